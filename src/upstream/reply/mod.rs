//! Translates the runtime's reply (runtime contract §1.2 and §4 "Gateway translation
//! rules") into a stream of typed [`UpstreamEvent`]s.
//!
//! The declared `Content-Type` (its media type, any case, parameters ignored)
//! decides, as [`ReplyKind::of`] says; nothing is guessed from the body:
//!
//! - `text/event-stream`: decoded by [`crate::upstream::http::sse`] (bounded, CR/LF/CRLF, frames
//!   split at any byte); each `data` payload is classified by [`classify_frame`].
//! - `application/json` (or `+json`), or no `Content-Type` at all: the whole body
//!   (at most `max_reply_bytes`) must be JSON and is classified by
//!   [`classify_json_reply`]; a body that is not JSON fails.
//! - `text/plain`: the whole body is the text (it must be UTF-8).
//! - `text/html`, an HTML page under any type, or an empty body: an error.
//! - any other type: an error naming it; the body is not read.
//!
//! The body stream carries the read (idle) timeout; a transport error after the
//! first byte is [`UpstreamError::Broken`], never a clean end.
//!
//! - [`control`]: the control vocabulary an agent's output may carry;
//! - [`sink`]: [`UpstreamEvent`]s into A2A task events through a `TaskUpdater`.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::stream::{BoxStream, StreamExt};
use serde_json::Value;

pub mod control;
pub mod sink;

use self::control::Control;
use crate::upstream::errors::{TimeoutKind, UpstreamError};

/// Default of `upstream.max_reply_bytes`, the largest JSON or text (non-SSE) reply
/// read: 16 MiB (the runtime's own limit is 100 MB, contract §1.4; every byte is
/// held in memory until the reply is complete).
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 16 * 1024 * 1024;

/// How a 2xx reply is read, by its declared `Content-Type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyKind {
    /// `text/event-stream`.
    EventStream,
    /// `application/json`, `application/*+json`, or no `Content-Type`.
    Json,
    /// `text/plain`.
    Text,
    /// `text/html`: a proxy's or load balancer's page.
    Html,
    /// Anything else: the media type, reduced to token characters.
    Other(String),
}

impl ReplyKind {
    /// The kind for a `Content-Type` header value (`None`: the header is absent).
    pub fn of(content_type: Option<&str>) -> Self {
        let Some(ct) = content_type else {
            return Self::Json;
        };
        let essence = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "" => Self::Json,
            "text/event-stream" => Self::EventStream,
            "application/json" => Self::Json,
            "text/plain" => Self::Text,
            "text/html" => Self::Html,
            e if e.starts_with("application/") && e.ends_with("+json") => Self::Json,
            e => Self::Other(crate::upstream::errors::token_text(e)),
        }
    }
}

/// One thing the upstream agent said.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamEvent {
    /// A piece of streamed text, to append exactly as sent.
    Text(String),
    /// A complete answer (`{"message": {"content": [{"text"}]}}`, `{"result": …}`,
    /// or the JSON reply's text). Used only when no [`Text`](Self::Text) came.
    FinalText(String),
    /// JSON that is neither text nor control: forwarded as a `data` part.
    Data(Value),
    /// Token usage metadata (`event.metadata.usage`); logged, not forwarded.
    Usage(Value),
    /// A control object (see [`control`]).
    Control(Control),
    /// `[DONE]`: the agent says the stream is over.
    Done,
}

/// Classification state across the frames of one stream.
#[derive(Debug, Default)]
pub struct FrameState {
    /// Strands `event.contentBlockDelta` frames were seen: the parallel `data`
    /// frames of the same text are then skipped (no doubled answer).
    strands_deltas: bool,
}

/// Classifies one SSE `data` payload (already joined across `data:` lines).
///
/// # Errors
/// [`UpstreamError::Agent`] for the SDK's `{"error", "error_type"}` frame;
/// [`UpstreamError::Control`] for a malformed control object.
pub fn classify_frame(
    data: &str,
    state: &mut FrameState,
) -> Result<Option<UpstreamEvent>, UpstreamError> {
    if data.trim() == "[DONE]" {
        return Ok(Some(UpstreamEvent::Done));
    }
    let Ok(value) = serde_json::from_str::<Value>(data) else {
        // Not JSON: the raw text is the delta.
        return Ok(Some(UpstreamEvent::Text(data.to_owned())));
    };
    let obj = match value {
        Value::String(s) => return Ok(Some(UpstreamEvent::Text(s))),
        Value::Null => return Ok(None),
        Value::Object(ref o) => o,
        other => return Ok(Some(UpstreamEvent::Data(other))),
    };
    if let Some(c) = control::parse(&value) {
        return c
            .map(|c| Some(UpstreamEvent::Control(c)))
            .map_err(UpstreamError::Control);
    }
    if let Some(e) = agent_error(obj) {
        return Err(e);
    }
    if let Some(event) = obj.get("event").and_then(Value::as_object) {
        if let Some(t) = pointer_str(&value, "/event/contentBlockDelta/delta/text") {
            state.strands_deltas = true;
            return Ok(Some(UpstreamEvent::Text(t.to_owned())));
        }
        if let Some(u) = value.pointer("/event/metadata/usage") {
            return Ok(Some(UpstreamEvent::Usage(u.clone())));
        }
        // Other model-stream bookkeeping (messageStart, contentBlockStop, …).
        let _ = event;
        return Ok(None);
    }
    if let Some(Value::String(d)) = obj.get("data") {
        return Ok((!state.strands_deltas).then(|| UpstreamEvent::Text(d.clone())));
    }
    for key in ["text", "delta", "content", "response", "output"] {
        if let Some(Value::String(s)) = obj.get(key) {
            return Ok(Some(UpstreamEvent::Text(s.clone())));
        }
    }
    if let Some(t) = pointer_str(&value, "/delta/text") {
        return Ok(Some(UpstreamEvent::Text(t.to_owned())));
    }
    if let Some(m) = obj.get("message")
        && let Some(t) = texts(m.get("content").unwrap_or(m))
    {
        return Ok(Some(UpstreamEvent::FinalText(t)));
    }
    if let Some(r) = obj.get("result")
        && let Some(t) = extract_text(r, 0)
    {
        return Ok(Some(UpstreamEvent::FinalText(t)));
    }
    Ok(Some(UpstreamEvent::Data(value)))
}

/// Classifies a whole (non-SSE) JSON reply.
///
/// # Errors
/// As [`classify_frame`].
pub fn classify_json_reply(value: Value) -> Result<Option<UpstreamEvent>, UpstreamError> {
    match &value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(UpstreamEvent::FinalText(s.clone()))),
        Value::Object(obj) => {
            if let Some(c) = control::parse(&value) {
                return c
                    .map(|c| Some(UpstreamEvent::Control(c)))
                    .map_err(UpstreamError::Control);
            }
            if let Some(e) = agent_error(obj) {
                return Err(e);
            }
            Ok(Some(match extract_text(&value, 0) {
                Some(t) => UpstreamEvent::FinalText(t),
                None => UpstreamEvent::Data(value),
            }))
        }
        _ => Ok(Some(UpstreamEvent::Data(value))),
    }
}

/// `{"error": …, "error_type": …}`: the SDK's mid-stream failure frame.
fn agent_error(obj: &serde_json::Map<String, Value>) -> Option<UpstreamError> {
    let (Some(err), Some(kind)) = (obj.get("error"), obj.get("error_type")) else {
        return None;
    };
    let err = match err {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let message = match kind.as_str() {
        Some(k) if !k.is_empty() => format!("{k}: {err}"),
        _ => err,
    };
    Some(UpstreamError::Agent { message })
}

fn pointer_str<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

/// The text of the nested reply shapes (contract §4 rule 4, as LiteLLM's
/// `_parse_json_response`): strings; objects with `response`, `result`, `text`,
/// `output`, `content`, `message`, `parts`, `artifacts`; lists of those.
fn extract_text(v: &Value, depth: u8) -> Option<String> {
    if depth > 5 {
        return None;
    }
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(_) => texts(v),
        Value::Object(o) => {
            for key in [
                "response",
                "result",
                "text",
                "output",
                "content",
                "message",
                "parts",
                "artifacts",
            ] {
                if let Some(t) = o.get(key).and_then(|x| extract_text(x, depth + 1)) {
                    return Some(t);
                }
            }
            None
        }
        _ => None,
    }
}

/// The concatenated text of a list of `{"text": …}` / strings / nested parts, or of
/// a single such value.
fn texts(v: &Value) -> Option<String> {
    match v {
        Value::Array(items) => {
            let found: Vec<String> = items.iter().filter_map(|i| extract_text(i, 3)).collect();
            (!found.is_empty()).then(|| found.concat())
        }
        other => extract_text(other, 3),
    }
}

/// The reply body as a stream of byte chunks, each within `read_timeout` of the
/// previous one. A transport error becomes [`UpstreamError::Broken`] (with the bytes
/// received so far), silence [`UpstreamError::Timeout`]; both end the stream.
pub fn body_stream(
    resp: reqwest::Response,
    read_timeout: Duration,
) -> BoxStream<'static, Result<Bytes, UpstreamError>> {
    ReadTimeout::new(resp.bytes_stream(), read_timeout).boxed()
}

/// A body stream whose next chunk must come within `read_timeout` of the first poll
/// for it, the first chunk within `read_timeout` of the stream's creation (time the
/// consumer takes between two chunks does not count).
///
/// One timer serves the whole body: a chunk only notes when the wait for the next one
/// began, and the timer, when it fires, either ends the stream or is set again to
/// that wait's own deadline. A `tokio::time::timeout` per chunk would register and
/// remove a timer in the runtime's wheel for every chunk of a streamed reply.
struct ReadTimeout<S> {
    inner: S,
    read_timeout: Duration,
    /// Fires no later than `read_timeout` after `waiting_since` (often earlier: it is
    /// moved forward only when it fires).
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// When the wait for the next chunk began; `None` right after a chunk was
    /// returned, until the next poll.
    waiting_since: Option<tokio::time::Instant>,
    received: u64,
    ended: bool,
}

impl<S> ReadTimeout<S> {
    fn new(inner: S, read_timeout: Duration) -> Self {
        let now = tokio::time::Instant::now();
        Self {
            inner,
            read_timeout,
            timer: Box::pin(tokio::time::sleep_until(deadline(now, read_timeout))),
            waiting_since: Some(now),
            received: 0,
            ended: false,
        }
    }
}

/// `read_timeout` after `since`, or about 30 years after it when that is past what an
/// `Instant` holds (a configured timeout of `u64::MAX` seconds means "never").
fn deadline(since: tokio::time::Instant, read_timeout: Duration) -> tokio::time::Instant {
    since
        .checked_add(read_timeout)
        .unwrap_or_else(|| since + Duration::from_secs(30 * 365 * 86_400))
}

impl<S> futures::Stream for ReadTimeout<S>
where
    S: futures::Stream<Item = reqwest::Result<Bytes>> + Unpin,
{
    type Item = Result<Bytes, UpstreamError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::future::Future;
        use std::task::Poll;
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        let since = *this
            .waiting_since
            .get_or_insert_with(tokio::time::Instant::now);
        match this.inner.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                this.received += chunk.len() as u64;
                this.waiting_since = None;
                return Poll::Ready(Some(Ok(chunk)));
            }
            Poll::Ready(Some(Err(e))) => {
                this.ended = true;
                return Poll::Ready(Some(Err(UpstreamError::Broken {
                    bytes: this.received,
                    reason: crate::upstream::errors::describe(&e),
                })));
            }
            Poll::Ready(None) => {
                this.ended = true;
                return Poll::Ready(None);
            }
            Poll::Pending => {}
        }
        let deadline = deadline(since, this.read_timeout);
        while this.timer.as_mut().poll(cx).is_ready() {
            if tokio::time::Instant::now() >= deadline {
                this.ended = true;
                return Poll::Ready(Some(Err(UpstreamError::Timeout {
                    kind: TimeoutKind::Read,
                    after: this.read_timeout,
                })));
            }
            this.timer.as_mut().reset(deadline);
        }
        Poll::Pending
    }
}

/// Parses an SSE body into upstream events (stopping after `[DONE]` or the first
/// error); one event may take at most `max_event_bytes` of the body and the whole
/// body at most `max_stream_bytes` (see [`crate::upstream::http::sse`]).
pub fn sse_events(
    body: BoxStream<'static, Result<Bytes, UpstreamError>>,
    max_event_bytes: usize,
    max_stream_bytes: u64,
) -> BoxStream<'static, Result<UpstreamEvent, UpstreamError>> {
    let mut state = FrameState::default();
    let mut finished = false;
    crate::upstream::http::sse::event_data(body, max_event_bytes, max_stream_bytes)
        .filter_map(move |item| {
            let out = if finished {
                None
            } else {
                match item {
                    Ok(data) => classify_frame(&data, &mut state).transpose(),
                    Err(e) => Some(Err(e)),
                }
            };
            if matches!(out, Some(Err(_)) | Some(Ok(UpstreamEvent::Done))) {
                finished = true;
            }
            futures::future::ready(out)
        })
        .boxed()
}

/// Reads a whole non-SSE body of kind `kind` (at most `max_bytes`) and classifies it.
///
/// # Errors
/// Transport errors and timeouts from `body`; [`UpstreamError::TooLarge`];
/// [`UpstreamError::ContentType`] for a kind the gateway does not read (the body is
/// not read); [`UpstreamError::BadReply`] for an empty body or an HTML page;
/// [`UpstreamError::Malformed`] for a JSON reply that is not JSON or a text reply that
/// is not UTF-8; the errors of [`classify_json_reply`].
pub async fn read_whole_reply(
    status: u16,
    kind: &ReplyKind,
    mut body: BoxStream<'static, Result<Bytes, UpstreamError>>,
    max_bytes: u64,
) -> Result<Option<UpstreamEvent>, UpstreamError> {
    let what = match kind {
        ReplyKind::Json => "JSON",
        ReplyKind::Text => "text/plain",
        ReplyKind::Html => {
            return Err(UpstreamError::BadReply {
                status,
                what: "with an HTML page",
            });
        }
        ReplyKind::Other(ct) => {
            return Err(UpstreamError::ContentType {
                status,
                content_type: ct.clone(),
            });
        }
        ReplyKind::EventStream => unreachable!("an event stream is not read whole"),
    };
    let mut buf = BytesMut::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        if (buf.len() + chunk.len()) as u64 > max_bytes {
            return Err(UpstreamError::TooLarge { limit: max_bytes });
        }
        buf.extend_from_slice(&chunk);
    }
    let Ok(text) = std::str::from_utf8(&buf) else {
        return Err(UpstreamError::Malformed(format!(
            "the {what} body is not UTF-8"
        )));
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(UpstreamError::BadReply {
            status,
            what: "with an empty body",
        });
    }
    let looks_html = trimmed
        .get(..5)
        .is_some_and(|s| s.eq_ignore_ascii_case("<html"))
        || trimmed
            .get(..9)
            .is_some_and(|s| s.eq_ignore_ascii_case("<!doctype"));
    if looks_html {
        return Err(UpstreamError::BadReply {
            status,
            what: "with an HTML page",
        });
    }
    if *kind == ReplyKind::Text {
        return Ok(Some(UpstreamEvent::FinalText(text.to_owned())));
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v) => classify_json_reply(v),
        Err(_) => Err(UpstreamError::Malformed(
            "the body is declared JSON (or undeclared) but is not JSON".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn frame(s: &str) -> Result<Option<UpstreamEvent>, UpstreamError> {
        classify_frame(s, &mut FrameState::default())
    }

    /// A body of `chunks` chunks, each `gap` after the previous one (the first
    /// `gap` after the first poll), then either its end or silence.
    fn paced_body(
        chunks: usize,
        gap: Duration,
        then_silent: bool,
    ) -> BoxStream<'static, reqwest::Result<Bytes>> {
        futures::stream::unfold(0, move |n| async move {
            if n == chunks {
                if then_silent {
                    futures::future::pending::<()>().await;
                }
                return None;
            }
            tokio::time::sleep(gap).await;
            Some((Ok(Bytes::from_static(b"data: x\n\n")), n + 1))
        })
        .boxed()
    }

    #[tokio::test(start_paused = true)]
    async fn read_timeout_counts_from_each_wait_not_from_the_first_chunk() {
        let t = Duration::from_secs(10);
        // 30 chunks 9 s apart: 270 s in all, never 10 s of silence.
        let mut body = ReadTimeout::new(paced_body(30, Duration::from_secs(9), false), t);
        let mut n = 0;
        while let Some(chunk) = body.next().await {
            chunk.expect("no read timeout while chunks keep coming");
            n += 1;
        }
        assert_eq!(n, 30);
    }

    #[tokio::test(start_paused = true)]
    async fn silence_after_chunks_times_out_read_timeout_after_the_wait_began() {
        let t = Duration::from_secs(10);
        let mut body = ReadTimeout::new(paced_body(3, Duration::from_secs(4), true), t);
        for _ in 0..3 {
            body.next().await.unwrap().unwrap();
        }
        let waited = tokio::time::Instant::now();
        match body.next().await {
            Some(Err(UpstreamError::Timeout { kind, after })) => {
                assert_eq!(kind, TimeoutKind::Read);
                assert_eq!(after, t);
            }
            other => panic!("expected a read timeout, got {other:?}"),
        }
        assert_eq!(waited.elapsed(), t);
        assert!(
            body.next().await.is_none(),
            "the stream ends after its timeout"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_timeout_past_what_an_instant_holds_never_fires() {
        let t = Duration::from_secs(u64::MAX);
        let mut body = ReadTimeout::new(paced_body(3, Duration::from_secs(3600), false), t);
        for _ in 0..3 {
            body.next().await.unwrap().unwrap();
        }
        assert!(body.next().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn time_the_consumer_takes_between_chunks_does_not_count() {
        let t = Duration::from_secs(10);
        let mut body = ReadTimeout::new(paced_body(2, Duration::from_secs(6), false), t);
        body.next().await.unwrap().unwrap();
        // The consumer is busy for 3 read timeouts before it asks for the next chunk,
        // which then comes 6 s later.
        tokio::time::sleep(3 * t).await;
        body.next()
            .await
            .unwrap()
            .expect("the wait began at the poll");
        assert!(body.next().await.is_none());
    }

    #[test]
    fn frame_shapes() {
        use UpstreamEvent::*;
        assert_eq!(frame(r#""Hel""#).unwrap(), Some(Text("Hel".into())));
        assert_eq!(
            frame("plain words").unwrap(),
            Some(Text("plain words".into()))
        );
        assert_eq!(frame("[DONE]").unwrap(), Some(Done));
        assert_eq!(
            frame(r#"{"event": {"contentBlockDelta": {"delta": {"text": "x"}}}}"#).unwrap(),
            Some(Text("x".into()))
        );
        assert_eq!(
            frame(r#"{"event": {"messageStart": {"role": "assistant"}}}"#).unwrap(),
            None
        );
        assert!(matches!(
            frame(r#"{"event": {"metadata": {"usage": {"inputTokens": 3}}}}"#).unwrap(),
            Some(Usage(_))
        ));
        assert_eq!(frame(r#"{"data": "d"}"#).unwrap(), Some(Text("d".into())));
        assert_eq!(frame(r#"{"delta": "z"}"#).unwrap(), Some(Text("z".into())));
        assert_eq!(
            frame(
                r#"{"message": {"role": "assistant", "content": [{"text": "a"}, {"text": "b"}]}}"#
            )
            .unwrap(),
            Some(FinalText("ab".into()))
        );
        assert_eq!(
            frame(r#"{"result": "done"}"#).unwrap(),
            Some(FinalText("done".into()))
        );
        assert_eq!(
            frame(r#"{"step": 1}"#).unwrap(),
            Some(Data(json!({"step": 1})))
        );
        assert_eq!(frame("42").unwrap(), Some(Data(json!(42))));
        assert!(matches!(
            frame(r#"{"a2a_control": "status", "text": "…"}"#).unwrap(),
            Some(Control(_))
        ));
    }

    #[test]
    fn strands_data_frames_not_doubled() {
        let mut st = FrameState::default();
        let e = classify_frame(
            r#"{"event": {"contentBlockDelta": {"delta": {"text": "x"}}}}"#,
            &mut st,
        )
        .unwrap();
        assert_eq!(e, Some(UpstreamEvent::Text("x".into())));
        assert_eq!(classify_frame(r#"{"data": "x"}"#, &mut st).unwrap(), None);
    }

    #[test]
    fn agent_error_frame_fails() {
        let e = frame(r#"{"error": "boom", "error_type": "ValueError", "message": "An error occurred during streaming"}"#)
            .unwrap_err();
        assert_eq!(e.to_string(), "the agent failed: ValueError: boom");
        // An ordinary dict with an `error` key alone is data, not a failure.
        assert!(matches!(
            frame(r#"{"error": "none found"}"#).unwrap(),
            Some(UpstreamEvent::Data(_))
        ));
    }

    #[test]
    fn json_reply_shapes() {
        use UpstreamEvent::*;
        let c = |v: Value| classify_json_reply(v).unwrap();
        assert_eq!(
            c(json!("The answer is 42")),
            Some(FinalText("The answer is 42".into()))
        );
        assert_eq!(c(json!({"response": "r"})), Some(FinalText("r".into())));
        assert_eq!(
            c(json!({"result": {"content": [{"text": "a"}, {"text": "b"}]}})),
            Some(FinalText("ab".into()))
        );
        assert_eq!(
            c(
                json!({"jsonrpc": "2.0", "result": {"message": {"parts": [{"kind": "text", "text": "p"}]}}})
            ),
            Some(FinalText("p".into()))
        );
        assert_eq!(
            c(json!({"response": [{"text": "s1"}, {"text": "s2"}]})),
            Some(FinalText("s1s2".into()))
        );
        assert_eq!(
            c(json!({"temperature": 21})),
            Some(Data(json!({"temperature": 21})))
        );
        assert_eq!(c(json!([1, 2])), Some(Data(json!([1, 2]))));
        assert_eq!(c(Value::Null), None);
    }

    #[tokio::test]
    async fn sse_split_at_every_byte_is_exact() {
        let raw = "data: \"h\u{e9}\u{1f600}\"\n\n: comment\nevent: x\ndata: {\"delta\": \"\u{4e16}\"}\r\n\r\ndata: line1\ndata: line2\n\n";
        let bytes = raw.as_bytes().to_vec();
        let body =
            futures::stream::iter(bytes.into_iter().map(|b| Ok(Bytes::from(vec![b])))).boxed();
        let events: Vec<_> = sse_events(body, 1024, u64::MAX).collect().await;
        let texts: Vec<String> = events
            .into_iter()
            .map(|e| match e.unwrap() {
                UpstreamEvent::Text(t) => t,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            texts,
            vec![
                "h\u{e9}\u{1f600}".to_owned(),
                "\u{4e16}".into(),
                "line1\nline2".into()
            ]
        );
    }
}
