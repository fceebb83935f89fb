//! SigV4 over the exact request sent (runtime contract §3 and §8): [`sign`] adds
//! `Authorization`, `X-Amz-Date` and, for temporary credentials,
//! `X-Amz-Security-Token` to a built `reqwest::Request` whose every other header and
//! body are final, with `aws-sigv4`.
//!
//! What is signed, as the AWS SDK signs `InvokeAgentRuntime`:
//! - the path URI-encoded a second time (the runtime ARN in it is already
//!   percent-encoded once, so `%3A` is signed as `%253A`), the query, the body's
//!   SHA-256 in the canonical request, and no `x-amz-content-sha256` header;
//! - the headers `host`, `content-type`, `x-amz-date`, `x-amz-security-token` and
//!   every `x-amz-*` / `x-amzn-bedrock-agentcore-runtime-*` header (session id, user
//!   id, the custom caller and tenant headers);
//! - not `traceparent`, `tracestate`, `baggage`, `user-agent`, `accept` or
//!   `content-length` (proxies and tracers may change them).

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign as sigv4};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;

use crate::upstream::auth::TokenError;

/// The SigV4 signing name of Amazon Bedrock AgentCore (data plane).
pub const SERVICE: &str = "bedrock-agentcore";

/// Prefix of the AgentCore runtime headers, every one of them signed.
const RUNTIME_HEADERS: &str = "x-amzn-bedrock-agentcore-runtime-";

/// Whether a request header (lowercase name) is part of the signature, besides `host`.
pub fn is_signed_header(name: &str) -> bool {
    name == "content-type" || name.starts_with("x-amz-") || name.starts_with(RUNTIME_HEADERS)
}

/// What to sign for: the region and the service's signing name.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// The region (`us-east-1`).
    pub region: &'a str,
    /// The signing name ([`SERVICE`] for AgentCore).
    pub service: &'a str,
}

/// Signs `request` with `credentials` for `scope` at `time`, replacing any earlier
/// signature: adds `Authorization`, `X-Amz-Date` and, for temporary credentials,
/// `X-Amz-Security-Token` (all marked sensitive, so `Debug` never prints them). The
/// body is the request's own (bytes; none is an empty body).
///
/// # Errors
/// A [`TokenError`] when the body is a stream, a header to sign is not visible ASCII
/// or the URL has no host.
pub fn sign(
    request: &mut reqwest::Request,
    credentials: &Credentials,
    scope: Scope<'_>,
    time: SystemTime,
) -> Result<(), TokenError> {
    let headers = request.headers_mut();
    for stale in ["authorization", "x-amz-date", "x-amz-security-token"] {
        headers.remove(stale);
    }
    for (name, value) in signature_headers(request, credentials, scope, time)? {
        request.headers_mut().insert(name, value);
    }
    Ok(())
}

/// The headers that sign `request` as it is.
fn signature_headers(
    request: &reqwest::Request,
    credentials: &Credentials,
    scope: Scope<'_>,
    time: SystemTime,
) -> Result<Vec<(&'static str, http::HeaderValue)>, TokenError> {
    let failed = |what: &str| TokenError::new(format!("cannot sign the request: {what}"));
    let body = match request.body() {
        None => &[][..],
        Some(b) => b
            .as_bytes()
            .ok_or_else(|| failed("its body is a stream, not bytes"))?,
    };
    let url = request.url();
    let host = url
        .host_str()
        .ok_or_else(|| failed("the URL has no host"))?;
    let host = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let mut signed: Vec<(&str, &str)> = vec![("host", host.as_str())];
    for (name, value) in request.headers() {
        if is_signed_header(name.as_str()) {
            let value = value
                .to_str()
                .map_err(|_| failed(&format!("header {name} is not visible ASCII")))?;
            signed.push((name.as_str(), value));
        }
    }
    let signable = SignableRequest::new(
        request.method().as_str(),
        url.as_str(),
        signed.into_iter(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| failed(&e.to_string()))?;
    let identity: Identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(scope.region)
        .name(scope.service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| failed(&e.to_string()))?
        .into();
    let (instructions, _signature) = sigv4(signable, &params)
        .map_err(|e| failed(&e.to_string()))?
        .into_parts();
    let (headers, _params) = instructions.into_parts();
    headers
        .into_iter()
        .map(|h| {
            let mut value = http::HeaderValue::from_str(h.value())
                .map_err(|_| failed("the signature is not a header value"))?;
            value.set_sensitive(true);
            Ok((h.name(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests;
