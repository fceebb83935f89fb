//! The executor against the real runtime side: `BedrockAgentCoreApp` from PyPI
//! (`bedrock-agentcore`) running `tests/python/upstream_agent.py` on 127.0.0.1,
//! reached through `url`.
//!
//! Python comes from `A2A_GATEWAY_TEST_PYTHON` (default `.venv/bin/python` in the
//! package root) and must have `bedrock-agentcore` installed. Without it the test is
//! skipped with a note, unless `CI=true`, where it fails.

mod upstream_common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use a2a_gateway::protocol::TaskState;
use a2a_gateway::test_util::{free_port, python_with, skip};
use a2a_gateway::upstream::{AgentCoreExecutor, AgentCoreSettings};
use tokio::process::{Child, Command};
use upstream_common::{ctx, ctx_in, run};

/// The venv's python when it has `bedrock-agentcore`; else the test is skipped (or fails
/// under `CI=true`).
fn python(test: &str) -> Option<PathBuf> {
    let py = python_with("bedrock_agentcore.runtime");
    if py.is_none() {
        skip(
            test,
            "the venv's python cannot import bedrock_agentcore (set A2A_GATEWAY_TEST_PYTHON to a python with `pip install bedrock-agentcore`)",
        );
    }
    py
}

async fn start_agent(py: &PathBuf) -> (Child, String) {
    let port = free_port();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/upstream_agent.py");
    let child = Command::new(py)
        .arg(script)
        .arg(port.to_string())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the Python agent");
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = client.get(format!("{base}/ping")).send().await
            && r.status().is_success()
        {
            let body: serde_json::Value = r.json().await.unwrap();
            assert_eq!(body["status"], "Healthy");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Python agent did not answer /ping within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (child, format!("{base}/invocations"))
}

#[tokio::test]
async fn bedrock_agentcore_app_replies_translate() {
    let Some(py) = python("bedrock_agentcore_app_replies_translate") else {
        return;
    };
    let (mut child, url) = start_agent(&py).await;
    let mut s = AgentCoreSettings::for_url(&url);
    s.connection.max_retries = 1;
    s.connection.retry_base_delay = Duration::from_millis(10);
    let e = AgentCoreExecutor::new(s).unwrap();

    // dict -> JSON object -> its `response` text, one last chunk.
    let out = run(&e, ctx("dict")).await;
    assert_eq!(
        out.states(),
        [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::Completed
        ],
        "{}",
        out.reason()
    );
    assert_eq!(out.text(), "from a dict");
    assert!(out.chunks()[0].last);

    // str -> JSON string literal.
    let out = run(&e, ctx("string")).await;
    assert_eq!(out.text(), "The answer is 42");
    assert_eq!(out.final_state(), TaskState::Completed);

    // sync generator -> SSE, chunks as they come, exact text.
    let out = run(&e, ctx("sync")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(out.text(), "Hello, w\u{f6}rld \u{1f600}");
    let chunks = out.chunks();
    assert_eq!(chunks.len(), 4, "{chunks:?}");
    assert!(!chunks[0].append && chunks[1..].iter().all(|c| c.append) && chunks[3].last);

    // async generator.
    let out = run(&e, ctx("async")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(out.text(), "one two three");

    // Raising mid-stream: the SDK's trailing error frame fails the task.
    let out = run(&e, ctx("raise")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert_eq!(out.text(), "partial ");
    assert_eq!(
        out.reason(),
        "the agent failed: ValueError: boom mid-stream"
    );

    // Raising before output: HTTP 500 {"error": ...}, retried, then a failure naming
    // the status (the body's text is in the log, under the correlation id).
    let out = run(&e, ctx("raise-now")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert_eq!(out.reason(), "AgentCore runtime answered HTTP 500");
    assert!(out.correlation_id().is_some());

    // Control object in a JSON reply.
    let out = run(&e, ctx("input")).await;
    assert_eq!(out.final_state(), TaskState::InputRequired);
    assert_eq!(out.reason(), "Which city?");

    // A `message` control object, returned or as the first frame: a direct Message.
    for (prompt, text) in [
        ("message", "Hello, no task needed."),
        ("message-stream", "Streamed hello, no task."),
    ] {
        let out = run(&e, ctx(prompt)).await;
        let [a2a_gateway::protocol::StreamResponse::Message(m)] = out.events.as_slice() else {
            panic!("{prompt}: one Message, got {:?}", out.events)
        };
        assert_eq!(m.parts[0].as_text(), Some(text), "{prompt}");
        assert_eq!(m.task_id, None);
    }

    // The session header reaches the agent's context.
    let c = ctx_in("ctx-py", "alice", "session");
    let expected = AgentCoreExecutor::session_for(&c);
    let out = run(&e, c).await;
    assert_eq!(out.text(), expected);

    child.kill().await.ok();
}
