//! [`CredentialCache`]: when to fetch AWS credentials, separate from how (the chain's
//! provider, which does not cache: each call fetches). Modelled on the bearer
//! [`TokenCache`](crate::upstream::auth::TokenCache):
//!
//! - Credentials are reused until `refresh_before` before their expiry (counted from
//!   the moment their fetch started); credentials without an expiry (static keys)
//!   are fetched once. Credentials whose whole lifetime is not longer than
//!   `refresh_before` are refreshed after half their lifetime.
//! - Single flight: any number of concurrent [`CredentialCache::get`] calls on an
//!   empty or stale cache cause one fetch; the others wait for it.
//! - A refresh that fails while the cached credentials are still valid keeps them in
//!   use (logged once per spell of failures, counted as
//!   `a2a_upstream_credential_fetches_total{outcome="kept"}`); expired credentials are
//!   never returned. A failure starts a short backoff (1 s, doubling, at most 30 s)
//!   during which callers get the same answer without a new fetch.
//! - [`CredentialCache::invalidate`] drops credentials the service refused
//!   (`ExpiredTokenException`, `InvalidClientTokenId`).
//!
//! Time is `tokio::time::Instant`, so tests drive it with paused time; the expiry the
//! provider reports (wall clock) is turned into a lifetime once, at fetch.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use tokio::time::Instant;

use crate::telemetry::metrics::UPSTREAM_CREDENTIAL_FETCHES;
use crate::upstream::auth::TokenError;

/// Longest wait for one fetch through the chain (a credential endpoint that hangs).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// First backoff after a failed fetch.
const BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// Longest backoff after consecutive failed fetches.
const BACKOFF_MAX: Duration = Duration::from_secs(30);

struct Cached {
    credentials: Credentials,
    /// From here on, `get` fetches new credentials.
    refresh_at: Instant,
    /// When they really expire (`None`: never).
    expires_at: Option<Instant>,
}

impl Cached {
    fn valid(&self, now: Instant) -> bool {
        self.expires_at.is_none_or(|e| now < e)
    }
}

struct Failure {
    error: TokenError,
    retry_at: Instant,
    consecutive: u32,
}

#[derive(Default)]
struct State {
    current: Option<Cached>,
    failure: Option<Failure>,
    /// Whether the current spell of failed refreshes was logged.
    warned: bool,
}

/// AWS credentials cached in front of a provider of the chain. Share it with `Arc`.
pub struct CredentialCache {
    provider: SharedCredentialsProvider,
    refresh_before: Duration,
    state: Mutex<State>,
    /// Held (across `.await`) by the one caller that fetches.
    fetch: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for CredentialCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialCache")
            .field("refresh_before", &self.refresh_before)
            .finish_non_exhaustive()
    }
}

impl CredentialCache {
    /// A cache over `provider`, refreshing `refresh_before` ahead of expiry.
    pub fn new(provider: SharedCredentialsProvider, refresh_before: Duration) -> Self {
        for outcome in ["ok", "error", "kept"] {
            metrics::counter!(UPSTREAM_CREDENTIAL_FETCHES, "outcome" => outcome).increment(0);
        }
        Self {
            provider,
            refresh_before,
            state: Mutex::new(State::default()),
            fetch: tokio::sync::Mutex::new(()),
        }
    }

    /// Valid credentials: the cached ones while fresh, else one fetch shared by all
    /// concurrent callers.
    ///
    /// # Errors
    /// Why the chain found no credentials (also returned, without a new fetch, during
    /// the backoff after a failure), unless still-valid cached ones can be used.
    pub async fn get(&self) -> Result<Credentials, TokenError> {
        if let Some(c) = self.fresh(Instant::now()) {
            return Ok(c);
        }
        let _single_flight = self.fetch.lock().await;
        let now = Instant::now();
        if let Some(c) = self.fresh(now) {
            return Ok(c);
        }
        if let Some(answer) = self.backing_off(now) {
            return answer;
        }
        let started = Instant::now();
        let fetched =
            match tokio::time::timeout(FETCH_TIMEOUT, self.provider.provide_credentials()).await {
                Ok(Ok(c)) => Ok(c),
                Ok(Err(e)) => Err(TokenError::new(
                    "no AWS credentials could be obtained from the chain",
                )
                .with_detail(crate::upstream::errors::describe(&e))),
                Err(_) => Err(TokenError::new(format!(
                    "the AWS credential chain did not answer within {} s",
                    FETCH_TIMEOUT.as_secs()
                ))),
            };
        let mut state = self.state.lock().expect("credential state lock");
        match fetched {
            Ok(credentials) => {
                metrics::counter!(UPSTREAM_CREDENTIAL_FETCHES, "outcome" => "ok").increment(1);
                let expires_at = credentials.expiry().map(|at| {
                    started
                        + at.duration_since(SystemTime::now())
                            .unwrap_or(Duration::ZERO)
                });
                let refresh_at = match expires_at {
                    None => started + Duration::from_secs(100 * 365 * 24 * 3600),
                    Some(e) => {
                        let lifetime = e - started;
                        if lifetime > self.refresh_before {
                            e - self.refresh_before
                        } else {
                            started + lifetime / 2
                        }
                    }
                };
                tracing::debug!(
                    aws.access_key_id = credentials.access_key_id(),
                    expires_in_s = expires_at.map(|e| (e - started).as_secs()),
                    "fetched AWS credentials"
                );
                state.current = Some(Cached {
                    credentials: credentials.clone(),
                    refresh_at,
                    expires_at,
                });
                state.failure = None;
                state.warned = false;
                Ok(credentials)
            }
            Err(error) => {
                let consecutive = state.failure.as_ref().map_or(1, |f| f.consecutive + 1);
                let backoff = BACKOFF_INITIAL
                    .saturating_mul(1 << (consecutive - 1).min(5))
                    .min(BACKOFF_MAX);
                state.failure = Some(Failure {
                    error: error.clone(),
                    retry_at: now + backoff,
                    consecutive,
                });
                let kept = state
                    .current
                    .as_ref()
                    .filter(|c| c.valid(now))
                    .map(|c| c.credentials.clone());
                match kept {
                    Some(credentials) => {
                        metrics::counter!(UPSTREAM_CREDENTIAL_FETCHES, "outcome" => "kept")
                            .increment(1);
                        if !state.warned {
                            state.warned = true;
                            tracing::warn!(
                                reason = %error,
                                "refreshing the AWS credentials failed; the cached ones stay in use until they expire"
                            );
                        }
                        Ok(credentials)
                    }
                    None => {
                        metrics::counter!(UPSTREAM_CREDENTIAL_FETCHES, "outcome" => "error")
                            .increment(1);
                        state.current = None;
                        Err(error)
                    }
                }
            }
        }
    }

    /// Drops the cached credentials (the service refused them as expired or
    /// unknown), so the next [`get`](Self::get) fetches at once.
    pub fn invalidate(&self) {
        let mut state = self.state.lock().expect("credential state lock");
        state.current = None;
        state.failure = None;
    }

    fn fresh(&self, now: Instant) -> Option<Credentials> {
        let state = self.state.lock().expect("credential state lock");
        state
            .current
            .as_ref()
            .filter(|c| now < c.refresh_at && c.valid(now))
            .map(|c| c.credentials.clone())
    }

    /// During a failure's backoff: the still-valid cached credentials, or the error.
    fn backing_off(&self, now: Instant) -> Option<Result<Credentials, TokenError>> {
        let state = self.state.lock().expect("credential state lock");
        let failure = state.failure.as_ref().filter(|f| now < f.retry_at)?;
        Some(match state.current.as_ref().filter(|c| c.valid(now)) {
            Some(c) => Ok(c.credentials.clone()),
            None => Err(failure.error.clone()),
        })
    }
}

#[cfg(test)]
mod tests;
