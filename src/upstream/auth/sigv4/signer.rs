//! SigV4 over the exact request sent (runtime contract §3 and §8): [`Signer::sign`] adds
//! `Authorization`, `X-Amz-Date` and, for temporary credentials,
//! `X-Amz-Security-Token` to a built `reqwest::Request` whose every other header and
//! body are final.
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
//!
//! How: a request of the gateway's shape (see [`canonical::applies`]) is canonicalised
//! by [`canonical`] and signed with the daily signing key `aws-sigv4` derives
//! (`generate_signing_key`), the final HMAC-SHA256 by `ring` (the crate's
//! `calculate_signature` computes the same HMAC in portable code, three times the
//! instructions), the key cached, ready for HMAC, per secret, date, region and
//! service (it changes once a day, not per request); any other request goes through
//! `aws_sigv4::http_request::sign` whole ([`sign_with_crate`]), which is also the
//! reference `tests/sigv4_signer_props.rs` holds the fast path to, byte for byte.

use std::borrow::Cow;
use std::sync::Mutex;
use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign as sigv4};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;

use super::canonical;
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

/// Signs requests, keeping the last daily signing key. Share one per credential source.
#[derive(Default)]
pub struct Signer {
    day_key: Mutex<Option<DayKey>>,
}

/// A daily signing key and what it was derived from.
struct DayKey {
    /// Whose secret (compared by value; `Credentials` shares, never prints, it).
    credentials: Credentials,
    /// `YYYYMMDD`.
    date: [u8; 8],
    region: String,
    service: String,
    /// The signing key, its HMAC pads already hashed.
    key: ring::hmac::Key,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").finish_non_exhaustive()
    }
}

/// The signature headers: `X-Amz-Date`, `Authorization` and the session token.
type SignatureHeaders = Vec<(&'static str, http::HeaderValue)>;

impl Signer {
    /// A signer with no key cached yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Signs `request` with `credentials` for `scope` at `time`, replacing any earlier
    /// signature: adds `Authorization`, `X-Amz-Date` and, for temporary credentials,
    /// `X-Amz-Security-Token` (all marked sensitive, so `Debug` never prints them). The
    /// body is the request's own (bytes; none is an empty body). The headers are
    /// byte for byte those of [`sign_with_crate`].
    ///
    /// # Errors
    /// A [`TokenError`] when the body is a stream, a header to sign is not visible ASCII
    /// or the URL has no host.
    pub fn sign(
        &self,
        request: &mut reqwest::Request,
        credentials: &Credentials,
        scope: Scope<'_>,
        time: SystemTime,
    ) -> Result<(), TokenError> {
        remove_signature(request);
        let headers = match canonical::Stamp::new(time) {
            Some(stamp) if canonical::applies(request.url()) => {
                self.signature_headers(request, credentials, scope, stamp, time)?
            }
            _ => crate_signature_headers(request, credentials, scope, time)?,
        };
        insert(request, headers);
        Ok(())
    }

    /// The headers that sign `request` (of the shape [`canonical::applies`] accepts).
    fn signature_headers(
        &self,
        request: &reqwest::Request,
        credentials: &Credentials,
        scope: Scope<'_>,
        stamp: canonical::Stamp,
        time: SystemTime,
    ) -> Result<SignatureHeaders, TokenError> {
        let body = body(request)?;
        let host = host(request.url())?;
        let mut signed = signed_headers(request, &host)?;
        signed.push(("x-amz-date", stamp.date_time()));
        if let Some(token) = credentials.session_token() {
            signed.push(("x-amz-security-token", token));
        }
        let creq = canonical::request(
            request.method().as_str(),
            request.url(),
            &mut signed,
            &canonical::sha256_hex(body),
        );
        let date = stamp.date();
        let string_to_sign = format!(
            "AWS4-HMAC-SHA256\n{}\n{date}/{}/{}/aws4_request\n{}",
            stamp.date_time(),
            scope.region,
            scope.service,
            canonical::sha256_hex(creq.request.as_bytes())
        );
        let key = self.day_key(credentials, &stamp, scope, time);
        let signature = canonical::hex(ring::hmac::sign(&key, string_to_sign.as_bytes()).as_ref());
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential={}/{date}/{}/{}/aws4_request, SignedHeaders={}, Signature={signature}",
            credentials.access_key_id(),
            scope.region,
            scope.service,
            creq.signed_headers,
        );
        let mut headers = vec![
            ("x-amz-date", stamp.date_time().to_owned()),
            ("authorization", authorization),
        ];
        if let Some(token) = credentials.session_token() {
            headers.push(("x-amz-security-token", token.to_owned()));
        }
        header_values(headers.iter().map(|(n, v)| (*n, v.as_str())))
    }

    /// The signing key of `credentials`' secret for `stamp`'s date and `scope`: the
    /// cached one when all four match, else derived (four HMACs) and cached.
    fn day_key(
        &self,
        credentials: &Credentials,
        stamp: &canonical::Stamp,
        scope: Scope<'_>,
        time: SystemTime,
    ) -> ring::hmac::Key {
        let date: [u8; 8] = stamp.date().as_bytes().try_into().expect("8 digits");
        // Nothing panics under the lock; were it poisoned, the key in it is still whole.
        let mut cached = self
            .day_key
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(k) = cached.as_ref()
            && k.date == date
            && k.region == scope.region
            && k.service == scope.service
            && k.credentials.secret_access_key() == credentials.secret_access_key()
        {
            return k.key.clone();
        }
        let derived = v4::generate_signing_key(
            credentials.secret_access_key(),
            time,
            scope.region,
            scope.service,
        );
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, derived.as_ref());
        *cached = Some(DayKey {
            credentials: credentials.clone(),
            date,
            region: scope.region.to_owned(),
            service: scope.service.to_owned(),
            key: key.clone(),
        });
        key
    }
}

/// Signs `request` as [`Signer::sign`] does, but wholly with
/// `aws_sigv4::http_request::sign` (no key cached): the reference the fast path is
/// tested against, and the signer of requests the fast path leaves out.
///
/// # Errors
/// As [`Signer::sign`]; also when the crate refuses the URL.
pub fn sign_with_crate(
    request: &mut reqwest::Request,
    credentials: &Credentials,
    scope: Scope<'_>,
    time: SystemTime,
) -> Result<(), TokenError> {
    remove_signature(request);
    let headers = crate_signature_headers(request, credentials, scope, time)?;
    insert(request, headers);
    Ok(())
}

fn remove_signature(request: &mut reqwest::Request) {
    let headers = request.headers_mut();
    for stale in ["authorization", "x-amz-date", "x-amz-security-token"] {
        headers.remove(stale);
    }
}

fn insert(request: &mut reqwest::Request, headers: SignatureHeaders) {
    for (name, value) in headers {
        request.headers_mut().insert(name, value);
    }
}

fn failed(what: &str) -> TokenError {
    TokenError::new(format!("cannot sign the request: {what}"))
}

/// The body of `request` (none: empty).
fn body(request: &reqwest::Request) -> Result<&[u8], TokenError> {
    match request.body() {
        None => Ok(&[]),
        Some(b) => b
            .as_bytes()
            .ok_or_else(|| failed("its body is a stream, not bytes")),
    }
}

/// The `host` header as signed: the URL's host, and its port when not the scheme's.
fn host(url: &url::Url) -> Result<Cow<'_, str>, TokenError> {
    let host = url
        .host_str()
        .ok_or_else(|| failed("the URL has no host"))?;
    Ok(match url.port() {
        Some(port) => Cow::Owned(format!("{host}:{port}")),
        None => Cow::Borrowed(host),
    })
}

/// `host`, then the headers of `request` that are signed, in their order.
fn signed_headers<'a>(
    request: &'a reqwest::Request,
    host: &'a str,
) -> Result<Vec<(&'a str, &'a str)>, TokenError> {
    let mut signed = Vec::with_capacity(8);
    signed.push(("host", host));
    for (name, value) in request.headers() {
        if is_signed_header(name.as_str()) {
            let value = value
                .to_str()
                .map_err(|_| failed(&format!("header {name} is not visible ASCII")))?;
            signed.push((name.as_str(), value));
        }
    }
    Ok(signed)
}

/// The headers that sign `request`, computed by `aws_sigv4::http_request::sign`.
fn crate_signature_headers(
    request: &reqwest::Request,
    credentials: &Credentials,
    scope: Scope<'_>,
    time: SystemTime,
) -> Result<SignatureHeaders, TokenError> {
    let body = body(request)?;
    let url = request.url();
    let host = host(url)?;
    let signed = signed_headers(request, &host)?;
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
    header_values(headers.iter().map(|h| (h.name(), h.value())))
}

/// `(name, value)` pairs as sensitive header values.
fn header_values<'a>(
    headers: impl Iterator<Item = (&'static str, &'a str)>,
) -> Result<SignatureHeaders, TokenError> {
    headers
        .map(|(name, value)| {
            let mut value = http::HeaderValue::from_str(value)
                .map_err(|_| failed("the signature is not a header value"))?;
            value.set_sensitive(true);
            Ok((name, value))
        })
        .collect()
}

#[cfg(test)]
mod tests;
