//! [`PushStore`] of the in-process [`MemoryTaskStore`](crate::store::MemoryTaskStore):
//! its outbox rows are added under the lock of the task's shard by the append that
//! stores their events (see [`MemoryPush::enqueue`]), so within the process the memory store keeps
//! the same promise as the SQL stores.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::protocol::StreamResponse;
use crate::scope::Scope;
use crate::store::push::{
    Claimed, DeliveryKey, PendingDelivery, PushStatus, PushStore, Settle, Settled, StoredPushConfig,
};
use crate::store::{StoreError, StoredEvent};

struct Row {
    event: Arc<StoredEvent>,
    attempts: u32,
    created_ms: i64,
    next_ms: i64,
    last_error: Option<String>,
    range_end: Option<u64>,
}

#[derive(Default)]
struct State {
    configs: BTreeMap<(Scope, String, String), StoredPushConfig>,
    outbox: BTreeMap<DeliveryKey, Row>,
    key: Option<Vec<u8>>,
}

/// Push state of the memory store.
#[derive(Default)]
pub struct MemoryPush {
    state: Mutex<State>,
    /// Whether a sender keeps its claims in memory on this store.
    sender: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for MemoryPush {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemoryPush")
    }
}

/// Whether an event is pushed to webhooks: the Task and its updates, not the user
/// messages appended as history.
pub(crate) fn deliverable(event: &StreamResponse) -> bool {
    !matches!(event, StreamResponse::Message(_))
}

/// The keys of up to `limit` rows after `head` in its (task, config) queue, in order.
fn queue_after(st: &State, head: &DeliveryKey, limit: usize) -> Vec<DeliveryKey> {
    let from = DeliveryKey {
        seq: head.seq.saturating_add(1),
        ..head.clone()
    };
    st.outbox
        .range(from..)
        .map(|(k, _)| k)
        .take_while(|k| {
            k.scope == head.scope && k.task_id == head.task_id && k.config_id == head.config_id
        })
        .take(limit)
        .cloned()
        .collect()
}

impl MemoryPush {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds the outbox rows of `events`, just appended to the task: one per enabled
    /// config and deliverable event. Called by the append with the task's shard locked.
    pub(crate) fn enqueue(&self, scope: &Scope, task_id: &str, events: &[Arc<StoredEvent>]) {
        let mut st = self.lock();
        let lo = (scope.clone(), task_id.to_owned(), String::new());
        let configs: Vec<String> = st
            .configs
            .range(lo..)
            .take_while(|((s, t, _), _)| s == scope && t == task_id)
            .filter(|(_, c)| c.enabled)
            .map(|((_, _, id), _)| id.clone())
            .collect();
        if configs.is_empty() {
            return;
        }
        let now = crate::protocol::time::now().timestamp_millis();
        for id in configs {
            for e in events.iter().filter(|e| deliverable(&e.event)) {
                let key = DeliveryKey {
                    scope: scope.clone(),
                    task_id: task_id.to_owned(),
                    config_id: id.clone(),
                    seq: e.seq,
                };
                st.outbox.insert(
                    key,
                    Row {
                        event: e.clone(),
                        attempts: 0,
                        created_ms: now,
                        next_ms: now,
                        last_error: None,
                        range_end: None,
                    },
                );
            }
        }
    }

    /// Forgets the configs and deliveries of a purged task.
    pub(crate) fn forget_task(&self, scope: &Scope, task_id: &str) {
        let mut st = self.lock();
        st.configs
            .retain(|(s, t, _), _| !(s == scope && t == task_id));
        st.outbox
            .retain(|k, _| !(&k.scope == scope && k.task_id == task_id));
    }
}

fn drop_pending(st: &mut State, scope: &Scope, task_id: &str, id: &str) -> u64 {
    let before = st.outbox.len();
    st.outbox
        .retain(|k, _| !(&k.scope == scope && k.task_id == task_id && k.config_id == id));
    (before - st.outbox.len()) as u64
}

#[async_trait]
impl PushStore for MemoryPush {
    async fn put_config(&self, scope: &Scope, config: &StoredPushConfig) -> Result<(), StoreError> {
        let mut c = config.clone();
        c.enabled = true;
        c.failures = 0;
        c.last_error = None;
        self.lock().configs.insert(
            (scope.clone(), config.task_id.clone(), config.id.clone()),
            c,
        );
        Ok(())
    }

    async fn get_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<Option<StoredPushConfig>, StoreError> {
        Ok(self
            .lock()
            .configs
            .get(&(scope.clone(), task_id.to_owned(), id.to_owned()))
            .cloned())
    }

    async fn list_configs(
        &self,
        scope: &Scope,
        task_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StoredPushConfig>, StoreError> {
        let st = self.lock();
        let lo = (scope.clone(), task_id.to_owned(), String::new());
        Ok(st
            .configs
            .range(lo..)
            .take_while(|((s, t, _), _)| s == scope && t == task_id)
            .filter(|((_, _, id), _)| after.is_none_or(|a| id.as_str() > a))
            .take(limit)
            .map(|(_, c)| c.clone())
            .collect())
    }

    async fn delete_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        let mut st = self.lock();
        let existed = st
            .configs
            .remove(&(scope.clone(), task_id.to_owned(), id.to_owned()))
            .is_some();
        drop_pending(&mut st, scope, task_id, id);
        Ok(existed)
    }

    async fn claim(
        &self,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
    ) -> Result<Vec<Claimed>, StoreError> {
        let mut st = self.lock();
        let mut heads: Vec<DeliveryKey> = Vec::new();
        let mut last: Option<(Scope, String, String)> = None;
        for (k, row) in &st.outbox {
            let queue = (k.scope.clone(), k.task_id.clone(), k.config_id.clone());
            if last.as_ref() == Some(&queue) {
                continue;
            }
            last = Some(queue);
            if row.next_ms <= now_ms {
                heads.push(k.clone());
            }
        }
        heads.sort_by_key(|k| st.outbox.get(k).map(|r| r.next_ms));
        heads.truncate(limit);
        let mut out = Vec::with_capacity(heads.len());
        for k in heads {
            let Some(config) = st
                .configs
                .get(&(k.scope.clone(), k.task_id.clone(), k.config_id.clone()))
                .cloned()
            else {
                st.outbox.remove(&k);
                continue;
            };
            let row = st.outbox.get_mut(&k).expect("listed above");
            row.next_ms = now_ms + lease_ms;
            out.push(Claimed {
                event: serde_json::to_string(&row.event.event).ok(),
                attempts: row.attempts,
                created_ms: row.created_ms,
                range_end: row.range_end,
                key: k,
                config,
            });
        }
        Ok(out)
    }

    async fn pending_after(
        &self,
        head: &DeliveryKey,
        limit: usize,
    ) -> Result<Vec<(u64, Option<String>)>, StoreError> {
        let st = self.lock();
        Ok(queue_after(&st, head, limit)
            .into_iter()
            .map(|k| {
                let event = serde_json::to_string(&st.outbox[&k].event.event).ok();
                (k.seq, event)
            })
            .collect())
    }

    async fn fix_range(&self, head: &DeliveryKey, last: u64) -> Result<u64, StoreError> {
        let mut st = self.lock();
        Ok(match st.outbox.get_mut(head) {
            Some(row) => *row.range_end.get_or_insert(last),
            None => head.seq,
        })
    }

    async fn unclaim(
        &self,
        keys: &[DeliveryKey],
        claimed_until: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let mut st = self.lock();
        for k in keys {
            if let Some(row) = st.outbox.get_mut(k)
                && row.next_ms == claimed_until
            {
                row.next_ms = now_ms;
            }
        }
        Ok(())
    }

    fn single_process(&self) -> bool {
        true
    }

    fn reserve_sender(&self) -> bool {
        !self.sender.swap(true, std::sync::atomic::Ordering::AcqRel)
    }

    fn release_sender(&self) {
        self.sender
            .store(false, std::sync::atomic::Ordering::Release);
    }

    async fn due_heads(
        &self,
        now_ms: i64,
        limit: usize,
        skip: &std::collections::HashSet<DeliveryKey>,
    ) -> Result<Vec<Claimed>, StoreError> {
        let st = self.lock();
        let mut heads: Vec<(i64, &DeliveryKey)> = Vec::new();
        let mut last: Option<(&Scope, &str, &str)> = None;
        for (k, row) in &st.outbox {
            let queue = (&k.scope, k.task_id.as_str(), k.config_id.as_str());
            if last == Some(queue) {
                continue;
            }
            last = Some(queue);
            if row.next_ms <= now_ms && !skip.contains(k) {
                heads.push((row.next_ms, k));
            }
        }
        heads.sort_by_key(|(next_ms, _)| *next_ms);
        let mut out = Vec::with_capacity(heads.len().min(limit));
        for (_, k) in heads {
            if out.len() == limit {
                break;
            }
            let ckey = (k.scope.clone(), k.task_id.clone(), k.config_id.clone());
            let Some(config) = st.configs.get(&ckey) else {
                continue; // an orphan: the next claim removes it
            };
            let row = &st.outbox[k];
            out.push(Claimed {
                event: serde_json::to_string(&row.event.event).ok(),
                attempts: row.attempts,
                created_ms: row.created_ms,
                range_end: row.range_end,
                key: k.clone(),
                config: config.clone(),
            });
        }
        Ok(out)
    }

    async fn has_configs(&self) -> Result<bool, StoreError> {
        Ok(self.lock().configs.values().any(|c| c.enabled))
    }

    async fn any_due(&self, now_ms: i64) -> Result<bool, StoreError> {
        Ok(self.lock().outbox.values().any(|r| r.next_ms <= now_ms))
    }

    async fn settle(&self, key: &DeliveryKey, outcome: &Settle) -> Result<Settled, StoreError> {
        let mut st = self.lock();
        if !st.outbox.contains_key(key) {
            return Ok(Settled::default());
        }
        let ckey = (
            key.scope.clone(),
            key.task_id.clone(),
            key.config_id.clone(),
        );
        let mut settled = Settled::default();
        if matches!(outcome, Settle::Delivered | Settle::GiveUp { .. })
            && let Some(end) = st.outbox[key].range_end
        {
            // The rest of the head's coalesced range went (or was given up) with it.
            let rest: Vec<DeliveryKey> = queue_after(&st, key, usize::MAX)
                .into_iter()
                .take_while(|k| k.seq <= end)
                .collect();
            for k in rest {
                st.outbox.remove(&k);
            }
        }
        match outcome {
            Settle::Delivered => {
                st.outbox.remove(key);
                if let Some(c) = st.configs.get_mut(&ckey) {
                    c.failures = 0;
                }
            }
            Settle::Retry { next_ms, error } => {
                let row = st.outbox.get_mut(key).expect("checked");
                row.attempts += 1;
                row.next_ms = *next_ms;
                row.last_error = Some(error.clone());
            }
            Settle::GiveUp {
                error,
                disable_after,
            } => {
                st.outbox.remove(key);
                let disable = match st.configs.get_mut(&ckey) {
                    Some(c) => {
                        c.failures += 1;
                        c.last_error = Some(error.clone());
                        if c.enabled && c.failures >= *disable_after {
                            c.enabled = false;
                            true
                        } else {
                            false
                        }
                    }
                    None => false,
                };
                if disable {
                    settled.disabled = true;
                    settled.dropped =
                        drop_pending(&mut st, &key.scope, &key.task_id, &key.config_id);
                }
            }
            Settle::Disable { error } => {
                if let Some(c) = st.configs.get_mut(&ckey) {
                    c.enabled = false;
                    c.last_error = Some(error.clone());
                    settled.disabled = true;
                }
                settled.dropped = drop_pending(&mut st, &key.scope, &key.task_id, &key.config_id)
                    .saturating_sub(1);
            }
        }
        Ok(settled)
    }

    async fn status(&self, task_id: Option<&str>, limit: usize) -> Result<PushStatus, StoreError> {
        let st = self.lock();
        let mut pending: Vec<PendingDelivery> = st
            .outbox
            .iter()
            .filter(|(k, _)| task_id.is_none_or(|t| k.task_id == t))
            .map(|(k, r)| PendingDelivery {
                key: k.clone(),
                attempts: r.attempts,
                created_ms: r.created_ms,
                next_ms: r.next_ms,
                last_error: r.last_error.clone(),
            })
            .collect();
        pending.sort_by(|a, b| (a.created_ms, &a.key).cmp(&(b.created_ms, &b.key)));
        let pending_total = pending.len() as u64;
        let oldest_pending_ms = pending.iter().map(|p| p.created_ms).min();
        pending.truncate(limit);
        let troubled = st
            .configs
            .iter()
            .filter(|((_, t, _), c)| {
                task_id.is_none_or(|w| t == w) && (!c.enabled || c.last_error.is_some())
            })
            .take(limit)
            .map(|((s, _, _), c)| (s.clone(), c.clone()))
            .collect();
        Ok(PushStatus {
            pending,
            troubled,
            pending_total,
            oldest_pending_ms,
        })
    }

    async fn signing_key(&self, candidate: &[u8]) -> Result<Vec<u8>, StoreError> {
        Ok(self
            .lock()
            .key
            .get_or_insert_with(|| candidate.to_vec())
            .clone())
    }
}
