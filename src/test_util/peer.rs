//! A Python peer a test runs as a child process (the AWS doubles of `tests/aws/`): started
//! with the venv's interpreter, its base URL read from its first stdout line, killed when
//! dropped.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::child::ChildGuard;

/// How long [`PythonPeer::start`] waits for the first stdout line.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running Python peer that printed its base URL (`http://127.0.0.1:PORT`) as its
/// first stdout line. Dropped, it is killed and reaped.
#[derive(Debug)]
pub struct PythonPeer {
    /// The base URL it printed, without a trailing `/`.
    pub url: String,
    _child: ChildGuard,
}

impl PythonPeer {
    /// Runs `python script args...` (stdin and stderr null, no environment of the test
    /// beyond `PATH` and `HOME`) and waits for its first stdout line.
    ///
    /// Panics when it cannot be spawned, exits, or prints nothing within 60 s.
    pub fn start<I, S>(python: &Path, script: &Path, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(python);
        cmd.arg(script)
            .args(args)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for var in ["PATH", "HOME"] {
            if let Some(v) = std::env::var_os(var) {
                cmd.env(var, v);
            }
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", script.display()));
        let stdout = child.stdout.take().expect("piped stdout");
        let guard = ChildGuard(child);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next().and_then(Result::ok));
            // Keep reading so the peer never blocks on a full pipe.
            for _ in lines {}
        });
        let url = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Some(line)) if line.starts_with("http") => line.trim_end_matches('/').to_owned(),
            other => panic!(
                "{} did not print its URL within {} s: {other:?}",
                script.display(),
                START_TIMEOUT.as_secs()
            ),
        };
        Self { url, _child: guard }
    }
}
