//! What a shared store provides for several gateway instances ([`crate::cluster`]):
//! the [`ClusterBackend`] trait (heartbeats, task and session leases, notifications),
//! and the notification words both sides speak ([`CHANNEL`], [`tag`],
//! [`event_payload`]): a store's append announces its events with them, and the
//! cluster's listener reads them. The PostgreSQL store implements it
//! (`postgres/cluster.rs`).

use std::time::Duration;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::StoreError;
use crate::scope::Scope;

/// The notification channel every instance listens on.
pub const CHANNEL: &str = "a2a_gateway";

/// The 16-hex-digit tag of a task in notifications: the first 64 bits of the
/// SHA-256 of its length-prefixed [`Scope::id_key`] (agent and tenant), owner and id.
pub fn tag(scope: &Scope, task_id: &str) -> String {
    let mut h = Sha256::new();
    for part in [&*scope.id_key(), &scope.owner, task_id] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    let d = h.finalize();
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The payload announcing that the task tagged `tag` has events up to `seq`.
pub fn event_payload(tag: &str, seq: i64) -> String {
    format!("e:{tag}:{seq}")
}

/// Who holds a task's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The instance id.
    pub instance: String,
    /// Whether its heartbeat is younger than the lease time.
    pub alive: bool,
    /// How long ago its last heartbeat was written, by the database's clock (`None`:
    /// the instance has no heartbeat row, it left).
    pub heartbeat_age: Option<std::time::Duration>,
}

/// A non-settled task nobody alive is processing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// The task's scope.
    pub scope: Scope,
    /// The task's id.
    pub task_id: String,
    /// The instance whose lease lapsed (`None`: the task had no lease).
    pub lost: Option<String>,
}

/// A notification listener connection ([`ClusterBackend::listen`]).
#[async_trait]
pub trait Listener: Send {
    /// The next payload on [`CHANNEL`]; `Ok(None)` when the connection was lost (it
    /// is re-established, but notifications sent meanwhile are gone).
    ///
    /// # Errors
    /// [`StoreError::Backend`] when it cannot listen any more.
    async fn recv(&mut self) -> Result<Option<String>, StoreError>;
}

/// What a shared store provides for several instances (see the module docs).
/// Times are the database's clock.
#[async_trait]
pub trait ClusterBackend: Send + Sync + 'static {
    /// Starts sending an event notification with every committed append.
    fn enable_notifications(&self);
    /// Records that `instance` is alive now (creating its row).
    async fn heartbeat(&self, instance: &str) -> Result<(), StoreError>;
    /// Takes the task's lease for `instance` (or keeps it). `Ok(Err(holder))` when
    /// another instance holds it.
    async fn claim(
        &self,
        instance: &str,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Result<(), String>, StoreError>;
    /// Gives up `instance`'s lease of the task and notifies its tag.
    async fn release(
        &self,
        instance: &str,
        scope: &Scope,
        task_id: &str,
        tag: &str,
    ) -> Result<(), StoreError>;
    /// The holder of the task's lease, alive meaning a heartbeat within `lease`.
    async fn holder(
        &self,
        scope: &Scope,
        task_id: &str,
        lease: Duration,
    ) -> Result<Option<Holder>, StoreError>;
    /// Up to `limit` SUBMITTED, WORKING or AUTH_REQUIRED tasks that are unleased or
    /// leased by an instance without a heartbeat within `lease`; also forgets
    /// instances long dead that hold nothing.
    async fn orphans(&self, lease: Duration, limit: usize) -> Result<Vec<Orphan>, StoreError>;
    /// Moves the orphan's lease to `instance` if it is still as found; `false` when
    /// another instance took it first (or its holder came back).
    async fn take_over(&self, instance: &str, orphan: &Orphan) -> Result<bool, StoreError>;
    /// Takes the lease of `agent`'s runtime session for `instance` under the claim's random
    /// `token` when it is free, already `instance`'s (this process serialises its own
    /// invocations of a session first), or held by an instance without a heartbeat
    /// within `lease`. `Ok(Ok(lost))` when taken (`lost`: the dead instance it was
    /// taken from), `Ok(Err(holder))` while another live instance holds it.
    async fn claim_session(
        &self,
        instance: &str,
        agent: &str,
        session: &str,
        token: i64,
        lease: Duration,
    ) -> Result<Result<Option<String>, String>, StoreError>;
    /// Gives up the claim `token` of `agent`'s session (if it is still the session's
    /// lease: never a later claim) and notifies `s:` + `tag`
    /// ([`session_tag`](crate::cluster::session_tag)).
    async fn release_session(
        &self,
        agent: &str,
        session: &str,
        token: i64,
        tag: &str,
    ) -> Result<(), StoreError>;
    /// Sends `payload` on [`CHANNEL`].
    async fn notify(&self, payload: &str) -> Result<(), StoreError>;
    /// Opens a listener connection on [`CHANNEL`].
    async fn listen(&self) -> Result<Box<dyn Listener>, StoreError>;
    /// Drops every task and session lease of `instance` and its row (a clean
    /// shutdown).
    async fn leave(&self, instance: &str) -> Result<(), StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_short_stable_and_separate_the_parts() {
        let a = tag(&Scope::new("t", "alice"), "task-1");
        assert_eq!(a.len(), 16);
        assert_eq!(a, tag(&Scope::new("t", "alice"), "task-1"));
        assert_ne!(a, tag(&Scope::new("ta", "lice"), "task-1"));
        assert_ne!(a, tag(&Scope::new("t", "alice"), "task-2"));
        assert!(event_payload(&a, i64::MAX).len() < 64);
    }
}
