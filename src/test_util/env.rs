//! What the test environment provides: whether this is CI, and the Python interpreter of
//! the venv with the real peers.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Whether `CI=true`: then a peer a test needs (PostgreSQL, Python, a program) that is
/// missing fails the test instead of skipping it.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips `test` because `why` (a missing peer): prints `note: skipping TEST: WHY` on
/// stderr, or panics with `CI=true but WHY` when [`ci`]. The caller returns after it.
pub fn skip(test: &str, why: &str) {
    assert!(!ci(), "CI=true but {why}: {test} cannot run");
    eprintln!("note: skipping {test}: {why}");
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
