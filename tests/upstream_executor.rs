//! The AgentCore executor against controllable fakes on 127.0.0.1:0: reply
//! translation, faults, retries, time limits, tokens, sessions, control objects,
//! cancel, and that no secret reaches logs or task events.

mod upstream_common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_gateway::executor::{AgentExecutor, EventQueue};
use a2a_gateway::protocol::{StreamResponse, TaskState};
use a2a_gateway::upstream::mock::{MockReply, MockRuntime};
use a2a_gateway::upstream::raw_mock::*;
use a2a_gateway::upstream::{
    AgentCoreExecutor, AgentCoreSettings, AuthSettings, OAuth2Settings, TokenEndpoint,
};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use base64::Engine;
use secrecy::SecretString;
use serde_json::{Value, json};
use tokio::time::Instant;
use upstream_common::*;

const SECRET: &str = "cl1ent-s3cret-DO-NOT-LOG";

fn settings(url: &str) -> AgentCoreSettings {
    let mut s = AgentCoreSettings::for_url(url);
    s.connection.retry_base_delay = Duration::from_millis(10);
    s.connection.read_timeout = Duration::from_secs(10);
    s
}

fn exec(s: AgentCoreSettings) -> AgentCoreExecutor {
    AgentCoreExecutor::new(s).expect("executor")
}

/// A counting OAuth token endpoint (and discovery document) on 127.0.0.1:0.
struct TokenFake {
    base: String,
    calls: Arc<AtomicUsize>,
    discovery_calls: Arc<AtomicUsize>,
    /// (status, body); `{n}` in the body becomes the call number.
    reply: Arc<Mutex<(u16, String)>>,
    basic_ok: Arc<AtomicUsize>,
}

#[derive(Clone)]
struct TokenState {
    calls: Arc<AtomicUsize>,
    discovery_calls: Arc<AtomicUsize>,
    reply: Arc<Mutex<(u16, String)>>,
    basic_ok: Arc<AtomicUsize>,
    base: String,
}

async fn token_fake(body: &str) -> TokenFake {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let st = TokenState {
        calls: Arc::default(),
        discovery_calls: Arc::default(),
        reply: Arc::new(Mutex::new((200, body.to_owned()))),
        basic_ok: Arc::default(),
        base: base.clone(),
    };
    async fn token(
        State(st): State<TokenState>,
        headers: HeaderMap,
        form: String,
    ) -> (StatusCode, [(&'static str, &'static str); 1], String) {
        let n = st.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let want = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("cid:{SECRET}"))
        );
        if headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(want.as_str())
            && form.contains("grant_type=client_credentials")
            && form.contains("scope=invoke")
        {
            st.basic_ok.fetch_add(1, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let (status, body) = st.reply.lock().unwrap().clone();
        (
            StatusCode::from_u16(status).unwrap(),
            [("content-type", "application/json")],
            body.replace("{n}", &n.to_string()),
        )
    }
    async fn discovery(State(st): State<TokenState>) -> axum::Json<Value> {
        st.discovery_calls.fetch_add(1, Ordering::SeqCst);
        axum::Json(
            json!({"issuer": st.base, "token_endpoint": format!("{}/oauth2/token", st.base)}),
        )
    }
    let app = Router::new()
        .route("/oauth2/token", post(token))
        .route("/.well-known/openid-configuration", get(discovery))
        .with_state(st.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    TokenFake {
        base,
        calls: st.calls,
        discovery_calls: st.discovery_calls,
        reply: st.reply,
        basic_ok: st.basic_ok,
    }
}

fn oauth(endpoint: TokenEndpoint) -> AuthSettings {
    AuthSettings::OAuth2(OAuth2Settings {
        client_id: "cid".into(),
        client_secret: SecretString::from(SECRET),
        scope: Some("invoke".into()),
        endpoint,
        refresh_before_expiry: Duration::from_secs(30),
    })
}

#[tokio::test]
async fn json_string_reply_is_one_last_chunk_and_request_follows_contract() {
    let up = raw_server(|_, _| vec![Step::Write(json_response(r#""The answer is 42""#))]).await;
    let out = run(
        &exec(settings(&up.url)),
        ctx_in("ctx-1", "alice", "What is it?"),
    )
    .await;
    assert_eq!(
        out.states(),
        [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::Completed
        ]
    );
    let chunks = out.chunks();
    assert_eq!(chunks.len(), 1);
    assert_eq!(
        chunks[0],
        Chunk {
            name: Some("response".into()),
            append: false,
            last: true,
            text: "The answer is 42".into()
        }
    );

    let req = &up.requests()[0];
    assert_eq!(req.line, "POST /invocations HTTP/1.1");
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(
        req.header("accept"),
        Some("text/event-stream, application/json")
    );
    assert!(
        req.header("user-agent")
            .unwrap()
            .starts_with("a2a-gateway/")
    );
    assert!(req.header("authorization").is_none());
    let session = req
        .header("x-amzn-bedrock-agentcore-runtime-session-id")
        .unwrap();
    assert!((33..=100).contains(&session.len()), "{session}");
    let tp = req.header("traceparent").unwrap();
    assert!(
        tp.len() == 55 && tp.starts_with("00-") && tp.ends_with("-01"),
        "{tp}"
    );
    assert_eq!(
        req.json(),
        json!({"prompt": "What is it?", "actor_id": "user-ctx-1"})
    );
}

#[tokio::test]
async fn object_and_data_replies() {
    let up = raw_server(|n, _| {
        vec![Step::Write(json_response(match n {
            0 => r#"{"result": {"content": [{"text": "from "}, {"text": "strands"}]}}"#,
            _ => r#"{"temperature": 21}"#,
        }))]
    })
    .await;
    let e = exec(settings(&up.url));
    let out = run(&e, ctx("a")).await;
    assert_eq!(out.text(), "from strands");
    assert_eq!(out.final_state(), TaskState::Completed);
    let out = run(&e, ctx("b")).await;
    assert_eq!(out.text(), r#"<data {"temperature":21}>"#);
    assert_eq!(out.final_state(), TaskState::Completed);
}

#[tokio::test]
async fn include_message_sends_the_whole_message() {
    let up = raw_server(|_, _| vec![Step::Write(json_response(r#""ok""#))]).await;
    let mut s = settings(&up.url);
    s.include_message = true;
    let c = ctx_in("ctx-m", "alice", "hi");
    let (task_id, message_id) = (c.task_id.clone(), c.message.message_id.clone());
    run(&exec(s), c).await;
    let body = up.requests()[0].json();
    assert_eq!(body["taskId"], json!(task_id));
    assert_eq!(body["contextId"], json!("ctx-m"));
    assert_eq!(body["message"]["messageId"], json!(message_id));
    assert_eq!(body["message"]["parts"][0]["text"], json!("hi"));
}

#[tokio::test]
async fn sse_one_byte_writes_keep_utf8_and_chunks_exact() {
    // Multi-byte characters, a Strands delta, a comment, CRLF framing.
    let body = "data: \"Gr\u{fc}\u{df}e \"\n\n: keep-alive\n\ndata: {\"event\": {\"contentBlockDelta\": {\"delta\": {\"text\": \"\u{1f600} \u{4e16}\u{754c}\"}}}}\r\n\r\ndata: \"!\"\n\n";
    let wire = sse_bytewise_chunks(body.as_bytes());
    let up =
        raw_server(move |_, _| vec![Step::Write(sse_head()), Step::WriteBytewise(wire.clone())])
            .await;
    let out = run(&exec(settings(&up.url)), ctx("stream")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(out.text(), "Gr\u{fc}\u{df}e \u{1f600} \u{4e16}\u{754c}!");
    let chunks = out.chunks();
    assert_eq!(chunks.len(), 4);
    assert!(!chunks[0].append && !chunks[0].last && chunks[0].name.as_deref() == Some("response"));
    assert!(chunks[1..].iter().all(|c| c.append));
    assert!(chunks[..3].iter().all(|c| !c.last));
    assert_eq!(
        chunks[3],
        Chunk {
            name: None,
            append: true,
            last: true,
            text: String::new()
        }
    );
    assert_eq!(out.artifact_ids().len(), 1);
}

#[tokio::test]
async fn sse_frames_split_at_chosen_bytes() {
    let body = "data: \"\u{e9}t\u{e9}\"\n\ndata: {\"data\": \"\u{1f680}\"}\n\n";
    let bytes = body.as_bytes().to_vec();
    for split in 1..bytes.len() {
        let (a, b) = (bytes[..split].to_vec(), bytes[split..].to_vec());
        let up = raw_server(move |_, _| {
            vec![
                Step::Write(sse_head()),
                Step::Write(chunk(&a)),
                Step::Sleep(Duration::from_millis(2)),
                Step::Write(chunk(&b)),
                Step::Write(end_chunks()),
            ]
        })
        .await;
        let out = run(&exec(settings(&up.url)), ctx("s")).await;
        assert_eq!(out.text(), "\u{e9}t\u{e9}\u{1f680}", "split at {split}");
        assert_eq!(out.final_state(), TaskState::Completed);
    }
}

#[tokio::test]
async fn sse_final_message_used_only_without_deltas_and_done_ends() {
    let up = raw_server(|n, _| {
        vec![Step::Write(match n {
            0 => sse_response(&[
                r#"{"event": {"messageStart": {"role": "assistant"}}}"#,
                r#"{"message": {"role": "assistant", "content": [{"text": "whole answer"}]}}"#,
                r#"{"event": {"metadata": {"usage": {"totalTokens": 9}}}}"#,
            ]),
            _ => sse_response(&[
                r#""a""#,
                r#""b""#,
                r#"{"message": {"content": [{"text": "ab"}]}}"#,
                "[DONE]",
                r#""ignored""#,
            ]),
        })]
    })
    .await;
    let e = exec(settings(&up.url));
    let out = run(&e, ctx("x")).await;
    assert_eq!(out.text(), "whole answer");
    assert_eq!(out.chunks().len(), 1);
    assert!(out.chunks()[0].last);
    let out = run(&e, ctx("y")).await;
    assert_eq!(out.text(), "ab");
    assert_eq!(out.final_state(), TaskState::Completed);
}

#[tokio::test]
async fn agent_error_frame_fails_the_task() {
    let up = raw_server(|_, _| {
        vec![Step::Write(sse_response(&[
            r#""partial ""#,
            r#"{"error": "database unreachable", "error_type": "ConnectionError", "message": "An error occurred during streaming"}"#,
        ]))]
    })
    .await;
    let out = run(&exec(settings(&up.url)), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert_eq!(
        out.reason(),
        "the agent failed: ConnectionError: database unreachable"
    );
    assert!(!out.states().contains(&TaskState::Completed));
}

#[tokio::test]
async fn reset_mid_stream_fails_never_completes() {
    let up = raw_server(|_, _| {
        let mut head = sse_head();
        head.extend(chunk(b"data: \"partial\"\n\n"));
        vec![
            Step::Write(head),
            Step::Sleep(Duration::from_millis(50)),
            Step::Reset,
        ]
    })
    .await;
    let out = run(&exec(settings(&up.url)), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert_eq!(out.text(), "partial");
    assert!(out.reason().contains("broke off"), "{}", out.reason());
    assert!(!out.states().contains(&TaskState::Completed));
    assert!(out.chunks().iter().all(|c| !c.last));
}

#[tokio::test]
async fn truncated_chunked_body_fails() {
    let up = raw_server(|_, _| {
        let mut head = sse_head();
        head.extend(chunk(b"data: \"partial\"\n\n"));
        vec![Step::Write(head), Step::Close]
    })
    .await;
    let out = run(&exec(settings(&up.url)), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed, "{:?}", out.states());
    assert!(out.reason().contains("broke off"), "{}", out.reason());
}

#[tokio::test]
async fn truncated_json_body_fails() {
    let up = raw_server(|_, _| {
        let mut r = response(
            200,
            &[("content-type", "application/json")],
            br#""complete answer""#,
        );
        r.truncate(r.len() - 5);
        vec![Step::Write(r), Step::Close]
    })
    .await;
    let out = run(&exec(settings(&up.url)), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert!(out.chunks().is_empty());
}

#[tokio::test]
async fn stall_past_read_timeout_fails_naming_the_setting() {
    let up = raw_server(|_, _| {
        let mut head = sse_head();
        head.extend(chunk(b"data: \"a\"\n\n"));
        vec![Step::Write(head), Step::Sleep(Duration::from_secs(5))]
    })
    .await;
    let mut s = settings(&up.url);
    s.connection.read_timeout = Duration::from_millis(300);
    let t0 = Instant::now();
    let out = run(&exec(s), ctx("x")).await;
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert_eq!(out.final_state(), TaskState::Failed);
    assert!(
        out.reason().contains("read_timeout_secs"),
        "{}",
        out.reason()
    );
}

#[tokio::test]
async fn silence_before_headers_is_a_read_timeout_and_stream_cap_applies() {
    let up = raw_server(|n, _| match n {
        0 => vec![Step::Sleep(Duration::from_secs(5))],
        _ => {
            // Keeps sending within the read timeout, but never ends.
            let mut steps = vec![Step::Write(sse_head())];
            for _ in 0..100 {
                steps.push(Step::Write(chunk(b"data: \".\"\n\n")));
                steps.push(Step::Sleep(Duration::from_millis(100)));
            }
            steps
        }
    })
    .await;
    let mut s = settings(&up.url);
    s.connection.read_timeout = Duration::from_millis(300);
    s.connection.max_stream = Duration::from_millis(800);
    let e = exec(s);
    let out = run(&e, ctx("x")).await;
    assert!(
        out.reason().contains("read_timeout_secs"),
        "{}",
        out.reason()
    );
    let out = run(&e, ctx("y")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert!(out.reason().contains("max_stream_secs"), "{}", out.reason());
    assert!(out.text().starts_with('.'));
}

#[tokio::test]
async fn too_many_requests_then_success_retries_once_honouring_retry_after() {
    let up = raw_server(|n, _| {
        vec![Step::Write(match n {
            0 => response(
                429,
                &[
                    ("x-amzn-ErrorType", "ThrottlingException"),
                    ("retry-after", "1"),
                ],
                br#"{"message":"Rate exceeded"}"#,
            ),
            _ => json_response(r#""ok""#),
        })]
    })
    .await;
    let out = run(&exec(settings(&up.url)), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Completed);
    let reqs = up.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at - reqs[0].at;
    assert!(gap >= Duration::from_millis(950), "{gap:?}");
    // Same session on the retry.
    assert_eq!(
        reqs[0].header("x-amzn-bedrock-agentcore-runtime-session-id"),
        reqs[1].header("x-amzn-bedrock-agentcore-runtime-session-id")
    );
}

#[tokio::test]
async fn retryable_statuses_retry_at_most_max_retries() {
    let up = raw_server(|_, _| {
        vec![Step::Write(response(
            409,
            &[(
                "x-amzn-ErrorType",
                "RetryableConflictException:http://internal.amazon.com/coral/",
            )],
            br#"{"message":"Session operation in progress, please retry"}"#,
        ))]
    })
    .await;
    let out = run(&exec(settings(&up.url)), ctx("x")).await;
    assert_eq!(up.count(), 4);
    assert_eq!(out.final_state(), TaskState::Failed);
    // The caller gets the category; the runtime's free text is in the log only.
    assert_eq!(
        out.reason(),
        "AgentCore runtime answered HTTP 409 RetryableConflictException (the runtime session is busy)"
    );
}

#[tokio::test]
async fn runtime_client_error_424_is_readable_and_not_retried() {
    let up = raw_server(|_, _| {
        vec![Step::Write(response(
            424,
            &[("x-amzn-ErrorType", "RuntimeClientError"), ("x-amzn-RequestId", "r-424"), ("content-type", "application/json")],
            br#"{"message":"Runtime initialization time exceeded. Please make sure that initialization completes in 30s."}"#,
        ))]
    })
    .await;
    let out = run(&exec(settings(&up.url)), ctx("x")).await;
    assert_eq!(up.count(), 1);
    assert_eq!(out.final_state(), TaskState::Failed);
    let r = out.reason();
    assert!(
        r.starts_with(
            "AgentCore runtime answered HTTP 424 RuntimeClientError (the agent's container failed"
        ),
        "{r}"
    );
    assert!(r.contains("[request id r-424]"), "{r}");
    assert!(
        !r.contains("Runtime initialization"),
        "free text stays in the log: {r}"
    );
}

#[tokio::test]
async fn html_error_page_and_html_or_empty_200() {
    let html = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>";
    let up = raw_server(move |n, _| {
        vec![Step::Write(match n {
            0 | 1 => response(502, &[("content-type", "text/html")], html),
            2 => response(200, &[("content-type", "text/html")], html),
            _ => response(200, &[("content-type", "application/json")], b""),
        })]
    })
    .await;
    let mut s = settings(&up.url);
    s.connection.max_retries = 1;
    let e = exec(s);
    let out = run(&e, ctx("x")).await;
    assert_eq!(up.count(), 2);
    assert_eq!(
        out.reason(),
        "AgentCore runtime answered HTTP 502 with an HTML page instead of an agent reply"
    );
    let out = run(&e, ctx("y")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert!(out.reason().contains("HTML page"), "{}", out.reason());
    let out = run(&e, ctx("z")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert!(out.reason().contains("empty body"), "{}", out.reason());
}

#[tokio::test]
async fn unreachable_upstream_fails_with_connect_reason() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/invocations", listener.local_addr().unwrap());
    drop(listener);
    let mut s = settings(&url);
    s.connection.max_retries = 1;
    let out = run(&exec(s), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert!(
        out.reason()
            .starts_with("could not connect to the AgentCore runtime"),
        "{}",
        out.reason()
    );
}

#[tokio::test]
async fn control_vocabulary() {
    let up = raw_server(|_, _| {
        vec![Step::Write(sse_response(&[
            r#"{"a2a_control": "status", "text": "Looking up flights"}"#,
            r#""Found 2 flights. ""#,
            r#"{"a2a_control": "artifact", "name": "flights.json", "data": {"count": 2}}"#,
            r#"{"a2a_control": "input_required", "text": "Which one?"}"#,
        ]))]
    })
    .await;
    let e = exec(settings(&up.url));
    let c1 = ctx_in("trip", "alice", "book a flight");
    let out = run(&e, c1).await;
    assert_eq!(
        out.states(),
        [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::Working,
            TaskState::InputRequired
        ]
    );
    assert_eq!(out.reason(), "Which one?");
    let status_texts: Vec<String> = out
        .events
        .iter()
        .filter_map(|e| match e {
            StreamResponse::StatusUpdate(s) => s
                .status
                .message
                .as_ref()
                .and_then(|m| m.parts[0].as_text())
                .map(str::to_owned),
            _ => None,
        })
        .collect();
    assert_eq!(status_texts, ["Looking up flights", "Which one?"]);
    let chunks = out.chunks();
    assert_eq!(chunks[0].text, "Found 2 flights. ");
    assert_eq!(chunks[1].name.as_deref(), Some("flights.json"));
    assert_eq!(chunks[1].text, r#"<data {"count":2}>"#);
    assert!(chunks[2].last && chunks[2].append);
    // The follow-up on the same context reaches the same runtime session.
    let mut c2 = ctx_in("trip", "alice", "the first");
    c2.current_task = Some(Box::new(a2a_gateway::executor::new_task(&c2.message)));
    let out2 = run(&e, c2).await;
    assert_eq!(
        out2.states()[0],
        TaskState::Working,
        "no second SUBMITTED for a follow-up"
    );
    let reqs = up.requests();
    let sid = |i: usize| {
        reqs[i]
            .header("x-amzn-bedrock-agentcore-runtime-session-id")
            .unwrap()
            .to_owned()
    };
    assert_eq!(sid(0), sid(1));
}

#[tokio::test]
async fn reject_and_fail_controls() {
    let up = raw_server(|n, _| {
        vec![Step::Write(match n {
            0 => json_response(r#"{"a2a_control": "reject", "text": "not my job"}"#),
            1 => sse_response(&[r#"{"a2a_control": "fail", "text": "quota gone"}"#]),
            _ => sse_response(&[r#"{"a2a_control": "explode"}"#]),
        })]
    })
    .await;
    let e = exec(settings(&up.url));
    let out = run(&e, ctx("a")).await;
    assert_eq!(out.final_state(), TaskState::Rejected);
    assert_eq!(out.reason(), "not my job");
    let out = run(&e, ctx("b")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert_eq!(out.reason(), "the agent failed: quota gone");
    let out = run(&e, ctx("c")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert!(
        out.reason()
            .contains("unknown `a2a_control` kind `explode`"),
        "{}",
        out.reason()
    );
}

#[tokio::test]
async fn sessions_differ_per_caller_and_one_invocation_per_session() {
    let up = raw_server(|_, _| {
        vec![
            Step::Sleep(Duration::from_millis(150)),
            Step::Write(json_response(r#""ok""#)),
        ]
    })
    .await;
    let e = exec(settings(&up.url));
    let runs = (0..3).map(|i| {
        let e = e.clone();
        async move { run(&e, ctx_in("shared", "alice", &format!("m{i}"))).await }
    });
    let outs = futures::future::join_all(runs).await;
    for out in &outs {
        assert_eq!(out.final_state(), TaskState::Completed);
    }
    // The two that waited said so in a WORKING status message, then went back to a
    // plain WORKING when their turn came; the one that ran at once did not.
    let queued = |out: &upstream_common::Outcome| {
        out.events.iter().any(|e| {
            matches!(e, StreamResponse::StatusUpdate(u)
            if u.status.state == TaskState::Working
                && u.status.message.as_ref().is_some_and(|m| {
                    a2a_gateway::executor::get_message_text(m, "")
                        == a2a_gateway::upstream::QUEUED_STATUS_TEXT
                }))
        })
    };
    assert_eq!(outs.iter().filter(|o| queued(o)).count(), 2);
    for out in outs.iter().filter(|o| queued(o)) {
        let states = out.states();
        assert_eq!(
            &states[states.len() - 3..],
            [TaskState::Working, TaskState::Working, TaskState::Completed],
            "{states:?}"
        );
    }
    let reqs = up.requests();
    // Each invocation arrived only after the previous reply (150 ms) was over.
    for w in reqs.windows(2) {
        assert!(
            w[1].at - w[0].at >= Duration::from_millis(140),
            "same session ran concurrently"
        );
    }
    let sid = |i: usize| {
        reqs[i]
            .header("x-amzn-bedrock-agentcore-runtime-session-id")
            .unwrap()
            .to_owned()
    };
    assert!(sid(0) == sid(1) && sid(1) == sid(2));
    // Another caller's context of the same id: another session, not serialised.
    let t0 = Instant::now();
    let (a, b) = tokio::join!(
        run(&e, ctx_in("shared", "bob", "m")),
        run(&e, ctx_in("other", "bob", "m"))
    );
    assert_eq!(
        (a.final_state(), b.final_state()),
        (TaskState::Completed, TaskState::Completed)
    );
    assert!(
        t0.elapsed() < Duration::from_millis(290),
        "different sessions ran one after the other"
    );
    let reqs = up.requests();
    assert_ne!(
        reqs[3]
            .header("x-amzn-bedrock-agentcore-runtime-session-id")
            .unwrap(),
        sid(0)
    );
}

#[tokio::test]
async fn cancel_drops_the_request_stops_the_session_and_ignores_later_output() {
    let up = raw_server(|_, req| {
        if req.line.contains("/stopruntimesession") {
            return vec![Step::Write(response(
                404,
                &[("x-amzn-ErrorType", "ResourceNotFoundException")],
                b"{}",
            ))];
        }
        let mut head = sse_head();
        head.extend(chunk(b"data: \"first\"\n\n"));
        vec![Step::Write(head), Step::AwaitClientClose]
    })
    .await;
    let e = exec(settings(&up.url));
    let c = ctx_in("cancel-me", "alice", "long job");
    let (queue, mut rx) = EventQueue::bounded(64);
    let e2 = e.clone();
    let c2 = c.clone();
    let q2 = queue.clone();
    let running = tokio::spawn(async move { e2.execute(c2, q2).await });
    // Wait for the first chunk.
    loop {
        match rx.recv().await.expect("event") {
            StreamResponse::ArtifactUpdate(_) => break,
            _ => continue,
        }
    }
    let t0 = Instant::now();
    c.cancellation().cancel();
    e.cancel(c.clone(), queue.clone())
        .await
        .expect("cancel ok (404 counts as done)");
    tokio::time::timeout(Duration::from_secs(1), running)
        .await
        .expect("execute returns promptly")
        .unwrap()
        .unwrap();
    drop(queue);
    let mut rest = Vec::new();
    while let Some(ev) = rx.recv().await {
        rest.push(ev);
    }
    let states: Vec<TaskState> = rest
        .iter()
        .filter_map(|e| match e {
            StreamResponse::StatusUpdate(s) => Some(s.status.state),
            _ => None,
        })
        .collect();
    assert_eq!(states, [TaskState::Canceled], "{rest:?}");
    // The upstream saw the connection go away within a second.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let closed = up.client_closed.lock().unwrap().clone();
    assert_eq!(closed.len(), 1);
    assert!(closed[0] - t0 < Duration::from_secs(1));
    let reqs = up.requests();
    let stop = reqs
        .iter()
        .find(|r| r.line.contains("/stopruntimesession"))
        .expect("StopRuntimeSession called");
    assert_eq!(
        stop.header("x-amzn-bedrock-agentcore-runtime-session-id"),
        reqs[0].header("x-amzn-bedrock-agentcore-runtime-session-id")
    );
}

// ---------------------------------------------------------------- tokens

async fn bearer_upstream() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let up = raw_server(move |_, req| {
        let auth = req.header("authorization").unwrap_or("").to_owned();
        s2.lock().unwrap().push(auth.clone());
        if auth == "Bearer tok-1" || auth == "Bearer stale" {
            vec![Step::Write(response(
                401,
                &[
                    ("x-amzn-ErrorType", "UnauthorizedException"),
                    ("www-authenticate", "Bearer"),
                ],
                br#"{"message":"Invalid token"}"#,
            ))]
        } else {
            vec![Step::Write(json_response(r#""ok""#))]
        }
    })
    .await;
    (up.url.clone(), seen)
}

#[tokio::test]
async fn upstream_401_refetches_the_token_once_and_retries() {
    let tok =
        token_fake(r#"{"access_token": "tok-{n}", "token_type": "Bearer", "expires_in": 3600}"#)
            .await;
    let (url, seen) = bearer_upstream().await;
    let mut s = settings(&url);
    s.connection.auth = oauth(TokenEndpoint::Url(format!("{}/oauth2/token", tok.base)));
    let e = exec(s);
    let out = run(&e, ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(*seen.lock().unwrap(), ["Bearer tok-1", "Bearer tok-2"]);
    assert_eq!(tok.calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        tok.basic_ok.load(Ordering::SeqCst),
        2,
        "HTTP Basic client auth + grant + scope"
    );
    // The new token is reused.
    run(&e, ctx("y")).await;
    assert_eq!(tok.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn second_401_and_static_bearer_401_fail() {
    let tok =
        token_fake(r#"{"access_token": "tok-1", "token_type": "Bearer", "expires_in": 3600}"#)
            .await;
    let (url, seen) = bearer_upstream().await;
    let mut s = settings(&url);
    s.connection.auth = oauth(TokenEndpoint::Url(format!("{}/oauth2/token", tok.base)));
    let out = run(&exec(s), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert!(
        out.reason().contains("HTTP 401 UnauthorizedException"),
        "{}",
        out.reason()
    );
    assert_eq!(seen.lock().unwrap().len(), 2);
    let mut s = settings(&url);
    s.connection.auth = AuthSettings::Bearer(SecretString::from("stale"));
    let out = run(&exec(s), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert_eq!(
        seen.lock().unwrap().len(),
        3,
        "no retry with a static token"
    );
    assert!(!out.reason().contains("stale"));
}

#[tokio::test]
async fn hundred_concurrent_sends_on_a_cold_cache_make_one_token_request() {
    let tok =
        token_fake(r#"{"access_token": "tok-{n}", "token_type": "Bearer", "expires_in": 3600}"#)
            .await;
    let up = raw_server(|_, _| vec![Step::Write(json_response(r#""ok""#))]).await;
    let mut s = settings(&up.url);
    s.connection.auth = oauth(TokenEndpoint::Url(format!("{}/oauth2/token", tok.base)));
    let e = exec(s);
    let runs = (0..100).map(|i| {
        let e = e.clone();
        async move { run(&e, ctx(&format!("m{i}"))).await }
    });
    for out in futures::future::join_all(runs).await {
        assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    }
    assert_eq!(tok.calls.load(Ordering::SeqCst), 1);
    assert_eq!(up.count(), 100);
    assert!(
        up.requests()
            .iter()
            .all(|r| r.header("authorization") == Some("Bearer tok-1"))
    );
}

/// Issue 43, item 3: a token that lives no longer than the 30 s refresh margin
/// (`expires_in` 10, or 0) is used for the request that fetched it and never cached:
/// each task fetches its own, and every task completes.
#[tokio::test]
async fn tokens_within_the_refresh_margin_serve_one_request_each() {
    for expires_in in ["10", "0"] {
        let tok = token_fake(&format!(
            r#"{{"access_token": "tok-{{n}}", "token_type": "Bearer", "expires_in": {expires_in}}}"#
        ))
        .await;
        let up = raw_server(|_, _| vec![Step::Write(json_response(r#""ok""#))]).await;
        let mut s = settings(&up.url);
        s.connection.auth = oauth(TokenEndpoint::Url(format!("{}/oauth2/token", tok.base)));
        let e = exec(s);
        for i in 0..3 {
            let out = run(&e, ctx(&format!("m{i}"))).await;
            assert_eq!(
                out.final_state(),
                TaskState::Completed,
                "expires_in {expires_in}: {}",
                out.reason()
            );
        }
        assert_eq!(
            tok.calls.load(Ordering::SeqCst),
            3,
            "expires_in {expires_in}"
        );
        let used: Vec<_> = up
            .requests()
            .iter()
            .map(|r| r.header("authorization").unwrap_or_default().to_owned())
            .collect();
        assert_eq!(used, ["Bearer tok-1", "Bearer tok-2", "Bearer tok-3"]);
    }
}

#[tokio::test]
async fn discovery_document_is_fetched_once() {
    let tok =
        token_fake(r#"{"access_token": "tok-{n}", "token_type": "bearer", "expires_in": "3600"}"#)
            .await;
    let up = raw_server(|_, _| vec![Step::Write(json_response(r#""ok""#))]).await;
    let mut s = settings(&up.url);
    s.connection.auth = oauth(TokenEndpoint::Discovery(format!(
        "{}/.well-known/openid-configuration",
        tok.base
    )));
    let e = exec(s);
    for i in 0..3 {
        let out = run(&e, ctx(&format!("{i}"))).await;
        assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    }
    assert_eq!(tok.discovery_calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        tok.calls.load(Ordering::SeqCst),
        1,
        "string expires_in \"3600\" is honoured"
    );
}

#[tokio::test]
async fn an_echoing_token_endpoint_cannot_leak_the_secret_into_reasons() {
    let up = raw_server(|_, _| vec![Step::Write(json_response(r#""ok""#))]).await;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("cid:{SECRET}"));
    let echo = format!(
        r#"{{"error": "invalid_client {SECRET}", "error_description": "got Basic {basic} and client_secret={SECRET}"}}"#
    );
    for body in [
        echo.clone(),
        echo.replace("invalid_client {SECRET}", "invalid_client"),
    ] {
        let tok = token_fake(&body).await;
        tok.reply.lock().unwrap().0 = 400;
        let mut s = settings(&up.url);
        s.connection.auth = oauth(TokenEndpoint::Url(format!("{}/oauth2/token", tok.base)));
        let e = exec(s);
        let out = run(&e, ctx("x")).await;
        assert_eq!(out.final_state(), TaskState::Failed);
        let r = out.reason();
        assert!(r.contains("(HTTP 400)"), "{r}");
        assert!(
            !r.contains(SECRET) && !r.contains(&basic),
            "secret in reason: {r}"
        );
        let ready = e.token_ready().await.unwrap_err();
        assert!(
            !ready.contains(SECRET) && !ready.contains(&basic),
            "{ready}"
        );
    }
}

#[tokio::test]
async fn failing_token_endpoint_fails_tasks_with_clear_reasons() {
    let up = raw_server(|_, _| vec![Step::Write(json_response(r#""ok""#))]).await;
    // Down.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}/oauth2/token", dead.local_addr().unwrap());
    drop(dead);
    let mut s = settings(&up.url);
    s.connection.auth = oauth(TokenEndpoint::Url(dead_url.clone()));
    let out = run(&exec(s), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert!(
        out.reason()
            .starts_with("the upstream token endpoint is unreachable"),
        "{}",
        out.reason()
    );

    // invalid_client, garbage, and a missing access_token.
    let tok = token_fake(
        r#"{"error": "invalid_client", "error_description": "Client authentication failed"}"#,
    )
    .await;
    tok.reply.lock().unwrap().0 = 401;
    let mut s = settings(&up.url);
    s.connection.auth = oauth(TokenEndpoint::Url(format!("{}/oauth2/token", tok.base)));
    let e = exec(s);
    let out = run(&e, ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    let r = out.reason();
    assert!(
        r.contains("(HTTP 401)") && r.contains("invalid_client"),
        "{r}"
    );
    assert!(!r.contains(SECRET));
    assert!(
        !r.contains("Client authentication failed"),
        "no endpoint free text: {r}"
    );
    assert!(!r.contains(&tok.base), "no endpoint URL: {r}");
    // During the shared backoff nobody calls the endpoint again.
    let runs = (0..10).map(|_| {
        let e = e.clone();
        async move { run(&e, ctx("y")).await }
    });
    for out in futures::future::join_all(runs).await {
        assert_eq!(out.final_state(), TaskState::Failed);
        assert!(out.reason().contains("next attempt in"), "{}", out.reason());
    }
    assert_eq!(tok.calls.load(Ordering::SeqCst), 1);
    assert_eq!(up.count(), 0);

    for (status, body, want) in [
        (200, "<html>oops</html>", "(HTTP 200)"),
        (200, r#"{"token_type": "Bearer"}"#, "lacks `access_token`"),
        (503, "", "(HTTP 503)"),
    ] {
        let tok = token_fake(body).await;
        tok.reply.lock().unwrap().0 = status;
        let mut s = settings(&up.url);
        s.connection.auth = oauth(TokenEndpoint::Url(format!("{}/oauth2/token", tok.base)));
        let out = run(&exec(s), ctx("x")).await;
        assert_eq!(out.final_state(), TaskState::Failed);
        assert!(out.reason().contains(want), "{want}: {}", out.reason());
    }
}

// ---------------------------------------------------------------- secrets in logs

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The capture behind the test binary's global tracing subscriber (installed once).
fn global_capture() -> Capture {
    static CAPTURE: std::sync::OnceLock<Capture> = std::sync::OnceLock::new();
    CAPTURE
        .get_or_init(|| {
            let capture = Capture::default();
            let w = capture.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_writer(move || w.clone())
                .with_ansi(false)
                .finish();
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber in this test binary");
            capture
        })
        .clone()
}

#[tokio::test(flavor = "current_thread")]
async fn no_secret_or_token_in_logs_or_events() {
    const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.SECRET-ACCESS-TOKEN.sig";
    // A process-wide subscriber, not a thread-local one: with a thread-local default, an
    // event whose callsite another test's thread registers at the same moment can be
    // lost (the callsite's interest is cached without this thread's subscriber), and
    // the assertions below would miss lines. Other tests' lines land here too; the
    // assertions look for this test's correlation id and secrets only.
    let capture = global_capture();

    let tok = token_fake(&format!(
        r#"{{"access_token": "{TOKEN}", "token_type": "Bearer", "expires_in": 3600}}"#
    ))
    .await;
    // The upstream rejects the token and echoes it back in its error body.
    let up = raw_server(|_, req| {
        let auth = req.header("authorization").unwrap_or("").to_owned();
        vec![Step::Write(response(
            403,
            &[("x-amzn-ErrorType", "AccessDeniedException")],
            format!(r#"{{"message":"token {auth} not accepted"}}"#).as_bytes(),
        ))]
    })
    .await;
    let mut s = settings(&up.url);
    s.connection.auth = oauth(TokenEndpoint::Url(format!("{}/oauth2/token", tok.base)));
    let e = exec(s);
    tracing::info!(executor = ?e, "built");
    let out = run(&e, ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    // The runtime's message (with the echoed token) is not repeated to the caller.
    assert!(!out.reason().contains("not accepted"), "{}", out.reason());
    // Then the token endpoint fails, echoing nothing useful.
    tok.reply.lock().unwrap().0 = 500;
    let c = ctx("y");
    e.cancel(c, EventQueue::bounded(4).0).await.ok();

    let logs = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("the runtime refused the invocation"),
        "logs captured: {logs}"
    );
    // The log has it, redacted, under the task's correlation id.
    let id = out.correlation_id().expect("a correlation id");
    assert!(
        logs.lines()
            .any(|l| l.contains(&id) && l.contains("token Bearer [redacted] not accepted")),
        "logs captured: {logs}"
    );
    assert!(!logs.contains(SECRET), "client secret in logs");
    assert!(!logs.contains("SECRET-ACCESS-TOKEN"), "token in logs");
    let events = serde_json::to_string(&out.events).unwrap();
    assert!(!events.contains(SECRET) && !events.contains("SECRET-ACCESS-TOKEN"));
    assert!(!format!("{e:?}").contains(SECRET));
}

#[tokio::test]
async fn a_message_without_text_is_rejected_unless_include_message_is_on() {
    let up = raw_server(|_, _| vec![Step::Write(json_response(r#""ok""#))]).await;
    let data_only = || {
        let mut c = ctx("");
        c.message.parts = vec![a2a_gateway::protocol::Part::data(json!({"k": 1}))];
        c
    };
    let out = run(&exec(settings(&up.url)), data_only()).await;
    assert_eq!(out.final_state(), TaskState::Rejected);
    assert!(out.reason().contains("include_message"), "{}", out.reason());
    assert_eq!(up.count(), 0, "nothing is sent upstream");

    let mut s = settings(&up.url);
    s.include_message = true;
    let out = run(&exec(s), data_only()).await;
    assert_eq!(out.final_state(), TaskState::Completed);
    assert_eq!(up.count(), 1);
}

/// Runs `execute` in the background; returns the event receiver and the run.
fn spawn_run(
    e: &AgentCoreExecutor,
    c: a2a_gateway::executor::RequestContext,
) -> (
    a2a_gateway::executor::EventReceiver,
    tokio::task::JoinHandle<()>,
) {
    let (queue, rx) = EventQueue::bounded(64);
    let e = e.clone();
    let run = tokio::spawn(async move {
        e.execute(c, queue).await.expect("execute returns Ok");
    });
    (rx, run)
}

async fn collect(
    mut rx: a2a_gateway::executor::EventReceiver,
    run: tokio::task::JoinHandle<()>,
) -> Vec<StreamResponse> {
    run.await.unwrap();
    let mut out = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        out.push(ev);
    }
    out
}

#[tokio::test]
async fn a_new_task_is_published_only_at_the_upstreams_first_output() {
    // The runtime answers only when the test lets it.
    let up = MockRuntime::start().await;
    up.hold();
    let e = exec(settings(&up.url()));

    // Nothing is published while the upstream has not answered: the answer may still
    // be a Message.
    let (mut rx, run) = spawn_run(&e, ctx("hello"));
    up.wait_invocations(1).await;
    assert!(
        matches!(
            rx.try_recv(),
            Err(tokio::sync::mpsc::error::TryRecvError::Empty)
        ),
        "no event before the upstream's first output"
    );
    up.script([MockReply::Sse(vec![
        json!({"event": {"messageStart": {"role": "assistant"}}}),
        json!({"a2a_control": "message", "text": "Hi, no task needed."}),
        json!("never read"),
    ])]);
    up.release(1);
    let events = collect(rx, run).await;
    let [StreamResponse::Message(m)] = events.as_slice() else {
        panic!("one Message, got {events:?}")
    };
    assert_eq!(m.parts[0].as_text(), Some("Hi, no task needed."));
    assert_eq!(m.task_id, None);
    assert!(m.context_id.is_some());

    // Any other first output publishes the Task first, then itself.
    let (mut rx, run) = spawn_run(&e, ctx("hello"));
    up.wait_invocations(2).await;
    assert!(rx.try_recv().is_err());
    up.script([MockReply::Sse(vec![json!("Hello")])]);
    up.release(1);
    let out = upstream_common::Outcome {
        events: collect(rx, run).await,
    };
    assert_eq!(
        out.states(),
        [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::Completed
        ]
    );
    assert_eq!(out.text(), "Hello");

    // A failure before any output still shows the whole lifecycle.
    let (rx, run) = spawn_run(&e, ctx("hello"));
    up.wait_invocations(3).await;
    up.script([MockReply::Sse(vec![
        json!({"a2a_control": "fail", "text": "no"}),
    ])]);
    up.release(1);
    let out = upstream_common::Outcome {
        events: collect(rx, run).await,
    };
    assert_eq!(
        out.states(),
        [TaskState::Submitted, TaskState::Working, TaskState::Failed]
    );
}

#[tokio::test]
async fn a_message_control_once_the_task_exists_ends_the_reply_completed() {
    let up = raw_server(|n, _| {
        vec![Step::Write(match n {
            0 => sse_response(&[
                r#""Hello, ""#,
                r#"{"a2a_control": "message", "text": "world"}"#,
                r#""never read""#,
            ]),
            _ => json_response(r#"{"a2a_control": "message", "text": "as a task"}"#),
        })]
    })
    .await;
    let e = exec(settings(&up.url));
    // After other output: the message's parts end the reply.
    let out = run(&e, ctx("a")).await;
    assert_eq!(
        out.states(),
        [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::Completed
        ]
    );
    assert_eq!(out.text(), "Hello, world");
    assert!(out.chunks().last().unwrap().last);
    // A follow-up to an existing task: no Message reply is possible.
    let mut follow = ctx("b");
    follow.current_task = Some(Box::new(a2a_gateway::executor::new_task(&follow.message)));
    let out = run(&e, follow).await;
    assert_eq!(out.states(), [TaskState::Working, TaskState::Completed]);
    assert_eq!(out.text(), "as a task");
    // returnImmediately: the client wants a task at once.
    let mut immediate = ctx("c");
    immediate.configuration = Some(a2a_gateway::protocol::SendMessageConfiguration {
        return_immediately: Some(true),
        ..Default::default()
    });
    let out = run(&e, immediate).await;
    assert_eq!(
        out.states(),
        [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::Completed
        ]
    );
    assert_eq!(out.text(), "as a task");
}

#[tokio::test]
async fn send_message_answers_with_the_upstreams_message_and_stores_no_task() {
    use a2a_gateway::protocol::{ListTasksRequest, SendMessageRequest, SendMessageResponse};
    let up = raw_server(|n, _| {
        vec![Step::Write(match n % 2 {
            0 => {
                json_response(r#"{"a2a_control": "message", "text": "Direct.", "data": {"k": 1}}"#)
            }
            _ => sse_response(&[r#"{"a2a_control": "message", "text": "Streamed."}"#]),
        })]
    })
    .await;
    let h = a2a_gateway::RequestHandler::new(
        Arc::new(exec(settings(&up.url))),
        Arc::new(a2a_gateway::store::MemoryTaskStore::new()),
        a2a_gateway::HandlerConfig::default(),
    );
    let call = a2a_gateway::CallContext::anonymous();
    let req = |text: &str| SendMessageRequest {
        tenant: None,
        message: a2a_gateway::executor::new_user_text_message(text),
        configuration: None,
        metadata: None,
    };
    let SendMessageResponse::Message(m) = h.send_message(&call, req("hi")).await.unwrap() else {
        panic!("a Message reply")
    };
    assert_eq!(m.parts.len(), 2);
    assert_eq!(m.parts[0].as_text(), Some("Direct."));
    // Streaming: the stream is that single Message.
    let events: Vec<_> = futures::StreamExt::collect::<Vec<_>>(
        h.send_streaming_message(&call, req("hi")).await.unwrap(),
    )
    .await;
    assert_eq!(events.len(), 1, "{events:?}");
    let StreamResponse::Message(m) = events[0].as_ref().unwrap().event() else {
        panic!("{events:?}")
    };
    assert_eq!(m.parts[0].as_text(), Some("Streamed."));
    let listed = h
        .list_tasks(&call, ListTasksRequest::default())
        .await
        .unwrap();
    assert!(listed.tasks.is_empty(), "{listed:?}");
}

// ---------------------------------------------------------------- the caller's identity

#[tokio::test]
async fn caller_and_tenant_reach_the_runtime_in_custom_headers() {
    let up = raw_server(|_, _| vec![Step::Write(json_response(r#""ok""#))]).await;
    let e = exec(settings(&up.url));
    let mut c = ctx_in("ctx-h", "Zoë Q", "hi");
    c.call_context.tenant = "acme".into();
    assert_eq!(run(&e, c).await.final_state(), TaskState::Completed);
    // The default tenant "" sends no tenant header.
    assert_eq!(
        run(&e, ctx_in("ctx-h2", "bob@example.com", "hi"))
            .await
            .final_state(),
        TaskState::Completed
    );
    // Renamed and disabled.
    let mut s = settings(&up.url);
    s.connection.caller_header = Some(axum::http::HeaderName::from_static("x-who"));
    s.connection.tenant_header = None;
    let mut c = ctx_in("ctx-h3", "carol", "hi");
    c.call_context.tenant = "acme".into();
    assert_eq!(run(&exec(s), c).await.final_state(), TaskState::Completed);

    let reqs = up.requests();
    assert_eq!(reqs.len(), 3);
    let caller = "x-amzn-bedrock-agentcore-runtime-custom-caller";
    let tenant = "x-amzn-bedrock-agentcore-runtime-custom-tenant";
    assert_eq!(reqs[0].header(caller), Some("Zo%C3%AB%20Q"));
    assert_eq!(reqs[0].header(tenant), Some("acme"));
    assert_eq!(reqs[1].header(caller), Some("bob@example.com"));
    assert_eq!(reqs[1].header(tenant), None);
    assert_eq!(reqs[2].header("x-who"), Some("carol"));
    assert_eq!(reqs[2].header(caller), None);
    assert_eq!(reqs[2].header(tenant), None);
    // Without forward, no caller credential goes upstream.
    assert!(reqs.iter().all(|r| r.header("authorization").is_none()));
}

mod forward {
    //! `upstream.auth.kind = "forward"` through a whole gateway: JWT and API-key
    //! callers over JSON-RPC, a JWKS endpoint, the fake runtime.

    use super::*;
    use a2a_gateway::config::{ApiKeyConfig, JwtConfig, ServerAuthKind, sha256_hex};
    use jsonwebtoken::jwk::Jwk;
    use jsonwebtoken::{Algorithm, EncodingKey, Header};

    const ISSUER: &str = "https://idp.test.example/";
    const AUDIENCE: &str = "a2a-gateway";
    const RSA_1: &[u8] = include_bytes!("fixtures/jwt/rsa-1.pem");
    const API_KEY: &str = "forward-test-api-key-SECRET-0123456789";

    async fn jwks_server(key: &EncodingKey) -> String {
        let mut jwk = Jwk::from_encoding_key(key, Algorithm::RS256).unwrap();
        jwk.common.key_id = Some("k1".into());
        let doc = json!({"keys": [jwk]});
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
        let app = Router::new().route(
            "/jwks.json",
            get(move || {
                let doc = doc.clone();
                async move { axum::Json(doc) }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    fn jwt(key: &EncodingKey, sub: &str, tenant: &str) -> String {
        let now = jsonwebtoken::get_current_timestamp() as i64;
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some("k1".into());
        let claims = json!({
            "iss": ISSUER, "aud": AUDIENCE, "sub": sub, "tenant": tenant,
            "iat": now, "exp": now + 600,
        });
        jsonwebtoken::encode(&header, &claims, key).unwrap()
    }

    /// A gateway accepting API keys and JWTs, forwarding to `upstream` with `forward`.
    async fn gateway(jwks_url: &str, upstream: &str) -> String {
        use a2a_gateway::app::Gateway;
        use a2a_gateway::config::{Config, ConfigSources};
        let mut config = Config::load(ConfigSources {
            file: None,
            env: vec![],
            overrides: vec![("store.url".into(), "memory:".into())],
        })
        .unwrap();
        let mut jwt = JwtConfig::default();
        jwt.issuer = ISSUER.into();
        jwt.audience = vec![AUDIENCE.into()];
        jwt.jwks_url = Some(jwks_url.parse().unwrap());
        config.server.auth.schemes = vec![ServerAuthKind::ApiKey, ServerAuthKind::Jwt];
        config.server.auth.keys = vec![ApiKeyConfig::from_sha256("keyed", sha256_hex(API_KEY))];
        config.server.auth.jwt = Some(jwt);
        config.server.auth.tenant_claim = Some("tenant".into());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        config.server.public_url = Some(format!("http://{addr}/").parse().unwrap());
        let mut s = settings(upstream);
        s.connection.auth = AuthSettings::Forward;
        let gateway = Gateway::new(
            &config,
            Arc::new(exec(s)),
            Arc::new(a2a_gateway::store::MemoryTaskStore::new()),
            None,
        );
        tokio::spawn(gateway.serve(listener, Duration::from_secs(1), futures::future::pending()));
        format!("http://{addr}/")
    }

    async fn send(url: &str, bearer: &str, tenant: &str) -> Value {
        let message = json!({
            "messageId": uuid::Uuid::new_v4().to_string(),
            "role": "ROLE_USER",
            "parts": [{"text": "hello"}],
        });
        reqwest::Client::new()
            .post(url)
            .header("A2A-Version", "1.0")
            .bearer_auth(bearer)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                          "params": {"message": message, "tenant": tenant}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn forward_sends_the_verified_jwt_and_an_api_key_caller_gets_a_failed_task() {
        let capture = global_capture();
        let key = EncodingKey::from_rsa_pem(RSA_1).unwrap();
        let jwks = jwks_server(&key).await;
        let up = raw_server(|_, _| vec![Step::Write(json_response(r#""ok""#))]).await;
        let url = gateway(&jwks, &up.url).await;

        let token = jwt(&key, "alice", "acme");
        let answer = send(&url, &token, "acme").await;
        let task = &answer["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
        let reqs = up.requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!(
            reqs[0].header("authorization"),
            Some(format!("Bearer {token}").as_str())
        );
        assert_eq!(
            reqs[0].header("x-amzn-bedrock-agentcore-runtime-custom-caller"),
            // The owner, which names the issuer (docs/authentication.md#owner-namespaces).
            Some(format!("jwt:{ISSUER}#alice").as_str())
        );
        assert_eq!(
            reqs[0].header("x-amzn-bedrock-agentcore-runtime-custom-tenant"),
            Some("acme")
        );

        // An API key is never forwarded: the task fails with the documented reason and
        // the runtime is not called.
        let answer = send(&url, API_KEY, "").await;
        let task = &answer["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{answer}");
        let reason = task["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            reason.contains("upstream.auth.kind = \"forward\"") && reason.contains("API key"),
            "{reason}"
        );
        assert_eq!(up.count(), 1, "the runtime was called without a JWT");

        let logs = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
        let signature = token.rsplit('.').next().unwrap();
        assert!(!logs.contains(signature), "the caller's JWT is in the log");
        assert!(!logs.contains(API_KEY), "the API key is in the log");
        assert!(!answer.to_string().contains(API_KEY));
    }
}
