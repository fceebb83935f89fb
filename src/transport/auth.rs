//! Inbound authentication of A2A requests (`[server.auth]`, spec §7.4), as the HTTP
//! bindings render it. Who is calling is decided by [`crate::identity`]; this module turns
//! an [`AuthFailure`] into the binding's answer, before the request body is read:
//!
//! - HTTP 401 (no or an unaccepted credential) or 403 (a missing scope, a tenant the
//!   credential does not allow) with `WWW-Authenticate: Bearer realm="a2a-gateway"` and,
//!   for a presented credential, `error="invalid_token"` / `error="insufficient_scope"`
//!   and an `error_description` saying which check failed (never the credential);
//! - the binding's error body: on JSON-RPC an error (-32600, id `null` before the body is
//!   read), on HTTP+JSON the `google.rpc.Status` body with status `UNAUTHENTICATED` or
//!   `PERMISSION_DENIED`;
//! - HTTP 503 with `Retry-After` and the binding's `UNAVAILABLE` error, no challenge, when
//!   a JWT could not be checked because the issuer's keys were never fetched
//!   ([`AuthFailure::KeysUnavailable`]): the caller is not at fault and may retry.
//!
//! The failure is logged at `warn` with the peer address and counted in
//! `a2a_auth_failures_total{reason}` by [`crate::identity::record`].

use std::net::SocketAddr;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

pub use crate::identity::{AuthFailure, Authenticator, Identity, TokenProblem};
use crate::protocol::jsonrpc::{self, ErrorObject};

/// The realm named in `WWW-Authenticate`.
pub const REALM: &str = "a2a-gateway";

/// JSON-RPC code of the 401/403 body: the spec defines none for authentication, so the
/// standard "invalid request" code is used (the HTTP status is what clients act on).
pub const UNAUTHENTICATED_CODE: i32 = -32600;

/// Message of the 401 body for a missing credential.
pub const UNAUTHENTICATED_MESSAGE: &str = "authentication required";

impl AuthFailure {
    /// The gRPC / `google.rpc.Status` code name: `UNAUTHENTICATED`, `PERMISSION_DENIED`,
    /// or `UNAVAILABLE` for [`AuthFailure::KeysUnavailable`].
    pub fn status_name(self) -> &'static str {
        if self.is_unavailable() {
            "UNAVAILABLE"
        } else if self.is_forbidden() {
            "PERMISSION_DENIED"
        } else {
            "UNAUTHENTICATED"
        }
    }

    /// The `WWW-Authenticate` header value.
    pub fn challenge_header(self) -> HeaderValue {
        HeaderValue::from_str(&self.challenge(REALM, &[])).expect("the challenge is ASCII")
    }

    fn refusal(self, body: String, content_type: &'static str) -> Response {
        let status = StatusCode::from_u16(self.http_status()).unwrap_or(StatusCode::UNAUTHORIZED);
        let mut resp = (status, body).into_response();
        let headers = resp.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if self.is_unavailable() {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(crate::transport::rest::response::RETRY_AFTER_SECS),
            );
        } else {
            headers.insert(header::WWW_AUTHENTICATE, self.challenge_header());
        }
        resp
    }

    /// The HTTP+JSON rendering (spec §11.6): HTTP 401/403 with the `Bearer` challenge and
    /// the binding's error body, `{"error":{"code":401,"status":"UNAUTHENTICATED",
    /// "message":"…","details":[ErrorInfo UNAUTHENTICATED]}}` (403 / `PERMISSION_DENIED`
    /// for a missing scope or tenant), served as `content_type`;
    /// [`AuthFailure::KeysUnavailable`] is the `UNAVAILABLE` error, HTTP 503 with
    /// `Retry-After` and no challenge.
    pub fn rest_response(self, content_type: &'static str) -> Response {
        let body = json!({
            "error": {
                "code": self.http_status(),
                "status": self.status_name(),
                "message": self.message(),
                "details": [{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": self.status_name(),
                    "domain": crate::error::ERROR_DOMAIN,
                    "metadata": {"check": self.reason()},
                }],
            }
        });
        self.refusal(body.to_string(), content_type)
    }

    /// HTTP 401/403 with the `Bearer` challenge and a JSON-RPC error body with `id`;
    /// for [`AuthFailure::KeysUnavailable`], HTTP 503 with `Retry-After` and the
    /// `UNAVAILABLE` error (-32000), no challenge.
    pub fn jsonrpc_response(self, id: Option<&jsonrpc::RequestId>) -> Response {
        let error = ErrorObject {
            // A failure of the gateway's takes the error table's `UNAVAILABLE` code.
            code: if self.is_unavailable() {
                crate::error::A2aError::Unavailable(String::new()).jsonrpc_code()
            } else {
                UNAUTHENTICATED_CODE
            },
            message: self.message().into_owned(),
            data: Some(json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": self.status_name(),
                "domain": crate::error::ERROR_DOMAIN,
                "metadata": {"check": self.reason()},
            }])),
        };
        self.refusal(jsonrpc::failure(id, &error).to_string(), "application/json")
    }

    /// [`jsonrpc_response`](Self::jsonrpc_response) with id `null`: HTTP 401/403 with the
    /// `Bearer` challenge, or 503 for [`AuthFailure::KeysUnavailable`].
    pub fn response(self) -> Response {
        self.jsonrpc_response(None)
    }
}

impl Authenticator {
    /// [`verify`](Authenticator::verify) for JSON-RPC: the refusal as the response to send.
    ///
    /// # Errors
    /// The 401/403 (or 503, see [`AuthFailure::KeysUnavailable`]) response.
    pub async fn check(
        &self,
        headers: &HeaderMap,
        peer: Option<SocketAddr>,
    ) -> Result<Option<Identity>, Box<Response>> {
        self.verify(headers, peer)
            .await
            .map_err(|failure| Box::new(failure.response()))
    }
}
