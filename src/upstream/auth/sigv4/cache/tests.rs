//! The credential cache on paused tokio time: fetched once and reused, refreshed
//! before expiry, one fetch for concurrent callers, valid credentials kept when a
//! refresh fails, expired ones never returned, invalidation.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{SharedCredentialsProvider, future};

use super::CredentialCache;

/// One scripted answer: credentials valid for that many seconds (`None`: forever), or
/// a failure.
type Step = Result<Option<u64>, ()>;

/// A provider answering from a script (each entry: credentials valid for that many
/// seconds, `None` forever, or a failure), counting its calls and pausing `delay` in
/// each.
#[derive(Debug, Clone)]
struct Scripted {
    calls: Arc<AtomicUsize>,
    script: Arc<Mutex<VecDeque<Step>>>,
    delay: Duration,
}

impl Scripted {
    fn new(script: &[Step]) -> Self {
        Self {
            calls: Arc::default(),
            script: Arc::new(Mutex::new(script.iter().copied().collect())),
            delay: Duration::ZERO,
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl aws_credential_types::provider::ProvideCredentials for Scripted {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(async move {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(self.delay).await;
            let next = self.script.lock().unwrap().pop_front().expect("scripted");
            match next {
                Ok(lifetime) => Ok(Credentials::new(
                    format!("AKID{n}"),
                    "secret",
                    Some("token".into()),
                    lifetime.map(|s| SystemTime::now() + Duration::from_secs(s)),
                    "scripted",
                )),
                Err(()) => Err(CredentialsError::provider_error("the endpoint is down")),
            }
        })
    }
}

fn cache(p: &Scripted, refresh_before: u64) -> CredentialCache {
    CredentialCache::new(
        SharedCredentialsProvider::new(p.clone()),
        Duration::from_secs(refresh_before),
    )
}

async fn key(c: &CredentialCache) -> String {
    c.get().await.unwrap().access_key_id().to_owned()
}

#[tokio::test(start_paused = true)]
async fn fetched_once_then_reused_until_the_refresh_margin() {
    let p = Scripted::new(&[Ok(Some(3600)), Ok(Some(3600))]);
    let c = cache(&p, 300);
    assert_eq!(key(&c).await, "AKID1");
    tokio::time::advance(Duration::from_secs(3299)).await;
    assert_eq!(key(&c).await, "AKID1");
    assert_eq!(p.calls(), 1, "reused, not fetched per request");
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(key(&c).await, "AKID2", "refreshed 300 s before expiry");
    assert_eq!(p.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn static_keys_are_fetched_once() {
    let p = Scripted::new(&[Ok(None)]);
    let c = cache(&p, 300);
    for _ in 0..3 {
        assert_eq!(key(&c).await, "AKID1");
        tokio::time::advance(Duration::from_secs(365 * 24 * 3600)).await;
    }
    assert_eq!(p.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn short_lived_credentials_are_refreshed_at_half_their_life() {
    let p = Scripted::new(&[Ok(Some(60)), Ok(Some(60))]);
    let c = cache(&p, 300);
    assert_eq!(key(&c).await, "AKID1");
    tokio::time::advance(Duration::from_secs(29)).await;
    assert_eq!(key(&c).await, "AKID1");
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(key(&c).await, "AKID2");
}

#[tokio::test(start_paused = true)]
async fn concurrent_callers_share_one_fetch() {
    let mut p = Scripted::new(&[Ok(Some(3600))]);
    p.delay = Duration::from_millis(500);
    let c = Arc::new(cache(&p, 300));
    let mut joins = Vec::new();
    for _ in 0..50 {
        let c = c.clone();
        joins.push(tokio::spawn(async move { key(&c).await }));
    }
    for j in joins {
        assert_eq!(j.await.unwrap(), "AKID1");
    }
    assert_eq!(p.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_refresh_keeps_valid_credentials_and_never_returns_expired_ones() {
    let p = Scripted::new(&[Ok(Some(600)), Err(()), Err(()), Ok(Some(600))]);
    let c = cache(&p, 300);
    assert_eq!(key(&c).await, "AKID1");
    // In the refresh window the refresh fails: the valid credentials stay in use.
    tokio::time::advance(Duration::from_secs(301)).await;
    assert_eq!(key(&c).await, "AKID1");
    assert_eq!(p.calls(), 2);
    // During the backoff no new fetch.
    assert_eq!(key(&c).await, "AKID1");
    assert_eq!(p.calls(), 2);
    // Past the expiry, with the chain still failing: an error, not expired credentials.
    tokio::time::advance(Duration::from_secs(300)).await;
    let e = c.get().await.unwrap_err();
    assert!(e.reason().contains("no AWS credentials"), "{e}");
    assert!(!e.to_string().contains("secret"), "{e}");
    assert_eq!(p.calls(), 3);
    // After the backoff the chain answers again.
    tokio::time::advance(Duration::from_secs(3)).await;
    assert_eq!(key(&c).await, "AKID4");
}

#[tokio::test(start_paused = true)]
async fn invalidate_makes_the_next_get_fetch() {
    let p = Scripted::new(&[Ok(Some(3600)), Ok(Some(3600))]);
    let c = cache(&p, 300);
    assert_eq!(key(&c).await, "AKID1");
    assert_eq!(key(&c).await, "AKID1");
    c.invalidate();
    assert_eq!(key(&c).await, "AKID2");
    assert_eq!(p.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_hanging_chain_times_out() {
    let mut p = Scripted::new(&[Ok(Some(3600))]);
    p.delay = Duration::from_secs(3600);
    let c = cache(&p, 300);
    let e = c.get().await.unwrap_err();
    assert!(e.reason().contains("did not answer"), "{e}");
}
