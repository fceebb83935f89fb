//! A local AgentCore-style `/invocations` endpoint for the process benchmarks, on
//! `127.0.0.1:0`, serving HTTP/1.1 and h2c (prior knowledge) with no HTTP/2 stream
//! limit worth the name, so thousands of in-flight replies share one connection.
//!
//! The prompt picks the reply:
//! - `hold`: one SSE text frame at once, then nothing until [`HoldUpstream::release`],
//!   then a last frame and the end of the stream (the task completes);
//! - `json`: a JSON answer at once;
//! - `stream N MS`: N SSE text frames, MS milliseconds apart;
//! - anything else: a frame every 100 ms for at most 30 s (a long run to cancel).
#![allow(dead_code)]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::Response;
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::watch;
use tower::ServiceExt;

/// The text of the first frame of a `hold` reply.
pub const HELD_TEXT: &str = "held; ";

/// The running endpoint.
pub struct HoldUpstream {
    /// `http://127.0.0.1:PORT/invocations`.
    pub url: String,
    release: watch::Sender<bool>,
    open: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
}

impl HoldUpstream {
    /// Binds and serves on the current runtime.
    pub async fn start() -> HoldUpstream {
        let (release, released) = watch::channel(false);
        let open = Arc::new(AtomicUsize::new(0));
        let connections = Arc::new(AtomicUsize::new(0));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/invocations", listener.local_addr().unwrap());
        let state = (released, open.clone());
        let app = Router::new()
            .route("/invocations", post(invocations))
            .with_state(state);
        let conns = connections.clone();
        tokio::spawn(async move {
            let mut builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            builder.http2().max_concurrent_streams(1_000_000);
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let _ = tcp.set_nodelay(true);
                let (app, builder, conns) = (app.clone(), builder.clone(), conns.clone());
                conns.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            app.clone().oneshot(req.map(Body::new))
                        },
                    );
                    let _ = builder
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                        .await;
                    conns.fetch_sub(1, Ordering::Relaxed);
                });
            }
        });
        HoldUpstream {
            url,
            release,
            open,
            connections,
        }
    }

    /// Lets every held reply (and every later one) finish.
    pub fn release(&self) {
        let _ = self.release.send(true);
    }

    /// Holds the next `hold` replies again.
    pub fn hold(&self) {
        let _ = self.release.send(false);
    }

    /// Replies being sent right now.
    pub fn open_replies(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Client connections open right now.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }
}

type State = (watch::Receiver<bool>, Arc<AtomicUsize>);

/// Counts a reply as open until its body is dropped.
struct OpenGuard(Arc<AtomicUsize>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn frame(text: &str) -> Result<Bytes, Infallible> {
    Ok(Bytes::from(format!("data: {}\n\n", json!(text))))
}

fn sse(body: impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(body))
        .unwrap()
}

async fn invocations(
    axum::extract::State((released, open)): axum::extract::State<State>,
    body: Bytes,
) -> Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or_default();
    let prompt = req["prompt"].as_str().unwrap_or("").to_owned();
    let mut words = prompt.split_whitespace();
    match words.next() {
        Some("json") => Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(json!({"result": "the answer"}).to_string()))
            .unwrap(),
        Some("hold") => {
            open.fetch_add(1, Ordering::Relaxed);
            let guard = OpenGuard(open);
            let rest = async move {
                let _guard = guard;
                let mut released = released;
                let _ = released.wait_for(|r| *r).await;
                frame("done")
            };
            sse(futures::stream::once(async { frame(HELD_TEXT) })
                .chain(futures::stream::once(rest)))
        }
        Some("stream") => {
            let n: u64 = words.next().and_then(|s| s.parse().ok()).unwrap_or(10);
            let ms: u64 = words.next().and_then(|s| s.parse().ok()).unwrap_or(0);
            sse(futures::stream::iter(0..n).then(move |i| async move {
                if ms > 0 && i > 0 {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                frame(&format!("w{i} "))
            }))
        }
        _ => sse(futures::stream::iter(0..300u64).then(|i| async move {
            if i > 0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            frame(&format!("slow{i} "))
        })),
    }
}
