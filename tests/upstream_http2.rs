//! HTTP versions to the upstream: HTTP/2 negotiated by ALPN over TLS (a hyper server
//! with an rcgen self-signed certificate trusted through `ca_file`), HTTP/1.1 when
//! forced, h2c prior knowledge on plain http with `http_version = "http2"`, and a
//! cancel that resets the HTTP/2 stream.

mod upstream_common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_gateway::executor::{AgentExecutor, EventQueue};
use a2a_gateway::protocol::{StreamResponse, TaskState};
use a2a_gateway::upstream::{AgentCoreExecutor, AgentCoreSettings, HttpVersion};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::Version;
use axum::response::Response;
use axum::routing::post;
use bytes::Bytes;
use futures::StreamExt;
use tokio::time::Instant;
use tower::ServiceExt;
use upstream_common::{ctx, run};

#[derive(Clone, Default)]
struct Seen {
    versions: Arc<Mutex<Vec<Version>>>,
    stream_dropped: Arc<Mutex<Option<Instant>>>,
}

struct DropFlag(Arc<Mutex<Option<Instant>>>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(Instant::now());
    }
}

async fn invocations(State(seen): State<Seen>, req: Request) -> Response {
    seen.versions.lock().unwrap().push(req.version());
    let body = axum::body::to_bytes(req.into_body(), 1 << 20)
        .await
        .unwrap();
    let prompt = serde_json::from_slice::<serde_json::Value>(&body).unwrap()["prompt"]
        .as_str()
        .unwrap()
        .to_owned();
    if prompt == "stall" {
        let flag = DropFlag(seen.stream_dropped.clone());
        let s = futures::stream::once(async {
            Ok::<_, Infallible>(Bytes::from_static(b"data: \"first\"\n\n"))
        })
        .chain(futures::stream::pending())
        .map(move |x| {
            let _keep = &flag;
            x
        });
        return Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(s))
            .unwrap();
    }
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(
            serde_json::to_vec(&format!("echo: {prompt}")).unwrap(),
        ))
        .unwrap()
}

fn app(seen: Seen) -> Router {
    Router::new()
        .route("/invocations", post(invocations))
        .with_state(seen)
}

/// A TLS server (ALPN h2 + http/1.1) on 127.0.0.1:0; returns its URL and a CA file.
async fn tls_server(seen: Seen) -> (String, tempfile::TempDir) {
    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), cert.cert.pem()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .unwrap();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://127.0.0.1:{}/invocations",
        listener.local_addr().unwrap().port()
    );
    let router = app(seen);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let router = router.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        router.clone().oneshot(req.map(Body::new))
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                .await;
            });
        }
    });
    (url, dir)
}

async fn plain_server(seen: Seen) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/invocations", listener.local_addr().unwrap());
    let router = app(seen);
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    url
}

fn exec(url: &str, version: HttpVersion, ca: Option<&tempfile::TempDir>) -> AgentCoreExecutor {
    let mut s = AgentCoreSettings::for_url(url);
    s.connection.http_version = version;
    s.connection.ca_file = ca.map(|d| d.path().join("ca.pem"));
    s.connection.max_retries = 0;
    AgentCoreExecutor::new(s).unwrap()
}

#[tokio::test]
async fn tls_auto_negotiates_http2_by_alpn() {
    let seen = Seen::default();
    let (url, ca) = tls_server(seen.clone()).await;
    let out = run(&exec(&url, HttpVersion::Auto, Some(&ca)), ctx("hi")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(out.text(), "echo: hi");
    let out = run(&exec(&url, HttpVersion::Http2, Some(&ca)), ctx("again")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(
        *seen.versions.lock().unwrap(),
        [Version::HTTP_2, Version::HTTP_2]
    );
}

#[tokio::test]
async fn tls_http1_when_forced() {
    let seen = Seen::default();
    let (url, ca) = tls_server(seen.clone()).await;
    let out = run(&exec(&url, HttpVersion::Http1, Some(&ca)), ctx("hi")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(*seen.versions.lock().unwrap(), [Version::HTTP_11]);
}

#[tokio::test]
async fn tls_without_the_ca_file_fails_readably() {
    let (url, _ca) = tls_server(Seen::default()).await;
    let out = run(&exec(&url, HttpVersion::Auto, None), ctx("hi")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    let r = out.reason();
    assert!(
        r.starts_with("could not connect to the AgentCore runtime")
            && r.to_lowercase().contains("certificate"),
        "{r}"
    );
}

#[tokio::test]
async fn plain_http_h2c_prior_knowledge_when_http2() {
    let seen = Seen::default();
    let url = plain_server(seen.clone()).await;
    let out = run(&exec(&url, HttpVersion::Http2, None), ctx("hi")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    let out = run(&exec(&url, HttpVersion::Auto, None), ctx("hi")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(
        *seen.versions.lock().unwrap(),
        [Version::HTTP_2, Version::HTTP_11]
    );
}

#[tokio::test]
async fn cancel_resets_the_http2_stream_within_a_second() {
    let seen = Seen::default();
    let (url, ca) = tls_server(seen.clone()).await;
    let e = exec(&url, HttpVersion::Auto, Some(&ca));
    let c = ctx("stall");
    let (queue, mut rx) = EventQueue::bounded(64);
    let (e2, c2, q2) = (e.clone(), c.clone(), queue.clone());
    let running = tokio::spawn(async move { e2.execute(c2, q2).await });
    loop {
        if let StreamResponse::ArtifactUpdate(_) = rx.recv().await.unwrap() {
            break;
        }
    }
    let t0 = Instant::now();
    c.cancellation().cancel();
    tokio::time::timeout(Duration::from_secs(1), running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let deadline = t0 + Duration::from_secs(1);
    loop {
        if let Some(at) = *seen.stream_dropped.lock().unwrap() {
            assert!(at - t0 < Duration::from_secs(1));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server still streams after cancel"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*seen.versions.lock().unwrap(), [Version::HTTP_2]);
}
