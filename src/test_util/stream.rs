//! A JSON-RPC streaming call (`SendStreamingMessage`, `SubscribeToTask`) read as the
//! server-sent events of the A2A JSON-RPC binding.

use std::pin::Pin;

use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use serde_json::Value;

use super::rpc::rpc_body;

/// One event of a stream.
#[derive(Clone, Debug)]
pub struct StreamEvent {
    /// The SSE `id`: the task event's sequence number (what `Last-Event-ID` resumes
    /// after). An event without one keeps the last id the stream set (the SSE rule);
    /// `None` before the first.
    pub id: Option<u64>,
    /// The JSON-RPC `result`: a `StreamResponse` (`task`, `message`, `statusUpdate` or
    /// `artifactUpdate`).
    pub result: Value,
}

impl StreamEvent {
    /// The task state a `statusUpdate` or `task` event names (`TASK_STATE_…`).
    pub fn state(&self) -> Option<&str> {
        self.result
            .get("statusUpdate")
            .or_else(|| self.result.get("task"))?["status"]["state"]
            .as_str()
    }
}

/// The events of a stream, in order; it ends when the server ends the response.
pub type StreamEvents = Pin<Box<dyn Stream<Item = StreamEvent> + Send>>;

/// POSTs the streaming call `method(params)` to `url` with `A2A-Version: 1.0` and, when
/// given, `Last-Event-ID` (a resume after that event), and returns its events.
///
/// Panics when the answer is not HTTP 200 with `text/event-stream` (naming what it was),
/// and, while the stream is read, on an event that is not well-formed SSE, whose data is
/// not JSON, or that carries a JSON-RPC `error`.
pub async fn rpc_stream(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    params: Value,
    last_event_id: Option<u64>,
) -> StreamEvents {
    let mut request = client.post(url);
    if let Some(n) = last_event_id {
        request = request.header("Last-Event-ID", n.to_string());
    }
    rpc_stream_with(request, method, params).await.1
}

/// [`rpc_stream`] on a request the caller started (its own headers), returning the
/// response's headers with the events.
pub async fn rpc_stream_with(
    request: reqwest::RequestBuilder,
    method: &str,
    params: Value,
) -> (reqwest::header::HeaderMap, StreamEvents) {
    let response = request
        .header("A2A-Version", "1.0")
        .json(&rpc_body(method, params))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"));
    let status = response.status();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if status != reqwest::StatusCode::OK || !content_type.starts_with("text/event-stream") {
        let body = response.text().await.unwrap_or_default();
        panic!("{method}: HTTP {status} {content_type:?}, not an event stream: {body}");
    }
    let headers = response.headers().clone();
    let events = response.bytes_stream().eventsource().map(|item| {
        let event = item.expect("well-formed SSE");
        let body: Value = serde_json::from_str(&event.data)
            .unwrap_or_else(|e| panic!("SSE data is not JSON ({e}): {}", event.data));
        assert!(body.get("error").is_none(), "stream error: {body}");
        StreamEvent {
            id: (!event.id.is_empty()).then(|| event.id.parse().expect("a numeric SSE id")),
            result: body["result"].clone(),
        }
    });
    (headers, Box::pin(events))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An endpoint on 127.0.0.1:0 answering every POST with `body` as `content_type`,
    /// echoing the `Last-Event-ID` it was sent in `x-last-event-id`.
    async fn endpoint(content_type: &'static str, body: &'static str) -> String {
        let app = axum::Router::new().route(
            "/",
            axum::routing::post(move |headers: axum::http::HeaderMap| async move {
                let last = headers
                    .get("last-event-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("none")
                    .to_owned();
                axum::http::Response::builder()
                    .header("content-type", content_type)
                    .header("x-last-event-id", last)
                    .body(axum::body::Body::from(body))
                    .unwrap()
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    const EVENTS: &str = "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"id\":\"t\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n\
                          data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"message\":{}}}\n\n\
                          id: 3\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"status\":{\"state\":\"TASK_STATE_COMPLETED\"}}}}\n\n";

    #[tokio::test]
    async fn events_carry_their_ids_results_and_states() {
        let url = endpoint("text/event-stream", EVENTS).await;
        let client = reqwest::Client::new();
        let events: Vec<StreamEvent> = rpc_stream(
            &client,
            &url,
            "SubscribeToTask",
            serde_json::json!({}),
            None,
        )
        .await
        .collect()
        .await;
        let ids: Vec<Option<u64>> = events.iter().map(|e| e.id).collect();
        assert_eq!(ids, [Some(1), Some(1), Some(3)]);
        let states: Vec<Option<&str>> = events.iter().map(StreamEvent::state).collect();
        assert_eq!(
            states,
            [
                Some("TASK_STATE_WORKING"),
                None,
                Some("TASK_STATE_COMPLETED")
            ]
        );
        assert!(events[1].result.get("message").is_some());

        let resumed = client.post(&url).header("Last-Event-ID", "7");
        let (headers, _) = rpc_stream_with(resumed, "SubscribeToTask", serde_json::json!({})).await;
        assert_eq!(headers["x-last-event-id"], "7");
    }

    #[tokio::test]
    #[should_panic(
        expected = "SendStreamingMessage: HTTP 200 OK \"application/json\", not an event stream: {}"
    )]
    async fn a_reply_that_is_not_a_stream_fails_naming_it() {
        let url = endpoint("application/json", "{}").await;
        let _ = rpc_stream(
            &reqwest::Client::new(),
            &url,
            "SendStreamingMessage",
            serde_json::json!({}),
            None,
        )
        .await;
    }

    #[tokio::test]
    #[should_panic(expected = "stream error")]
    async fn an_error_event_fails_the_reader() {
        let url = endpoint(
            "text/event-stream",
            "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32001}}\n\n",
        )
        .await;
        let mut events = rpc_stream(
            &reqwest::Client::new(),
            &url,
            "SubscribeToTask",
            serde_json::json!({}),
            Some(2),
        )
        .await;
        events.next().await;
    }
}
