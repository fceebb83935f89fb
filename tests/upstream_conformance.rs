//! The AgentCore kind against the runtime-kind conformance checks
//! (`a2a_gateway::upstream::conformance`), each against a fresh scripted mock runtime on
//! 127.0.0.1:0.

use std::sync::Arc;

use a2a_gateway::executor::AgentExecutor;
use a2a_gateway::upstream::a2a::{A2aExecutor, A2aSettings};
use a2a_gateway::upstream::conformance::{self, Knobs};
use a2a_gateway::upstream::mock::MockRuntime;
use a2a_gateway::upstream::{AgentCoreExecutor, AgentCoreSettings};

/// An AgentCore executor for `mock` with `knobs`.
fn agentcore(mock: &MockRuntime, knobs: &Knobs) -> Arc<dyn AgentExecutor> {
    let mut s = AgentCoreSettings::for_url(mock.url());
    s.connection.max_retries = knobs.max_retries;
    s.connection.retry_base_delay = knobs.retry_delay;
    s.connection.read_timeout = knobs.read_timeout;
    s.connection.request_timeout = knobs.request_timeout;
    s.connection.max_stream = knobs.max_stream;
    s.connection.max_reply_bytes = knobs.max_reply_bytes;
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

/// An `a2a` executor for `mock` (as an A2A 1.0 agent, [`MockRuntime::a2a_url`]) with
/// `knobs`; resuming a broken stream is tried for 1 s.
fn a2a(mock: &MockRuntime, knobs: &Knobs) -> Arc<dyn AgentExecutor> {
    let mut s = A2aSettings::for_url(mock.a2a_url());
    s.connection.max_retries = knobs.max_retries;
    s.connection.retry_base_delay = knobs.retry_delay;
    s.connection.read_timeout = knobs.read_timeout;
    s.connection.request_timeout = knobs.request_timeout;
    s.connection.max_stream = knobs.max_stream;
    s.connection.max_reply_bytes = knobs.max_reply_bytes;
    s.resume_for = std::time::Duration::from_secs(1);
    s.poll_initial = std::time::Duration::from_millis(20);
    let exec = match &knobs.token_source {
        Some(source) => {
            A2aExecutor::with_token_source(s, source.clone(), std::time::Duration::from_secs(30))
        }
        None => A2aExecutor::new(s),
    };
    Arc::new(exec.expect("settings for a mock are valid"))
}

/// The `a2a` kind against the mock as an A2A agent: every check but
/// `cancel_reaches_the_runtime`, whose shape (a cancel before the agent named its task,
/// then `execute` ending by itself) is not an A2A agent's: the `a2a` kind cancels the
/// agent's task once the agent named it (below), and the handler ends the run.
#[tokio::test]
async fn a2a_passes_the_runtime_kind_conformance_checks_that_apply() {
    conformance::text_reply(&a2a).await;
    conformance::streamed_reply(&a2a).await;
    conformance::input_required(&a2a).await;
    conformance::direct_message(&a2a).await;
    conformance::retried_only_before_the_first_byte(&a2a).await;
    conformance::unauthorized_refetches_once(&a2a).await;
    conformance::oversized_reply_fails(&a2a).await;
    conformance::timeouts_name_themselves(&a2a).await;
    conformance::public_reasons_carry_a_correlation_id(&a2a).await;
}

/// Cancel while the agent streams its task reaches the agent (its CancelTask).
#[tokio::test]
async fn a2a_cancel_reaches_the_agent() {
    use a2a_gateway::executor::{CallContext, EventQueue, RequestContext, new_user_text_message};
    use a2a_gateway::upstream::mock::MockReply;
    let mock = MockRuntime::start().await;
    mock.script([MockReply::SseThenStall(vec![serde_json::json!("tick")])]);
    let exec = a2a(&mock, &Knobs::default());
    let ctx = RequestContext::new(
        new_user_text_message("a long question"),
        "gw-task".to_owned(),
        "gw-ctx".to_owned(),
        CallContext::new("", "alice"),
    );
    let (queue, mut rx) = EventQueue::bounded(64);
    let running = {
        let (exec, ctx, queue) = (exec.clone(), ctx.clone(), queue.clone());
        tokio::spawn(async move { exec.execute(ctx, queue).await })
    };
    // The agent named its task once its first chunk is relayed.
    loop {
        let ev = rx.recv().await.expect("events");
        if matches!(ev, a2a_gateway::protocol::StreamResponse::ArtifactUpdate(_)) {
            break;
        }
    }
    ctx.cancellation().cancel();
    exec.cancel(ctx, queue).await.expect("cancel returns Ok");
    let stops = mock.stops();
    assert_eq!(stops.len(), 1, "one CancelTask");
    let body: serde_json::Value = serde_json::from_slice(&stops[0].body).unwrap();
    assert_eq!(body["method"], "CancelTask");
    assert_eq!(
        body["params"]["id"], "mock-task",
        "the agent's task, not the gateway's"
    );
    running.abort();
}
