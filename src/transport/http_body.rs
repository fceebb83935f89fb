//! Reading a request body for the HTTP bindings (JSON-RPC and REST): bounded in size
//! and in time, so a client can neither make the gateway buffer an unbounded body nor
//! hold a request open by sending it slowly.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};

use crate::error::A2aError;

/// Longest time a client may take to send a request body; slower bodies get HTTP 408.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads `body` whole, at most `limit` bytes, within [`BODY_READ_TIMEOUT`]. A
/// `Content-Length` above the limit is refused before anything is read.
///
/// # Errors
/// `(413, InvalidRequest)` when the body exceeds `limit` bytes; `(408, InvalidRequest)`
/// when it did not arrive in time.
pub async fn read(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, (StatusCode, A2aError)> {
    let too_large = || {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            A2aError::InvalidRequest(format!("request body exceeds the limit of {limit} bytes")),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    match tokio::time::timeout(BODY_READ_TIMEOUT, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(_)) => Err(too_large()),
        Err(_) => Err((
            StatusCode::REQUEST_TIMEOUT,
            A2aError::InvalidRequest(format!(
                "the request body did not arrive within {} s",
                BODY_READ_TIMEOUT.as_secs()
            )),
        )),
    }
}
