//! Inbound authentication of A2A requests (`[server.auth]`, spec §7.4): static API keys
//! presented as `Authorization: Bearer <key>`.
//!
//! Only SHA-256 digests of the keys are held. The presented key is hashed and compared
//! with **every** configured digest in constant time (`subtle`), so neither the position
//! of a match nor the length of a common prefix shows in the timing. A missing or wrong
//! key is answered with HTTP 401, `WWW-Authenticate: Bearer realm="a2a-gateway"` and the
//! binding's error body before the request body is read: on JSON-RPC an error with id
//! `null` (-32600 "authentication required"), on HTTP+JSON the `google.rpc.Status` body
//! with status `UNAUTHENTICATED`;
//! the failure is logged at `warn` with the peer address (never the key) and counted in
//! `a2a_auth_failures_total{reason}`.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::{SHA256_LEN, ServerAuthConfig};
use crate::protocol::jsonrpc::{self, ErrorObject};

/// The realm named in `WWW-Authenticate`.
pub const REALM: &str = "a2a-gateway";

/// Counter of refused requests, labelled `reason` (`missing` or `invalid`).
pub const AUTH_FAILURES: &str = "a2a_auth_failures_total";

/// JSON-RPC code of the 401 body: the spec defines none for authentication, so the
/// standard "invalid request" code is used (the HTTP status is what clients act on).
pub const UNAUTHENTICATED_CODE: i32 = -32600;

/// Message of the 401 body.
pub const UNAUTHENTICATED_MESSAGE: &str = "authentication required";

/// One accepted key: who it stands for and the SHA-256 of the key.
struct Key {
    caller: String,
    digest: [u8; SHA256_LEN],
}

/// Decides who is calling. Cheap to clone. The default authenticates nobody and lets
/// everyone through as the anonymous owner (`[server.auth] kind = "none"`).
#[derive(Clone, Default)]
pub struct Authenticator {
    /// `None`: no authentication. `Some`: one of these keys is required (an empty list
    /// refuses everyone).
    keys: Option<Arc<[Key]>>,
}

impl fmt::Debug for Authenticator {
    /// Caller names only, never digests.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.keys {
            None => f.write_str("Authenticator::None"),
            Some(keys) => f
                .debug_tuple("Authenticator::ApiKeys")
                .field(&keys.iter().map(|k| &k.caller).collect::<Vec<_>>())
                .finish(),
        }
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No `Authorization` header.
    Missing,
    /// An `Authorization` header that is not `Bearer` with a configured key.
    Invalid,
}

impl AuthFailure {
    /// The metric label and log field: `missing` or `invalid`.
    pub fn reason(self) -> &'static str {
        match self {
            AuthFailure::Missing => "missing",
            AuthFailure::Invalid => "invalid",
        }
    }

    /// The `WWW-Authenticate` challenge (RFC 6750 §3; `error="invalid_token"` for a key
    /// that was presented but not accepted).
    fn challenge(self) -> HeaderValue {
        let challenge = match self {
            AuthFailure::Missing => format!("Bearer realm=\"{REALM}\""),
            AuthFailure::Invalid => format!("Bearer realm=\"{REALM}\", error=\"invalid_token\""),
        };
        HeaderValue::from_str(&challenge).expect("the challenge is ASCII")
    }

    fn unauthorized(self, body: String, content_type: &'static str) -> Response {
        let mut resp = (StatusCode::UNAUTHORIZED, body).into_response();
        let headers = resp.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers.insert(header::WWW_AUTHENTICATE, self.challenge());
        resp
    }

    /// The HTTP+JSON rendering (spec §11.6): HTTP 401 with the `Bearer` challenge and the
    /// binding's error body, `{"error":{"code":401,"status":"UNAUTHENTICATED",
    /// "message":"authentication required","details":[ErrorInfo UNAUTHENTICATED]}}`,
    /// served as `content_type`.
    pub fn rest_response(self, content_type: &'static str) -> Response {
        let body = json!({
            "error": {
                "code": 401,
                "status": "UNAUTHENTICATED",
                "message": UNAUTHENTICATED_MESSAGE,
                "details": [{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "UNAUTHENTICATED",
                    "domain": crate::error::ERROR_DOMAIN,
                    "metadata": {},
                }],
            }
        });
        self.unauthorized(body.to_string(), content_type)
    }

    /// HTTP 401 with the `Bearer` challenge and a JSON-RPC error body with id `null`.
    pub fn response(self) -> Response {
        let error = ErrorObject {
            code: UNAUTHENTICATED_CODE,
            message: UNAUTHENTICATED_MESSAGE.to_owned(),
            data: Some(json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "UNAUTHENTICATED",
                "domain": crate::error::ERROR_DOMAIN,
            }])),
        };
        self.unauthorized(
            jsonrpc::failure(None, &error).to_string(),
            "application/json",
        )
    }
}

impl Authenticator {
    /// No authentication: every request is the anonymous owner.
    pub fn none() -> Self {
        Self::default()
    }

    /// Requires one of `keys`, given as `(caller, SHA-256 of the key)`.
    pub fn api_keys(keys: impl IntoIterator<Item = (String, [u8; SHA256_LEN])>) -> Self {
        let keys: Vec<Key> = keys
            .into_iter()
            .map(|(caller, digest)| Key { caller, digest })
            .collect();
        Self {
            keys: Some(keys.into()),
        }
    }

    /// The authenticator `[server.auth]` describes (after [`Config::load`], which checked
    /// it). An entry without a usable digest is left out, so it can never match.
    ///
    /// [`Config::load`]: crate::config::Config::load
    pub fn from_config(config: &ServerAuthConfig) -> Self {
        if !config.required() {
            return Self::none();
        }
        Self::api_keys(
            config
                .keys
                .iter()
                .filter_map(|k| Some((k.caller.clone(), k.digest()?))),
        )
    }

    /// Whether requests must authenticate.
    pub fn required(&self) -> bool {
        self.keys.is_some()
    }

    /// The caller `headers` authenticate as: `Ok(None)` when no authentication is
    /// configured, `Ok(Some(caller))` for an accepted key.
    ///
    /// # Errors
    /// [`AuthFailure`] when a key is required and missing or not accepted.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Option<&str>, AuthFailure> {
        let Some(keys) = &self.keys else {
            return Ok(None);
        };
        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        let Some(value) = values.next() else {
            return Err(AuthFailure::Missing);
        };
        if values.next().is_some() {
            return Err(AuthFailure::Invalid);
        }
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.trim().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|token| !token.is_empty())
            .ok_or(AuthFailure::Invalid)?;
        let presented: [u8; SHA256_LEN] = Sha256::digest(token.as_bytes()).into();
        // Every digest is compared, whatever matched before.
        let mut matched = None;
        for key in keys.iter() {
            if bool::from(presented.ct_eq(&key.digest)) {
                matched = Some(key.caller.as_str());
            }
        }
        matched.map(Some).ok_or(AuthFailure::Invalid)
    }

    /// [`authenticate`](Self::authenticate) for a transport: on failure, logs it at `warn`
    /// with `peer` (never the key), counts it in `a2a_auth_failures_total` and returns the
    /// 401 response to send.
    ///
    /// # Errors
    /// The 401 response.
    pub fn check(
        &self,
        headers: &HeaderMap,
        peer: Option<SocketAddr>,
    ) -> Result<Option<String>, Box<Response>> {
        self.verify(headers, peer)
            .map_err(|failure| Box::new(failure.response()))
    }

    /// [`authenticate`](Self::authenticate) for a binding that renders the refusal
    /// itself (HTTP+JSON, gRPC): on failure, logs it at `warn` with `peer` (never the key)
    /// and counts it in `a2a_auth_failures_total`.
    ///
    /// # Errors
    /// The [`AuthFailure`].
    pub fn verify(
        &self,
        headers: &HeaderMap,
        peer: Option<SocketAddr>,
    ) -> Result<Option<String>, AuthFailure> {
        self.authenticate(headers)
            .map(|caller| caller.map(str::to_owned))
            .inspect_err(|failure| {
                metrics::counter!(AUTH_FAILURES, "reason" => failure.reason()).increment(1);
                let peer = peer.map_or_else(|| "unknown".to_owned(), |p| p.to_string());
                tracing::warn!(%peer, reason = failure.reason(), "authentication failed");
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_auth(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, value.parse().unwrap());
        headers
    }

    fn two_callers() -> Authenticator {
        Authenticator::api_keys([
            ("a".to_owned(), Sha256::digest(b"key-a").into()),
            ("b".to_owned(), Sha256::digest(b"key-b").into()),
        ])
    }

    #[test]
    fn none_lets_everyone_through_anonymously() {
        assert_eq!(
            Authenticator::none().authenticate(&HeaderMap::new()),
            Ok(None)
        );
    }

    #[test]
    fn keys_map_to_their_callers() {
        let auth = two_callers();
        assert_eq!(auth.authenticate(&with_auth("Bearer key-a")), Ok(Some("a")));
        assert_eq!(
            auth.authenticate(&with_auth("bearer  key-b ")),
            Ok(Some("b"))
        );
    }

    #[test]
    fn missing_wrong_or_malformed_credentials_are_refused() {
        let auth = two_callers();
        assert_eq!(
            auth.authenticate(&HeaderMap::new()),
            Err(AuthFailure::Missing)
        );
        for bad in [
            "Bearer key-c",
            "Bearer",
            "Bearer ",
            "Basic a2V5LWE=",
            "key-a",
        ] {
            assert_eq!(
                auth.authenticate(&with_auth(bad)),
                Err(AuthFailure::Invalid),
                "{bad}"
            );
        }
        let mut twice = with_auth("Bearer key-a");
        twice.append(header::AUTHORIZATION, "Bearer key-b".parse().unwrap());
        assert_eq!(auth.authenticate(&twice), Err(AuthFailure::Invalid));
        assert_eq!(
            Authenticator::api_keys([]).authenticate(&with_auth("Bearer key-a")),
            Err(AuthFailure::Invalid)
        );
    }

    #[test]
    fn debug_shows_callers_only() {
        let debug = format!("{:?}", two_callers());
        assert!(debug.contains("\"a\""), "{debug}");
        assert!(!debug.contains("key-a"), "{debug}");
    }
}
