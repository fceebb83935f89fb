//! [`SessionLeases`]: how an executor serialises something across the instances of a
//! cluster without knowing what a cluster is.
//!
//! An executor whose upstream must not see two calls of one session at once (AgentCore:
//! one invocation per runtime session) takes the session's lease around each call, after
//! its own per-process lock. The request handler hands the executor the leases when it
//! joins a cluster ([`AgentExecutor::use_session_leases`](super::AgentExecutor::use_session_leases));
//! without a cluster an executor has none and its per-process lock is the whole story.

use async_trait::async_trait;

/// Why a session's lease could not be had: the text of the store failure behind it. It
/// is logged and becomes part of a task's failure reason, so it never holds secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LeaseError(pub String);

/// A held session lease. Dropping it releases the lease (and wakes the instances
/// waiting for it); what that takes is the implementation's business.
pub struct HeldLease {
    /// Held only to be dropped with the lease.
    _guard: Box<dyn Send + Sync>,
}

impl HeldLease {
    /// Wraps the implementation's guard, whose `Drop` releases the lease.
    pub fn new(guard: impl Send + Sync + 'static) -> Self {
        Self {
            _guard: Box::new(guard),
        }
    }
}

impl std::fmt::Debug for HeldLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeldLease")
    }
}

/// Leases of upstream sessions shared by every instance of a cluster: at most one
/// holder per session id at a time (the cluster's "Session leases"). Session ids are
/// the executor's own (for AgentCore the runtime session id); the implementation only
/// compares them.
#[async_trait]
pub trait SessionLeases: Send + Sync + 'static {
    /// The lease of `session` if it can be had now; `Ok(None)` while another live
    /// instance holds it.
    ///
    /// # Errors
    /// [`LeaseError`] when the store behind the leases fails.
    async fn try_lease(&self, session: &str) -> Result<Option<HeldLease>, LeaseError>;

    /// Waits for the lease of `session`. Cancel-safe: dropping the future gives up
    /// the wait and leaves no lease behind.
    ///
    /// # Errors
    /// [`LeaseError`] when the store behind the leases kept failing.
    async fn lease(&self, session: &str) -> Result<HeldLease, LeaseError>;
}
