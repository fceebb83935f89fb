//! A LOCAL STAND-IN for an agent hosted on Amazon Bedrock AgentCore Runtime. It
//! speaks the invocation contract the gateway's upstream executor uses (see
//! `docs/upstream-contract.md`): `POST /invocations` with a JSON body
//! `{"prompt", "actor_id"}` and the `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id`
//! header, answered as `text/event-stream` with one `data:` frame per word (a JSON
//! string), over HTTP/1.1 or HTTP/2 (h2c prior knowledge). Also
//! `POST /stopruntimesession` and `GET /ping`.
//!
//! What it does with the prompt (case-insensitive):
//! - contains `fail`: streams a few words, then an error frame
//!   `{"error": ..., "error_type": "DemoFailure"}` (the task ends FAILED);
//! - contains `ask me`: streams a question, then the control object
//!   `{"a2a_control": "input_required", "text": ...}` (the task ends INPUT_REQUIRED);
//!   the next prompt in the same session is taken as the answer;
//! - contains `slow`: words come every 500 ms instead of the usual delay;
//! - anything else: a friendly reply that quotes the prompt.
//!
//! With a [`TokenIssuer`], a request without a valid bearer token gets 401 with
//! `x-amzn-ErrorType: AccessDeniedException`, as the hosted runtime answers.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Version, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::issuer::TokenIssuer;

/// The session header of the invocation contract (lower case).
pub const SESSION_HEADER: &str = "x-amzn-bedrock-agentcore-runtime-session-id";

/// How the stand-in behaves.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// Delay between words of an ordinary reply.
    pub word_delay: Duration,
    /// Delay between words when the prompt says `slow`.
    pub slow_word_delay: Duration,
    /// When set, requests need a bearer token this issuer handed out.
    pub issuer: Option<Arc<TokenIssuer>>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            word_delay: Duration::from_millis(80),
            slow_word_delay: Duration::from_millis(500),
            issuer: None,
        }
    }
}

#[derive(Debug)]
struct Runtime {
    options: RuntimeOptions,
    /// Sessions whose last reply asked for input.
    waiting: Mutex<HashSet<String>>,
}

/// The stand-in's router: `/invocations`, `/stopruntimesession`, `/ping`.
pub fn router(options: RuntimeOptions) -> Router {
    let state = Arc::new(Runtime {
        options,
        waiting: Mutex::new(HashSet::new()),
    });
    Router::new()
        .route("/invocations", post(invoke))
        .route("/stopruntimesession", post(stop_session))
        .route(
            "/ping",
            get(|| async { Json(json!({"status": "Healthy"})) }),
        )
        .with_state(state)
}

#[derive(Deserialize)]
struct Invocation {
    prompt: Option<Value>,
    actor_id: Option<String>,
}

fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let mut resp = (status, Json(json!({ "message": message }))).into_response();
    if let Ok(v) = kind.parse() {
        resp.headers_mut().insert("x-amzn-errortype", v);
    }
    resp
}

/// A refusal: status, `x-amzn-ErrorType`, message.
type Refusal = (StatusCode, &'static str, &'static str);

fn refuse((status, kind, message): Refusal) -> Response {
    error(status, kind, message)
}

fn check_auth(rt: &Runtime, headers: &HeaderMap) -> Result<(), Refusal> {
    let Some(issuer) = &rt.options.issuer else {
        return Ok(());
    };
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match token {
        Some(t) if issuer.is_valid(t) => Ok(()),
        _ => Err((
            StatusCode::UNAUTHORIZED,
            "AccessDeniedException",
            "missing, unknown or expired bearer token",
        )),
    }
}

fn session_of(headers: &HeaderMap) -> Result<String, Refusal> {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|s| (33..=100).contains(&s.len()))
        .map(str::to_owned)
        .ok_or((
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "the runtime session id header must hold 33 to 100 characters",
        ))
}

async fn invoke(
    State(rt): State<Arc<Runtime>>,
    version: Version,
    headers: HeaderMap,
    Json(body): Json<Invocation>,
) -> Response {
    if let Err(r) = check_auth(&rt, &headers) {
        return refuse(r);
    }
    let session = match session_of(&headers) {
        Ok(s) => s,
        Err(r) => return refuse(r),
    };
    let prompt = match body.prompt {
        Some(Value::String(s)) => s,
        Some(other) => other.to_string(),
        None => {
            return error(
                StatusCode::BAD_REQUEST,
                "ValidationException",
                "`prompt` is required",
            );
        }
    };
    tracing::info!(
        http = ?version,
        session = %session,
        actor = body.actor_id.as_deref().unwrap_or("-"),
        "stand-in runtime: invocation"
    );
    let lower = prompt.to_lowercase();
    let was_waiting = rt.waiting.lock().expect("lock").remove(&session);
    let delay = if lower.contains("slow") {
        rt.options.slow_word_delay
    } else {
        rt.options.word_delay
    };
    let (text, last): (String, Option<Value>) = if was_waiting {
        (
            format!("Thanks! With \"{prompt}\" I have everything I need. Done."),
            None,
        )
    } else if lower.contains("fail") {
        (
            "Starting the work... ".to_owned(),
            Some(json!({
                "error": "the stand-in runtime was asked to fail",
                "error_type": "DemoFailure",
                "message": "the stand-in runtime was asked to fail",
            })),
        )
    } else if lower.contains("ask me") {
        rt.waiting.lock().expect("lock").insert(session.clone());
        (
            "I can do that, but I need one detail first. ".to_owned(),
            Some(json!({
                "a2a_control": "input_required",
                "text": "Which release should I look at?",
            })),
        )
    } else {
        (
            format!(
                "Hello from the local stand-in runtime! You said: \"{prompt}\". \
                 This reply streams word by word through the gateway."
            ),
            None,
        )
    };
    let words: Vec<Value> = split_words(&text).into_iter().map(Value::String).collect();
    let frames =
        futures::stream::iter(words.into_iter().chain(last)).then(move |frame| async move {
            tokio::time::sleep(delay).await;
            Ok::<_, Infallible>(Event::default().data(frame.to_string()))
        });
    let mut resp = Sse::new(frames).into_response();
    if let Ok(v) = session.parse() {
        resp.headers_mut().insert(SESSION_HEADER, v);
    }
    resp
}

/// Splits `text` into words that keep their trailing space, so the concatenation
/// of the pieces is `text` again.
fn split_words(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_owned).collect()
}

async fn stop_session(State(rt): State<Arc<Runtime>>, headers: HeaderMap) -> Response {
    if let Err(r) = check_auth(&rt, &headers) {
        return refuse(r);
    }
    let session = match session_of(&headers) {
        Ok(s) => s,
        Err(r) => return refuse(r),
    };
    rt.waiting.lock().expect("lock").remove(&session);
    tracing::info!(session = %session, "stand-in runtime: session stopped");
    Json(json!({})).into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn words_concatenate_to_the_text() {
        let t = "Hello there, \"x y\". Done.";
        assert_eq!(super::split_words(t).concat(), t);
    }
}
