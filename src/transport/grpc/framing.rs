//! The request framing of a gRPC call, checked as its bytes arrive (gRPC over HTTP/2,
//! "Length-Prefixed-Message": a 1-byte compressed flag, a 4-byte big-endian length, the
//! message).
//!
//! Every method of `A2AService` takes exactly one request message (none is
//! client-streaming). tonic answers the ways a body can break that rule with its own
//! `INTERNAL` texts ("Missing request message.", "protocol error: received message with
//! invalid compression flag…") and drops a second message of a unary call silently. This
//! body wrapper finds each of them first and fails the call with `INVALID_ARGUMENT`
//! carrying an `ErrorInfo` (reason `PARSE_ERROR`) that says what was wrong:
//!
//! - a first byte other than 0 or 1: the body is not gRPC-framed;
//! - the compressed flag set without a `grpc-encoding` header (the gRPC spec forbids it);
//! - a second message after the first;
//! - a body that ends inside a message's prefix or payload (truncated);
//! - a body that ends with no message at all.
//!
//! The bytes themselves pass through unchanged and unbuffered; the message size limit
//! stays tonic's (`RESOURCE_EXHAUSTED`, see the module above).

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;

use super::status;
use crate::error::A2aError;

/// The length of a message's prefix: the compressed flag and the length (bytes).
const PREFIX: usize = 5;

/// A request body that fails with `INVALID_ARGUMENT` (reason `PARSE_ERROR`) as soon as
/// its bytes break the one-message gRPC framing (see the module docs).
pub struct OneMessageBody {
    inner: Body,
    /// Whether the call named a `grpc-encoding`, so the compressed flag may be 1.
    encoded: bool,
    /// The prefix of the message being read, and how many of its bytes have arrived.
    prefix: [u8; PREFIX],
    prefix_len: usize,
    /// Payload bytes of the current message still to come.
    remaining: u64,
    /// Messages whose prefix has arrived.
    messages: u32,
    /// Set once an error was returned: the body then ends.
    failed: bool,
}

impl OneMessageBody {
    /// Wraps `inner`; `encoded` is whether the request carries a `grpc-encoding` header.
    pub fn new(inner: Body, encoded: bool) -> Self {
        Self {
            inner,
            encoded,
            prefix: [0; PREFIX],
            prefix_len: 0,
            remaining: 0,
            messages: 0,
            failed: false,
        }
    }

    /// Walks `data` through the framing; the reason it breaks the rule, if it does.
    fn check(&mut self, mut data: &[u8]) -> Result<(), &'static str> {
        while !data.is_empty() {
            if self.remaining > 0 {
                let n = data
                    .len()
                    .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
                self.remaining -= n as u64;
                data = &data[n..];
                continue;
            }
            let n = (PREFIX - self.prefix_len).min(data.len());
            self.prefix[self.prefix_len..self.prefix_len + n].copy_from_slice(&data[..n]);
            self.prefix_len += n;
            data = &data[n..];
            if self.prefix_len < PREFIX {
                return Ok(());
            }
            self.prefix_len = 0;
            match self.prefix[0] {
                0 => {}
                1 if self.encoded => {}
                1 => {
                    return Err(
                        "the request message has the compressed flag set but the call \
                                names no grpc-encoding",
                    );
                }
                _ => {
                    return Err(
                        "the request body is not gRPC-framed (each message starts with \
                                a compressed flag of 0 or 1 and a 4-byte length)",
                    );
                }
            }
            if self.messages > 0 {
                return Err(
                    "a second request message arrived; every A2AService method takes \
                            exactly one",
                );
            }
            self.messages += 1;
            self.remaining = u64::from(u32::from_be_bytes([
                self.prefix[1],
                self.prefix[2],
                self.prefix[3],
                self.prefix[4],
            ]));
        }
        Ok(())
    }

    /// At the body's end: the reason it is incomplete, if it is.
    fn at_end(&self) -> Result<(), &'static str> {
        if self.prefix_len > 0 || self.remaining > 0 {
            Err("the request body ended inside a message")
        } else if self.messages == 0 {
            Err("the call carries no request message; every A2AService method takes exactly one")
        } else {
            Ok(())
        }
    }

    /// Ends the body with `why` as an `INVALID_ARGUMENT` status tonic passes on.
    fn fail(&mut self, why: &str) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::BoxError>>> {
        self.failed = true;
        tracing::debug!(reason = why, "gRPC request framing refused");
        let status = status::from_error(&A2aError::ParseError(why.to_owned()));
        Poll::Ready(Some(Err(Box::new(status))))
    }
}

impl http_body::Body for OneMessageBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::BoxError>>> {
        if self.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => match self.at_end() {
                Ok(()) => Poll::Ready(None),
                Err(why) => self.fail(why),
            },
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && let Err(why) = self.check(data)
                {
                    return self.fail(why);
                }
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        // Never report the end before `poll_frame` has seen it: the end-of-body check
        // must run.
        self.failed
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checker(encoded: bool) -> OneMessageBody {
        OneMessageBody::new(Body::empty(), encoded)
    }

    fn framed(flag: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![flag];
        v.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn one_message_in_any_split_is_accepted() {
        let bytes = framed(0, b"hello world");
        for split in 0..=bytes.len() {
            let mut c = checker(false);
            c.check(&bytes[..split]).unwrap();
            c.check(&bytes[split..]).unwrap();
            c.at_end().unwrap();
        }
        // Byte by byte, and an empty message.
        let mut c = checker(false);
        for b in &bytes {
            c.check(std::slice::from_ref(b)).unwrap();
        }
        c.at_end().unwrap();
        let mut c = checker(false);
        c.check(&framed(0, b"")).unwrap();
        c.at_end().unwrap();
    }

    #[test]
    fn each_broken_framing_is_named() {
        let mut c = checker(false);
        assert!(
            c.check(b"garbage!")
                .unwrap_err()
                .contains("not gRPC-framed")
        );
        let mut c = checker(false);
        assert!(
            c.check(&framed(1, b"x"))
                .unwrap_err()
                .contains("grpc-encoding")
        );
        let mut c = checker(true);
        c.check(&framed(1, b"x")).unwrap();
        let mut c = checker(false);
        let mut two = framed(0, b"one");
        two.extend(framed(0, b"two"));
        assert!(
            c.check(&two)
                .unwrap_err()
                .contains("second request message")
        );
        let mut c = checker(false);
        c.check(&framed(0, b"abc")[..6]).unwrap();
        assert!(c.at_end().unwrap_err().contains("ended inside"));
        let mut c = checker(false);
        c.check(&[0, 0]).unwrap();
        assert!(c.at_end().unwrap_err().contains("ended inside"));
        assert!(
            checker(false)
                .at_end()
                .unwrap_err()
                .contains("no request message")
        );
    }

    #[test]
    fn a_huge_declared_length_is_left_to_the_size_limit() {
        let mut c = checker(false);
        c.check(&[0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3]).unwrap();
        assert!(c.at_end().is_err());
    }
}
