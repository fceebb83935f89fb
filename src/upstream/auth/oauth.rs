//! OAuth 2.0 client-credentials token source (runtime contract §2.2), using the
//! `oauth2` crate: HTTP Basic client authentication, `grant_type=client_credentials`,
//! optional space-separated `scope`. The token endpoint is configured directly or
//! read once from an OIDC discovery document (`token_endpoint`) and cached.
//!
//! The answer is trusted only as RFC 6749 §5.1 describes it (documented in
//! `docs/upstream-contract.md` §2); anything else fails the fetch with a reason
//! saying what is wrong, instead of guessing:
//!
//! | Part of the answer | Accepted |
//! |---|---|
//! | status | exactly 200 (§5.1); any other status is an error answer (§5.2) |
//! | `Content-Type` | `application/json` (parameters allowed) |
//! | body | a JSON object of at most [`MAX_TOKEN_ANSWER_BYTES`] |
//! | `access_token` | a non-empty string of visible ASCII (usable in an `Authorization` header) |
//! | `token_type` | `Bearer`, in any case (§7.1, RFC 6750); required |
//! | `expires_in` | a number, or a string holding one, of seconds, `0` or more (at most 7 days believed; a lifetime within the refresh margin, `0` included, makes a token used for one request, [`super::token`]); missing or `null`: [`DEFAULT_TOKEN_LIFETIME`] (300 s) with a warning (the field is only RECOMMENDED); negative or anything else: an error |
//!
//! Failures become a [`TokenError`] whose reason names the status and a standard
//! OAuth `error` code or the fault in the answer; the endpoint's URL and transport
//! errors go to its log-only detail; never the secret or a token.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use oauth2::basic::{
    BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse,
    BasicTokenType,
};
use oauth2::{
    AccessToken, AuthType, ClientId, ClientSecret, HttpClientError, RefreshToken,
    RequestTokenError, Scope, StandardRevocableToken, TokenResponse, TokenUrl,
};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::settings::{OAuth2Settings, TokenEndpoint};
use super::token::{FetchedToken, TokenError, TokenSource};
use crate::log_url::LogUrl;

/// Lifetime assumed when `expires_in` is missing or unusable.
pub const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(300);
/// Longest lifetime believed, whatever `expires_in` says.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(7 * 86_400);
/// Largest token answer or discovery document read.
pub const MAX_TOKEN_ANSWER_BYTES: usize = 64 * 1024;
/// One token exchange (including discovery) must finish within this.
pub const TOKEN_FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// The token response, with `expires_in` kept as raw JSON so that strings and
/// garbage can be handled deliberately (the standard response type rejects them).
#[derive(Debug, Serialize, Deserialize)]
pub struct LenientTokenResponse {
    access_token: AccessToken,
    /// Raw, so that a missing or non-Bearer type is refused deliberately.
    #[serde(default)]
    token_type: Option<Value>,
    #[serde(default)]
    expires_in: Option<Value>,
    #[serde(default)]
    refresh_token: Option<RefreshToken>,
    #[serde(skip)]
    scopes: Option<Vec<Scope>>,
}

/// The only token type used (see [`LenientTokenResponse::token_type`]).
static BEARER: BasicTokenType = BasicTokenType::Bearer;

impl TokenResponse for LenientTokenResponse {
    type TokenType = BasicTokenType;

    fn access_token(&self) -> &AccessToken {
        &self.access_token
    }

    /// Always Bearer: an answer of another type is refused by [`check_answer`].
    fn token_type(&self) -> &BasicTokenType {
        &BEARER
    }

    fn expires_in(&self) -> Option<Duration> {
        interpret_expires_in(self.expires_in.as_ref()).ok()
    }

    fn refresh_token(&self) -> Option<&RefreshToken> {
        self.refresh_token.as_ref()
    }

    fn scopes(&self) -> Option<&Vec<Scope>> {
        self.scopes.as_ref()
    }
}

/// Checks a 200 answer's `token_type` and `access_token` (RFC 6749 §5.1, RFC 6750):
/// `Err(what is wrong)` for a missing or non-Bearer type, an empty token or one with
/// characters an `Authorization` header cannot carry.
pub fn check_answer(resp: &LenientTokenResponse) -> Result<(), &'static str> {
    match &resp.token_type {
        None | Some(Value::Null) => return Err("the token response lacks `token_type`"),
        Some(Value::String(t)) if t.eq_ignore_ascii_case("bearer") => {}
        Some(_) => return Err("the token response's `token_type` is not Bearer"),
    }
    let token = resp.access_token.secret();
    if token.is_empty() {
        return Err("the token response has an empty access_token");
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the token response's access_token has characters a bearer token cannot have");
    }
    Ok(())
}

/// Reads `expires_in`: `Ok(lifetime)` for a number of seconds of 0 or more (or a numeric
/// string),
/// `Err(why)` otherwise (missing or `null` → the caller uses
/// [`DEFAULT_TOKEN_LIFETIME`]; anything else fails the fetch).
pub fn interpret_expires_in(v: Option<&Value>) -> Result<Duration, &'static str> {
    let secs = match v {
        None | Some(Value::Null) => return Err("missing"),
        Some(Value::Number(n)) => n.as_f64().ok_or("not a number")?,
        Some(Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .map_err(|_| "a non-numeric string")?,
        Some(_) => return Err("not a number"),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err("negative");
    }
    Ok(Duration::from_secs_f64(
        secs.min(MAX_TOKEN_LIFETIME.as_secs_f64()),
    ))
}

type OAuthClient = oauth2::Client<
    BasicErrorResponse,
    LenientTokenResponse,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointSet,
>;

/// Fetches tokens with the client-credentials grant. No caching of tokens here
/// (that is [`TokenCache`](super::token::TokenCache)); only the discovered token
/// endpoint is cached.
pub struct OAuthClientCredentials {
    http: reqwest::Client,
    client_id: String,
    client_secret: SecretString,
    scopes: Vec<String>,
    endpoint: TokenEndpoint,
    discovered: tokio::sync::OnceCell<String>,
}

impl fmt::Debug for OAuthClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthClientCredentials")
            .field("client_id", &self.client_id)
            .field("client_secret", &"[redacted]")
            .field("scopes", &self.scopes)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl OAuthClientCredentials {
    /// A token source for `settings`, sending with `http` (which carries the CA roots
    /// and connect timeout).
    pub fn new(settings: &OAuth2Settings, http: reqwest::Client) -> Self {
        Self {
            http,
            client_id: settings.client_id.clone(),
            client_secret: settings.client_secret.clone(),
            scopes: settings
                .scope
                .as_deref()
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
            endpoint: settings.endpoint.clone(),
            discovered: tokio::sync::OnceCell::new(),
        }
    }

    /// The forms in which the client secret could come back in an error text: as
    /// is, form-encoded, and inside the HTTP Basic credentials (plain and with the
    /// RFC 6749 §2.3.1 form-encoding of id and secret).
    fn redactions(&self) -> Vec<String> {
        use base64::Engine;
        let secret = self.client_secret.expose_secret();
        const FORM: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
            .remove(b'-')
            .remove(b'.')
            .remove(b'_')
            .remove(b'*');
        let enc = |v: &str| percent_encoding::utf8_percent_encode(v, FORM).to_string();
        let b64 = base64::engine::general_purpose::STANDARD;
        vec![
            secret.to_owned(),
            enc(secret),
            b64.encode(format!("{}:{}", self.client_id, secret)),
            b64.encode(format!("{}:{}", enc(&self.client_id), enc(secret))),
        ]
    }

    async fn token_url(&self) -> Result<String, TokenError> {
        match &self.endpoint {
            TokenEndpoint::Url(u) => Ok(u.clone()),
            TokenEndpoint::Discovery(d) => self
                .discovered
                .get_or_try_init(|| self.discover(d))
                .await
                .cloned(),
        }
    }

    async fn discover(&self, url: &str) -> Result<String, TokenError> {
        let fail = |what: &str, detail: String| {
            tracing::warn!(discovery_url = %LogUrl(url), reason = what, %detail, "OAuth discovery failed");
            TokenError::new(format!("the OAuth discovery document {what}"))
                .with_detail(format!("{}: {detail}", LogUrl(url)))
        };
        let resp = self
            .http
            .get(url)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| fail("is unreachable", crate::upstream::errors::describe(&e)))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(fail(
                &format!("answered HTTP {}", status.as_u16()),
                String::new(),
            ));
        }
        let body = read_capped(resp)
            .await
            .map_err(|e| fail("could not be read", e))?;
        let doc: Value = serde_json::from_slice(&body)
            .map_err(|_| fail("is not JSON", format!("{} bytes", body.len())))?;
        match doc.get("token_endpoint").and_then(Value::as_str) {
            Some(t) if t.starts_with("https://") || t.starts_with("http://") => {
                tracing::info!(
                    discovery_url = %LogUrl(url),
                    token_endpoint = %LogUrl(t),
                    "discovered the OAuth token endpoint"
                );
                Ok(t.to_owned())
            }
            _ => Err(fail("has no `token_endpoint` URL", String::new())),
        }
    }

    async fn exchange(&self) -> Result<FetchedToken, TokenError> {
        let url = self.token_url().await?;
        let token_url = TokenUrl::new(url.clone()).map_err(|_| {
            TokenError::new("the upstream token endpoint is not a valid URL")
                .with_detail(url.clone())
        })?;
        let client: OAuthClient = oauth2::Client::new(ClientId::new(self.client_id.clone()))
            .set_client_secret(ClientSecret::new(
                self.client_secret.expose_secret().to_owned(),
            ))
            .set_auth_type(AuthType::BasicAuth)
            .set_token_uri(token_url);
        let seen = Arc::new(Mutex::new(Answer::default()));
        let http = self.http.clone();
        let record = seen.clone();
        let send = move |req: oauth2::HttpRequest| {
            let http = http.clone();
            let record = record.clone();
            async move {
                let req = reqwest::Request::try_from(req)
                    .map_err(|e| HttpClientError::Reqwest(Box::new(e)))?;
                let resp = http
                    .execute(req)
                    .await
                    .map_err(|e| HttpClientError::Reqwest(Box::new(e)))?;
                let content_type = resp
                    .headers()
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                {
                    let mut r = record.lock().expect("answer lock");
                    r.status = Some(resp.status().as_u16());
                    r.json = content_type.as_deref().is_some_and(is_json_media_type);
                }
                let mut b = http::Response::builder().status(resp.status());
                for (k, v) in resp.headers() {
                    b = b.header(k, v);
                }
                let body = match read_capped(resp).await {
                    Ok(body) => body,
                    Err(e) => {
                        record.lock().expect("answer lock").unreadable = Some(e.clone());
                        return Err(HttpClientError::Other(e));
                    }
                };
                b.body(body).map_err(HttpClientError::Http)
            }
        };
        let result = client
            .exchange_client_credentials()
            .add_scopes(self.scopes.iter().cloned().map(Scope::new))
            .request_async(&send)
            .await;
        let answer = seen.lock().expect("answer lock").clone();
        // Client-visible reasons (task status, /readyz) name the status and a
        // standard OAuth error code or the fault in the answer only: never the
        // endpoint's URL or its free text, which an echoing endpoint could fill with
        // the credentials it received. The URL goes to the log-only detail.
        let at = |what: &str| {
            let status = answer
                .status
                .map(|s| format!("HTTP {s}"))
                .unwrap_or_else(|| "no answer".into());
            tracing::warn!(token_endpoint = %LogUrl(&url), %status, reason = %what, "token request failed");
            TokenError::new(format!(
                "the upstream token endpoint failed ({status}): {what}"
            ))
            .with_detail(format!("token endpoint {}", LogUrl(&url)))
        };
        match result {
            Ok(resp) => {
                if !answer.json {
                    return Err(at("the token response is not declared application/json"));
                }
                check_answer(&resp).map_err(at)?;
                let lifetime = match interpret_expires_in(resp.expires_in.as_ref()) {
                    Ok(l) => l,
                    Err("missing") => {
                        tracing::warn!(
                            token_endpoint = %LogUrl(&url),
                            default_secs = DEFAULT_TOKEN_LIFETIME.as_secs(),
                            "token response has no expires_in; assuming the default lifetime"
                        );
                        DEFAULT_TOKEN_LIFETIME
                    }
                    Err(_) => {
                        return Err(at(
                            "the token response's `expires_in` is not a number of seconds of 0 or more",
                        ));
                    }
                };
                tracing::debug!(token_endpoint = %LogUrl(&url), lifetime_secs = lifetime.as_secs(), "fetched an access token");
                Ok(FetchedToken {
                    token: SecretString::from(resp.access_token.secret().clone()),
                    lifetime: Some(lifetime),
                })
            }
            Err(RequestTokenError::ServerResponse(e)) => {
                let code = e.error().to_string();
                let what = if STANDARD_OAUTH_ERRORS.contains(&code.as_str()) {
                    format!("OAuth error `{code}`")
                } else {
                    "a non-standard OAuth error code".to_owned()
                };
                if let Some(d) = e.error_description() {
                    tracing::debug!(
                        token_endpoint = %LogUrl(&url),
                        description = %redact(d, &self.redactions()),
                        "token endpoint error description"
                    );
                }
                Err(at(&what))
            }
            Err(RequestTokenError::Request(e)) => {
                if let Some(why) = answer.unreadable {
                    return Err(at(&why));
                }
                let why = redact(&crate::upstream::errors::describe(&e), &self.redactions());
                tracing::warn!(token_endpoint = %LogUrl(&url), error = %why, "token endpoint unreachable");
                Err(
                    TokenError::new("the upstream token endpoint is unreachable")
                        .with_detail(format!("token endpoint {}: {why}", LogUrl(&url))),
                )
            }
            Err(RequestTokenError::Parse(e, _body)) => {
                if answer.status != Some(200) {
                    // oauth2 reads every other status as a §5.2 error answer.
                    return Err(at("the answer is not an OAuth error response"));
                }
                // Only the field path and the kind of problem: serde's text may quote values.
                let inner = e.inner();
                let what = if inner.is_syntax() || inner.is_eof() {
                    "the response is not JSON".to_owned()
                } else if inner.to_string().starts_with("missing field") {
                    format!(
                        "the token response lacks `{}`",
                        missing_field(&inner.to_string())
                    )
                } else {
                    format!(
                        "the token response has an unexpected value at `{}`",
                        e.path()
                    )
                };
                Err(at(&what))
            }
            Err(RequestTokenError::Other(s)) => {
                // oauth2's own text (it quotes the endpoint's Content-Type): log only.
                tracing::warn!(token_endpoint = %LogUrl(&url), error = %s, "token answer refused");
                let what = if answer.status == Some(200) && !answer.json {
                    "the token response is not declared application/json"
                } else if s.contains("empty") {
                    "the answer has an empty body"
                } else {
                    "the answer is not a token response"
                };
                Err(at(what))
            }
        }
    }
}

/// What the send function saw of the token endpoint's answer.
#[derive(Debug, Clone, Default)]
struct Answer {
    status: Option<u16>,
    /// The declared `Content-Type` is `application/json`.
    json: bool,
    /// Why the body could not be read (too large, broke off).
    unreadable: Option<String>,
}

/// `application/json` or a `+json` type, parameters ignored, any case.
fn is_json_media_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The body, at most [`MAX_TOKEN_ANSWER_BYTES`].
async fn read_capped(mut resp: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| {
        format!(
            "the answer broke off: {}",
            crate::upstream::errors::describe(&e)
        )
    })? {
        if body.len() + chunk.len() > MAX_TOKEN_ANSWER_BYTES {
            return Err(format!(
                "the answer is larger than {} KiB",
                MAX_TOKEN_ANSWER_BYTES / 1024
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The error codes of RFC 6749 §5.2; anything else is not repeated to clients.
const STANDARD_OAUTH_ERRORS: [&str; 6] = [
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
];

/// `text` with every occurrence of each of `secrets` replaced by `[redacted]`.
fn redact(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|s| !s.is_empty())
        .fold(text.to_owned(), |t, s| t.replace(s.as_str(), "[redacted]"))
}

fn missing_field(msg: &str) -> String {
    msg.split('`')
        .nth(1)
        .unwrap_or("a required field")
        .to_owned()
}

#[async_trait]
impl TokenSource for OAuthClientCredentials {
    async fn fetch(&self) -> Result<FetchedToken, TokenError> {
        match tokio::time::timeout(TOKEN_FETCH_TIMEOUT, self.exchange()).await {
            Ok(r) => r,
            Err(_) => Err(TokenError::new(format!(
                "the upstream token endpoint did not answer within {} s",
                TOKEN_FETCH_TIMEOUT.as_secs()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expires_in_is_read_deliberately() {
        let d = |v: Value| interpret_expires_in(Some(&v));
        assert_eq!(d(json!(3600)), Ok(Duration::from_secs(3600)));
        assert_eq!(d(json!("3600")), Ok(Duration::from_secs(3600)));
        assert_eq!(d(json!(59.5)), Ok(Duration::from_millis(59_500)));
        assert_eq!(d(json!(10_000_000)), Ok(MAX_TOKEN_LIFETIME));
        assert_eq!(d(json!(0)), Ok(Duration::ZERO), "used once, not cached");
        assert!(d(json!(-5)).is_err());
        assert!(d(json!("soon")).is_err());
        assert!(d(json!({"a": 1})).is_err());
        assert!(d(Value::Null).is_err());
        assert!(interpret_expires_in(None).is_err());
    }
}
