//! Fair shares of the run slots (issue 43, item 9): at most
//! [`HandlerConfig::max_tasks_per_caller`](super::HandlerConfig::max_tasks_per_caller)
//! runs of one caller and
//! [`HandlerConfig::max_tasks_per_tenant`](super::HandlerConfig::max_tasks_per_tenant)
//! of one tenant at once, besides the handler's `max_concurrent_tasks`. So one caller
//! (or tenant) holding every slot cannot make every other caller's new task fail.
//!
//! A [`RunPermit`] is what a run (or a message queued behind a running turn) holds: one
//! of the handler's slots and one count of its caller and tenant, all given back when
//! the permit is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::A2aError;
use crate::scope::Scope;

/// The running counts per caller and per tenant of one handler, and their bounds.
pub(crate) struct RunLimits {
    per_caller: usize,
    per_tenant: usize,
    counts: Mutex<Counts>,
}

/// Runs held now, per caller (its owner, in whichever tenants) and per tenant; entries at zero are
/// removed, so the maps hold only callers with a run.
#[derive(Default)]
struct Counts {
    callers: HashMap<String, usize>,
    tenants: HashMap<String, usize>,
}

/// A run's share: one of the handler's slots and one count of its caller and tenant.
/// Dropping it gives all three back.
pub(crate) struct RunPermit {
    _slot: OwnedSemaphorePermit,
    limits: Arc<RunLimits>,
    tenant: String,
    owner: String,
}

impl RunLimits {
    /// Bounds of `per_caller` and `per_tenant` runs at once (0 is taken as 1).
    pub(crate) fn new(per_caller: usize, per_tenant: usize) -> Self {
        Self {
            per_caller: per_caller.max(1),
            per_tenant: per_tenant.max(1),
            counts: Mutex::new(Counts::default()),
        }
    }

    /// A permit for a run of `scope`'s caller, or a retryable refusal naming the limit
    /// that is reached: the handler's `max_concurrent_tasks` (`max_total`, the size of
    /// `slots`) when every slot is taken, else the caller's, then the tenant's (not for
    /// the default tenant `""`, which holds every call that names no tenant).
    ///
    /// # Errors
    /// Unavailable (HTTP 503 with `Retry-After`, gRPC UNAVAILABLE) naming
    /// `max_tasks_per_caller`, `max_tasks_per_tenant` or `max_concurrent_tasks`.
    pub(crate) fn acquire(
        self: &Arc<Self>,
        scope: &Scope,
        slots: &Arc<Semaphore>,
        max_total: usize,
    ) -> Result<RunPermit, A2aError> {
        let slot = slots.clone().try_acquire_owned().map_err(|_| {
            A2aError::Unavailable(format!(
                "the configured maximum of {max_total} running tasks is reached \
                 (max_concurrent_tasks); retry later"
            ))
        })?;
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        // A caller is its owner, whatever tenants it names (when tenants are not bound
        // to credentials, a caller names any tenant it likes).
        let caller_key = scope.owner.clone();
        let by_caller = counts.callers.get(&caller_key).copied().unwrap_or(0);
        if by_caller >= self.per_caller {
            return Err(A2aError::Unavailable(format!(
                "this caller already runs {by_caller} task(s), the limit per caller \
                 (max_tasks_per_caller = {}); retry later",
                self.per_caller
            )));
        }
        // The default tenant (`""`) is every call that names none, not one tenant: its
        // callers are bounded one by one only.
        let by_tenant = counts.tenants.get(&scope.tenant).copied().unwrap_or(0);
        if by_tenant >= self.per_tenant && !scope.tenant.is_empty() {
            return Err(A2aError::Unavailable(format!(
                "this tenant already runs {by_tenant} task(s), the limit per tenant \
                 (max_tasks_per_tenant = {}); retry later",
                self.per_tenant
            )));
        }
        *counts.callers.entry(caller_key).or_default() += 1;
        *counts.tenants.entry(scope.tenant.clone()).or_default() += 1;
        Ok(RunPermit {
            _slot: slot,
            limits: self.clone(),
            tenant: scope.tenant.clone(),
            owner: scope.owner.clone(),
        })
    }
}

/// Takes one off `map[key]`, removing the entry at zero.
fn release<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: &K) {
    if let Some(n) = map.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            map.remove(key);
        }
    }
}

impl Drop for RunPermit {
    fn drop(&mut self) {
        let mut counts = self.limits.counts.lock().unwrap_or_else(|p| p.into_inner());
        release(&mut counts.callers, &std::mem::take(&mut self.owner));
        release(&mut counts.tenants, &std::mem::take(&mut self.tenant));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(r: Result<RunPermit, A2aError>) -> String {
        match r {
            Err(A2aError::Unavailable(m)) => m,
            Err(e) => panic!("not Unavailable: {e:?}"),
            Ok(_) => panic!("not refused"),
        }
    }

    #[test]
    fn a_caller_at_its_limit_leaves_slots_to_others_and_gets_them_back() {
        let limits = Arc::new(RunLimits::new(2, 3));
        let slots = Arc::new(Semaphore::new(4));
        let a = Scope::new("t", "a");
        let held: Vec<_> = (0..2)
            .map(|_| limits.acquire(&a, &slots, 4).unwrap())
            .collect();
        let m = refusal(limits.acquire(&a, &slots, 4));
        assert!(m.contains("max_tasks_per_caller = 2"), "{m}");
        // Another caller of the tenant takes one; the tenant is then at its limit.
        let b = limits.acquire(&Scope::new("t", "b"), &slots, 4).unwrap();
        let m = refusal(limits.acquire(&Scope::new("t", "c"), &slots, 4));
        assert!(m.contains("max_tasks_per_tenant = 3"), "{m}");
        // The caller at its limit does not get more by naming another tenant.
        let m = refusal(limits.acquire(&Scope::new("u", "a"), &slots, 4));
        assert!(m.contains("max_tasks_per_caller = 2"), "{m}");
        // Another tenant takes the last slot; then the total is reached.
        let other = limits.acquire(&Scope::new("u", "d"), &slots, 4).unwrap();
        let m = refusal(limits.acquire(&Scope::new("v", "x"), &slots, 4));
        assert!(m.contains("max_concurrent_tasks"), "{m}");
        drop((b, other));
        // The default tenant is no tenant: only its callers are bounded (one tenant
        // run at most here, yet two callers without a tenant run one each).
        let one_each = Arc::new(RunLimits::new(1, 1));
        let own_slots = Arc::new(Semaphore::new(4));
        let untenanted: Vec<_> = ["x", "y"]
            .iter()
            .map(|c| {
                one_each
                    .acquire(&Scope::new("", *c), &own_slots, 4)
                    .unwrap()
            })
            .collect();
        let m = refusal(one_each.acquire(&Scope::new("", "x"), &own_slots, 4));
        assert!(m.contains("max_tasks_per_caller = 1"), "{m}");
        drop(untenanted);
        drop(held);
        assert_eq!(slots.available_permits(), 4);
        let counts = limits.counts.lock().unwrap();
        assert!(counts.callers.is_empty() && counts.tenants.is_empty());
    }
}
