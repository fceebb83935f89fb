//! The bound on what one caller writes per window (issue 43, item 9): the bytes of the
//! messages a caller has stored, a token bucket per caller (its owner, whatever tenants
//! it names)
//! holding [`HandlerConfig::max_message_bytes_per_caller_per_minute`] and refilled at
//! that rate. A message that finds its caller's bucket short is refused with a
//! retryable error naming the limit, before anything is stored; other callers are not
//! touched. So one caller cannot fill the store (or a disk) at the rate its connection
//! allows.
//!
//! [`HandlerConfig::max_message_bytes_per_caller_per_minute`]: super::HandlerConfig::max_message_bytes_per_caller_per_minute

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::A2aError;
use crate::scope::Scope;

/// The window the budget is given per.
const WINDOW: Duration = Duration::from_secs(60);

/// Callers kept beyond which buckets that refilled whole are forgotten (a full bucket
/// and no bucket are the same).
const PRUNE_AT: usize = 1024;

/// The token buckets of one handler's callers.
pub(crate) struct WriteBudget {
    per_window: u64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

/// Bytes a caller may still write, as of `at`.
#[derive(Clone, Copy)]
struct Bucket {
    left: u64,
    at: Instant,
}

impl Bucket {
    /// The bucket refilled up to `now`, at `per_window` bytes per [`WINDOW`].
    fn refilled(self, now: Instant, per_window: u64) -> Bucket {
        let elapsed = now.saturating_duration_since(self.at);
        let gained = (u128::from(per_window) * elapsed.as_nanos() / WINDOW.as_nanos())
            .min(u128::from(u64::MAX)) as u64;
        Bucket {
            left: self.left.saturating_add(gained).min(per_window),
            at: now,
        }
    }
}

impl WriteBudget {
    /// A budget of `per_window` bytes per caller per minute (0 is taken as 1).
    pub(crate) fn new(per_window: u64) -> Self {
        Self {
            per_window: per_window.max(1),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Gives back `bytes` taken by [`WriteBudget::charge`] for a message that was then
    /// refused before anything of it was stored (the gateway was busy): a client that
    /// retries on 503 does not spend its budget on refusals.
    pub(crate) fn refund(&self, scope: &Scope, bytes: u64) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = buckets.get_mut(&scope.owner) {
            b.left = b.left.saturating_add(bytes).min(self.per_window);
        }
    }

    /// Takes `bytes` from the bucket of `scope`'s caller, or refuses. A message larger
    /// than the whole budget is taken when the bucket is full (it empties it), so no
    /// message the body limit allows is refused for ever.
    ///
    /// # Errors
    /// Unavailable (HTTP 503 with `Retry-After`, gRPC UNAVAILABLE) naming
    /// `max_message_bytes_per_caller_per_minute`.
    pub(crate) fn charge(&self, scope: &Scope, bytes: u64) -> Result<(), A2aError> {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= PRUNE_AT {
            let per_window = self.per_window;
            buckets.retain(|_, b| b.refilled(now, per_window).left < per_window);
        }
        // A caller is its owner, whatever tenants it names.
        let key = scope.owner.clone();
        let bucket = buckets
            .get(&key)
            .map(|b| b.refilled(now, self.per_window))
            .unwrap_or(Bucket {
                left: self.per_window,
                at: now,
            });
        let full = bucket.left == self.per_window;
        if bucket.left < bytes && !full {
            buckets.insert(key, bucket);
            return Err(A2aError::Unavailable(format!(
                "this caller wrote more message bytes in the last minute than its limit \
                 (max_message_bytes_per_caller_per_minute = {}): {} left, this message \
                 takes {bytes}; retry later",
                self.per_window, bucket.left
            )));
        }
        buckets.insert(
            key,
            Bucket {
                left: bucket.left.saturating_sub(bytes),
                at: now,
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_caller_over_its_budget_waits_for_the_refill_and_others_go_on() {
        let budget = WriteBudget::new(600);
        let a = Scope::new("t", "a");
        budget.charge(&a, 400).unwrap();
        let Err(A2aError::Unavailable(m)) = budget.charge(&a, 400) else {
            panic!("not refused");
        };
        assert!(
            m.contains("max_message_bytes_per_caller_per_minute = 600"),
            "{m}"
        );
        // Another caller has its own bucket; the same owner naming another tenant has not.
        budget.charge(&Scope::new("t", "b"), 600).unwrap();
        assert!(budget.charge(&Scope::new("u", "a"), 400).is_err());
        // 200 left; 20 s refill 200 more.
        tokio::time::advance(Duration::from_secs(19)).await;
        assert!(budget.charge(&a, 400).is_err());
        tokio::time::advance(Duration::from_secs(1)).await;
        budget.charge(&a, 400).unwrap();
        // A message over the whole budget passes on a full bucket, and empties it.
        tokio::time::advance(Duration::from_secs(60)).await;
        budget.charge(&a, 10_000).unwrap();
        assert!(budget.charge(&a, 1).is_err());
    }
}
