//! A fake A2A 1.0 agent for the benches of the `a2a` upstream kind (see [`start`]).

use std::sync::Arc;

use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use axum::routing::post;
use serde_json::json;

/// A fake A2A 1.0 agent streaming `chunks` artifact updates (each text a few words,
/// padded with `x` to `frame_bytes` when that is longer) to every
/// `SendStreamingMessage`: first the task (WORKING), then one `artifactUpdate` per chunk
/// (`append` after the first, `lastChunk` on the last), then a COMPLETED `statusUpdate`,
/// each echoing the request's JSON-RPC id; its card (JSON-RPC 1.0 at its base URL,
/// streaming) at `/.well-known/agent-card.json`. Returns its base URL.
pub async fn start(chunks: usize, frame_bytes: usize) -> String {
    let texts: Arc<Vec<String>> = Arc::new(
        (0..chunks)
            .map(|i| {
                let mut text = format!("chunk {i:05} of the streamed reply, ");
                if text.len() < frame_bytes {
                    text.extend(std::iter::repeat_n('x', frame_bytes - text.len()));
                }
                text
            })
            .collect(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let card = json!({
        "name": "bench agent", "description": "a fake A2A agent streaming chunks",
        "version": "1", "skills": [],
        "supportedInterfaces": [{"url": format!("http://{addr}/"),
            "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
    });
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            axum::routing::get(move || {
                let card = card.clone();
                async move { axum::Json(card) }
            }),
        )
        .route(
            "/",
            post(move |body: axum::body::Bytes| {
                let texts = texts.clone();
                async move {
                    let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                    let id = req["id"].clone();
                    let task = a2a_gateway::executor::new_id();
                    let event = |result: serde_json::Value| {
                        axum::body::Bytes::from(format!(
                            "data: {}\n\n",
                            json!({"jsonrpc": "2.0", "id": id, "result": result})
                        ))
                    };
                    let mut frames = vec![event(json!({"task": {"id": task, "contextId": task,
                        "status": {"state": "TASK_STATE_WORKING"}}}))];
                    let n = texts.len();
                    frames.extend(texts.iter().enumerate().map(|(i, t)| {
                        event(json!({"artifactUpdate": {"taskId": task, "contextId": task,
                            "append": i > 0, "lastChunk": i + 1 == n,
                            "artifact": {"artifactId": "reply", "parts": [{"text": t}]}}}))
                    }));
                    frames.push(event(
                        json!({"statusUpdate": {"taskId": task, "contextId": task,
                        "status": {"state": "TASK_STATE_COMPLETED"}}}),
                    ));
                    let body =
                        futures::stream::iter(frames.into_iter().map(Ok::<_, std::io::Error>));
                    Response::builder()
                        .header(header::CONTENT_TYPE, "text/event-stream")
                        .body(Body::from_stream(body))
                        .unwrap()
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/")
}
