//! [`Credentials`]: how a request to the runtime is authenticated, whatever the kind of
//! runtime: no `Authorization` header, a static bearer token, OAuth client-credentials
//! tokens from a cache, the caller's own verified JWT, or an AWS SigV4 signature
//! ([`SigV4`](super::sigv4::SigV4)). Built from the settings by
//! [`from_settings`](super::build::from_settings).
//!
//! Every request to the runtime (each invocation attempt, StopRuntimeSession, any
//! later call a kind makes) is authenticated at one place,
//! [`Credentials::authorize`], on the built request whose headers and body are final.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};

use super::token::{StaticToken, TokenCache, TokenError, TokenSource};
use crate::executor::CallContext;

/// Why a task fails under `upstream.auth.kind = "forward"` when its call carried no
/// verified JWT (an API key, or a task resumed after a restart: tokens are never stored).
pub const NO_FORWARDABLE_TOKEN: &str = "upstream.auth.kind = \"forward\" sends the caller's own \
    verified JWT to the runtime, and this call has none (an API key is never forwarded): \
    call with a JWT bearer token";

/// How each request to the runtime is authenticated, and what a refusal means for it.
///
/// A sender builds the request with every header and the body final, then calls
/// [`authorize`](Self::authorize) on it, per attempt (a retry authorizes again: a
/// signature covers the time it was made). The default puts the bearer token
/// [`token`](Self::token) returns in `Authorization` (none: no header). When the
/// runtime answers 401, the sender asks [`on_unauthorized`](Self::on_unauthorized),
/// and for any other refusal [`on_rejected`](Self::on_rejected), once per request
/// whether a second attempt with fresh credentials may cure it; a second refusal fails
/// the request.
#[async_trait]
pub trait Credentials: Send + Sync + fmt::Debug + 'static {
    /// Authenticates `request` (built, every header and the body final, the body as
    /// bytes) on behalf of `caller`. Returns the bearer token it sent, if any: the
    /// sender redacts it from an error body and hands it to
    /// [`on_unauthorized`](Self::on_unauthorized).
    ///
    /// The default sets `Authorization: Bearer` (marked sensitive) from
    /// [`token`](Self::token).
    ///
    /// # Errors
    /// [`TokenError`] when no credentials can be had, or the request cannot be signed.
    async fn authorize(
        &self,
        request: &mut reqwest::Request,
        caller: &CallContext,
    ) -> Result<Option<SecretString>, TokenError> {
        let token = self.token(caller).await?;
        if let Some(t) = &token {
            let mut value =
                http::HeaderValue::from_str(&format!("Bearer {}", t.expose_secret()))
                    .map_err(|_| TokenError::new("the bearer token is not a valid header value"))?;
            value.set_sensitive(true);
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, value);
        }
        Ok(token)
    }

    /// The bearer token for a request made on behalf of `caller`, or `None` for no
    /// `Authorization` header. The sender also uses it to redact a token the runtime
    /// echoes back in an error body.
    ///
    /// # Errors
    /// [`TokenError`] when no token can be had (the token endpoint failed; no
    /// forwardable caller token).
    async fn token(&self, caller: &CallContext) -> Result<Option<SecretString>, TokenError>;

    /// The runtime refused `token` with 401: drops it where it is cached and says
    /// whether one more attempt (with [`token`](Self::token) asked again) may succeed.
    /// The default: no (a static or the caller's own token stays what it is).
    fn on_unauthorized(&self, token: &SecretString) -> bool {
        let _ = token;
        false
    }

    /// The runtime refused a request with `status` (not 401) and the AWS exception
    /// `error_type` (`x-amzn-ErrorType`), before any reply byte: drops what it
    /// blames and says whether one more attempt (authorized again) may succeed. The
    /// default: no. SigV4 says yes to `ExpiredTokenException` and
    /// `InvalidClientTokenId` (credentials expired or rotated).
    fn on_rejected(&self, status: u16, error_type: Option<&str>) -> bool {
        let _ = (status, error_type);
        false
    }

    /// Readiness: whether a token is obtainable now without a caller (for a cache, the
    /// cached one or one fetch through it). The default: always.
    ///
    /// # Errors
    /// The token endpoint's failure.
    async fn ready(&self) -> Result<(), TokenError> {
        Ok(())
    }
}

/// No `Authorization` header (a local runtime; `kind = "none"`).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCredentials;

#[async_trait]
impl Credentials for NoCredentials {
    async fn token(&self, _caller: &CallContext) -> Result<Option<SecretString>, TokenError> {
        Ok(None)
    }
}

/// One static bearer token (`kind = "bearer"`). A 401 with it fails the request. It
/// goes through a [`TokenCache`] like fetched tokens do, so `/metrics` counts its one
/// "fetch" as for any other source.
#[derive(Debug, Clone)]
pub struct StaticBearer {
    cache: Arc<TokenCache>,
}

impl StaticBearer {
    /// Sends `token` with every request.
    pub fn new(token: SecretString) -> Self {
        Self {
            cache: Arc::new(TokenCache::new(
                Arc::new(StaticToken::new(token)),
                Duration::ZERO,
            )),
        }
    }
}

#[async_trait]
impl Credentials for StaticBearer {
    async fn token(&self, _caller: &CallContext) -> Result<Option<SecretString>, TokenError> {
        Ok(Some(self.cache.get().await?))
    }

    async fn ready(&self) -> Result<(), TokenError> {
        self.cache.get().await.map(|_| ())
    }
}

/// Tokens from a [`TokenCache`] (single-flight refresh before expiry) over a
/// [`TokenSource`], such as OAuth client credentials (`kind = "oauth2"`). A 401
/// drops the cached token, and the next request fetches a new one.
#[derive(Debug, Clone)]
pub struct CachedToken {
    cache: Arc<TokenCache>,
}

impl CachedToken {
    /// Tokens from `source`, refreshed `refresh_before` their expiry.
    pub fn new(source: Arc<dyn TokenSource>, refresh_before: Duration) -> Self {
        Self {
            cache: Arc::new(TokenCache::new(source, refresh_before)),
        }
    }
}

#[async_trait]
impl Credentials for CachedToken {
    async fn token(&self, _caller: &CallContext) -> Result<Option<SecretString>, TokenError> {
        Ok(Some(self.cache.get().await?))
    }

    fn on_unauthorized(&self, token: &SecretString) -> bool {
        self.cache.invalidate(token);
        true
    }

    async fn ready(&self) -> Result<(), TokenError> {
        self.cache.get().await.map(|_| ())
    }
}

/// The caller's own verified JWT
/// ([`CallContext::caller_token`](crate::executor::CallContext::caller_token)), per
/// request (`kind = "forward"`). A call without one fails with
/// [`NO_FORWARDABLE_TOKEN`]; a 401 fails too (the runtime refused the caller's token).
#[derive(Debug, Default, Clone, Copy)]
pub struct ForwardCaller;

#[async_trait]
impl Credentials for ForwardCaller {
    async fn token(&self, caller: &CallContext) -> Result<Option<SecretString>, TokenError> {
        match &caller.caller_token {
            Some(t) => Ok(Some(t.secret().clone())),
            None => Err(TokenError::new(NO_FORWARDABLE_TOKEN)),
        }
    }
}
