//! Session leases: at most one invocation per runtime session in flight across all
//! instances (see the module docs of [`crate::cluster`], "Session leases").
//!
//! An executor that must not call one upstream session twice at once (AgentCore:
//! the agent's in-memory state is not safe under concurrent invocations of one
//! session, and the runtime does not refuse them) takes the session's lease around
//! each invocation, after its own per-process lock. The lease is a row per session of
//! an agent of the gateway (the same session id of two agents is two leases: their
//! upstreams are different runtimes) naming the instance ([`super::ClusterBackend::claim_session`]); it is valid for as long
//! as that instance heart-beats, so a 15-minute invocation needs no renewal and
//! holds no database connection. Waiters do not spin: they wait for the holder's
//! release notification (`s:` + [`session_tag`]), re-trying the claim at most every
//! [`ClusterOptions::sweep_interval`](super::ClusterOptions) so that a dead holder's
//! lease is taken over within the lease time plus that interval. Dropping a wait
//! (a cancel) gives up the place at once and never leaves a row behind.

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use super::{Cluster, Shared, Wake};
use crate::executor::{HeldLease, LeaseError, SessionLeases};
use crate::store::StoreError;

/// The 16-hex-digit tag of `agent`'s runtime session in notifications (`s:TAG`): the
/// first 64 bits of the SHA-256 of `session\0`, the agent and a NUL unless it is the
/// agent at `/` (`""`), and the session id (apart from task tags; a collision only
/// causes a needless re-try of a claim).
pub fn session_tag(agent: &str, session: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"session\0");
    if !agent.is_empty() {
        h.update(agent.as_bytes());
        h.update(b"\0");
    }
    h.update(session.as_bytes());
    let d = h.finalize();
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// This instance's lease of a runtime session. Dropping it releases the lease (in a
/// task of its own) and wakes the instances waiting for it.
pub struct SessionLease {
    shared: Arc<Shared>,
    /// The agent whose session it is (`""`: the agent at `/`).
    agent: String,
    session: String,
    tag: String,
    /// This claim's random token: the release deletes this claim only.
    token: i64,
}

impl std::fmt::Debug for SessionLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLease")
            .field("agent", &self.agent)
            .field("session", &self.session)
            .field("instance", &self.shared.instance)
            .finish()
    }
}

impl Drop for SessionLease {
    fn drop(&mut self) {
        let (shared, agent, session, tag, token) = (
            self.shared.clone(),
            std::mem::take(&mut self.agent),
            std::mem::take(&mut self.session),
            std::mem::take(&mut self.tag),
            self.token,
        );
        let release = async move {
            if let Err(e) = shared
                .backend
                .release_session(&agent, &session, token, &tag)
                .await
            {
                // The row then lapses with this instance, or is re-taken by its next
                // claim of the session (or deleted when it leaves).
                tracing::warn!(upstream.session = %session, error = %e, "cannot release the runtime session's lease");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(release);
            }
            Err(_) => {
                tracing::warn!(
                    "a runtime session's lease dropped outside the runtime; it lapses with this instance"
                );
            }
        }
    }
}

/// How long store failures are retried while waiting for a session's lease before
/// the wait gives up with the last error.
fn give_up_after(lease: Duration) -> Duration {
    lease.max(Duration::from_secs(5))
}

impl Cluster {
    /// The session leases of `agent` (`""`: the agent at `/`) as an executor takes them
    /// ([`SessionLeases`]): what a request handler hands its executor when it joins the
    /// cluster.
    pub fn session_leases(&self, agent: &str) -> AgentSessionLeases {
        AgentSessionLeases {
            cluster: self.clone(),
            agent: agent.to_owned(),
        }
    }

    /// The lease of `agent`'s session if it can be had now (free, or its holder is
    /// dead); `Ok(None)` while another live instance holds it.
    ///
    /// # Errors
    /// [`StoreError::Backend`].
    pub async fn try_lock_session(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Option<SessionLease>, StoreError> {
        self.claim_session_once(agent, session, &session_tag(agent, session))
            .await
    }

    /// Waits for the session's lease (see the module docs): woken by the holder's
    /// release, re-trying at least every sweep interval so a dead holder's lease is
    /// taken over once its heartbeat is older than the lease time. Cancel-safe:
    /// dropping the future gives up the wait and leaves no lease behind.
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the store kept failing for the lease time (at
    /// least 5 s).
    pub async fn lock_session(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<SessionLease, StoreError> {
        let tag = session_tag(agent, session);
        // Subscribed before the first claim, so a release in between wakes this wait.
        let mut wake: Wake = self.wake_for(tag.clone(), self.shared.options.sweep_interval);
        let mut failing: Option<tokio::time::Instant> = None;
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.claim_session_once(agent, session, &tag).await {
                Ok(Some(lease)) => return Ok(lease),
                Ok(None) => {
                    failing = None;
                    wake.changed().await;
                }
                Err(e) => {
                    let since = *failing.get_or_insert_with(tokio::time::Instant::now);
                    if since.elapsed() >= give_up_after(self.shared.options.lease) {
                        return Err(e);
                    }
                    tracing::warn!(upstream.session = %session, error = %e, retry_in_ms = backoff.as_millis() as u64, "cannot claim the runtime session's lease; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// One claim. It runs in a task of its own: when the caller gives up while the
    /// statement is in flight, a lease it took is dropped (released) there instead of
    /// staying behind.
    async fn claim_session_once(
        &self,
        agent: &str,
        session: &str,
        tag: &str,
    ) -> Result<Option<SessionLease>, StoreError> {
        let (tx, rx) = oneshot::channel();
        let shared = self.shared.clone();
        let (agent, session, tag) = (agent.to_owned(), session.to_owned(), tag.to_owned());
        tokio::spawn(async move {
            let token = rand::random::<i64>();
            let got = shared
                .backend
                .claim_session(
                    &shared.instance,
                    &agent,
                    &session,
                    token,
                    shared.options.lease,
                )
                .await;
            let answer = match got {
                Ok(Ok(previous)) => {
                    if let Some(lost) = previous {
                        tracing::warn!(upstream.session = %session, lost.instance = %lost, "took over the runtime session's lease of a gateway instance without a heartbeat");
                    }
                    Ok(Some(SessionLease {
                        shared: shared.clone(),
                        agent,
                        session,
                        tag,
                        token,
                    }))
                }
                Ok(Err(holder)) => {
                    tracing::debug!(upstream.session = %session, holder = %holder, "the runtime session is busy on another gateway instance");
                    Ok(None)
                }
                Err(e) => Err(e),
            };
            // Nobody waiting any more: the lease (if taken) is released as it drops.
            let _ = tx.send(answer);
        });
        rx.await.unwrap_or_else(|_| {
            Err(StoreError::Backend(
                "the session lease claim stopped unexpectedly".into(),
            ))
        })
    }
}

/// The session leases of one agent of the gateway ([`Cluster::session_leases`]): the
/// executor API's view of them, what the request handler of that agent hands its
/// executor when it joins the cluster. A store failure's text becomes the
/// [`LeaseError`].
#[derive(Clone)]
pub struct AgentSessionLeases {
    cluster: Cluster,
    agent: String,
}

impl std::fmt::Debug for AgentSessionLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSessionLeases")
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl SessionLeases for AgentSessionLeases {
    async fn try_lease(&self, session: &str) -> Result<Option<HeldLease>, LeaseError> {
        match self.cluster.try_lock_session(&self.agent, session).await {
            Ok(lease) => Ok(lease.map(HeldLease::new)),
            Err(e) => Err(LeaseError(e.to_string())),
        }
    }

    async fn lease(&self, session: &str) -> Result<HeldLease, LeaseError> {
        match self.cluster.lock_session(&self.agent, session).await {
            Ok(lease) => Ok(HeldLease::new(lease)),
            Err(e) => Err(LeaseError(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_tags_are_short_stable_and_apart_from_task_tags() {
        let s = session_tag("", "a2a-0123");
        assert_eq!(s.len(), 16);
        assert_eq!(s, session_tag("", "a2a-0123"));
        assert_ne!(s, session_tag("", "a2a-0124"));
        assert_ne!(s, session_tag("reviewer", "a2a-0123"));
        assert_ne!(
            s,
            crate::store::cluster::tag(&crate::scope::Scope::new("", ""), "a2a-0123")
        );
    }
}
