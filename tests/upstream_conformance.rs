//! The AgentCore kind against the runtime-kind conformance checks
//! (`a2a_gateway::upstream::conformance`), each against a fresh scripted mock runtime on
//! 127.0.0.1:0.

use std::sync::Arc;

use a2a_gateway::executor::AgentExecutor;
use a2a_gateway::upstream::conformance::{self, Knobs};
use a2a_gateway::upstream::mock::MockRuntime;
use a2a_gateway::upstream::{AgentCoreExecutor, AgentCoreSettings};

/// An AgentCore executor for `mock` with `knobs`.
fn agentcore(mock: &MockRuntime, knobs: &Knobs) -> Arc<dyn AgentExecutor> {
    let mut s = AgentCoreSettings::for_url(mock.url());
    s.max_retries = knobs.max_retries;
    s.retry_base_delay = knobs.retry_delay;
    s.read_timeout = knobs.read_timeout;
    s.request_timeout = knobs.request_timeout;
    s.max_stream = knobs.max_stream;
    s.max_reply_bytes = knobs.max_reply_bytes;
    let exec = match &knobs.token_source {
        Some(source) => AgentCoreExecutor::with_token_source(
            s,
            source.clone(),
            std::time::Duration::from_secs(30),
        ),
        None => AgentCoreExecutor::new(s),
    };
    Arc::new(exec.expect("settings for a mock are valid"))
}

#[tokio::test]
async fn agentcore_passes_the_runtime_kind_conformance_checks() {
    conformance::run_all(&agentcore).await;
}
