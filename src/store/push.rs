//! What the push sender needs from the task store ([`PushStore`]): webhook configs kept
//! beside their tasks, the outbox of deliveries, and the signing key. Every task store
//! implements it (memory, SQLite, PostgreSQL) and runs the same conformance cases.
//!
//! The outbox: when a task's events are appended, one delivery row per enabled config
//! of that task and per deliverable event (the Task, status and artifact updates; not
//! the user messages kept as history) is written in the same transaction, keyed by
//! (tenant, owner, task, config, seq). So an event is pushed if and only if it was
//! stored, and a restart finds every delivery still pending.
//!
//! Order: only the *head* of a (task, config) queue (its lowest `seq`) can be claimed,
//! so event n+1 is never sent before event n is delivered or given up. On a store that
//! several instances share (PostgreSQL) a claim reserves the head until a lease expires
//! (`next_ms`): the claiming instance settles it first, or another instance takes it
//! over after the lease. On a store only one process uses (memory, SQLite:
//! [`PushStore::single_process`]) the sender keeps its claims in memory and reads the
//! heads with [`PushStore::due_heads`]; nothing is written until the settlement.

use async_trait::async_trait;

use crate::scope::Scope;
use crate::store::StoreError;

/// One stored webhook config (the secrets in clear: they are sent, never shown).
#[derive(Clone, PartialEq, Eq)]
pub struct StoredPushConfig {
    /// The task.
    pub task_id: String,
    /// The config id (unique per task).
    pub id: String,
    /// Where events are posted.
    pub url: String,
    /// `X-A2A-Notification-Token`.
    pub token: Option<String>,
    /// `Authorization` scheme.
    pub auth_scheme: Option<String>,
    /// `Authorization` credentials.
    pub auth_credentials: Option<String>,
    /// Whether deliveries are made (false once disabled).
    pub enabled: bool,
    /// Deliveries given up in a row (reset by a delivered one).
    pub failures: u32,
    /// The last delivery error (never a secret), if any.
    pub last_error: Option<String>,
    /// Creation (or last replacement) time, milliseconds since the Unix epoch.
    pub created_ms: i64,
}

impl std::fmt::Debug for StoredPushConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredPushConfig")
            .field("task_id", &self.task_id)
            .field("id", &self.id)
            .field("url", &self.url)
            .field("enabled", &self.enabled)
            .field("failures", &self.failures)
            .field("last_error", &self.last_error)
            .finish_non_exhaustive()
    }
}

/// The key of one delivery: the event `seq` of a task, for one of its configs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeliveryKey {
    /// The task's scope.
    pub scope: Scope,
    /// The task.
    pub task_id: String,
    /// The config.
    pub config_id: String,
    /// The event's sequence number.
    pub seq: u64,
}

/// A claimed delivery, with what the sender needs to make the attempt.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// Which delivery.
    pub key: DeliveryKey,
    /// The config (as stored when claimed).
    pub config: StoredPushConfig,
    /// The event in its stored JSON form (a `StreamResponse`); `None` when the event is
    /// gone (its task was purged).
    pub event: Option<String>,
    /// Attempts made before this one.
    pub attempts: u32,
    /// When the event was stored, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// The last event `seq` of the coalesced range this head is sent with, once fixed
    /// ([`PushStore::fix_range`]); `None`: not fixed (the head alone, or a range still
    /// to choose).
    pub range_end: Option<u64>,
}

/// How an attempt ended, for [`PushStore::settle`]. A delivered or given-up head
/// takes the rest of its fixed range ([`Claimed::range_end`]) with it; a retried one
/// keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settle {
    /// 2xx: the delivery is removed; the config's failure run is reset.
    Delivered,
    /// Retry at `next_ms` (milliseconds since the Unix epoch); `error` is kept.
    Retry {
        /// When the next attempt is due.
        next_ms: i64,
        /// Why this attempt failed.
        error: String,
    },
    /// The delivery is given up: removed and counted on the config, which is disabled
    /// (with its pending deliveries removed) when this makes `disable_after` in a row.
    GiveUp {
        /// Why.
        error: String,
        /// The failure run that disables the config.
        disable_after: u32,
    },
    /// The receiver asked to stop (410 Gone): the config is disabled now and its pending
    /// deliveries are removed.
    Disable {
        /// Why.
        error: String,
    },
}

/// What [`PushStore::settle`] did to the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Settled {
    /// The config was disabled by this settlement.
    pub disabled: bool,
    /// Pending deliveries removed with it.
    pub dropped: u64,
}

/// One pending delivery as `push-status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingDelivery {
    /// Which delivery.
    pub key: DeliveryKey,
    /// Attempts made.
    pub attempts: u32,
    /// When the event was stored (ms since the epoch).
    pub created_ms: i64,
    /// When the next attempt is due (or the claim's lease ends).
    pub next_ms: i64,
    /// The last attempt's error.
    pub last_error: Option<String>,
}

/// The operator's view of push delivery (`a2a-gateway push-status`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PushStatus {
    /// Pending deliveries, oldest event first.
    pub pending: Vec<PendingDelivery>,
    /// Configs that are disabled or whose last delivery failed, with their scope.
    pub troubled: Vec<(Scope, StoredPushConfig)>,
    /// All pending deliveries (beyond the listed ones).
    pub pending_total: u64,
    /// The store time of the oldest pending event (ms since the epoch), if any.
    pub oldest_pending_ms: Option<i64>,
}

/// Push state in the task store (see the module docs).
#[async_trait]
pub trait PushStore: Send + Sync {
    /// Creates `config` for its task, or replaces the one with its id (enabled again,
    /// its failure run reset). The task need not exist yet (an inline config of
    /// SendMessage is stored before the task's first event).
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn put_config(&self, scope: &Scope, config: &StoredPushConfig) -> Result<(), StoreError>;

    /// The config `id` of the task, or `None`.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn get_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<Option<StoredPushConfig>, StoreError>;

    /// Up to `limit` configs of the task with ids after `after`, in id order (bytewise).
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn list_configs(
        &self,
        scope: &Scope,
        task_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StoredPushConfig>, StoreError>;

    /// Deletes the config and its pending deliveries, atomically; whether it existed.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn delete_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<bool, StoreError>;

    /// Claims up to `limit` due deliveries (`next_ms <= now_ms`), each the head of its
    /// (task, config) queue, reserving each until `now_ms + lease_ms`. Safe to call
    /// from several instances at once: no delivery is claimed twice within a lease.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn claim(
        &self,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
    ) -> Result<Vec<Claimed>, StoreError>;

    /// Gives back claims of [`claim`](Self::claim) whose attempts were not started
    /// (their host or caller had no room): each of `keys` still reserved until
    /// `claimed_until` (the claim's lease end; a claim another instance has taken over
    /// since is left alone) is due again at `now_ms`, without counting an attempt.
    /// Default: nothing is written, and the claims end with their lease.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn unclaim(
        &self,
        keys: &[DeliveryKey],
        claimed_until: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let _ = (keys, claimed_until, now_ms);
        Ok(())
    }

    /// Up to `limit` deliveries pending after `head` in its (task, config) queue, in
    /// `seq` order, each with its event's stored JSON (`None` when the event is gone):
    /// what a coalesced POST may add to the head. Default: none (no coalescing).
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn pending_after(
        &self,
        head: &DeliveryKey,
        limit: usize,
    ) -> Result<Vec<(u64, Option<String>)>, StoreError> {
        let _ = (head, limit);
        Ok(Vec::new())
    }

    /// Fixes the coalesced range of `head` to end at event `last` (durably, before its
    /// first attempt), unless one is fixed already; answers the fixed end (the earlier
    /// one when there was one; `head.seq` when the head is gone). Default: `head.seq`
    /// (no coalescing).
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn fix_range(&self, head: &DeliveryKey, last: u64) -> Result<u64, StoreError> {
        let _ = last;
        Ok(head.seq)
    }

    /// Whether no other process can use this store (the memory store; SQLite, whose
    /// file only one process may open), so the sender may keep its claims in memory:
    /// it reads the due heads with [`due_heads`](Self::due_heads) instead of writing a
    /// claim, and the outbox rows stay the durable record (a row is removed or
    /// rescheduled only by its settlement, so a restart finds every delivery not yet
    /// settled due again). Stores that several instances share (PostgreSQL) answer
    /// false and are claimed with [`claim`](Self::claim). Default false.
    fn single_process(&self) -> bool {
        false
    }

    /// Reserves, on a [`single_process`](Self::single_process) store, the one sender
    /// that may keep its claims in memory: true for the first caller, false while it
    /// runs (two senders of one process on one store, each with its own in-flight
    /// set, could send one row twice at once). Released by
    /// [`release_sender`](Self::release_sender). Default true.
    fn reserve_sender(&self) -> bool {
        true
    }

    /// Ends the reservation of [`reserve_sender`](Self::reserve_sender).
    fn release_sender(&self) {}

    /// Up to `limit` due deliveries (`next_ms <= now_ms`), each the head of its (task,
    /// config) queue and not in `skip`, oldest due first, *without* reserving them: a
    /// read for a sender that keeps its claims in memory (see
    /// [`single_process`](Self::single_process)) and passes the heads it already has
    /// in flight as `skip` (their configs and events are not read again).
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure, or when the store does not answer
    /// this read (the default: its claims must be written).
    async fn due_heads(
        &self,
        now_ms: i64,
        limit: usize,
        skip: &std::collections::HashSet<DeliveryKey>,
    ) -> Result<Vec<Claimed>, StoreError> {
        let _ = (now_ms, limit, skip);
        Err(StoreError::Backend(
            "this store's push claims are written (claim), not kept in memory".into(),
        ))
    }

    /// Whether the store holds any enabled config (of any task and scope): read once
    /// when push opens on a [`single_process`](Self::single_process) store, to know
    /// whether commits can queue deliveries.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn has_configs(&self) -> Result<bool, StoreError>;

    /// Whether any delivery is due at `now_ms` (a cheap read before [`claim`](Self::claim)).
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn any_due(&self, now_ms: i64) -> Result<bool, StoreError>;

    /// Records how an attempt of `key` ended (see [`Settle`]). A delivery that is gone
    /// (its config was deleted meanwhile) is left alone.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn settle(&self, key: &DeliveryKey, outcome: &Settle) -> Result<Settled, StoreError>;

    /// [`settle`](Self::settle) for many attempts at once, in order, as one write
    /// transaction on the SQL stores (one commit for the lot instead of one per
    /// delivery); the answers are in the order of `items`. Either every settlement is
    /// stored or none (an error: each delivery is then claimed again after its lease).
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn settle_many(
        &self,
        items: &[(&DeliveryKey, &Settle)],
    ) -> Result<Vec<Settled>, StoreError> {
        let mut out = Vec::with_capacity(items.len());
        for (key, outcome) in items {
            out.push(self.settle(key, outcome).await?);
        }
        Ok(out)
    }

    /// Pending deliveries (of `task_id` only, when given; at most `limit`) and the
    /// configs that are disabled or failing.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn status(&self, task_id: Option<&str>, limit: usize) -> Result<PushStatus, StoreError>;

    /// The signing key kept in the store: stores `candidate` (PKCS#8 bytes) when none is
    /// kept yet, and returns the kept one (so every instance and restart signs with the
    /// same key).
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn signing_key(&self, candidate: &[u8]) -> Result<Vec<u8>, StoreError>;
}
