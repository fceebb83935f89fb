//! The official A2A Python clients driven from Rust tests: `tests/python/agents_client.py`
//! (a2a-sdk 1.x from `.venv`, or 0.3 from `.venv03`) resolves an agent's card from its URL,
//! picks the card's interface for the binding asked (JSON-RPC, HTTP+JSON, gRPC), sends one
//! message and reads the task back.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

/// The Python at `$var` (else `default`, relative to the crate) when it imports `module`;
/// else `None`, and the test is skipped with a note (it fails under `CI=true`, see
/// [`super::skip`]).
pub fn python_for(test: &str, var: &str, default: &str, module: &str) -> Option<PathBuf> {
    let py = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(default));
    let ok = std::process::Command::new(&py)
        .args(["-c", &format!("import {module}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        super::skip(test, &format!("{} cannot import {module}", py.display()));
        return None;
    }
    Some(py)
}

/// Runs `tests/python/agents_client.py` with `py` and `spec` (`{"sdk": "1" | "03",
/// "url": agent base URL, "binding": "JSONRPC" | "HTTP+JSON" | "GRPC", "key": API key or
/// null, "text": prompt}`): the one JSON line it prints (`card`, `interface`, `task`,
/// `state`, `text`, `got`, or `error` and `message`).
///
/// # Panics
/// When the script cannot run or prints no JSON (its output is in the message).
pub async fn official_client(py: &Path, spec: Value) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/agents_client.py");
    let out = tokio::process::Command::new(py)
        .arg(script)
        .arg(spec.to_string())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("run agents_client.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "agents_client.py printed no JSON ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}
