//! HTTPS for the inbound listener: a rustls acceptor in front of the same router,
//! serving HTTP/1.1 and HTTP/2 (ALPN) with graceful shutdown.

use std::future::Future;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Longest TLS handshake before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The TLS files could not be used. Names the file; never contains key material.
#[derive(Debug, thiserror::Error)]
#[error("{key} {path}: {message}")]
pub struct TlsError {
    /// The config key that named the file.
    pub key: &'static str,
    /// The file.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// A rustls server config from a PEM certificate chain and a PEM private key
/// (PKCS#8, PKCS#1 or SEC1), offering `h2` and `http/1.1` by ALPN.
///
/// # Errors
/// [`TlsError`] naming `server.tls_cert_file` or `server.tls_key_file`.
pub fn server_config(
    cert_file: &Path,
    key_file: &Path,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let err = |key: &'static str, path: &Path, message: String| TlsError {
        key,
        path: path.display().to_string(),
        message,
    };
    const CERT: &str = "server.tls_cert_file";
    const KEY: &str = "server.tls_key_file";
    let cert_pem = std::fs::read(cert_file).map_err(|e| err(CERT, cert_file, e.to_string()))?;
    let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(CERT, cert_file, format!("not a PEM certificate chain: {e}")))?;
    if certs.is_empty() {
        return Err(err(CERT, cert_file, "holds no PEM certificate".into()));
    }
    let key_pem = std::fs::read(key_file).map_err(|e| err(KEY, key_file, e.to_string()))?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(|e| err(KEY, key_file, format!("not a PEM private key: {e}")))?
        .ok_or_else(|| err(KEY, key_file, "holds no PEM private key".into()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err(CERT, cert_file, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            err(
                KEY,
                key_file,
                format!("does not match the certificate: {e}"),
            )
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `app` over TLS on `listener` under the default
/// [`ConnectionLimits`](crate::server::ConnectionLimits) until `shutdown` resolves; see
/// [`serve_tls_with_limits`].
///
/// # Errors
/// None today: accept errors are logged and the loop goes on (returns `Ok` after
/// shutdown); the `Result` mirrors [`crate::server::serve`].
pub async fn serve_tls(
    listener: TcpListener,
    app: Router,
    tls: Arc<rustls::ServerConfig>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    serve_tls_with_limits(listener, app, tls, Default::default(), shutdown).await
}

/// Serves `app` over TLS on `listener` under `limits` until `shutdown` resolves, then
/// stops accepting and lets in-flight connections finish (open SSE streams must already
/// have been ended by the caller's shutdown future). The TLS handshake must finish within
/// 10 s, and with the first request head within `limits.header_timeout`; connections are
/// then served as by [`crate::server::serve_with_limits`].
///
/// # Errors
/// None today: accept errors are logged and the loop goes on (returns `Ok` after
/// shutdown); the `Result` mirrors [`crate::server::serve`].
pub async fn serve_tls_with_limits(
    listener: TcpListener,
    app: Router,
    tls: Arc<rustls::ServerConfig>,
    limits: crate::server::ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    crate::server::serve_connections(listener, app, limits, shutdown, move |tcp, peer| {
        let acceptor = acceptor.clone();
        async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => Some(s),
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    None
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    None
                }
            }
        }
    })
    .await
}
