//! Response streams as Server-Sent Events (spec §9.4.2 and §11.7): every event is
//! `id: <task event sequence number>` and a `data:` line framed per binding
//! ([`Framing`]): the JSON-RPC envelope (around the 1.0 `StreamResponse` or its 0.3
//! shape), or the bare `StreamResponse` for HTTP+JSON.
//! An error after the first event is one final event carrying the error, then the
//! stream closes.
//! Keep-alive comment lines are sent while the stream is idle.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use super::compat03;
use super::operations::Operation;
use crate::handler::{EventStream, SequencedEvent};
use crate::protocol::jsonrpc::{self, RequestId};
use crate::telemetry::streams::{StreamEnd, StreamOutcome};

/// How long an open stream may still deliver events after shutdown began.
pub const SHUTDOWN_DRAIN: Duration = Duration::from_secs(1);

/// How each event of a stream is framed in its `data:` line.
#[derive(Debug, Clone)]
pub enum Framing {
    /// JSON-RPC (spec §9.4.2): `{"jsonrpc":"2.0","id":<request id>,"result":<StreamResponse>}`,
    /// an error as a JSON-RPC error response with the same id.
    JsonRpc(RequestId),
    /// HTTP+JSON (spec §11.7): the bare `StreamResponse`, an error as the binding's
    /// error body `{"error":{"code","status","message","details"}}`.
    Bare,
    /// A2A 0.3 on JSON-RPC: the envelope of [`Framing::JsonRpc`] around the event's
    /// 0.3 shape (`kind`, `final`; see [`super::compat03::response`]) for a stream of
    /// the given operation; errors as for `JsonRpc`.
    JsonRpcV03(RequestId, Operation),
}

fn event_for(framing: &Framing, item: Result<SequencedEvent, crate::A2aError>) -> Event {
    match item {
        Ok(ev) => {
            // The JSON text a SQL store made for its write is sent as it is (only
            // the envelope is added); otherwise the event is serialized here.
            let body = match (framing, ev.cached_json()) {
                (Framing::JsonRpc(id), Some(json)) => jsonrpc::success_raw(id, json),
                (Framing::JsonRpc(id), None) => jsonrpc::success_text(id, ev.event()),
                (Framing::Bare, Some(json)) => Ok(json.to_owned()),
                (Framing::Bare, None) => serde_json::to_string(ev.event()),
                (Framing::JsonRpcV03(id, op), _) => {
                    compat03::response::stream_event_to_v03(ev.event(), *op)
                        .and_then(|v| jsonrpc::success_text(id, &v))
                }
            };
            let seq = ev.seq;
            let body = match body {
                Ok(b) => b,
                Err(e) => return event_for(framing, Err(crate::A2aError::internal(e))),
            };
            let mut ev = Event::default().data(body);
            if let Some(seq) = seq {
                ev = ev.id(seq.to_string());
            }
            ev
        }
        Err(e) => match framing {
            Framing::JsonRpc(id) | Framing::JsonRpcV03(id, _) => {
                Event::default().data(jsonrpc::failure(Some(id), &e.to_error_object()).to_string())
            }
            Framing::Bare => Event::default().data(e.to_http_error_body().to_string()),
        },
    }
}

/// Renders `first` (already taken from the stream, so that an error before it can
/// be a plain error response) and the rest of `rest` as SSE framed as `framing` says.
/// The stream also ends [`SHUTDOWN_DRAIN`] after `shutdown` is cancelled (normally
/// sooner: its task's final event ends it); a stream cut that way ends with an error
/// event ([`shutdown_cut`]: `Unavailable`, "GetTask shows how it went on"), so that a
/// client can tell it from a stream its task ended.
pub fn render(
    framing: Framing,
    first: Option<SequencedEvent>,
    rest: EventStream,
    keepalive: Duration,
    shutdown: CancellationToken,
) -> Response {
    // Lives as long as the response body: counts the stream in `a2a_open_streams`
    // and writes its `stream ended` line (see `crate::telemetry::streams`).
    let end = StreamEnd::new(match framing {
        Framing::Bare => "rest",
        Framing::JsonRpc(_) | Framing::JsonRpcV03(..) => "jsonrpc",
    });
    let first_ev = first.map(|f| {
        end.event(f.event().task_id());
        event_for(&framing, Ok(f))
    });
    let (on_item, on_done, on_shutdown) = (end.clone(), end.clone(), end);
    // `take_until` polls its future for every event: a child token takes its own
    // lock there, not the one every stream and task of the server shares.
    let shutdown = shutdown.child_token();
    let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (cut_by_shutdown, last) = (cut.clone(), framing.clone());
    let rest = rest.map(move |item| {
        match &item {
            Ok(ev) => on_item.event(ev.event().task_id()),
            Err(_) => {
                on_item.event(None);
                on_item.end(StreamOutcome::Error);
            }
        }
        event_for(&framing, item)
    });
    let done = futures::stream::once(async move {
        on_done.end(StreamOutcome::Completed);
    })
    .filter_map(|()| async { None });
    let events = futures::stream::iter(first_ev)
        .chain(rest)
        .chain(done)
        .take_until(async move {
            // At shutdown the handler has already recorded the final state of every task
            // it cut short; give the stream a moment to deliver it, then close.
            shutdown.cancelled_owned().await;
            tokio::time::sleep(SHUTDOWN_DRAIN).await;
            cut_by_shutdown.store(true, std::sync::atomic::Ordering::Relaxed);
            on_shutdown.end(StreamOutcome::Shutdown);
        })
        .chain(
            futures::stream::once(async move {
                cut.load(std::sync::atomic::Ordering::Relaxed)
                    .then(|| event_for(&last, Err(shutdown_cut())))
            })
            .filter_map(futures::future::ready),
        )
        .map(Ok::<_, Infallible>);
    sse_response(events, keepalive)
}

/// The error that ends a stream the gateway's shutdown cut before its task's final
/// event: `Unavailable` (JSON-RPC -32000 / HTTP 503 `UNAVAILABLE` in the binding's
/// error body); the task is stored, so the client reads it (or resubscribes) later.
fn shutdown_cut() -> crate::A2aError {
    crate::A2aError::Unavailable(
        "the gateway shut down before this stream ended; the task is stored: GetTask shows \
         how it went on (SubscribeToTask while it still runs)"
            .into(),
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{StreamResponse, TaskState, TaskStatus, TaskStatusUpdateEvent};

    fn working(seq: u64) -> SequencedEvent {
        let update = TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus::new(TaskState::Working),
            metadata: None,
        };
        SequencedEvent::new(Some(seq), StreamResponse::StatusUpdate(update))
    }

    async fn body(resp: Response) -> String {
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    /// A stream the shutdown cuts (its task never reached a final event) ends with
    /// an error event after the drain, in the binding's framing; a stream whose
    /// events ended by themselves does not get one.
    #[tokio::test(start_paused = true)]
    async fn a_stream_cut_by_the_shutdown_ends_with_an_unavailable_error_event() {
        let shutdown = CancellationToken::new();
        let rest: EventStream = Box::pin(futures::stream::pending());
        let resp = render(
            Framing::JsonRpc(RequestId(7.into())),
            Some(working(2)),
            rest,
            Duration::from_secs(3600),
            shutdown.clone(),
        );
        shutdown.cancel();
        let text = body(resp).await;
        let datas: Vec<&str> = text.lines().filter(|l| l.starts_with("data:")).collect();
        assert_eq!(datas.len(), 2, "{text}");
        assert!(datas[0].contains("TASK_STATE_WORKING"), "{text}");
        assert!(
            datas[1].contains("-32000") && datas[1].contains("GetTask"),
            "{text}"
        );
        assert!(datas[1].contains("\"id\":7"), "{text}");

        let shutdown = CancellationToken::new();
        let rest: EventStream = Box::pin(futures::stream::iter([Ok(working(3))]));
        let resp = render(
            Framing::Bare,
            Some(working(2)),
            rest,
            Duration::from_secs(3600),
            shutdown,
        );
        let text = body(resp).await;
        assert_eq!(
            text.lines().filter(|l| l.starts_with("data:")).count(),
            2,
            "{text}"
        );
        assert!(!text.contains("GetTask"), "{text}");
    }
}
