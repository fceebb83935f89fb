//! The real AgentCore runtime side in a test: `tests/python/upstream_agent.py`, a
//! `BedrockAgentCoreApp` from PyPI (`bedrock-agentcore`), on a free 127.0.0.1 port.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{ChildGuard, free_port};

/// A running `upstream_agent.py` (killed when dropped) and its invocation URL.
#[derive(Debug)]
pub struct AgentCoreApp {
    /// `http://127.0.0.1:PORT/invocations`.
    pub url: String,
    _child: ChildGuard,
}

impl AgentCoreApp {
    /// Starts the app with `python` (one that imports `bedrock_agentcore.runtime`, see
    /// [`super::python_with`]) and waits up to 30 s until its `/ping` says `Healthy`.
    /// Panics when it does not.
    pub async fn start(python: &Path) -> Self {
        let port = free_port();
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/upstream_agent.py");
        let child = Command::new(python)
            .arg(script)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tests/python/upstream_agent.py");
        let child = ChildGuard(child);
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = client.get(format!("{base}/ping")).send().await
                && r.status().is_success()
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the BedrockAgentCoreApp did not answer /ping within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self {
            url: format!("{base}/invocations"),
            _child: child,
        }
    }
}
