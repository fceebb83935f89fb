//! [`A2aAgent`]: one of the upstream A2A agents of `tests/a2a_agents` (built with the
//! official SDKs) as a child process on a port the OS chose, with its call log.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::ChildGuard;

/// Which agent of `tests/a2a_agents/README.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    /// `sdk1_agent.py` on a2a-sdk 1.x (`.venv`): A2A 1.0.
    Sdk1,
    /// `sdk03_agent.py` on a2a-sdk 0.3 (`.venv03`): A2A 0.3.
    Sdk03,
    /// `agentcore_agent.py` (bedrock-agentcore `build_a2a_app`) on a2a-sdk 1.x (`.venv`).
    AgentCore,
    /// `tests/js/a2a_agent.mjs` on `@a2a-js/sdk` (`node` on `PATH`): A2A 1.0.
    Js,
}

/// An upstream A2A agent, killed when dropped.
#[derive(Debug)]
pub struct A2aAgent {
    /// Its base URL, `http://127.0.0.1:PORT/` (JSON-RPC at `/`, its card below it).
    pub url: String,
    _child: ChildGuard,
}

/// The program running `kind`: `A2A_GATEWAY_TEST_PYTHON` (`.venv`) for a2a-sdk 1.x,
/// `A2A_GATEWAY_TEST_PYTHON03` (`.venv03`) for 0.3, `node` for the JavaScript agent.
pub fn agent_python(kind: AgentKind) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    match kind {
        AgentKind::Sdk03 => std::env::var_os("A2A_GATEWAY_TEST_PYTHON03")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(".venv03/bin/python")),
        AgentKind::Sdk1 | AgentKind::AgentCore => super::python(),
        AgentKind::Js => PathBuf::from("node"),
    }
}

impl A2aAgent {
    /// Starts `kind` with `args` (`--break-after 2`, `--no-streaming`, ...) and waits
    /// (at most 45 s) for the port it prints on its first line. `None` when its program
    /// cannot start it (the caller skips, see [`super::skip`]).
    pub fn start(kind: AgentKind, args: &[&str]) -> Option<Self> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let script = match kind {
            AgentKind::Sdk1 => root.join("tests/a2a_agents/sdk1_agent.py"),
            AgentKind::Sdk03 => root.join("tests/a2a_agents/sdk03_agent.py"),
            AgentKind::AgentCore => root.join("tests/a2a_agents/agentcore_agent.py"),
            AgentKind::Js => root.join("tests/js/a2a_agent.mjs"),
        };
        let mut cmd = Command::new(agent_python(kind));
        cmd.arg(script)
            .arg("0")
            .args(args)
            .env("A2A_PEER_NO_GRPC", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().ok()?;
        let stdout = child.stdout.take()?;
        let guard = ChildGuard(child);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(45)).ok()?;
        let port: u16 = line.trim().parse().ok()?;
        Some(Self {
            url: format!("http://127.0.0.1:{port}/"),
            _child: guard,
        })
    }

    /// Its call log (`GET /calls`): one entry per executor call, in order.
    pub async fn calls(&self) -> Vec<Value> {
        let v: Value =
            super::get_json(&reqwest::Client::new(), &format!("{}calls", self.url)).await;
        v["calls"].as_array().cloned().unwrap_or_default()
    }
}
