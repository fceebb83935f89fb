//! Who may start a push attempt now: the sender's slots shared between hosts, tenants
//! and callers, so that one caller's dead webhooks never delay another's.
//!
//! The claim loop asks [`Slots::try_start`] for every due delivery it read and starts
//! the attempt only when all three budgets have room; nothing ever waits holding a slot
//! (a delivery whose host or caller has no room is held in memory, see the `ready`
//! module, or left pending in the outbox, and is looked at again on the next pass):
//!
//! - **Global**: at most `[push] concurrency` attempts in flight.
//! - **Host** (the URL's host and port): at most `per_host_concurrency` attempts, fewer
//!   while it does not answer: an attempt that times out or cannot connect halves the
//!   host's limit (down to one), an attempt the host answers (any HTTP status) doubles it
//!   back (up to `per_host_concurrency`). A host that never answers thus holds one slot.
//! - **Caller**: when deliveries of several tenants are waiting, a tenant may hold at
//!   most `concurrency / tenants waiting` slots, and a caller (its [`Scope`]) an equal
//!   part of its tenant's share; a lone caller may use every slot (the shares bind only
//!   while someone else waits).
//!
//! [`interleave`] orders what one pass read: round-robin over tenants, then over the
//! callers of a tenant, oldest due first within each caller, so the slots that free up
//! go to each waiting caller in turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::scope::Scope;
#[cfg(test)]
use crate::store::push::Claimed;

/// Hosts whose state is kept at most (beyond this, hosts with nothing in flight are
/// forgotten, with their lowered limits).
const MAX_HOSTS: usize = 10_000;

/// The slots of one sender (see the module docs).
#[derive(Debug)]
pub(crate) struct Slots {
    global: Arc<Semaphore>,
    concurrency: usize,
    host_max: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    hosts: HashMap<String, Host>,
    tenants: HashMap<String, usize>,
    callers: HashMap<Scope, usize>,
}

#[derive(Debug, Clone, Copy)]
struct Host {
    busy: usize,
    limit: usize,
}

/// The shares of one pass: how many tenants, and callers per tenant, have deliveries
/// waiting (read and not in flight).
#[derive(Debug, Default)]
pub(crate) struct Shares {
    tenants: usize,
    callers: HashMap<String, usize>,
}

impl Shares {
    /// The shares of the waiting deliveries `rows`.
    #[cfg(test)]
    pub(crate) fn of(rows: &[Claimed]) -> Self {
        Self::of_scopes(rows.iter().map(|c| &c.key.scope))
    }

    /// The shares of waiting deliveries of the callers `scopes` (one per delivery).
    pub(crate) fn of_scopes<'a>(scopes: impl IntoIterator<Item = &'a Scope>) -> Self {
        let mut callers: HashMap<String, Vec<&str>> = HashMap::new();
        for scope in scopes {
            let owners = callers.entry(scope.tenant.clone()).or_default();
            if !owners.contains(&scope.owner.as_str()) {
                owners.push(&scope.owner);
            }
        }
        Shares {
            tenants: callers.len(),
            callers: callers.into_iter().map(|(t, o)| (t, o.len())).collect(),
        }
    }
}

/// What [`Slots::try_start`] answered.
#[derive(Debug)]
pub(crate) enum Start {
    /// Start the attempt; the slot is released when dropped.
    Go(Slot),
    /// The caller (its tenant's or its own share) has no room: leave this delivery
    /// pending.
    NoRoom,
    /// The host has no room: leave this delivery, and every other one to this host in
    /// this pass, pending.
    HostBusy,
    /// No global slot is free: stop this pass.
    Full,
}

/// One attempt's place in the budgets, released when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    slots: Arc<Slots>,
    host: String,
    scope: Scope,
    _global: OwnedSemaphorePermit,
}

impl Slots {
    /// Slots for `concurrency` attempts in all and `per_host` to one host (both at
    /// least 1).
    pub(crate) fn new(concurrency: usize, per_host: usize) -> Arc<Self> {
        let concurrency = concurrency.max(1);
        Arc::new(Slots {
            global: Arc::new(Semaphore::new(concurrency)),
            concurrency,
            host_max: per_host.max(1),
            state: Mutex::default(),
        })
    }

    /// Global slots free now.
    pub(crate) fn free(&self) -> usize {
        self.global.available_permits()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot for an attempt of `scope` to `host`, if the host, the caller (under
    /// `shares`) and the global budget all have room.
    pub(crate) fn try_start(self: &Arc<Self>, shares: &Shares, scope: &Scope, host: &str) -> Start {
        let mut st = self.state();
        let tenant_share = (self.concurrency / shares.tenants.max(1)).max(1);
        let callers = shares.callers.get(&scope.tenant).copied().unwrap_or(1);
        let caller_share = (tenant_share / callers.max(1)).max(1);
        if st.tenants.get(&scope.tenant).copied().unwrap_or(0) >= tenant_share
            || st.callers.get(scope).copied().unwrap_or(0) >= caller_share
        {
            return Start::NoRoom;
        }
        let h = st.hosts.get(host).copied().unwrap_or(Host {
            busy: 0,
            limit: self.host_max,
        });
        if h.busy >= h.limit {
            return Start::HostBusy;
        }
        let Ok(global) = self.global.clone().try_acquire_owned() else {
            return Start::Full;
        };
        if st.hosts.len() >= MAX_HOSTS && !st.hosts.contains_key(host) {
            st.hosts.retain(|_, h| h.busy > 0);
        }
        st.hosts.insert(
            host.to_owned(),
            Host {
                busy: h.busy + 1,
                limit: h.limit,
            },
        );
        *st.tenants.entry(scope.tenant.clone()).or_default() += 1;
        *st.callers.entry(scope.clone()).or_default() += 1;
        Start::Go(Slot {
            slots: self.clone(),
            host: host.to_owned(),
            scope: scope.clone(),
            _global: global,
        })
    }

    /// The attempts `host` may have in flight now.
    #[cfg(test)]
    pub(crate) fn host_limit(&self, host: &str) -> usize {
        self.state()
            .hosts
            .get(host)
            .map_or(self.host_max, |h| h.limit)
    }
}

impl Slot {
    /// The host budget this slot counts against (see [`host_of`]).
    pub(crate) fn host(&self) -> &str {
        &self.host
    }

    /// Records whether the host answered the attempt (any HTTP status) or not (timed
    /// out, could not connect), growing or shrinking its limit.
    pub(crate) fn report(&self, answered: bool) {
        let mut st = self.slots.state();
        if let Some(h) = st.hosts.get_mut(&self.host) {
            h.limit = if answered {
                h.limit.saturating_mul(2).min(self.slots.host_max)
            } else {
                (h.limit / 2).max(1)
            };
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let host_max = self.slots.host_max;
        let mut st = self.slots.state();
        if let Some(h) = st.hosts.get_mut(&self.host) {
            h.busy = h.busy.saturating_sub(1);
            if h.busy == 0 && h.limit >= host_max {
                st.hosts.remove(&self.host);
            }
        }
        if let Some(n) = st.tenants.get_mut(&self.scope.tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                st.tenants.remove(&self.scope.tenant);
            }
        }
        if let Some(n) = st.callers.get_mut(&self.scope) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                st.callers.remove(&self.scope);
            }
        }
    }
}

/// The host budget a delivery counts against: its URL's host and port (`""` when the
/// URL does not parse; the attempt then fails at once).
pub(crate) fn host_of(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => format!(
            "{}:{}",
            u.host_str().unwrap_or_default(),
            u.port_or_known_default().unwrap_or(0)
        ),
        Err(_) => String::new(),
    }
}

/// A caller of a tenant seen by [`interleave`], and how many of its rows so far.
type Seen<'a> = (&'a str, usize);

/// `rows` (oldest due first; `scope` gives each one's caller) in the order to start
/// them: round-robin over tenants (in the order they first appear), each tenant's turn
/// going round-robin over its callers, each caller's rows in their order.
pub(crate) fn interleave<T>(rows: Vec<T>, scope: impl Fn(&T) -> &Scope) -> Vec<T> {
    // (tenant index, caller index in its tenant, the row's index among its caller's).
    let mut at = Vec::with_capacity(rows.len());
    let mut tenants: HashMap<&str, (usize, Vec<Seen<'_>>)> = HashMap::new();
    for c in &rows {
        let n = tenants.len();
        let s = scope(c);
        let (t, owners) = tenants.entry(s.tenant.as_str()).or_insert((n, Vec::new()));
        let owner = s.owner.as_str();
        let ci = match owners.iter().position(|(o, _)| *o == owner) {
            Some(i) => i,
            None => {
                owners.push((owner, 0));
                owners.len() - 1
            }
        };
        at.push((*t, ci, owners[ci].1));
        owners[ci].1 += 1;
    }
    let callers: HashMap<usize, usize> = tenants.values().map(|(t, o)| (*t, o.len())).collect();
    // Within a tenant: rank k * callers + caller; then the turn is that rank's position.
    let mut per_tenant: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
    for (i, &(t, ci, k)) in at.iter().enumerate() {
        per_tenant
            .entry(t)
            .or_default()
            .push((k * callers[&t] + ci, i));
    }
    let mut order: Vec<(usize, usize, usize)> = Vec::with_capacity(rows.len());
    for (t, mut list) in per_tenant {
        list.sort_unstable();
        for (turn, (_, i)) in list.into_iter().enumerate() {
            order.push((turn, t, i));
        }
    }
    order.sort_unstable();
    let mut rows: Vec<Option<T>> = rows.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|(_, _, i)| rows[i].take())
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::store::push::{DeliveryKey, StoredPushConfig};

    /// A claimed delivery of `(tenant, owner)`, task `t{seq}`, config `c`, to
    /// `https://receiver.example/` (also the fixture of `ready.rs`'s tests).
    pub(in crate::push) fn row(tenant: &str, owner: &str, seq: u64) -> Claimed {
        Claimed {
            key: DeliveryKey {
                scope: Scope::new(tenant, owner),
                task_id: format!("t{seq}"),
                config_id: "c".into(),
                seq,
            },
            config: StoredPushConfig {
                task_id: format!("t{seq}"),
                id: "c".into(),
                url: "https://receiver.example/".into(),
                token: None,
                auth_scheme: None,
                auth_credentials: None,
                enabled: true,
                failures: 0,
                last_error: None,
                created_ms: 0,
            },
            event: None,
            attempts: 0,
            created_ms: 0,
            range_end: None,
        }
    }

    fn go(s: Start) -> Slot {
        match s {
            Start::Go(slot) => slot,
            other => panic!("expected a slot, got {other:?}"),
        }
    }

    #[test]
    fn interleaves_tenants_then_callers_keeping_each_callers_order() {
        let rows = vec![
            row("a", "x", 1),
            row("a", "x", 2),
            row("a", "y", 3),
            row("a", "x", 4),
            row("b", "z", 5),
            row("b", "z", 6),
        ];
        let seqs: Vec<u64> = interleave(rows, |c| &c.key.scope)
            .iter()
            .map(|c| c.key.seq)
            .collect();
        // Tenant a's own turns: x1 y3 x2 x4; tenant b's: z5 z6; alternated a, b.
        assert_eq!(seqs, vec![1, 5, 3, 6, 2, 4]);
    }

    #[test]
    fn a_host_holds_at_most_its_limit_and_waiting_takes_no_global_slot() {
        let slots = Slots::new(4, 2);
        let shares = Shares::of(&[row("a", "x", 1)]);
        let alice = Scope::new("a", "x");
        let _one = go(slots.try_start(&shares, &alice, "dead:443"));
        let _two = go(slots.try_start(&shares, &alice, "dead:443"));
        assert!(matches!(
            slots.try_start(&shares, &alice, "dead:443"),
            Start::HostBusy
        ));
        assert_eq!(slots.free(), 2, "a refused start holds no global slot");
        let _three = go(slots.try_start(&shares, &alice, "alive:443"));
    }

    #[test]
    fn a_host_that_keeps_timing_out_gets_fewer_attempts_and_recovers() {
        let slots = Slots::new(64, 8);
        let shares = Shares::default();
        let s = Scope::new("", "");
        for expected in [4, 2, 1, 1] {
            let slot = go(slots.try_start(&shares, &s, "dead:443"));
            slot.report(false);
            drop(slot);
            assert_eq!(slots.host_limit("dead:443"), expected);
        }
        let _held = go(slots.try_start(&shares, &s, "dead:443"));
        assert!(matches!(
            slots.try_start(&shares, &s, "dead:443"),
            Start::HostBusy
        ));
        drop(_held);
        for expected in [2, 4, 8, 8] {
            let slot = go(slots.try_start(&shares, &s, "dead:443"));
            slot.report(true);
            drop(slot);
            assert_eq!(slots.host_limit("dead:443"), expected);
        }
    }

    #[test]
    fn tenants_share_the_slots_while_both_wait_and_a_lone_one_takes_all() {
        let slots = Slots::new(4, 100);
        let a = Scope::new("a", "x");
        let b = Scope::new("b", "y");
        let alone = Shares::of(&[row("a", "x", 1)]);
        let held: Vec<Slot> = (0..3)
            .map(|i| go(slots.try_start(&alone, &a, &format!("h{i}:443"))))
            .collect();
        let both = Shares::of(&[row("a", "x", 4), row("b", "y", 5)]);
        assert!(matches!(
            slots.try_start(&both, &a, "h9:443"),
            Start::NoRoom
        ));
        let _b = go(slots.try_start(&both, &b, "h9:443"));
        assert!(matches!(slots.try_start(&both, &b, "h8:443"), Start::Full));
        drop(held);
        let _b2 = go(slots.try_start(&both, &b, "h8:443"));
        assert!(
            matches!(slots.try_start(&both, &b, "h7:443"), Start::NoRoom),
            "b holds its half"
        );
    }
}
