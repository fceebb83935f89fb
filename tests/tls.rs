//! HTTPS with rustls: the gateway's router behind `tls::serve_tls`, with a
//! certificate made in the test (rcgen); HTTP/2 by ALPN and HTTP/1.1 both work, and
//! the server stops when its shutdown future resolves.

use std::time::Duration;

use axum::Router;
use axum::routing::get;

fn self_signed(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, Vec<u8>) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert_pem = ck.cert.pem();
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, &cert_pem).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    (cert, key, cert_pem.into_bytes())
}

#[tokio::test]
async fn https_serves_h2_and_http1_and_shuts_down() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, cert_pem) = self_signed(dir.path());
    let tls = a2a_gateway::tls::server_config(&cert, &key).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/healthz", get(|| async { "ok\n" }));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(a2a_gateway::tls::serve_tls(
        listener,
        app,
        tls,
        async move {
            let _ = stop_rx.await;
        },
    ));

    let root = reqwest::Certificate::from_pem(&cert_pem).unwrap();
    let url = format!("https://localhost:{}/healthz", addr.port());
    for http1 in [false, true] {
        let mut builder = reqwest::Client::builder()
            .add_root_certificate(root.clone())
            .resolve("localhost", addr)
            .timeout(Duration::from_secs(10));
        if http1 {
            builder = builder.http1_only();
        }
        let resp = builder.build().unwrap().get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let want = if http1 {
            reqwest::Version::HTTP_11
        } else {
            reqwest::Version::HTTP_2
        };
        assert_eq!(resp.version(), want);
        assert_eq!(resp.text().await.unwrap(), "ok\n");
    }

    // A plain-HTTP client gets no answer (the handshake fails), and the server goes on.
    let plain = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    assert!(
        plain
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .is_err()
    );

    stop_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("serve_tls stops after shutdown")
        .unwrap()
        .unwrap();
}

#[test]
fn bad_tls_files_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, _key, _) = self_signed(dir.path());
    let not_a_key = dir.path().join("nokey.pem");
    std::fs::write(&not_a_key, "hello\n").unwrap();
    let err = a2a_gateway::tls::server_config(&cert, &not_a_key).unwrap_err();
    assert_eq!(err.key, "server.tls_key_file", "{err}");
    let err = a2a_gateway::tls::server_config(&not_a_key, &cert).unwrap_err();
    assert_eq!(err.key, "server.tls_cert_file", "{err}");
}

/// Over TLS the header timeout counts from accept: a socket that never starts the
/// handshake, and one that completes it but sends no request, are both closed then.
#[tokio::test(start_paused = true)]
async fn tls_connections_without_a_request_are_closed_after_the_header_timeout() {
    use tokio::io::AsyncReadExt;
    const HEADER: Duration = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, cert_pem) = self_signed(dir.path());
    let tls = a2a_gateway::tls::server_config(&cert, &key).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/healthz", get(|| async { "ok\n" }));
    let limits = a2a_gateway::server::ConnectionLimits {
        header_timeout: HEADER,
        idle_timeout: Duration::from_secs(60),
        max_connections: 100,
        ..a2a_gateway::server::ConnectionLimits::default()
    };
    tokio::spawn(a2a_gateway::tls::serve_tls_with_limits(
        listener,
        app,
        tls,
        limits,
        futures::future::pending(),
    ));

    let started = tokio::time::Instant::now();
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut cert_pem.as_slice()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(client));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut shook = connector.connect(name, tcp).await.expect("TLS handshake");

    let mut out = Vec::new();
    tokio::time::timeout(HEADER * 4, silent.read_to_end(&mut out))
        .await
        .expect("a socket without a handshake is closed")
        .unwrap();
    let at = started.elapsed();
    assert!(at >= HEADER && at < HEADER * 2, "closed after {at:?}");
    let closed = tokio::time::timeout(HEADER * 4, shook.read_to_end(&mut out)).await;
    assert!(
        closed.is_ok(),
        "a TLS connection without a request stayed open"
    );
    let at = started.elapsed();
    assert!(at >= HEADER && at < HEADER * 2, "closed after {at:?}");
}
