//! The sender: claims due deliveries from the outbox (a written claim with a lease on
//! PostgreSQL, an in-memory one on the memory and SQLite stores, see the sender loop
//! `run`) and POSTs them, at most `[push] concurrency` at once, shared fairly between
//! tenants and callers, and `per_host_concurrency` to one host (fewer while it does not
//! answer; see the `fair` module), one at a time per (task, config) (only queue heads are
//! claimed), and settles each attempt in the store (delivered, retried later, given
//! up, or config disabled).
//!
//! Outcomes of an attempt: 2xx delivered; 410 Gone disables the config; 408, 429, 5xx,
//! connection errors and timeouts are retried with exponential backoff and jitter
//! (`Retry-After` honoured, capped at `max_backoff_secs`) until `max_attempts` or
//! `max_age_secs`; 3xx (redirects are never followed), other 4xx and refused addresses
//! (the SSRF guard) fail the delivery at once. Every give-up is logged once (task and
//! config ids, never secrets) and counted.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::Rng as _;
use reqwest::StatusCode;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::PushService;
use super::fair::{Shares, Slot, Slots, Start, host_of, interleave};
use super::ready::{Held, Ready};
use crate::scope::Scope;
use crate::store::push::{Claimed, DeliveryKey, Settle};
use crate::telemetry::metrics::{
    PUSH_ATTEMPTS, PUSH_CONFIGS_DISABLED, PUSH_DELIVERIES, PUSH_DELIVERY_LATENCY,
    PUSH_OLDEST_PENDING,
};

/// The longest claim batch.
const CLAIM_BATCH: usize = 64;

/// The most due rows one read goes past (rows whose host or caller has no room).
const MAX_READ_PAST: usize = 1024;

/// Reads in a row that start nothing before the loop waits for a wake-up.
const MAX_ROUNDS: usize = 8;

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
    /// The host did not answer (timed out, or the connection failed): worth another
    /// try, and counted against the host ([`Slot::report`]).
    Unreachable(String),
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

/// Makes one attempt of `c` to `url` (its config's URL, parsed once by the caller)
/// with `body` (its event's stored JSON, or the coalesced body of the events up to
/// `last`, moved into the request without a copy).
pub(crate) async fn attempt(
    svc: &PushService,
    c: &Claimed,
    url: reqwest::Url,
    body: String,
    last: u64,
) -> Attempt {
    if let Err(why) = svc.policy.check_url(&url) {
        return Attempt::Failed(format!("refused: {why}"));
    }
    let id = super::range_webhook_id(&c.key, last);
    let ts = now_ms() / 1000;
    let signature = svc.signer.sign(&id, ts, body.as_bytes());
    let mut req = svc
        .client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", ts)
        .header("webhook-signature", signature);
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
    metrics::counter!(PUSH_ATTEMPTS).increment(1);
    match req.body(body).send().await {
        Ok(resp) => classify(resp.status(), retry_after(resp.headers())),
        Err(e) => {
            let (text, refused) = describe(&e);
            if refused {
                Attempt::Failed(text)
            } else if e.is_timeout() || e.is_connect() {
                Attempt::Unreachable(text)
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
        Attempt::Unreachable(e) => settlement(svc, c, Attempt::Retryable(e, None), now),
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
/// write transaction and only then frees its key and its slot (so the next event of
/// its (task, config) is claimed only after this one is settled).
struct Done {
    key: DeliveryKey,
    attempts: u32,
    outcome: Settle,
    slot: Slot,
}

/// The longest settlement batch (one write transaction).
const SETTLE_BATCH: usize = 256;

/// Makes the attempt of one claimed delivery (in `slot`, taken by the claim loop),
/// tells the slot whether the host answered, and hands the outcome to the settler.
async fn deliver(svc: Arc<PushService>, mut c: Claimed, slot: Slot, done: Settler) {
    let result = match (c.config.enabled, c.event.take()) {
        (false, _) => Attempt::Failed("the config is disabled".into()),
        (true, None) => Attempt::Failed("the event is gone (its task was purged)".into()),
        (true, Some(head)) => match reqwest::Url::parse(&c.config.url) {
            Err(e) => Attempt::Failed(format!("bad URL: {e}")),
            Ok(url) => match coalesced(&svc, &c, head).await {
                Ok((body, last)) => attempt(&svc, &c, url, body, last).await,
                Err(e) => Attempt::Retryable(e, None),
            },
        },
    };
    match result {
        Attempt::Unreachable(_) => slot.report(false),
        Attempt::Delivered | Attempt::Retryable(..) | Attempt::Gone => slot.report(true),
        Attempt::Failed(_) => {}
    }
    let now = now_ms();
    if result == Attempt::Delivered {
        let ms = (now - c.created_ms).max(0) as f64 / 1000.0;
        metrics::histogram!(PUSH_DELIVERY_LATENCY).record(ms);
    }
    let outcome = settlement(&svc, &c, result, now);
    let label = match &outcome {
        Settle::Delivered => "delivered",
        Settle::Retry { .. } => "retried",
        Settle::GiveUp { .. } => "failed",
        Settle::Disable { .. } => "disabled",
    };
    metrics::counter!(PUSH_DELIVERIES, "outcome" => label).increment(1);
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
        slot,
    });
}

/// The body of the POST of head `c` (whose event is `head`) and the last event it
/// carries: the head alone, or its coalesced range (see the `coalesce` module). A
/// range fixed earlier (a retry, a restart, another instance) is sent exactly; a new
/// one is fixed in the store before it is sent, also when it is the head alone (a
/// head that could lead a range), so that no later attempt sends a different range
/// under another `webhook-id`.
///
/// # Errors
/// A message (the attempt is retried) when the store cannot be read or written, or a
/// fixed range is no longer whole.
async fn coalesced(svc: &PushService, c: &Claimed, head: String) -> Result<(String, u64), String> {
    let seq = c.key.seq;
    let mut fixed = c.range_end;
    if fixed.is_some_and(|end| end <= seq)
        || (fixed.is_none() && (!svc.config.coalesce || !super::coalesce::may_lead(&head)))
    {
        return Ok((head, seq));
    }
    let Some(store) = svc.store.push_store() else {
        return Ok((head, seq));
    };
    let limits = super::coalesce::Limits {
        max_events: svc.config.max_coalesce_events,
        max_bytes: svc.config.max_coalesce_bytes,
    };
    // At most twice: a range another instance fixed meanwhile is read again.
    for _ in 0..2 {
        let want = match fixed {
            Some(end) => usize::try_from(end - seq).unwrap_or(usize::MAX),
            None => limits.max_events.saturating_sub(1),
        };
        let more = store
            .pending_after(&c.key, want)
            .await
            .map_err(|e| format!("reading the events to coalesce: {e}"))?;
        let mut seqs = vec![seq];
        let mut events = vec![head.clone()];
        for (s, event) in more {
            if fixed.is_some_and(|end| s > end) {
                break;
            }
            let Some(event) = event else { break };
            seqs.push(s);
            events.push(event);
        }
        let refs: Vec<&str> = events.iter().map(String::as_str).collect();
        let n = match fixed {
            Some(end) => {
                if seqs.last() != Some(&end) {
                    return Err("the coalesced range is no longer whole".into());
                }
                seqs.len()
            }
            None => super::coalesce::range_len(&refs, limits),
        };
        let last = seqs[n - 1];
        if fixed.is_none() {
            let stored = store
                .fix_range(&c.key, last)
                .await
                .map_err(|e| format!("fixing the coalesced range: {e}"))?;
            if stored != last {
                if stored <= seq {
                    return Ok((head, seq));
                }
                fixed = Some(stored);
                continue;
            }
        }
        if n == 1 {
            return Ok((head, seq));
        }
        let body = super::coalesce::merge(&refs[..n])?;
        return Ok((body, last));
    }
    Err("the coalesced range changed while it was read".into())
}

/// Where finished attempts go (see [`settle_loop`]).
type Settler = mpsc::UnboundedSender<Done>;

/// Keys whose settlement is stored (or given up on), each with its host, on their way
/// back to the claim loop, which takes them out of its in-flight set before its next
/// read of the outbox.
type Freed = mpsc::UnboundedSender<Vec<(DeliveryKey, String)>>;

/// Stores finished attempts in batches: whatever has finished while the previous batch
/// was written goes into the next write transaction ([`PushStore::settle_many`]).
/// Then the batch's slots are freed, its keys go back to the claim loop (`freed`) and
/// the claim loop is woken (`settled`). When a batch cannot be stored, its keys go back
/// only after `hold` (the lease): their rows are still due, and an at once retry would
/// send them again and again while the database fails. Ends when every [`Settler`] is
/// gone.
///
/// [`PushStore::settle_many`]: crate::store::PushStore::settle_many
async fn settle_loop(
    svc: Arc<PushService>,
    mut rx: mpsc::UnboundedReceiver<Done>,
    freed: Freed,
    settled: Arc<Notify>,
    hold: Duration,
) {
    let mut batch = Vec::with_capacity(SETTLE_BATCH);
    while rx.recv_many(&mut batch, SETTLE_BATCH).await > 0 {
        let mut stored = true;
        if let Some(store) = svc.store.push_store() {
            let items: Vec<_> = batch.iter().map(|d| (&d.key, &d.outcome)).collect();
            match store.settle_many(&items).await {
                Ok(settled) => {
                    for (d, s) in batch.iter().zip(settled) {
                        if !s.disabled {
                            continue;
                        }
                        metrics::counter!(PUSH_CONFIGS_DISABLED).increment(1);
                        if matches!(d.outcome, Settle::GiveUp { .. }) {
                            tracing::warn!(
                                task.id = %d.key.task_id, push.config = %d.key.config_id,
                                dropped = s.dropped, attempts = d.attempts + 1,
                                "push config disabled after a run of failed deliveries"
                            );
                        }
                    }
                }
                Err(e) => {
                    stored = false;
                    tracing::warn!(
                        deliveries = batch.len(), task.id = %batch[0].key.task_id, error = %e,
                        "push deliveries could not be settled; they are retried after their lease"
                    );
                }
            }
        }
        let keys: Vec<(DeliveryKey, String)> = batch
            .iter()
            .map(|d| (d.key.clone(), d.slot.host().to_owned()))
            .collect();
        batch.clear(); // frees the slots
        if stored {
            let _ = freed.send(keys);
        } else {
            let freed = freed.clone();
            let settled = settled.clone();
            tokio::spawn(async move {
                tokio::time::sleep(hold).await;
                let _ = freed.send(keys);
                settled.notify_one();
            });
        }
        settled.notify_one();
    }
}

/// What woke the claim loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// New events were queued, or the poll interval passed: read the outbox.
    Read,
    /// Attempts were settled: start held heads, and read the outbox only for a host
    /// that freed a slot and has none held.
    Settled,
}

/// Gives back heads the claim loop will not start now: out of the in-flight set and,
/// on a store with written claims, due again at `now` rather than after their lease.
async fn give_back(
    store: &dyn crate::store::PushStore,
    local: bool,
    in_flight: &mut HashSet<DeliveryKey>,
    heads: Vec<Held>,
    now: i64,
) {
    let mut by_lease: Vec<(i64, Vec<DeliveryKey>)> = Vec::new();
    for h in heads {
        in_flight.remove(&h.claimed.key);
        match by_lease.iter_mut().find(|(u, _)| *u == h.claimed_until) {
            Some((_, keys)) => keys.push(h.claimed.key),
            None => by_lease.push((h.claimed_until, vec![h.claimed.key])),
        }
    }
    if local {
        return;
    }
    for (until, keys) in by_lease {
        if let Err(e) = store.unclaim(&keys, until, now).await {
            tracing::warn!(error = %e, "push claims could not be released; they are taken again after their lease");
        }
    }
}

/// The sender loop (see the module docs); ends when `stop` is cancelled, after the
/// attempts in flight (each bounded by the timeout) are settled.
///
/// Claims: on a store that several instances share, each claim is a write that
/// reserves the heads for `lease_secs` ([`PushStore::claim`]). On a store only this
/// process uses ([`PushStore::single_process`]: memory, SQLite) nothing is written:
/// the loop reads the due heads ([`PushStore::due_heads`]) and skips those in its
/// in-flight set, which holds every key from its read to its stored settlement. That
/// is as safe as the written claim: no other process can read the outbox, so the set
/// is the whole truth about what is in flight; a key leaves it only after its
/// settlement is committed, and the next read starts after that (the loop drains the
/// freed keys before each read), so a delivered event is never read as due again and
/// event n+1 of a queue is read as its head only once n is settled. After a crash
/// the set is gone with the process and every unsettled row is due again, so a
/// restart sends it (at least once, as with a lease, only sooner).
///
/// Heads read whose host or caller has no room are held in memory (see the `ready`
/// module; their keys stay in the in-flight set) and started as slots free, before
/// the outbox is read again: a settlement reads the outbox only when it freed a slot
/// of a host with nothing held, and otherwise new events and the poll interval do.
/// Reading past due rows that could be neither started nor held happens at most once
/// per poll interval.
///
/// [`PushStore::claim`]: crate::store::PushStore::claim
/// [`PushStore::single_process`]: crate::store::PushStore::single_process
/// [`PushStore::due_heads`]: crate::store::PushStore::due_heads
pub(crate) async fn run(svc: Arc<PushService>, stop: CancellationToken) {
    let Some(store) = svc.store.push_store() else {
        tracing::warn!("the task store keeps no push state: push notifications are off");
        return;
    };
    let local = store.single_process();
    if local && !store.reserve_sender() {
        tracing::warn!(
            "another push sender of this process runs on this task store; this one stays idle"
        );
        return;
    }
    let slots = Slots::new(svc.config.concurrency, svc.config.per_host_concurrency);
    let mut ready = Ready::new(
        svc.config.concurrency.saturating_mul(2),
        svc.config.concurrency,
    );
    // Keys read or claimed by this process, from then to their stored settlement (or
    // their give-back): started, or held in `ready` (a claim taken over after its
    // lease while the first attempt still waits is not started twice; in-memory
    // claims skip them).
    let mut in_flight: HashSet<DeliveryKey> = HashSet::new();
    let (done, rx) = mpsc::unbounded_channel();
    let (freed_tx, mut freed) = mpsc::unbounded_channel();
    let settled = Arc::new(Notify::new());
    let lease = Duration::from_secs(svc.config.lease_secs);
    // The reservation ends with the settle task, after the last attempt's settlement:
    // not when the shutdown below stops waiting for them.
    let reservation = local.then(|| Reservation(svc.clone()));
    let settler = tokio::spawn({
        let settle = settle_loop(svc.clone(), rx, freed_tx, settled.clone(), lease);
        async move {
            settle.await;
            drop(reservation);
        }
    });
    let poll = Duration::from_millis(svc.config.poll_interval_ms);
    let lease_ms = i64::try_from(svc.config.lease_secs * 1000).unwrap_or(i64::MAX / 4);
    let timeout_ms = i64::try_from(svc.config.timeout_secs * 1000).unwrap_or(i64::MAX / 4);
    let mut gauge_at = std::time::Instant::now();
    let mut read_at = tokio::time::Instant::now();
    let mut past_at: Option<tokio::time::Instant> = None;
    // A read this pass had to make but could not (no slot was free).
    let mut owed = false;
    loop {
        let wake = tokio::select! {
            _ = stop.cancelled() => break,
            _ = svc.wake.notified() => Wake::Read,
            _ = settled.notified() => Wake::Settled,
            _ = tokio::time::sleep(poll) => Wake::Read,
        };
        if gauge_at.elapsed() >= Duration::from_secs(5) {
            gauge_at = std::time::Instant::now();
            update_gauge(&svc).await;
        }
        let mut must_read = owed || wake == Wake::Read || read_at.elapsed() >= poll;
        owed = false;
        let mut rounds = 0usize;
        // Due rows read past in this pass because they could be neither started nor
        // held: when a read starts nothing, the next reads that many more (on a local
        // store they stay first in the due order), so that the rows behind them are
        // seen.
        let mut extra = 0usize;
        // Whether this pass reads past such rows (at most one pass per poll interval).
        let mut passing = false;
        loop {
            while let Ok(keys) = freed.try_recv() {
                for (k, host) in keys {
                    in_flight.remove(&k);
                    must_read |= !ready.holds(&host);
                }
            }
            let now = now_ms();
            let generation = svc.forgotten.load(Ordering::Acquire);
            let expired = ready.expired(now, generation);
            if !expired.is_empty() {
                give_back(store, local, &mut in_flight, expired, now).await;
                must_read = true;
            }
            let free = slots.free().min(CLAIM_BATCH);
            if free == 0 {
                // A settled batch wakes the loop, and then reads if this pass had to.
                owed = must_read && rounds == 0;
                break;
            }
            let mut waiting = ready.take_all();
            let mut full_read = false;
            if must_read {
                rounds += 1;
                read_at = tokio::time::Instant::now();
                let (read, limit) = if local {
                    // Started and held heads are still due in the store: the read
                    // skips them.
                    let limit = free + extra;
                    (store.due_heads(now, limit, &in_flight).await, limit)
                } else {
                    let read = match store.any_due(now).await {
                        Ok(true) => store.claim(now, lease_ms, free).await,
                        Ok(false) => Ok(Vec::new()),
                        Err(e) => Err(e),
                    };
                    (read, free)
                };
                match read {
                    Ok(claimed) => {
                        full_read = claimed.len() >= limit;
                        let (claimed_until, until_ms) = if local {
                            (i64::MAX, i64::MAX)
                        } else {
                            (now + lease_ms, now + lease_ms - timeout_ms - 1000)
                        };
                        waiting.extend(claimed.into_iter().filter_map(|c| {
                            (!in_flight.contains(&c.key)).then(|| Held {
                                host: host_of(&c.config.url),
                                claimed: c,
                                claimed_until,
                                until_ms,
                                generation,
                            })
                        }));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "push outbox claim failed; retrying");
                        must_read = false;
                    }
                }
            }
            let shares = Shares::of_scopes(waiting.iter().map(|h| &h.claimed.key.scope));
            let (mut started, mut no_room, mut full) = (0usize, Vec::new(), false);
            // Hosts and callers that had no room in this pass: their other heads are
            // not asked again (a busy host may have many heads held).
            let mut busy_hosts: HashSet<String> = HashSet::new();
            let mut busy_callers: HashSet<Scope> = HashSet::new();
            for h in interleave(waiting, |h| &h.claimed.key.scope) {
                if full
                    || busy_hosts.contains(&h.host)
                    || busy_callers.contains(&h.claimed.key.scope)
                {
                    no_room.push(h);
                    continue;
                }
                match slots.try_start(&shares, &h.claimed.key.scope, &h.host) {
                    Start::Go(slot) => {
                        in_flight.insert(h.claimed.key.clone());
                        started += 1;
                        tokio::spawn(deliver(svc.clone(), h.claimed, slot, done.clone()));
                    }
                    Start::HostBusy => {
                        busy_hosts.insert(h.host.clone());
                        no_room.push(h);
                    }
                    Start::NoRoom => {
                        busy_callers.insert(h.claimed.key.scope.clone());
                        no_room.push(h);
                    }
                    Start::Full => {
                        full = true;
                        no_room.push(h);
                    }
                }
            }
            // Not started: held while there is room, else given back (on a shared
            // store due again at once, behind older rows, rather than after the lease).
            let mut left = Vec::new();
            for h in no_room {
                let key = h.claimed.key.clone();
                match ready.hold(h) {
                    None => {
                        in_flight.insert(key);
                    }
                    Some(h) => left.push(h),
                }
            }
            let past = left.len();
            if !left.is_empty() {
                give_back(store, local, &mut in_flight, left, now).await;
            }
            // Read again while there may be more due rows and slots for them: at once
            // when every row read was started or held; when some could be neither,
            // only if nothing started (a settlement wakes the loop again) and no other
            // pass read past rows within the poll interval, a few times, each time
            // further on a local store (on a shared one the released rows now sort
            // last).
            if !must_read || full || !full_read {
                break;
            }
            if past > 0 {
                let recent = !passing && past_at.is_some_and(|t| t.elapsed() < poll);
                if started > 0 || recent || rounds >= MAX_ROUNDS || extra >= MAX_READ_PAST {
                    break;
                }
                if !passing {
                    passing = true;
                    past_at = Some(tokio::time::Instant::now());
                }
                if local {
                    extra = (extra + past).min(MAX_READ_PAST);
                }
            }
        }
    }
    // Held heads are not started any more: on a shared store others may take them now.
    let held = ready.take_all();
    if !held.is_empty() {
        give_back(store, local, &mut in_flight, held, now_ms()).await;
    }
    // Let attempts in flight end (each by its timeout) and be settled.
    drop(done);
    if tokio::time::timeout(Duration::from_secs(svc.config.timeout_secs + 5), settler)
        .await
        .is_err()
    {
        tracing::warn!(
            "push attempts are still being settled after the sender stopped; another sender \
             of this process can start on this task store once they are"
        );
    }
}

/// The reservation of the one sender of a single-process store
/// ([`PushStore::reserve_sender`](crate::store::PushStore::reserve_sender)), released
/// when dropped.
struct Reservation(Arc<PushService>);

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(store) = self.0.store.push_store() {
            store.release_sender();
        }
    }
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
        metrics::gauge!(PUSH_OLDEST_PENDING).set(age);
    }
}

#[cfg(test)]
mod shutdown_tests;

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
