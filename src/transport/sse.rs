//! Response streams as Server-Sent Events (spec §9.4.2): every event is
//! `id: <task event sequence number>` and
//! `data: {"jsonrpc":"2.0","id":<request id>,"result":<StreamResponse>}`; an error
//! after the first event is one final `error` event, then the stream closes.
//! Keep-alive comment lines are sent while the stream is idle.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::handler::{EventStream, SequencedEvent};
use crate::protocol::jsonrpc::{self, RequestId};

/// How long an open stream may still deliver events after shutdown began.
pub const SHUTDOWN_DRAIN: Duration = Duration::from_secs(1);

fn event_for(id: &RequestId, item: Result<SequencedEvent, crate::A2aError>) -> Event {
    match item {
        Ok(SequencedEvent { seq, event }) => {
            let body = match jsonrpc::success_text(id, &event) {
                Ok(b) => b,
                Err(e) => return event_for(id, Err(crate::A2aError::internal(e))),
            };
            let mut ev = Event::default().data(body);
            if let Some(seq) = seq {
                ev = ev.id(seq.to_string());
            }
            ev
        }
        Err(e) => {
            Event::default().data(jsonrpc::failure(Some(id), &e.to_error_object()).to_string())
        }
    }
}

/// Renders `first` (already taken from the stream, so that an error before it can
/// be a plain JSON-RPC response) and the rest of `rest` as SSE. The stream also
/// ends [`SHUTDOWN_DRAIN`] after `shutdown` is cancelled (normally sooner: its
/// task's final event ends it).
pub fn render(
    id: RequestId,
    first: Option<SequencedEvent>,
    rest: EventStream,
    keepalive: Duration,
    shutdown: CancellationToken,
) -> Response {
    let first_ev = first.map(|f| event_for(&id, Ok(f)));
    // Lives as long as the response body: counts the stream in `a2a_open_streams`.
    let guard = crate::ops::OpenStreamGuard::new();
    let rest = rest.map(move |item| {
        let _ = &guard;
        event_for(&id, item)
    });
    let events = futures::stream::iter(first_ev)
        .chain(rest)
        .take_until(async move {
            // At shutdown the handler has already recorded the final state of every task
            // it cut short; give the stream a moment to deliver it, then close.
            shutdown.cancelled_owned().await;
            tokio::time::sleep(SHUTDOWN_DRAIN).await;
        })
        .map(Ok::<_, Infallible>);
    sse_response(events, keepalive)
}

fn sse_response(
    events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
    keepalive: Duration,
) -> Response {
    let mut resp = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keepalive))
        .into_response();
    // Proxies (nginx) must not buffer the stream.
    resp.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    resp.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-cache"),
    );
    resp
}
