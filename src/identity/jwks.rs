//! The issuer's signing keys (JWKS, RFC 7517 §5), fetched from `jwks_url` or the
//! `jwks_uri` of an OpenID Connect discovery document, cached, and refreshed in the
//! background.
//!
//! - The refresh period is the response's `Cache-Control: max-age` clamped to
//!   `[min_refresh_secs, max_refresh_secs]` (`refresh_secs` without one); a failed fetch is
//!   retried after 1 s, doubling with each further failure up to 10 s (or
//!   `min_refresh_secs` when shorter; [`retry_after`]), so keys arrive within seconds of
//!   the issuer coming back, with or without traffic (a gateway that is not ready gets
//!   none).
//! - A token whose `kid` is not in the set causes one refetch, at most once per
//!   `unknown_kid_refetch_secs` whatever the number of such tokens (key rotation at the
//!   provider needs no restart and cannot be turned into a flood of fetches).
//! - A failed fetch keeps the last good keys; [`Jwks::status`] says since when they are
//!   stale (shown by `/readyz`), as do the metrics `a2a_auth_jwks_fetches_total{result}`,
//!   `a2a_auth_jwks_keys`, `a2a_auth_jwks_stale` and
//!   `a2a_auth_jwks_last_success_timestamp_seconds`.
//! - Symmetric (`oct`) keys and keys with `use` other than `sig` are ignored: HMAC tokens
//!   are verified only with the configured secret.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};
use reqwest::Url;
use serde_json::Value;
use tokio::time::Instant;

use crate::config::{JwtConfig, masked};
use crate::telemetry::metrics::{JWKS_FETCHES, JWKS_KEYS, JWKS_LAST_SUCCESS, JWKS_STALE};

/// Largest JWKS or discovery document read, in bytes.
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;
/// Timeout of one fetch.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Least time between two on-demand fetches while no key was ever fetched (the first
/// token arrived before the background fetch, or the endpoint is down at start).
const COLD_REFETCH: Duration = Duration::from_secs(1);

/// Wait after the first failed background fetch; it doubles with each further failure.
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest wait between failed background fetches (one request per 10 s per
/// instance while the issuer is down).
const MAX_RETRY: Duration = Duration::from_secs(10);

/// How long the background refresh waits after `failures` (1 or more) fetches in a row
/// failed: [`FIRST_RETRY`] (1 s) doubled per further failure, at most [`MAX_RETRY`]
/// (10 s) or `min_refresh` when shorter, never below 1 s.
fn retry_after(failures: u32, min_refresh: Duration) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    FIRST_RETRY
        .saturating_mul(1 << doublings)
        .min(min_refresh.min(MAX_RETRY).max(FIRST_RETRY))
}

/// When the last on-demand fetches started.
#[derive(Default)]
struct OnDemand {
    /// For a `kid` missing from a held set (limited by `unknown_kid_refetch_secs`).
    unknown_kid: Option<Instant>,
    /// While no set is held (limited by [`COLD_REFETCH`]).
    cold: Option<Instant>,
}

/// One verification key from the set.
#[derive(Clone)]
pub(crate) struct VerifyKey {
    pub(crate) key: DecodingKey,
    /// The key's `alg`, when the JWK names one: a token must use exactly it.
    pub(crate) alg: Option<Algorithm>,
}

impl VerifyKey {
    /// Whether a token signed with `alg` may be verified with this key.
    pub(crate) fn fits(&self, alg: Algorithm) -> bool {
        self.key.family() == alg.family() && self.alg.is_none_or(|a| a == alg)
    }
}

#[derive(Default)]
struct KeySet {
    by_kid: HashMap<String, VerifyKey>,
    without_kid: Vec<VerifyKey>,
}

impl KeySet {
    fn len(&self) -> usize {
        self.by_kid.len() + self.without_kid.len()
    }

    /// The key for `kid` (or, without a `kid`, the only key that fits `alg`).
    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<&VerifyKey> {
        match kid {
            Some(kid) => self.by_kid.get(kid),
            None => {
                let mut fitting = self
                    .by_kid
                    .values()
                    .chain(&self.without_kid)
                    .filter(|k| k.fits(alg));
                let first = fitting.next()?;
                fitting.next().is_none().then_some(first)
            }
        }
    }
}

/// What [`Jwks::status`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwksStatus {
    /// Usable keys held.
    pub keys: usize,
    /// When keys were last fetched successfully.
    pub last_success: Option<SystemTime>,
    /// Why the last fetch failed, when it did (the held keys are then the last good ones).
    pub last_error: Option<String>,
}

#[derive(Default)]
struct FetchState {
    last_success: Option<SystemTime>,
    last_error: Option<String>,
}

struct Inner {
    jwks_url: Option<Url>,
    discovery_url: Option<Url>,
    issuer: String,
    http: reqwest::Client,
    keys: RwLock<Arc<KeySet>>,
    /// Counts the key sets installed: a token verified with an older set is verified
    /// again (see `super::verified_cache`).
    generation: AtomicU64,
    state: Mutex<FetchState>,
    /// The `jwks_uri` found through discovery (cleared when a fetch fails).
    discovered: Mutex<Option<Url>>,
    /// When the last on-demand fetches started; held across every fetch, so fetches
    /// never overlap.
    last_fetch: tokio::sync::Mutex<OnDemand>,
    default_refresh: Duration,
    min_refresh: Duration,
    max_refresh: Duration,
    unknown_kid_refetch: Duration,
}

/// The cached key set of one issuer. Cheap to clone.
#[derive(Clone)]
pub struct Jwks {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Jwks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jwks")
            .field(
                "url",
                &self
                    .inner
                    .jwks_url
                    .as_ref()
                    .or(self.inner.discovery_url.as_ref())
                    .map(Url::as_str),
            )
            .field("keys", &self.keys_held())
            .finish()
    }
}

impl Jwks {
    /// The key set `config` names (`jwks_url` or `discovery_url`); `None` when it names
    /// neither (HMAC only). Nothing is fetched until [`start`](Self::start) or the first
    /// token.
    pub fn from_config(config: &JwtConfig) -> Option<Self> {
        if config.jwks_url.is_none() && config.discovery_url.is_none() {
            return None;
        }
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
            .unwrap_or_default();
        let secs = Duration::from_secs;
        Some(Self {
            inner: Arc::new(Inner {
                jwks_url: config.jwks_url.clone(),
                discovery_url: config.discovery_url.clone(),
                issuer: config.issuer.clone(),
                http,
                keys: RwLock::default(),
                generation: AtomicU64::new(0),
                state: Mutex::default(),
                discovered: Mutex::default(),
                last_fetch: tokio::sync::Mutex::default(),
                default_refresh: secs(config.refresh_secs),
                min_refresh: secs(config.min_refresh_secs),
                max_refresh: secs(config.max_refresh_secs.max(config.min_refresh_secs)),
                unknown_kid_refetch: secs(config.unknown_kid_refetch_secs),
            }),
        })
    }

    /// Starts the background refresh on the current tokio runtime (a no-op outside one).
    /// It ends when the last clone of this set is dropped.
    pub fn start(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        rt.spawn(async move {
            let mut failures = 0;
            loop {
                let Some(inner) = weak.upgrade() else { return };
                let wait = {
                    // Scheduled fetches do not count against the unknown-kid limit.
                    let _fetching = inner.last_fetch.lock().await;
                    match inner.fetch().await {
                        Ok(ttl) => {
                            failures = 0;
                            ttl
                        }
                        Err(_) => {
                            failures += 1;
                            retry_after(failures, inner.min_refresh)
                        }
                    }
                };
                drop(inner);
                tokio::time::sleep(wait).await;
            }
        });
    }

    fn keys_held(&self) -> usize {
        self.inner.keys.read().map(|k| k.len()).unwrap_or(0)
    }

    fn lookup(&self, kid: Option<&str>, alg: Algorithm) -> Option<VerifyKey> {
        let keys = self.inner.keys.read().ok()?.clone();
        keys.find(kid, alg).cloned()
    }

    /// The key for a token with `kid` signed with `alg`: from the cache, else after one
    /// rate-limited refetch. `Ok(None)` when no key has that `kid`; `Err(())` when no key
    /// was ever fetched.
    #[allow(clippy::result_unit_err)]
    pub(crate) async fn key_for(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<Option<VerifyKey>, ()> {
        if let Some(k) = self.lookup(kid, alg) {
            return Ok(Some(k));
        }
        {
            let mut last = self.inner.last_fetch.lock().await;
            // Another request may have fetched while this one waited for the lock.
            if let Some(k) = self.lookup(kid, alg) {
                return Ok(Some(k));
            }
            let (slot, limit) = if self.keys_held() == 0 {
                (&mut last.cold, COLD_REFETCH)
            } else {
                (&mut last.unknown_kid, self.inner.unknown_kid_refetch)
            };
            if slot.is_none_or(|t| t.elapsed() >= limit) {
                *slot = Some(Instant::now());
                let _ = self.inner.fetch().await;
            }
        }
        match self.lookup(kid, alg) {
            Some(k) => Ok(Some(k)),
            None if self.keys_held() == 0 && self.status().last_success.is_none() => Err(()),
            None => Ok(None),
        }
    }

    /// The number of key sets installed so far: it changes with every successful fetch
    /// (read it before a verification: a fetch during the verification makes the result
    /// count as made with an older set).
    pub(crate) fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }

    /// Keys held, last success, last error.
    pub fn status(&self) -> JwksStatus {
        let state = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        JwksStatus {
            keys: self.keys_held(),
            last_success: state.last_success,
            last_error: state.last_error.clone(),
        }
    }
}

impl Inner {
    /// Fetches the set once and installs it; returns the refresh period. On failure the
    /// held keys stay.
    async fn fetch(&self) -> Result<Duration, String> {
        let result = self.fetch_set().await;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok((set, ttl)) => {
                let n = set.len();
                if let Ok(mut keys) = self.keys.write() {
                    *keys = Arc::new(set);
                }
                self.generation.fetch_add(1, Ordering::AcqRel);
                let now = SystemTime::now();
                state.last_success = Some(now);
                state.last_error = None;
                metrics::counter!(JWKS_FETCHES, "result" => "ok").increment(1);
                metrics::gauge!(JWKS_KEYS).set(n as f64);
                metrics::gauge!(JWKS_STALE).set(0.0);
                let unix = now
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs_f64();
                metrics::gauge!(JWKS_LAST_SUCCESS).set(unix);
                tracing::debug!(keys = n, refresh_secs = ttl.as_secs(), "JWKS fetched");
                Ok(ttl)
            }
            Err(e) => {
                if let Ok(mut d) = self.discovered.lock() {
                    *d = None;
                }
                metrics::counter!(JWKS_FETCHES, "result" => "error").increment(1);
                metrics::gauge!(JWKS_STALE).set(1.0);
                tracing::warn!(error = %e, "JWKS fetch failed; keeping the last good keys");
                state.last_error = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The JSON document at `url` and its `Cache-Control: max-age`. Errors name the URL
    /// masked ([`masked`]: they reach the log and `/readyz`).
    async fn get_json(&self, url: &Url) -> Result<(Value, Option<Duration>), String> {
        let shown = masked(url);
        let resp = self
            .http
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("GET {shown}: {}", without_url(&e)))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("GET {shown}: HTTP {}", status.as_u16()));
        }
        let max_age = cache_max_age(resp.headers());
        if resp
            .content_length()
            .is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(format!("GET {shown}: the document exceeds 1 MiB"));
        }
        let body = resp
            .bytes()
            .await
            .map_err(|e| format!("GET {shown}: {}", without_url(&e)))?;
        if body.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("GET {shown}: the document exceeds 1 MiB"));
        }
        let json = serde_json::from_slice(&body)
            .map_err(|e| format!("GET {shown}: not a JSON document: {e}"))?;
        Ok((json, max_age))
    }

    async fn jwks_url(&self) -> Result<Url, String> {
        if let Some(u) = &self.jwks_url {
            return Ok(u.clone());
        }
        if let Some(u) = self.discovered.lock().ok().and_then(|d| d.clone()) {
            return Ok(u);
        }
        let discovery_url = self
            .discovery_url
            .as_ref()
            .ok_or_else(|| "no jwks_url nor discovery_url".to_owned())?;
        let (doc, _) = self.get_json(discovery_url).await?;
        let discovery = masked(discovery_url);
        let issuer = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
        if issuer != self.issuer {
            return Err(format!(
                "the discovery document {discovery} names issuer {issuer:?}, not the configured {:?}",
                self.issuer
            ));
        }
        let uri = doc
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("the discovery document {discovery} has no jwks_uri"))?;
        let url = Url::parse(uri)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                format!(
                    "the discovery document {discovery} has a jwks_uri that is not an http(s) URL"
                )
            })?;
        if let Ok(mut d) = self.discovered.lock() {
            *d = Some(url.clone());
        }
        Ok(url)
    }

    async fn fetch_set(&self) -> Result<(KeySet, Duration), String> {
        let url = self.jwks_url().await?;
        let (doc, max_age) = self.get_json(&url).await?;
        let url = masked(&url);
        let entries = doc
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("GET {url}: not a JWKS (no \"keys\" array)"))?;
        let mut set = KeySet::default();
        for entry in entries {
            let Ok(jwk) = serde_json::from_value::<Jwk>(entry.clone()) else {
                continue;
            };
            if let Some(k) = verify_key(&jwk) {
                match jwk.common.key_id {
                    Some(kid) => {
                        set.by_kid.insert(kid, k);
                    }
                    None => set.without_kid.push(k),
                }
            }
        }
        if set.len() == 0 {
            return Err(format!("GET {url}: the JWKS holds no usable signing key"));
        }
        let ttl = max_age
            .unwrap_or(self.default_refresh)
            .clamp(self.min_refresh, self.max_refresh);
        Ok((set, ttl))
    }
}

/// A reqwest error without its URL (the URL is already in the message).
fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(url) = e.url() {
        s = s.replace(&format!(" ({url})"), "");
    }
    if e.is_timeout() {
        s = "timed out".into();
    }
    s
}

/// The usable signature key `jwk` holds: public (RSA, EC, OKP), for signatures.
fn verify_key(jwk: &Jwk) -> Option<VerifyKey> {
    if matches!(
        jwk.algorithm,
        AlgorithmParameters::OctetKey(_) | AlgorithmParameters::Other(_)
    ) {
        return None;
    }
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return None;
    }
    let alg = match jwk.common.key_algorithm {
        Some(a) => Some(Algorithm::from_str(&a.to_string()).ok()?),
        None => None,
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    if key.family() == AlgorithmFamily::Hmac {
        return None;
    }
    let k = VerifyKey { key, alg };
    if let Some(a) = alg
        && !k.fits(a)
    {
        return None;
    }
    Some(k)
}

/// `Cache-Control: max-age=N` (`no-cache` / `no-store`: zero, raised to the minimum by the
/// caller).
fn cache_max_age(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let mut found = None;
    for value in headers.get_all(reqwest::header::CACHE_CONTROL) {
        let Ok(v) = value.to_str() else { continue };
        for directive in v.split(',') {
            let d = directive.trim().to_ascii_lowercase();
            if d == "no-cache" || d == "no-store" {
                return Some(Duration::ZERO);
            }
            if let Some(n) = d.strip_prefix("max-age=")
                && let Ok(n) = n.trim_matches('"').parse::<u64>()
            {
                found = Some(Duration::from_secs(n));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_fetches_are_retried_from_one_second_doubling_up_to_ten() {
        let min_refresh = Duration::from_secs(60);
        let waits: Vec<u64> = (1..=7)
            .map(|n| retry_after(n, min_refresh).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 10, 10, 10]);
        assert_eq!(retry_after(u32::MAX, min_refresh), MAX_RETRY);
        // A shorter min_refresh_secs caps it, but never below a second.
        assert_eq!(retry_after(5, Duration::from_secs(3)).as_secs(), 3);
        assert_eq!(retry_after(1, Duration::ZERO), FIRST_RETRY);
    }

    #[test]
    fn max_age_is_read() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(cache_max_age(&h), None);
        h.insert("cache-control", "public, max-age=600".parse().unwrap());
        assert_eq!(cache_max_age(&h), Some(Duration::from_secs(600)));
        h.insert("cache-control", "no-store".parse().unwrap());
        assert_eq!(cache_max_age(&h), Some(Duration::ZERO));
        h.insert("cache-control", "max-age=x".parse().unwrap());
        assert_eq!(cache_max_age(&h), None);
    }

    #[test]
    fn symmetric_and_encryption_keys_are_ignored() {
        let oct: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "oct", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0", "kid": "h"
        }))
        .unwrap();
        assert!(verify_key(&oct).is_none());
        let enc: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "OKP", "crv": "Ed25519", "use": "enc",
            "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
        }))
        .unwrap();
        assert!(verify_key(&enc).is_none());
        let sig: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA",
            "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
        }))
        .unwrap();
        let k = verify_key(&sig).unwrap();
        assert!(k.fits(Algorithm::EdDSA));
        assert!(!k.fits(Algorithm::HS256));
        assert!(!k.fits(Algorithm::RS256));
    }
}
