//! The floor of `bench/floor.sh`: a bare axum server that does the least a JSON-RPC
//! SendMessage server must do, so the gateway's throughput can be read as a share of it.
//!
//! `POST /` reads the body, parses the JSON-RPC envelope with the gateway's own parser
//! ([`jsonrpc::parse_request`]), decodes `params` into a [`SendMessageRequest`] (refused
//! with -32602 when it does not decode), and answers one fixed COMPLETED [`Task`] shaped
//! like the hello-world agent's (its user message, the WORKING message and one `result`
//! artifact), serialized per request with [`jsonrpc::success_text`]. No store, no
//! executor, no task driver, no metrics, no log line, no tower layers: what is left is
//! HTTP/1.1, JSON parsing and JSON rendering on the same tokio runtime shape as
//! `a2a-gateway serve` (one worker per core), with `TCP_NODELAY` and the allocator
//! (mimalloc) like the gateway.
//!
//! `cargo run --release --example floor -- --listen 127.0.0.1:9990`

use std::net::SocketAddr;
use std::sync::Arc;

use a2a_gateway::protocol::jsonrpc::{self, RequestId};
use a2a_gateway::protocol::{SendMessageRequest, SendMessageResponse, Task};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use clap::Parser;
use serde_json::{Value, json};

/// The process allocator: mimalloc as in the `a2a-gateway` binary (feature `mimalloc`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Command line.
#[derive(Parser)]
struct Args {
    /// Address to serve on.
    #[arg(long, default_value = "127.0.0.1:9990")]
    listen: SocketAddr,
}

/// The fixed answer: the Task the hello-world agent ends with for "hello".
fn fixed_task() -> Task {
    serde_json::from_value(json!({
        "id": "019ad7a4-6f3c-7c52-9d2e-6a1b2c3d4e5f",
        "contextId": "019ad7a4-6f3c-7c52-9d2e-6a1b2c3d4e60",
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-01T12:00:00.000Z"},
        "artifacts": [{
            "artifactId": "019ad7a4-6f3c-7c52-9d2e-6a1b2c3d4e61",
            "name": "result",
            "parts": [{"text": "Hello, World! I have received your request (hello)"}]
        }],
        "history": [
            {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}],
             "taskId": "019ad7a4-6f3c-7c52-9d2e-6a1b2c3d4e5f",
             "contextId": "019ad7a4-6f3c-7c52-9d2e-6a1b2c3d4e60"},
            {"messageId": "019ad7a4-6f3c-7c52-9d2e-6a1b2c3d4e62", "role": "ROLE_AGENT",
             "parts": [{"text": "Processing request..."}],
             "taskId": "019ad7a4-6f3c-7c52-9d2e-6a1b2c3d4e5f",
             "contextId": "019ad7a4-6f3c-7c52-9d2e-6a1b2c3d4e60"}
        ]
    }))
    .expect("the fixed task is a valid Task")
}

fn json_body(body: String) -> Response {
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn error(id: Option<&RequestId>, code: i64, message: String) -> Response {
    let id = id.map_or(Value::Null, |i| i.0.clone());
    json_body(
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            .to_string(),
    )
}

async fn send_message(State(task): State<Arc<Task>>, body: Bytes) -> Response {
    let req = match jsonrpc::parse_request(&body) {
        Ok(r) => r,
        Err(e) => return error(None, -32600, format!("{e:?}")),
    };
    let Some(id) = req.id else {
        return StatusCode::NO_CONTENT.into_response();
    };
    if req.method != "SendMessage" {
        return error(Some(&id), -32601, req.method);
    }
    if let Err(e) = serde_json::from_value::<SendMessageRequest>(req.params) {
        return error(Some(&id), -32602, e.to_string());
    }
    let answer = SendMessageResponse::Task(Task::clone(&task));
    match jsonrpc::success_text(&id, &answer) {
        Ok(body) => json_body(body),
        Err(e) => error(Some(&id), -32603, e.to_string()),
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let app = axum::Router::new()
        .route("/", axum::routing::post(send_message))
        .with_state(Arc::new(fixed_task()));
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!("floor listening on http://{}/", listener.local_addr()?);
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(a2a_gateway::server::shutdown_signal())
        .await
}
