//! The sender: claims due deliveries from the outbox and POSTs them, at most
//! `[push] concurrency` at once and `per_host_concurrency` to one host, one at a time
//! per (task, config) (only queue heads are claimed), and settles each attempt in the
//! store (delivered, retried later, given up, or config disabled).
//!
//! Outcomes of an attempt: 2xx delivered; 410 Gone disables the config; 408, 429, 5xx,
//! connection errors and timeouts are retried with exponential backoff and jitter
//! (`Retry-After` honoured, capped at `max_backoff_secs`) until `max_attempts` or
//! `max_age_secs`; 3xx (redirects are never followed), other 4xx and refused addresses
//! (the SSRF guard) fail the delivery at once. Every give-up is logged once (task and
//! config ids, never secrets) and counted.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng as _;
use reqwest::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::PushService;
use super::store::{Claimed, DeliveryKey, Settle};

/// Deliveries by outcome (`delivered`, `retried`, `failed`, `disabled`).
pub const DELIVERIES: &str = "a2a_push_deliveries_total";
/// Attempts made (each POST).
pub const ATTEMPTS: &str = "a2a_push_attempts_total";
/// Seconds from the event being stored to its 2xx.
pub const LATENCY: &str = "a2a_push_delivery_latency_seconds";
/// Age in seconds of the oldest pending delivery (0 when none).
pub const OLDEST_PENDING: &str = "a2a_push_oldest_pending_seconds";
/// Configs disabled (410 Gone or a run of failures).
pub const DISABLED: &str = "a2a_push_configs_disabled_total";

/// The longest claim batch.
const CLAIM_BATCH: usize = 64;

fn now_ms() -> i64 {
    crate::protocol::time::now().timestamp_millis()
}

/// What one attempt came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// 2xx.
    Delivered,
    /// Worth another try (after at least this long, when the receiver said so).
    Retryable(String, Option<Duration>),
    /// Not worth another try.
    Failed(String),
    /// 410 Gone.
    Gone,
}

/// Classifies an HTTP answer.
pub(crate) fn classify(status: StatusCode, retry_after: Option<Duration>) -> Attempt {
    let code = status.as_u16();
    if status.is_success() {
        Attempt::Delivered
    } else if code == 410 {
        Attempt::Gone
    } else if code == 408 || code == 429 || status.is_server_error() {
        Attempt::Retryable(format!("HTTP {code}"), retry_after)
    } else if status.is_redirection() {
        Attempt::Failed(format!(
            "HTTP {code}: redirects are not followed; register the final URL"
        ))
    } else {
        Attempt::Failed(format!("HTTP {code}"))
    }
}

/// Reads `Retry-After` (seconds or an HTTP date).
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(v).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// The delay before retry number `attempts + 1`: `initial * 2^attempts` with full
/// jitter over its upper half, at least `retry_after`, at most `max`.
pub(crate) fn backoff(
    initial: Duration,
    max: Duration,
    attempts: u32,
    retry_after: Option<Duration>,
) -> Duration {
    let exp = initial.saturating_mul(1u32.checked_shl(attempts.min(30)).unwrap_or(u32::MAX));
    let exp = exp.min(max);
    let jittered = exp.mul_f64(rand::rng().random_range(0.5..=1.0));
    jittered.max(retry_after.unwrap_or(Duration::ZERO)).min(max)
}

/// The error chain of a failed request, as one line (no URL query: it may hold a
/// secret).
fn describe(e: &reqwest::Error) -> (String, bool) {
    let mut refused = false;
    let mut text = if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        "connection failed".to_owned()
    } else {
        "request failed".to_owned()
    };
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = src {
        if let Some(r) = s.downcast_ref::<super::ssrf::Refused>() {
            refused = true;
            text = format!("refused: {r}");
            break;
        }
        src = s.source();
    }
    if !refused && let Some(s) = std::error::Error::source(e) {
        text = format!("{text}: {s}");
    }
    (text, refused)
}

/// Makes one attempt of `c`.
pub(crate) async fn attempt(svc: &PushService, c: &Claimed) -> Attempt {
    let Some(body) = c.event.as_deref() else {
        return Attempt::Failed("the event is gone (its task was purged)".into());
    };
    let url = match reqwest::Url::parse(&c.config.url) {
        Ok(u) => u,
        Err(e) => return Attempt::Failed(format!("bad URL: {e}")),
    };
    if let Err(why) = svc.policy.check_url(&url) {
        return Attempt::Failed(format!("refused: {why}"));
    }
    let id = super::webhook_id(&c.key);
    let ts = now_ms() / 1000;
    let mut req = svc
        .client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", ts.to_string())
        .header(
            "webhook-signature",
            svc.signer.sign(&id, ts, body.as_bytes()),
        );
    if let Some(t) = &c.config.token {
        req = req
            .header("X-A2A-Notification-Token", t)
            .header("A2A-Notification-Token", t);
    }
    if let (Some(scheme), Some(cred)) = (&c.config.auth_scheme, &c.config.auth_credentials) {
        req = req.header(reqwest::header::AUTHORIZATION, format!("{scheme} {cred}"));
    } else if let Some(scheme) = &c.config.auth_scheme {
        req = req.header(reqwest::header::AUTHORIZATION, scheme.as_str());
    }
    metrics::counter!(ATTEMPTS).increment(1);
    match req.body(body.to_owned()).send().await {
        Ok(resp) => classify(resp.status(), retry_after(resp.headers())),
        Err(e) => {
            let (text, refused) = describe(&e);
            if refused {
                Attempt::Failed(text)
            } else {
                Attempt::Retryable(text, None)
            }
        }
    }
}

/// What to store after `attempt` of `c`, given the service's limits.
pub(crate) fn settlement(svc: &PushService, c: &Claimed, attempt: Attempt, now: i64) -> Settle {
    let cfg = &svc.config;
    let give_up = |error: String| Settle::GiveUp {
        error,
        disable_after: cfg.disable_after_failures,
    };
    match attempt {
        Attempt::Delivered => Settle::Delivered,
        Attempt::Gone => Settle::Disable {
            error: "HTTP 410 Gone: the receiver asked to stop".into(),
        },
        Attempt::Failed(e) => give_up(e),
        Attempt::Retryable(e, after) => {
            let attempts = c.attempts + 1;
            let delay = backoff(
                Duration::from_millis(cfg.initial_backoff_ms),
                Duration::from_secs(cfg.max_backoff_secs),
                c.attempts,
                after,
            );
            let next_ms = now + i64::try_from(delay.as_millis()).unwrap_or(i64::MAX / 2);
            let deadline =
                c.created_ms + i64::try_from(cfg.max_age_secs * 1000).unwrap_or(i64::MAX / 2);
            if attempts >= cfg.max_attempts {
                give_up(format!("{e} (after {attempts} attempts)"))
            } else if next_ms > deadline {
                give_up(format!("{e} (the event is older than max_age_secs)"))
            } else {
                Settle::Retry { next_ms, error: e }
            }
        }
    }
}

/// A finished attempt on its way to the settler, which stores it with others in one
/// write transaction and only then frees its key and its permit (so the next event of
/// its (task, config) is claimed only after this one is settled).
struct Done {
    key: DeliveryKey,
    attempts: u32,
    outcome: Settle,
    _permit: OwnedSemaphorePermit,
}

/// The longest settlement batch (one write transaction).
const SETTLE_BATCH: usize = 256;

/// Makes the attempt of one claimed delivery (holding a permit of its host for the
/// request only) and hands its outcome to the settler.
async fn deliver(svc: Arc<PushService>, c: Claimed, permit: OwnedSemaphorePermit, done: Settler) {
    let result = if c.config.enabled {
        let host = reqwest::Url::parse(&c.config.url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        let host_permits = svc.host_permits(&host);
        let _host = host_permits.acquire_owned().await;
        attempt(&svc, &c).await
    } else {
        Attempt::Failed("the config is disabled".into())
    };
    let now = now_ms();
    if result == Attempt::Delivered {
        let ms = (now - c.created_ms).max(0) as f64 / 1000.0;
        metrics::histogram!(LATENCY).record(ms);
    }
    let outcome = settlement(&svc, &c, result, now);
    let label = match &outcome {
        Settle::Delivered => "delivered",
        Settle::Retry { .. } => "retried",
        Settle::GiveUp { .. } => "failed",
        Settle::Disable { .. } => "disabled",
    };
    metrics::counter!(DELIVERIES, "outcome" => label).increment(1);
    match &outcome {
        Settle::GiveUp { error, .. } => tracing::warn!(
            task.id = %c.key.task_id, push.config = %c.key.config_id, event.seq = c.key.seq,
            attempts = c.attempts + 1, error = %error, "push delivery given up"
        ),
        Settle::Disable { error } => tracing::warn!(
            task.id = %c.key.task_id, push.config = %c.key.config_id, error = %error,
            "push config disabled"
        ),
        Settle::Retry { error, next_ms } => tracing::debug!(
            task.id = %c.key.task_id, push.config = %c.key.config_id, event.seq = c.key.seq,
            error = %error, retry_in_ms = next_ms - now, "push delivery will be retried"
        ),
        Settle::Delivered => {}
    }
    let _ = done.send(Done {
        key: c.key,
        attempts: c.attempts,
        outcome,
        _permit: permit,
    });
}

/// Where finished attempts go (see [`settle_loop`]).
type Settler = mpsc::UnboundedSender<Done>;

/// Stores finished attempts in batches: whatever has finished while the previous batch
/// was written goes into the next write transaction ([`PushStore::settle_many`]).
/// Then the batch's keys leave `in_flight`, their permits are freed and the claim loop
/// is woken. Ends when every [`Settler`] is gone.
///
/// [`PushStore::settle_many`]: super::PushStore::settle_many
async fn settle_loop(
    svc: Arc<PushService>,
    mut rx: mpsc::UnboundedReceiver<Done>,
    in_flight: InFlight,
) {
    let mut batch = Vec::with_capacity(SETTLE_BATCH);
    while rx.recv_many(&mut batch, SETTLE_BATCH).await > 0 {
        if let Some(store) = svc.store.push_store() {
            let items: Vec<_> = batch.iter().map(|d| (&d.key, &d.outcome)).collect();
            match store.settle_many(&items).await {
                Ok(settled) => {
                    for (d, s) in batch.iter().zip(settled) {
                        if !s.disabled {
                            continue;
                        }
                        metrics::counter!(DISABLED).increment(1);
                        if matches!(d.outcome, Settle::GiveUp { .. }) {
                            tracing::warn!(
                                task.id = %d.key.task_id, push.config = %d.key.config_id,
                                dropped = s.dropped, attempts = d.attempts + 1,
                                "push config disabled after a run of failed deliveries"
                            );
                        }
                    }
                }
                Err(e) => tracing::warn!(
                    deliveries = batch.len(), task.id = %batch[0].key.task_id, error = %e,
                    "push deliveries could not be settled; they are retried after their lease"
                ),
            }
        }
        {
            let mut held = in_flight.lock().unwrap_or_else(|p| p.into_inner());
            for d in &batch {
                held.remove(&d.key);
            }
        }
        batch.clear(); // frees the permits
        svc.wake.notify_one();
    }
}

/// Keys in flight in this process, from their claim to their settlement (a claim taken
/// over after its lease while the first attempt still waits is not started twice).
type InFlight = Arc<Mutex<HashSet<DeliveryKey>>>;

/// The sender loop (see the module docs); ends when `stop` is cancelled, after the
/// attempts in flight (each bounded by the timeout) are settled.
pub(crate) async fn run(svc: Arc<PushService>, stop: CancellationToken) {
    let Some(_) = svc.store.push_store() else {
        tracing::warn!("the task store keeps no push state: push notifications are off");
        return;
    };
    let permits = Arc::new(Semaphore::new(svc.config.concurrency));
    let in_flight: InFlight = Arc::default();
    let (done, rx) = mpsc::unbounded_channel();
    let settler = tokio::spawn(settle_loop(svc.clone(), rx, in_flight.clone()));
    let poll = Duration::from_millis(svc.config.poll_interval_ms);
    let lease_ms = i64::try_from(svc.config.lease_secs * 1000).unwrap_or(i64::MAX / 4);
    let mut gauge_at = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = svc.wake.notified() => {}
            _ = tokio::time::sleep(poll) => {}
        }
        if gauge_at.elapsed() >= Duration::from_secs(5) {
            gauge_at = std::time::Instant::now();
            update_gauge(&svc).await;
        }
        loop {
            let free = permits.available_permits().min(CLAIM_BATCH);
            if free == 0 {
                break; // a settled batch wakes the loop
            }
            let store = svc.store.push_store().expect("checked above");
            let now = now_ms();
            match store.any_due(now).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "push outbox unreadable; retrying");
                    break;
                }
            }
            let claimed = match store.claim(now, lease_ms, free).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "push outbox claim failed; retrying");
                    break;
                }
            };
            let n = claimed.len();
            for c in claimed {
                if !in_flight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(c.key.clone())
                {
                    continue;
                }
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    in_flight
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&c.key);
                    continue; // claimed but not started: taken again after the lease
                };
                tokio::spawn(deliver(svc.clone(), c, permit, done.clone()));
            }
            if n < free {
                break;
            }
        }
    }
    // Let attempts in flight end (each by its timeout) and be settled.
    drop(done);
    let _ = tokio::time::timeout(Duration::from_secs(svc.config.timeout_secs + 5), settler).await;
}

async fn update_gauge(svc: &PushService) {
    let Some(store) = svc.store.push_store() else {
        return;
    };
    if let Ok(s) = store.status(None, 0).await {
        let age = s
            .oldest_pending_ms
            .map(|ms| (now_ms() - ms).max(0) as f64 / 1000.0)
            .unwrap_or(0.0);
        metrics::gauge!(OLDEST_PENDING).set(age);
    }
}

/// Per-host permits.
pub(crate) type HostPermits = Mutex<HashMap<String, Arc<Semaphore>>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let c = |code: u16| classify(StatusCode::from_u16(code).unwrap(), None);
        assert_eq!(c(200), Attempt::Delivered);
        assert_eq!(c(204), Attempt::Delivered);
        assert_eq!(c(410), Attempt::Gone);
        for code in [408, 429, 500, 502, 503] {
            assert!(matches!(c(code), Attempt::Retryable(..)), "{code}");
        }
        for code in [301, 302, 307, 400, 401, 403, 404, 422] {
            assert!(matches!(c(code), Attempt::Failed(_)), "{code}");
        }
    }

    #[test]
    fn backoff_grows_with_jitter_and_honours_retry_after() {
        let s = Duration::from_secs(1);
        let max = Duration::from_secs(60);
        for attempts in 0..10 {
            let d = backoff(s, max, attempts, None);
            let full = s.saturating_mul(1 << attempts).min(max);
            assert!(d <= full && d >= full / 2, "{attempts}: {d:?}");
        }
        assert_eq!(
            backoff(s, max, 0, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        assert_eq!(backoff(s, max, 0, Some(Duration::from_secs(700))), max);
    }

    #[test]
    fn retry_after_forms() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }
}
