//! The bearer-token cache: when to fetch a token, separate from how (runtime
//! contract §2.3, pitfalls §6 #1).
//!
//! - A token is reused until `refresh_before` before it expires; its lifetime is
//!   counted from the moment the fetch **started** (conservative).
//! - A token whose whole lifetime is at most `refresh_before` (an `expires_in` of 10
//!   with the default 30 s margin, or of 0) is never cached: it serves the request
//!   that fetched it (and the callers that waited on that same fetch), and the next
//!   request fetches again. One fetch per request, never a loop.
//! - Single flight: any number of concurrent [`TokenCache::get`] calls on an empty or
//!   stale cache cause exactly one [`TokenSource::fetch`]; the others wait for it.
//! - A failed fetch starts a short backoff (1 s, doubling per consecutive failure, at
//!   most 30 s) shared by all callers: during it they get the same error without a
//!   new request, so a failing token endpoint is not hammered. If the previous token
//!   has not actually expired yet, it is still returned.
//! - [`TokenCache::invalidate`] drops a token the upstream rejected (401).
//!
//! Time is `tokio::time::Instant`, so tests drive it with paused time.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use tokio::time::Instant;

/// First backoff after a failed fetch.
pub const FAILURE_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// Longest backoff after consecutive failed fetches.
pub const FAILURE_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Why no token could be had. The reason names what failed (the endpoint is
/// unreachable, its HTTP status, a standard OAuth error code, what is wrong with its
/// answer) and is what a remote caller may see; the detail (the endpoint's URL, the
/// transport's error chain) is for the log only. Neither holds the client secret or
/// a token. Cheap to clone, because every caller waiting on one failed fetch gets
/// the same error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenError {
    reason: String,
    detail: Option<String>,
}

impl TokenError {
    /// An error with the given caller-safe reason (no secret, URL, address or OS error).
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            detail: None,
        }
    }

    /// The same error with a log-only `detail` (which must not contain secrets).
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// The caller-safe reason text.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The log-only detail, if any.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }
}

/// The reason, then the log-only detail in parentheses.
impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)?;
        if let Some(d) = &self.detail {
            write!(f, " ({d})")?;
        }
        Ok(())
    }
}

impl std::error::Error for TokenError {}

/// A freshly fetched token.
pub struct FetchedToken {
    /// The bearer token.
    pub token: SecretString,
    /// How long it is valid from the start of the fetch; `None`: it does not expire
    /// (a static token).
    pub lifetime: Option<Duration>,
}

impl fmt::Debug for FetchedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FetchedToken")
            .field("token", &"[redacted]")
            .field("lifetime", &self.lifetime)
            .finish()
    }
}

/// How to fetch a token (one HTTP exchange, no caching).
#[async_trait]
pub trait TokenSource: Send + Sync + fmt::Debug + 'static {
    /// Fetches a new token.
    ///
    /// # Errors
    /// A [`TokenError`] naming the endpoint and what it answered.
    async fn fetch(&self) -> Result<FetchedToken, TokenError>;

    /// Whether a fetch calls a token endpoint, and so is counted in
    /// `a2a_upstream_token_fetches_total` and its duration histogram (a static token,
    /// configured or read from its file, is not: nothing is fetched).
    fn calls_an_endpoint(&self) -> bool {
        true
    }
}

struct Cached {
    token: SecretString,
    /// From here on, `get` fetches a new token.
    refresh_at: Instant,
    /// When the token really expires (`None`: never).
    expires_at: Option<Instant>,
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
    /// Fetches finished so far; a caller notes it on entry, so it can tell a fetch it
    /// waited on from one that ended before it came.
    fetches: u64,
    /// The token of the last fetch when it was too short-lived to cache, with that
    /// fetch's number: handed only to callers that entered before it ended.
    one_shot: Option<(u64, SecretString)>,
}

/// A cached bearer token in front of a [`TokenSource`]. Share it with `Arc`.
pub struct TokenCache {
    source: Arc<dyn TokenSource>,
    refresh_before: Duration,
    state: Mutex<State>,
    /// Held (across `.await`) by the one caller that fetches.
    fetch: tokio::sync::Mutex<()>,
}

impl fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCache")
            .field("source", &self.source)
            .field("refresh_before", &self.refresh_before)
            .finish_non_exhaustive()
    }
}

impl TokenCache {
    /// A cache over `source` that refreshes `refresh_before` ahead of expiry. A token
    /// whose whole lifetime is not longer than `refresh_before` is not cached (see the
    /// module docs).
    pub fn new(source: Arc<dyn TokenSource>, refresh_before: Duration) -> Self {
        // Both outcomes exist from the first scrape (an error rate of 0 is not "no data").
        if source.calls_an_endpoint() {
            for outcome in ["ok", "error"] {
                metrics::counter!("a2a_upstream_token_fetches_total", "outcome" => outcome)
                    .increment(0);
            }
        }
        Self {
            source,
            refresh_before,
            state: Mutex::new(State::default()),
            fetch: tokio::sync::Mutex::new(()),
        }
    }

    /// A valid token: the cached one while fresh, else one new fetch shared by all
    /// concurrent callers.
    ///
    /// # Errors
    /// The fetch's [`TokenError`] (also returned, without a new fetch, to every caller
    /// during the backoff that follows a failure), unless an unexpired older token
    /// can still be used.
    pub async fn get(&self) -> Result<SecretString, TokenError> {
        let entered = self.state.lock().expect("token state lock").fetches;
        if let Some(t) = self.fresh(Instant::now()) {
            return Ok(t);
        }
        let _single_flight = self.fetch.lock().await;
        let now = Instant::now();
        if let Some(t) = self.fresh(now) {
            return Ok(t);
        }
        if let Some(t) = self.one_shot_since(entered) {
            return Ok(t);
        }
        if let Some(err) = self.backing_off(now) {
            return self.unexpired(now).ok_or(err);
        }
        let started = Instant::now();
        let result = tracing::Instrument::instrument(
            self.source.fetch(),
            tracing::info_span!("upstream.token_fetch"),
        )
        .await;
        let outcome = if result.is_ok() { "ok" } else { "error" };
        if self.source.calls_an_endpoint() {
            metrics::counter!("a2a_upstream_token_fetches_total", "outcome" => outcome)
                .increment(1);
            metrics::histogram!("a2a_upstream_token_fetch_duration_seconds", "outcome" => outcome)
                .record(started.elapsed().as_secs_f64());
        }
        match result {
            Ok(fetched) => {
                let token = fetched.token.clone();
                let mut st = self.state.lock().expect("token state lock");
                st.failure = None;
                st.fetches += 1;
                st.one_shot = None;
                let (refresh_at, expires_at) = match fetched.lifetime {
                    None => (None, None),
                    Some(life) if life <= self.refresh_before => {
                        tracing::debug!(
                            lifetime_ms = life.as_millis() as u64,
                            "the token lives no longer than the refresh margin; used once, not cached"
                        );
                        st.one_shot = Some((st.fetches, fetched.token));
                        return Ok(token);
                    }
                    Some(life) => (
                        Some(started + (life - self.refresh_before)),
                        Some(started + life),
                    ),
                };
                st.current = Some(Cached {
                    token: fetched.token,
                    // A token without expiry is refreshed only when invalidated.
                    refresh_at: refresh_at.unwrap_or_else(far_future),
                    expires_at,
                });
                Ok(token)
            }
            Err(error) => {
                let now = Instant::now();
                let mut st = self.state.lock().expect("token state lock");
                st.fetches += 1;
                st.one_shot = None;
                let consecutive = st.failure.as_ref().map_or(0, |f| f.consecutive) + 1;
                let backoff = FAILURE_BACKOFF_INITIAL
                    .saturating_mul(1u32 << (consecutive - 1).min(16))
                    .min(FAILURE_BACKOFF_MAX);
                tracing::warn!(
                    error = %error,
                    backoff_ms = backoff.as_millis() as u64,
                    "token fetch failed; callers get this error until the backoff ends"
                );
                st.failure = Some(Failure {
                    error: error.clone(),
                    retry_at: now + backoff,
                    consecutive,
                });
                drop(st);
                self.unexpired(now).ok_or(error)
            }
        }
    }

    /// Drops `rejected` if it is still the cached token (the upstream answered 401),
    /// so the next [`get`](Self::get) fetches. A newer token is left alone.
    pub fn invalidate(&self, rejected: &SecretString) {
        let mut st = self.state.lock().expect("token state lock");
        if st
            .one_shot
            .as_ref()
            .is_some_and(|(_, t)| t.expose_secret() == rejected.expose_secret())
        {
            st.one_shot = None;
        }
        if st
            .current
            .as_ref()
            .is_some_and(|c| c.token.expose_secret() == rejected.expose_secret())
        {
            st.current = None;
        }
    }

    /// The uncached token of a fetch that ended after the caller entered (at
    /// `entered` fetches): the fetch it waited on.
    fn one_shot_since(&self, entered: u64) -> Option<SecretString> {
        let st = self.state.lock().expect("token state lock");
        st.one_shot
            .as_ref()
            .filter(|(fetch, _)| *fetch > entered)
            .map(|(_, t)| t.clone())
    }

    fn fresh(&self, now: Instant) -> Option<SecretString> {
        let st = self.state.lock().expect("token state lock");
        st.current
            .as_ref()
            .filter(|c| now < c.refresh_at)
            .map(|c| c.token.clone())
    }

    /// The cached token if it has not actually expired (used while refreshing fails).
    fn unexpired(&self, now: Instant) -> Option<SecretString> {
        let st = self.state.lock().expect("token state lock");
        st.current
            .as_ref()
            .filter(|c| c.expires_at.is_none_or(|e| now < e))
            .map(|c| c.token.clone())
    }

    fn backing_off(&self, now: Instant) -> Option<TokenError> {
        let st = self.state.lock().expect("token state lock");
        st.failure.as_ref().filter(|f| now < f.retry_at).map(|f| {
            let left = f.retry_at - now;
            TokenError {
                reason: format!(
                    "{} (token endpoint failing; next attempt in {})",
                    f.error.reason,
                    crate::upstream::text::fmt_duration(Duration::from_secs(left.as_secs().max(1)))
                ),
                detail: f.error.detail.clone(),
            }
        })
    }
}

fn far_future() -> Instant {
    // About 30 years: `Instant + Duration` must not overflow.
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

/// A [`TokenSource`] that always returns the same token (`auth.kind = "bearer"`).
pub struct StaticToken(SecretString);

impl StaticToken {
    /// Wraps a configured token.
    pub fn new(token: SecretString) -> Self {
        Self(token)
    }
}

impl fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StaticToken([redacted])")
    }
}

#[async_trait]
impl TokenSource for StaticToken {
    async fn fetch(&self) -> Result<FetchedToken, TokenError> {
        Ok(FetchedToken {
            token: self.0.clone(),
            lifetime: None,
        })
    }

    fn calls_an_endpoint(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug)]
    struct Counting {
        calls: AtomicUsize,
        lifetime: Option<Duration>,
        fail: bool,
        delay: Duration,
    }

    #[async_trait]
    impl TokenSource for Counting {
        async fn fetch(&self) -> Result<FetchedToken, TokenError> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(self.delay).await;
            if self.fail {
                return Err(TokenError::new("token endpoint answered HTTP 503"));
            }
            Ok(FetchedToken {
                token: SecretString::from(format!("tok-{n}")),
                lifetime: self.lifetime,
            })
        }
    }

    fn source(lifetime: Option<Duration>, fail: bool) -> Arc<Counting> {
        Arc::new(Counting {
            calls: AtomicUsize::new(0),
            lifetime,
            fail,
            delay: Duration::from_millis(50),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn refreshes_exactly_once_at_margin_before_expiry() {
        let src = source(Some(Duration::from_secs(3600)), false);
        let cache = TokenCache::new(src.clone(), Duration::from_secs(30));
        assert_eq!(cache.get().await.unwrap().expose_secret(), "tok-1");
        // The fetch took 50 ms of (paused) time; the token counts from its start.
        let start = Instant::now() - Duration::from_millis(50);
        tokio::time::sleep_until(start + Duration::from_secs(3570) - Duration::from_millis(1))
            .await;
        for _ in 0..5 {
            assert_eq!(cache.get().await.unwrap().expose_secret(), "tok-1");
        }
        assert_eq!(src.calls.load(Ordering::SeqCst), 1);
        tokio::time::sleep_until(start + Duration::from_secs(3570)).await;
        let mut handles = Vec::new();
        let cache = Arc::new(cache);
        for _ in 0..20 {
            let c = cache.clone();
            handles.push(tokio::spawn(async move {
                c.get().await.unwrap().expose_secret().to_owned()
            }));
        }
        for h in handles {
            assert_eq!(h.await.unwrap(), "tok-2");
        }
        assert_eq!(src.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn hundred_concurrent_gets_on_cold_cache_fetch_once() {
        let src = source(Some(Duration::from_secs(3600)), false);
        let cache = Arc::new(TokenCache::new(src.clone(), Duration::from_secs(30)));
        let gets = (0..100).map(|_| {
            let c = cache.clone();
            tokio::spawn(async move { c.get().await.map(|t| t.expose_secret().to_owned()) })
        });
        for r in futures::future::join_all(gets).await {
            assert_eq!(r.unwrap().unwrap(), "tok-1");
        }
        assert_eq!(src.calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lifetime_within_the_margin_serves_one_request_and_is_not_cached() {
        for secs in [10, 30, 0] {
            let src = source(Some(Duration::from_secs(secs)), false);
            let cache = TokenCache::new(src.clone(), Duration::from_secs(30));
            assert_eq!(cache.get().await.unwrap().expose_secret(), "tok-1");
            // The next request, at once, fetches again: one fetch per request.
            assert_eq!(cache.get().await.unwrap().expose_secret(), "tok-2");
            assert_eq!(cache.get().await.unwrap().expose_secret(), "tok-3");
            assert_eq!(src.calls.load(Ordering::SeqCst), 3, "expires_in {secs}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_callers_share_one_fetch_of_a_short_lived_token() {
        let src = source(Some(Duration::from_secs(10)), false);
        let cache = Arc::new(TokenCache::new(src.clone(), Duration::from_secs(30)));
        let gets = (0..50).map(|_| {
            let c = cache.clone();
            tokio::spawn(async move { c.get().await.map(|t| t.expose_secret().to_owned()) })
        });
        for r in futures::future::join_all(gets).await {
            assert_eq!(r.unwrap().unwrap(), "tok-1");
        }
        assert_eq!(src.calls.load(Ordering::SeqCst), 1, "single flight holds");
        // A request after that flight ended does not get its token.
        assert_eq!(cache.get().await.unwrap().expose_secret(), "tok-2");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lifetime_just_over_the_margin_is_cached_until_the_margin() {
        let src = source(Some(Duration::from_secs(31)), false);
        let cache = TokenCache::new(src.clone(), Duration::from_secs(30));
        cache.get().await.unwrap();
        cache.get().await.unwrap();
        assert_eq!(src.calls.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_secs(1)).await;
        cache.get().await.unwrap();
        assert_eq!(src.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_for_everyone() {
        let src = source(Some(Duration::from_secs(3600)), true);
        let cache = Arc::new(TokenCache::new(src.clone(), Duration::from_secs(30)));
        let gets = (0..50).map(|_| {
            let c = cache.clone();
            tokio::spawn(async move { c.get().await })
        });
        for r in futures::future::join_all(gets).await {
            let e = r.unwrap().unwrap_err();
            assert!(e.reason().contains("HTTP 503"), "{e}");
        }
        assert_eq!(src.calls.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_millis(500)).await;
        let e = cache.get().await.unwrap_err();
        assert!(e.reason().contains("next attempt in"), "{e}");
        assert_eq!(src.calls.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_secs(1)).await;
        cache.get().await.unwrap_err();
        assert_eq!(src.calls.load(Ordering::SeqCst), 2);
        // Second failure: 2 s backoff.
        tokio::time::advance(Duration::from_millis(1500)).await;
        cache.get().await.unwrap_err();
        assert_eq!(src.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn invalidate_forces_one_refetch() {
        let src = source(Some(Duration::from_secs(3600)), false);
        let cache = TokenCache::new(src.clone(), Duration::from_secs(30));
        let t1 = cache.get().await.unwrap();
        cache.invalidate(&t1);
        let t2 = cache.get().await.unwrap();
        assert_eq!(t2.expose_secret(), "tok-2");
        // A stale invalidation (of t1) does not drop t2.
        cache.invalidate(&t1);
        assert_eq!(cache.get().await.unwrap().expose_secret(), "tok-2");
        assert_eq!(src.calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn debug_hides_tokens() {
        let f = FetchedToken {
            token: SecretString::from("s3cr3t-token"),
            lifetime: None,
        };
        assert!(!format!("{f:?}").contains("s3cr3t"));
        assert!(
            !format!("{:?}", StaticToken::new(SecretString::from("s3cr3t-token")))
                .contains("s3cr3t")
        );
    }
}
