//! Heads the sender read (or claimed) but could not start because their host or
//! caller had no room, kept in memory per host and started as slots free, so that a
//! busy host's backlog is not read from the outbox again for every delivery.
//!
//! A held head holds no slot (see the `fair` module). Its key stays in the claim
//! loop's in-flight set, so no read of this process returns it twice; it is still
//! pending in the store, so a crash loses nothing (a restart, or another instance
//! after the lease, sends it). On a store with written claims a head is held only
//! while its lease leaves room for an attempt (its `until_ms`, see
//! [`Ready::expired`]); then it is given back.

use std::collections::{HashMap, VecDeque};

use crate::store::push::Claimed;

/// One held head: the delivery, its host (see `fair::host_of`), the end of its claim
/// (milliseconds since the epoch; `i64::MAX` without a written claim) and the last
/// moment it may still be started (the same units).
#[derive(Debug)]
pub(crate) struct Held {
    /// The delivery as read.
    pub(crate) claimed: Claimed,
    /// Its host budget's name.
    pub(crate) host: String,
    /// When its written claim ends (the `claimed_until` of an unclaim).
    pub(crate) claimed_until: i64,
    /// The last moment an attempt may start and still end within the claim.
    pub(crate) until_ms: i64,
    /// `PushService::forgotten` when it was read: a held head read before a config
    /// was deleted is read again rather than started.
    pub(crate) generation: u64,
}

/// Held heads per host, in the order they were read, at most `max` in all and
/// `max_per_host` for one host (so one host's backlog, or a dead host, cannot take
/// the room of the others).
#[derive(Debug)]
pub(crate) struct Ready {
    hosts: HashMap<String, VecDeque<Held>>,
    len: usize,
    max: usize,
    max_per_host: usize,
}

impl Ready {
    /// An empty queue for at most `max` heads, `max_per_host` of one host (both at
    /// least 1).
    pub(crate) fn new(max: usize, max_per_host: usize) -> Self {
        Ready {
            hosts: HashMap::new(),
            len: 0,
            max: max.max(1),
            max_per_host: max_per_host.max(1),
        }
    }

    /// How many heads are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether heads of `host` are held.
    pub(crate) fn holds(&self, host: &str) -> bool {
        self.hosts.get(host).is_some_and(|q| !q.is_empty())
    }

    /// Holds `h` (`None`), or gives it back when the queue or its host's part is full.
    pub(crate) fn hold(&mut self, h: Held) -> Option<Held> {
        if self.len >= self.max {
            return Some(h);
        }
        // Looked up first: the host's name is cloned only for a new queue.
        let q = match self.hosts.get_mut(&h.host) {
            Some(q) => q,
            None => self.hosts.entry(h.host.clone()).or_default(),
        };
        if q.len() >= self.max_per_host {
            return Some(h);
        }
        q.push_back(h);
        self.len += 1;
        None
    }

    /// Takes every held head out, each host's in its order, hosts one after another.
    pub(crate) fn take_all(&mut self) -> Vec<Held> {
        self.len = 0;
        self.hosts.drain().flat_map(|(_, q)| q).collect()
    }

    /// Takes out the heads whose `until_ms` is before `now_ms` (they may no longer
    /// start within their claim) or whose `generation` is before `generation` (a
    /// config was deleted since they were read).
    pub(crate) fn expired(&mut self, now_ms: i64, generation: u64) -> Vec<Held> {
        let mut out = Vec::new();
        for q in self.hosts.values_mut() {
            let (keep, gone): (VecDeque<Held>, VecDeque<Held>) = q
                .drain(..)
                .partition(|h| h.until_ms >= now_ms && h.generation >= generation);
            *q = keep;
            out.extend(gone);
        }
        self.hosts.retain(|_, q| !q.is_empty());
        self.len -= out.len();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(host: &str, seq: u64, until_ms: i64) -> Held {
        Held {
            claimed: crate::push::fair::tests::row("t", "o", seq),
            host: host.into(),
            claimed_until: i64::MAX,
            until_ms,
            generation: 0,
        }
    }

    #[test]
    fn holds_at_most_its_bounds_and_gives_back_in_order() {
        let mut r = Ready::new(3, 2);
        assert!(r.hold(held("a", 1, 10)).is_none());
        assert!(r.hold(held("a", 2, 10)).is_none());
        assert!(r.hold(held("a", 3, 10)).is_some(), "a host's part is full");
        assert!(r.hold(held("b", 4, 10)).is_none());
        assert!(r.hold(held("c", 5, 10)).is_some(), "the queue is full");
        assert_eq!(r.len(), 3);
        assert!(r.holds("a") && r.holds("b") && !r.holds("c"));
        let mut seqs: Vec<u64> = r.take_all().iter().map(|h| h.claimed.key.seq).collect();
        let a: Vec<u64> = seqs.iter().copied().filter(|&s| s < 3).collect();
        assert_eq!(a, vec![1, 2], "one host's heads keep their order");
        seqs.sort_unstable();
        assert_eq!(seqs, vec![1, 2, 4]);
        assert_eq!(r.len(), 0);
        assert!(!r.holds("a"));
    }

    #[test]
    fn gives_out_the_heads_whose_time_is_over_or_read_before_a_delete() {
        let mut r = Ready::new(10, 10);
        assert!(r.hold(held("a", 1, 5)).is_none());
        assert!(r.hold(held("a", 2, 20)).is_none());
        assert!(r.hold(held("b", 3, 5)).is_none());
        let mut gone: Vec<u64> = r.expired(10, 0).iter().map(|h| h.claimed.key.seq).collect();
        gone.sort_unstable();
        assert_eq!(gone, vec![1, 3]);
        assert_eq!(r.len(), 1);
        assert!(r.holds("a") && !r.holds("b"));
        assert_eq!(r.expired(10, 1).len(), 1, "read before a delete");
        assert_eq!(r.len(), 0);
    }
}
