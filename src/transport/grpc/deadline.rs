//! The client's deadline of a gRPC call: the `grpc-timeout` request header (gRPC over
//! HTTP/2: 1 to 8 ASCII digits and a unit, `H` hours, `M` minutes, `S` seconds, `m`
//! milliseconds, `u` microseconds, `n` nanoseconds).
//!
//! tonic honours the header only when it serves through its own `Server`; the gateway
//! serves gRPC as axum routes, so it applies the deadline here, to the whole call: a call
//! whose answer has not begun by then ends with `DEADLINE_EXCEEDED`, and a streamed
//! answer still open then ends with `DEADLINE_EXCEEDED` in its trailers. Work the call
//! started goes on (a blocking `SendMessage`'s task keeps running and can be read with
//! `GetTask`), as when a client goes away. A header that is no valid timeout is ignored,
//! as tonic and gRPC's own servers do.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue};
use bytes::Bytes;
use tokio::time::{Instant, Sleep};

/// The `grpc-timeout` header's duration; `None` without one or when it is not a valid
/// timeout.
pub fn client_deadline(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?;
    let parsed = parse(value.as_bytes());
    if parsed.is_none() {
        tracing::debug!(value = ?value, "grpc-timeout is no valid timeout; ignored");
    }
    parsed
}

/// `digits unit` as a duration (see the module docs).
fn parse(raw: &[u8]) -> Option<Duration> {
    let (&unit, digits) = raw.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The message of a call ended by its deadline.
pub fn exceeded_message(timeout: Duration) -> String {
    format!(
        "the call's deadline (grpc-timeout {} ms) passed",
        timeout.as_millis()
    )
}

/// A response body that ends with `DEADLINE_EXCEEDED` trailers if it is still open at
/// `deadline`.
pub struct DeadlineResponse {
    inner: Body,
    sleep: Pin<Box<Sleep>>,
    timeout: Duration,
    done: bool,
}

impl DeadlineResponse {
    /// Wraps `inner`, to end at `deadline` (the call's start plus `timeout`).
    pub fn new(inner: Body, deadline: Instant, timeout: Duration) -> Self {
        Self {
            inner,
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            timeout,
            done: false,
        }
    }
}

impl http_body::Body for DeadlineResponse {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            if frame
                .as_ref()
                .is_none_or(|f| f.as_ref().is_ok_and(|f| f.is_trailers()))
            {
                self.done = true;
            }
            return Poll::Ready(frame);
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            self.done = true;
            let message = exceeded_message(self.timeout);
            tracing::debug!(%message, "gRPC stream ended by its deadline");
            let mut trailers = HeaderMap::new();
            trailers.insert(
                "grpc-status",
                HeaderValue::from(tonic::Code::DeadlineExceeded as i32),
            );
            // Printable ASCII without '%': valid in grpc-message as it is.
            if let Ok(m) = HeaderValue::from_str(&message) {
                trailers.insert("grpc-message", m);
            }
            return Poll::Ready(Some(Ok(http_body::Frame::trailers(trailers))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_units_of_the_grpc_spec() {
        assert_eq!(parse(b"2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse(b"3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse(b"10S"), Some(Duration::from_secs(10)));
        assert_eq!(parse(b"250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse(b"99999999u"), Some(Duration::from_micros(99_999_999)));
        assert_eq!(parse(b"5n"), Some(Duration::from_nanos(5)));
        assert_eq!(parse(b"0m"), Some(Duration::ZERO));
    }

    #[test]
    fn anything_else_is_no_timeout() {
        for bad in [
            &b""[..],
            b"S",
            b"123456789S",
            b"10s",
            b"10",
            b"-1S",
            b"1.5S",
            b" 1S",
            b"\xff1S",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
