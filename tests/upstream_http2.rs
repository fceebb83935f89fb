//! HTTP versions to the upstream: HTTP/2 negotiated by ALPN over TLS (the crate's
//! `MockRuntime` over TLS with an rcgen self-signed certificate trusted through
//! `ca_file`), HTTP/1.1 when
//! forced, h2c prior knowledge on plain http with `http_version = "http2"`, and a
//! cancel that resets the HTTP/2 stream.

mod upstream_common;

use std::time::Duration;

use a2a_gateway::executor::{AgentExecutor, EventQueue};
use a2a_gateway::protocol::{StreamResponse, TaskState};
use a2a_gateway::upstream::mock::{MockReply, MockRuntime};
use a2a_gateway::upstream::{AgentCoreExecutor, AgentCoreSettings, HttpVersion};
use axum::http::Version;
use serde_json::json;
use tokio::time::Instant;
use upstream_common::{ctx, run};

/// The runtime's answers: `stall` gets one SSE frame and then nothing (a reply that never
/// ends), any other prompt the JSON string `echo: <prompt>`.
fn answer(mock: &MockRuntime) {
    mock.answer_with(|r| match r.prompt().unwrap_or_default().as_str() {
        "stall" => MockReply::SseThenStall(vec![json!("first")]),
        prompt => MockReply::Json(json!(format!("echo: {prompt}"))),
    });
}

/// The mock over TLS (ALPN h2 + http/1.1) with an rcgen self-signed certificate for
/// `127.0.0.1`; returns it and a directory holding that certificate as `ca.pem`.
async fn tls_server() -> (MockRuntime, tempfile::TempDir) {
    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), cert.cert.pem()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    let mock = MockRuntime::start_tls(vec![cert.cert.der().clone()], key).await;
    answer(&mock);
    (mock, dir)
}

async fn plain_server() -> MockRuntime {
    let mock = MockRuntime::start().await;
    answer(&mock);
    mock
}

/// The HTTP versions of the invocations `mock` saw, in order.
fn versions(mock: &MockRuntime) -> Vec<Version> {
    mock.invocations().iter().map(|r| r.version).collect()
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
    let (mock, ca) = tls_server().await;
    let url = mock.url();
    let out = run(&exec(&url, HttpVersion::Auto, Some(&ca)), ctx("hi")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(out.text(), "echo: hi");
    let out = run(&exec(&url, HttpVersion::Http2, Some(&ca)), ctx("again")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(versions(&mock), [Version::HTTP_2, Version::HTTP_2]);
}

#[tokio::test]
async fn tls_http1_when_forced() {
    let (mock, ca) = tls_server().await;
    let url = mock.url();
    let out = run(&exec(&url, HttpVersion::Http1, Some(&ca)), ctx("hi")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(versions(&mock), [Version::HTTP_11]);
}

#[tokio::test]
async fn tls_without_the_ca_file_fails_readably() {
    let (mock, _ca) = tls_server().await;
    let url = mock.url();
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
    let mock = plain_server().await;
    let url = mock.url();
    let out = run(&exec(&url, HttpVersion::Http2, None), ctx("hi")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    let out = run(&exec(&url, HttpVersion::Auto, None), ctx("hi")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(versions(&mock), [Version::HTTP_2, Version::HTTP_11]);
}

#[tokio::test]
async fn cancel_resets_the_http2_stream_within_a_second() {
    let (mock, ca) = tls_server().await;
    let url = mock.url();
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
        if let Some(&at) = mock.replies_dropped().first() {
            assert!(at - t0 < Duration::from_secs(1));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server still streams after cancel"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(versions(&mock), [Version::HTTP_2]);
}
