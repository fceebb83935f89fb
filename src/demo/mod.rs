//! LOCAL STAND-INS used by `a2a-gateway demo` (and by tests): a runtime that speaks
//! the Amazon Bedrock AgentCore invocation contract ([`runtime`]) and an OAuth 2.0
//! client-credentials token issuer ([`issuer`]). They let the gateway, with its real
//! upstream executor, run the whole path on one machine with nothing else
//! installed. They are not AgentCore and not Cognito: no AWS code runs here.

pub mod issuer;
pub mod runtime;

use std::net::SocketAddr;

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Serves `app` on a fresh `127.0.0.1:0` listener (HTTP/1.1 and h2c prior
/// knowledge) until `stop` is cancelled; returns the bound address.
///
/// # Errors
/// The listener cannot be bound.
pub async fn spawn_local(app: Router, stop: CancellationToken) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
    });
    Ok(addr)
}
