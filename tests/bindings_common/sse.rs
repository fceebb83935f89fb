//! Reading an SSE response body into [`Event`]s with a binding's framing.

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::Value;

use super::client::{Event, Events, Failure};

/// The events of `resp` (already checked to be `text/event-stream`). `unframe` turns a
/// `data:` payload into the `StreamResponse` or the failure it carries.
pub fn events(resp: reqwest::Response, unframe: fn(Value) -> Result<Value, Failure>) -> Events {
    resp.bytes_stream()
        .eventsource()
        .map(move |item| {
            let ev = item.map_err(|e| Failure {
                reason: format!("SSE: {e}"),
                code: "transport".into(),
            })?;
            let data: Value = serde_json::from_str(&ev.data).map_err(|e| Failure {
                reason: format!("SSE data is not JSON: {e}"),
                code: "transport".into(),
            })?;
            let body = unframe(data)?;
            Ok(Event {
                id: ev.id.parse().ok(),
                body,
            })
        })
        .boxed()
}
