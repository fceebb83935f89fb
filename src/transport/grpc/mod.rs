//! The gRPC binding (spec §10): `lf.a2a.v1.A2AService` from `proto/a2a.proto`, on tonic
//! and prost, over the same [operation table](crate::transport::operations) as the
//! JSON-RPC and HTTP+JSON bindings.
//!
//! - [`proto`]: the generated messages, server trait and client.
//! - [`json`]: prost message ⇄ ProtoJSON, the form the operation table speaks.
//! - [`convert`]: our protocol types → prost messages directly, for the answers and
//!   stream events.
//! - [`service`]: the `A2AService` implementation (metadata checks, streams).
//! - [`status`]: [`A2aError`](crate::A2aError) → `google.rpc.Status` with `ErrorInfo`.
//! - [`codec`]: prost's codec with `INVALID_ARGUMENT` for undecodable messages.
//!
//! Serving: [`router`] answers gRPC requests only. By default it shares the HTTP
//! listener ([`alongside`]): a request whose `content-type` is `application/grpc`
//! (with or without `+proto` or parameters) goes to gRPC, anything else to the HTTP
//! routes; over TLS, ALPN offers `h2`, and plain connections take HTTP/2 with prior
//! knowledge (h2c). With `server.grpc_listen` it has a listener of its own instead.
//!
//! Bad input never reaches the handler as a fault: an unknown method or service is
//! `UNIMPLEMENTED` (reason `METHOD_NOT_FOUND`), an undecodable or truncated message
//! `INVALID_ARGUMENT` (reason `PARSE_ERROR`), a message larger than
//! `server.max_body_bytes` `RESOURCE_EXHAUSTED`, a codec other than protobuf
//! (`application/grpc+json`, ...) `INVALID_ARGUMENT` (reason
//! `CONTENT_TYPE_NOT_SUPPORTED`), and a panic `INTERNAL` without details. A request
//! message that has not arrived whole [`TransportConfig::request_message_timeout`]
//! after the call's headers (a stalled or trickling client) ends the call with
//! `DEADLINE_EXCEEDED`, so no call waits on its client forever; dead peers of open
//! streams are found by the server's HTTP/2 keep-alive pings
//! ([`ConnectionLimits`](crate::server::ConnectionLimits)). A body that is not one
//! gRPC-framed message (garbage, a compressed flag without `grpc-encoding`, no message,
//! a second message, a truncated one) is `INVALID_ARGUMENT` with reason `PARSE_ERROR`
//! ([`framing`]); the client's `grpc-timeout` bounds the call ([`deadline`]).
//!
//! [`TransportConfig::request_message_timeout`]: crate::transport::TransportConfig::request_message_timeout

pub mod codec;
pub mod convert;
pub mod deadline;
pub mod field_count;
pub mod framing;
pub mod json;
pub mod page;
pub mod proto;
pub mod service;
pub mod status;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use tower::ServiceExt;

use super::AppState;
use super::operations::Operation;
use crate::error::A2aError;
use proto::a2a_service_server::{A2aServiceServer, SERVICE_NAME};

/// Whether `req` is a gRPC call: its `content-type` is `application/grpc` or
/// `application/grpc+<codec>`, parameters allowed (gRPC-Web's `application/grpc-web`
/// is not gRPC).
pub fn is_grpc<B>(req: &axum::http::Request<B>) -> bool {
    let Some(ct) = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = ct.split(';').next().unwrap_or("").trim();
    let Some(rest) = essence
        .get(..16)
        .filter(|p| p.eq_ignore_ascii_case("application/grpc"))
        .map(|_| &essence[16..])
    else {
        return false;
    };
    rest.is_empty() || rest.starts_with('+')
}

/// The codec a gRPC `content-type` names (`proto` for `application/grpc`, `json` for
/// `application/grpc+json`), lowercased; `None` when the request is no gRPC call.
fn codec_of<B>(req: &axum::http::Request<B>) -> Option<String> {
    if !is_grpc(req) {
        return None;
    }
    let ct = req.headers().get(header::CONTENT_TYPE)?.to_str().ok()?;
    let essence = ct.split(';').next().unwrap_or("").trim();
    let codec = essence.get(16..).unwrap_or("").trim_start_matches('+');
    Some(if codec.is_empty() {
        "proto".to_owned()
    } else {
        codec.to_ascii_lowercase()
    })
}

/// The path of `op` on this service: `/lf.a2a.v1.A2AService/<name>`.
pub fn method_path(op: Operation) -> String {
    format!("/{SERVICE_NAME}/{}", op.name())
}

/// Every gRPC request: the eleven methods of `A2AService`, `UNIMPLEMENTED` for any
/// other path, messages up to `state.config.max_body_bytes`.
pub fn router(state: AppState) -> Router {
    let limit = state.config.max_body_bytes;
    let message_timeout = state.config.request_message_timeout;
    let service = A2aServiceServer::new(service::A2aGrpc::new(state))
        .max_decoding_message_size(limit)
        .max_encoding_message_size(usize::MAX);
    let mut router = Router::new();
    for op in Operation::ALL {
        router = router.route_service(&method_path(op), service.clone());
    }
    router
        .fallback(unknown_method)
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| guard(req, next, message_timeout),
        ))
        .layer(axum::middleware::map_response(size_limit_status))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                tracing::error!("gRPC handler panicked");
                tonic::Status::internal("internal error").into_http::<Body>()
            },
        ))
}

/// `http` for every request but gRPC calls, which go to `grpc`.
pub fn alongside(http: Router, grpc: Router) -> Router {
    Router::new().fallback_service(tower::service_fn(move |req: Request| {
        let target = if is_grpc(&req) {
            grpc.clone()
        } else {
            http.clone()
        };
        target.oneshot(req)
    }))
}

/// `UNIMPLEMENTED` with reason `METHOD_NOT_FOUND` for a path that is no method here.
async fn unknown_method(req: Request) -> Response {
    let path: String = req.uri().path().chars().take(256).collect();
    let err = A2aError::MethodNotFound(format!("{path} is not a method of {SERVICE_NAME}"));
    status::from_error(&err).into_http::<Body>()
}

/// Refuses codecs other than protobuf, and puts the request message under its deadline.
async fn guard(req: Request, next: Next, message_timeout: Duration) -> Response {
    if let Some(codec) = codec_of(&req).filter(|c| c != "proto") {
        let codec: String = codec.chars().take(64).collect();
        let err = A2aError::ContentTypeNotSupported(format!(
            "gRPC content-type application/grpc+{codec} is not supported; this service speaks \
             application/grpc (protobuf)"
        ));
        return status::from_error(&err).into_http::<Body>();
    }
    // `identity` is no encoding: a compressed flag under it is as unframed as without.
    let encoded = req
        .headers()
        .get("grpc-encoding")
        .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
    let client_deadline = deadline::client_deadline(req.headers());
    let req = req.map(|body| {
        let framed = Body::new(framing::OneMessageBody::new(body, encoded));
        Body::new(DeadlineBody::new(framed, message_timeout))
    });
    let Some(timeout) = client_deadline else {
        return next.run(req).await;
    };
    let ends = tokio::time::Instant::now() + timeout;
    match tokio::time::timeout_at(ends, next.run(req)).await {
        Ok(resp) => {
            resp.map(|body| Body::new(deadline::DeadlineResponse::new(body, ends, timeout)))
        }
        Err(_) => {
            let message = deadline::exceeded_message(timeout);
            tracing::debug!(%message, "gRPC call ended by its deadline");
            tonic::Status::deadline_exceeded(message).into_http::<Body>()
        }
    }
}

/// A request body that fails with `DEADLINE_EXCEEDED` if it has not ended within its
/// timeout of the call's start.
struct DeadlineBody {
    inner: Body,
    timeout: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    failed: bool,
}

impl DeadlineBody {
    fn new(inner: Body, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            failed: false,
        }
    }
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::BoxError>>> {
        if self.failed {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.failed = true;
            let secs = self.timeout.as_secs_f64();
            tracing::debug!(timeout_secs = secs, "gRPC request message timed out");
            return Poll::Ready(Some(Err(Box::new(tonic::Status::deadline_exceeded(
                format!("the request message did not arrive within {secs} s"),
            )))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// tonic refuses a message over the size limit with `OUT_OF_RANGE`; gRPC's own
/// implementations (and its status code guide) use `RESOURCE_EXHAUSTED`, which is what
/// clients retry-classify. Nothing else here answers `OUT_OF_RANGE`. (A truncated
/// message, which tonic would answer `INTERNAL`, is refused earlier by [`framing`].)
async fn size_limit_status(mut resp: Response) -> Response {
    let out_of_range = HeaderValue::from(tonic::Code::OutOfRange as i32);
    if resp.headers().get(tonic::Status::GRPC_STATUS) == Some(&out_of_range) {
        resp.headers_mut().insert(
            tonic::Status::GRPC_STATUS,
            HeaderValue::from(tonic::Code::ResourceExhausted as i32),
        );
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_ct(ct: &str) -> axum::http::Request<()> {
        axum::http::Request::builder()
            .header(header::CONTENT_TYPE, ct)
            .body(())
            .unwrap()
    }

    #[test]
    fn grpc_is_told_by_content_type() {
        for yes in [
            "application/grpc",
            "application/grpc+proto",
            "Application/GRPC; charset=x",
        ] {
            assert!(is_grpc(&with_ct(yes)), "{yes}");
        }
        for no in [
            "application/json",
            "application/grpc-web",
            "application/grpcx",
            "application/grp",
            "",
        ] {
            assert!(!is_grpc(&with_ct(no)), "{no}");
        }
        assert!(!is_grpc(&axum::http::Request::new(())));
    }

    #[test]
    fn method_paths_name_the_service() {
        assert_eq!(
            method_path(Operation::SendMessage),
            "/lf.a2a.v1.A2AService/SendMessage"
        );
    }
}
