//! What the test environment provides: whether this is CI, and the Python interpreter of
//! the venv with the real peers.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Whether `CI=true`: then a peer a test needs (PostgreSQL, Python, a program) that is
/// missing fails the test instead of skipping it.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The environment variable naming the file [`skip`] appends each skip to
/// (`scripts/test.sh` sets it and prints the file in its final summary, since cargo
/// shows a passing test's output only with `--nocapture`).
pub const SKIPS_FILE_VAR: &str = "A2A_GATEWAY_TEST_SKIPS";

/// Skips `test` because `why` (a missing peer): prints `note: skipping TEST: WHY` on
/// stderr and appends `TEST: WHY` to the file named by [`SKIPS_FILE_VAR`] when it is
/// set, or panics with `CI=true but WHY` when [`ci`]. The caller returns after it.
pub fn skip(test: &str, why: &str) {
    assert!(!ci(), "CI=true but {why}: {test} cannot run");
    eprintln!("note: skipping {test}: {why}");
    if let Some(path) = std::env::var_os(SKIPS_FILE_VAR) {
        record_skip(std::path::Path::new(&path), test, why);
    }
}

/// Appends `TEST: WHY` as one line to `path` (best effort: a skip never fails a test).
fn record_skip(path: &std::path::Path, test: &str, why: &str) {
    use std::io::Write;
    let line = format!("{test}: {why}\n").replace(['\r'], " ");
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
}

/// The Python interpreter of the test venv: `A2A_GATEWAY_TEST_PYTHON`, or `.venv/bin/python`
/// in the package root (what `scripts/test.sh` installs). Not checked to exist.
pub fn python() -> PathBuf {
    std::env::var_os("A2A_GATEWAY_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"))
}

/// [`python`] when it runs and can import `module` (e.g. `bedrock_agentcore.runtime`),
/// else `None`; what a test does without it is the caller's ([`skip`]).
pub fn python_with(module: &str) -> Option<PathBuf> {
    let py = python();
    Command::new(&py)
        .args(["-c", &format!("import {module}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        .then_some(py)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_recorded_for_the_summary() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("skips");
        record_skip(&file, "cluster_behind_haproxy", "haproxy is not on PATH");
        record_skip(&file, "prometheus_queries", "prometheus is not on PATH");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "cluster_behind_haproxy: haproxy is not on PATH\n\
             prometheus_queries: prometheus is not on PATH\n"
        );
    }
}
