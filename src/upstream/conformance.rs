//! The checks every runtime kind passes (feature `test-util`), each against a fresh
//! [`MockRuntime`]: a kind's test calls [`run_all`] with a function that builds its
//! executor for a mock and a set of [`Knobs`]. A new kind is done when it passes them.
//!
//! | check | what it asserts |
//! |---|---|
//! | [`text_reply`] | a JSON text reply is the task's artifact; COMPLETED |
//! | [`streamed_reply`] | SSE frames arrive as chunks of one artifact; COMPLETED |
//! | [`input_required`] | an `input_required` control object ends the turn INPUT_REQUIRED with its question |
//! | [`direct_message`] | a `message` control object as the first output of a new message is a Message, no task |
//! | [`cancel_reaches_the_runtime`] | cancel during an invocation reaches the runtime; `execute` ends |
//! | [`retried_only_before_the_first_byte`] | 429 and 503 are retried; a reply that breaks after its first bytes is not |
//! | [`unauthorized_refetches_once`] | a 401 fetches a new token and retries once; a second 401 fails |
//! | [`oversized_reply_fails`] | a reply over the reply limit fails the task naming the limit |
//! | [`timeouts_name_themselves`] | the read, request and stream limits each fail the task naming their setting |
//! | [`public_reasons_carry_a_correlation_id`] | a failure's reason ends with `[correlation id …]` |
//!
//! Time limits are a few hundred milliseconds of real time against a real socket: the
//! mock is a real peer on `127.0.0.1:0`, which paused tokio time would not drive.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use secrecy::SecretString;
use serde_json::{Value, json};

use super::auth::token::{FetchedToken, TokenError, TokenSource};
use super::mock::{MockReply, MockRuntime};
use crate::executor::{
    AgentExecutor, CallContext, EventQueue, RequestContext, new_user_text_message,
};
use crate::protocol::{StreamResponse, TaskState};

/// The settings a check needs of a kind's executor; the kind's builder maps them onto
/// its own settings.
#[derive(Clone, Debug)]
pub struct Knobs {
    /// Retries before the first reply byte. Default 2.
    pub max_retries: u32,
    /// First retry delay. Default 10 ms.
    pub retry_delay: Duration,
    /// Longest silence of the runtime. Default 10 s.
    pub read_timeout: Duration,
    /// A whole (JSON) reply's time limit. Default 10 s.
    pub request_timeout: Duration,
    /// A streamed reply's time limit. Default 10 s.
    pub max_stream: Duration,
    /// Largest whole (JSON) reply in bytes. Default 1 MiB.
    pub max_reply_bytes: u64,
    /// When set, bearer tokens come from this source (cached, refetched once on a
    /// 401); otherwise no authentication.
    pub token_source: Option<Arc<dyn TokenSource>>,
}

impl Default for Knobs {
    fn default() -> Self {
        Self {
            max_retries: 2,
            retry_delay: Duration::from_millis(10),
            read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            max_stream: Duration::from_secs(10),
            max_reply_bytes: 1024 * 1024,
            token_source: None,
        }
    }
}

/// Builds a kind's executor for a mock runtime (its URL: [`MockRuntime::url`]).
pub type MakeExecutor<'a> = &'a (dyn Fn(&MockRuntime, &Knobs) -> Arc<dyn AgentExecutor> + Sync);

/// Runs every check in turn; a failing one panics naming itself.
pub async fn run_all(make: MakeExecutor<'_>) {
    text_reply(make).await;
    streamed_reply(make).await;
    input_required(make).await;
    direct_message(make).await;
    cancel_reaches_the_runtime(make).await;
    retried_only_before_the_first_byte(make).await;
    unauthorized_refetches_once(make).await;
    oversized_reply_fails(make).await;
    timeouts_name_themselves(make).await;
    public_reasons_carry_a_correlation_id(make).await;
}

/// A JSON string reply becomes the task's text; the task COMPLETES.
pub async fn text_reply(make: MakeExecutor<'_>) {
    let mock = MockRuntime::start().await;
    mock.script([MockReply::Json(json!("hello"))]);
    let out = run(make, &mock, &Knobs::default()).await;
    assert_eq!(
        out.final_state(),
        Some(TaskState::Completed),
        "text_reply: {out:?}"
    );
    assert_eq!(out.text(), "hello", "text_reply");
}

/// SSE frames arrive as chunks of the reply; the task COMPLETES with their text.
pub async fn streamed_reply(make: MakeExecutor<'_>) {
    let mock = MockRuntime::start().await;
    mock.script([MockReply::Sse(vec![
        json!("Hel"),
        json!("lo"),
        json!(" there"),
    ])]);
    let out = run(make, &mock, &Knobs::default()).await;
    assert_eq!(
        out.final_state(),
        Some(TaskState::Completed),
        "streamed_reply: {out:?}"
    );
    assert_eq!(out.text(), "Hello there", "streamed_reply");
    assert!(
        out.artifact_updates() >= 3,
        "streamed_reply: one chunk per frame: {out:?}"
    );
}

/// An `input_required` control object ends the turn INPUT_REQUIRED with its question.
pub async fn input_required(make: MakeExecutor<'_>) {
    let mock = MockRuntime::start().await;
    mock.script([MockReply::Json(
        json!({"a2a_control": "input_required", "text": "Which region?"}),
    )]);
    let out = run(make, &mock, &Knobs::default()).await;
    assert_eq!(
        out.final_state(),
        Some(TaskState::InputRequired),
        "input_required: {out:?}"
    );
    assert!(
        out.last_status_text().contains("Which region?"),
        "input_required: {out:?}"
    );
}

/// A `message` control object as the first output for a new message is a direct
/// Message reply: no Task is published.
pub async fn direct_message(make: MakeExecutor<'_>) {
    let mock = MockRuntime::start().await;
    mock.script([MockReply::Json(
        json!({"a2a_control": "message", "text": "hi"}),
    )]);
    let out = run(make, &mock, &Knobs::default()).await;
    let [StreamResponse::Message(m)] = out.events.as_slice() else {
        panic!("direct_message: one Message and nothing else: {out:?}");
    };
    let text: String = m.parts.iter().filter_map(|p| p.as_text()).collect();
    assert_eq!(text, "hi", "direct_message");
}

/// Cancel while an invocation is in flight reaches the runtime (the kind's stop call)
/// and `execute` ends.
pub async fn cancel_reaches_the_runtime(make: MakeExecutor<'_>) {
    let mock = MockRuntime::start().await;
    mock.script([MockReply::Stall]);
    let exec = make(&mock, &Knobs::default());
    let ctx = context("a long question");
    let (queue, mut rx) = EventQueue::bounded(64);
    let running = {
        let (exec, ctx, queue) = (exec.clone(), ctx.clone(), queue.clone());
        tokio::spawn(async move { exec.execute(ctx, queue).await })
    };
    tokio::spawn(async move { while rx.recv().await.is_some() {} });
    tokio::time::timeout(Duration::from_secs(10), mock.wait_invocations(1))
        .await
        .expect("cancel_reaches_the_runtime: the invocation arrives");
    // As the handler does: the context's token first, then the executor's cancel.
    ctx.cancellation().cancel();
    exec.cancel(ctx, queue)
        .await
        .expect("cancel_reaches_the_runtime: cancel returns Ok");
    assert_eq!(
        mock.stops().len(),
        1,
        "cancel_reaches_the_runtime: one stop call"
    );
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("cancel_reaches_the_runtime: execute ends")
        .expect("execute does not panic")
        .expect("execute returns Ok");
}

/// 429 and 503 before any reply byte are retried; a reply that breaks after its first
/// frame is not (its output may have been acted on).
pub async fn retried_only_before_the_first_byte(make: MakeExecutor<'_>) {
    let mock = MockRuntime::start().await;
    mock.script([
        MockReply::status(429),
        MockReply::status(503),
        MockReply::Json(json!("third time")),
    ]);
    let out = run(make, &mock, &Knobs::default()).await;
    assert_eq!(
        out.final_state(),
        Some(TaskState::Completed),
        "retried: {out:?}"
    );
    assert_eq!(out.text(), "third time", "retried");
    assert_eq!(
        mock.invocations().len(),
        3,
        "retried: 429, 503, then the answer"
    );

    let mock = MockRuntime::start().await;
    mock.script([MockReply::SseThenBreak(vec![json!("part")])]);
    let out = run(make, &mock, &Knobs::default()).await;
    assert_eq!(
        out.final_state(),
        Some(TaskState::Failed),
        "broken: {out:?}"
    );
    assert_eq!(
        mock.invocations().len(),
        1,
        "broken: never retried after the first byte"
    );
}

/// A 401 drops the token, fetches a new one and retries once; a second 401 fails.
pub async fn unauthorized_refetches_once(make: MakeExecutor<'_>) {
    let tokens = Arc::new(Numbered::default());
    let knobs = Knobs {
        token_source: Some(tokens.clone()),
        ..Knobs::default()
    };
    let mock = MockRuntime::start().await;
    mock.script([MockReply::status(401), MockReply::Json(json!("welcome"))]);
    let out = run(make, &mock, &knobs).await;
    assert_eq!(
        out.final_state(),
        Some(TaskState::Completed),
        "401 once: {out:?}"
    );
    let auth: Vec<_> = mock
        .invocations()
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default().to_owned())
        .collect();
    assert_eq!(auth, ["Bearer token-1", "Bearer token-2"], "401 once");

    let mock = MockRuntime::start().await;
    mock.script([MockReply::status(401), MockReply::status(401)]);
    let out = run(make, &mock, &knobs).await;
    assert_eq!(
        out.final_state(),
        Some(TaskState::Failed),
        "401 twice: {out:?}"
    );
    assert_eq!(mock.invocations().len(), 2, "401 twice: one refetch only");
}

/// A whole reply over the reply limit fails the task, naming the limit's setting.
pub async fn oversized_reply_fails(make: MakeExecutor<'_>) {
    let mock = MockRuntime::start().await;
    mock.script([MockReply::Json(Value::from("x".repeat(200)))]);
    let knobs = Knobs {
        max_reply_bytes: 64,
        ..Knobs::default()
    };
    let out = run(make, &mock, &knobs).await;
    assert_eq!(
        out.final_state(),
        Some(TaskState::Failed),
        "oversized: {out:?}"
    );
    assert!(
        out.last_status_text().contains("max_reply_bytes"),
        "oversized: {out:?}"
    );
}

/// The read, request and stream time limits each fail the task naming their setting.
pub async fn timeouts_name_themselves(make: MakeExecutor<'_>) {
    let short = Duration::from_millis(300);
    for (reply, knobs, setting) in [
        (
            MockReply::Stall,
            Knobs {
                read_timeout: short,
                ..Knobs::default()
            },
            "read_timeout_secs",
        ),
        (
            MockReply::JsonThenStall("{\"text\": \"never end".to_owned()),
            Knobs {
                request_timeout: short,
                ..Knobs::default()
            },
            "request_timeout_secs",
        ),
        (
            MockReply::SseThenStall(vec![json!("and then")]),
            Knobs {
                max_stream: short,
                ..Knobs::default()
            },
            "max_stream_secs",
        ),
    ] {
        let mock = MockRuntime::start().await;
        mock.script([reply]);
        let out = run(make, &mock, &knobs).await;
        assert_eq!(
            out.final_state(),
            Some(TaskState::Failed),
            "{setting}: {out:?}"
        );
        assert!(
            out.last_status_text().contains(setting),
            "{setting}: {out:?}"
        );
    }
}

/// A failure's public reason ends with `[correlation id <12 hex digits>]`.
pub async fn public_reasons_carry_a_correlation_id(make: MakeExecutor<'_>) {
    let mock = MockRuntime::start().await;
    mock.script([MockReply::status(400)]);
    let out = run(make, &mock, &Knobs::default()).await;
    assert_eq!(
        out.final_state(),
        Some(TaskState::Failed),
        "correlation id: {out:?}"
    );
    let reason = out.last_status_text();
    let id = reason
        .rsplit_once(" [correlation id ")
        .and_then(|(_, id)| id.strip_suffix(']'))
        .unwrap_or_else(|| panic!("correlation id: none in {reason:?}"));
    assert!(
        id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "correlation id: {reason:?}"
    );
}

/// A token source handing out `token-1`, `token-2`, … (one per fetch).
#[derive(Debug, Default)]
struct Numbered(AtomicUsize);

#[async_trait]
impl TokenSource for Numbered {
    async fn fetch(&self) -> Result<FetchedToken, TokenError> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(FetchedToken {
            token: SecretString::from(format!("token-{n}")),
            lifetime: Some(Duration::from_secs(3600)),
        })
    }
}

/// A new task's context with `text` in a new context of `alice`.
fn context(text: &str) -> RequestContext {
    let task_id = uuid::Uuid::new_v4().to_string();
    let context_id = uuid::Uuid::new_v4().to_string();
    let mut m = new_user_text_message(text);
    m.task_id = Some(task_id.clone());
    m.context_id = Some(context_id.clone());
    RequestContext::new(m, task_id, context_id, CallContext::new("", "alice"))
}

/// What one `execute` published.
#[derive(Debug)]
struct Published {
    events: Vec<StreamResponse>,
}

impl Published {
    fn final_state(&self) -> Option<TaskState> {
        self.events.iter().rev().find_map(|e| match e {
            StreamResponse::Task(t) => Some(t.status.state),
            StreamResponse::StatusUpdate(s) => Some(s.status.state),
            _ => None,
        })
    }

    fn last_status_text(&self) -> String {
        self.events
            .iter()
            .rev()
            .find_map(|e| match e {
                StreamResponse::StatusUpdate(s) => s.status.message.as_ref(),
                _ => None,
            })
            .map(|m| m.parts.iter().filter_map(|p| p.as_text()).collect())
            .unwrap_or_default()
    }

    fn artifact_updates(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, StreamResponse::ArtifactUpdate(_)))
            .count()
    }

    fn text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamResponse::ArtifactUpdate(a) => Some(
                    a.artifact
                        .parts
                        .iter()
                        .filter_map(|p| p.as_text())
                        .collect::<String>(),
                ),
                _ => None,
            })
            .collect()
    }
}

/// Runs `execute` for a new message to its end and collects every event.
async fn run(make: MakeExecutor<'_>, mock: &MockRuntime, knobs: &Knobs) -> Published {
    let exec = make(mock, knobs);
    let (queue, mut rx) = EventQueue::bounded(64);
    let collector = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            events.push(e);
        }
        events
    });
    tokio::time::timeout(
        Duration::from_secs(30),
        exec.execute(context("a question"), queue),
    )
    .await
    .expect("execute ends")
    .expect("execute returns Ok");
    drop(exec);
    Published {
        events: collector.await.expect("the collector does not panic"),
    }
}
