//! [`UpstreamLinks`]: where an executor that fronts an agent with tasks of its own (the
//! `a2a` upstream kind) keeps, durably, which task of the agent each gateway task is,
//! without knowing what a task store is. The request handler hands the executor the
//! store's links when it is built
//! ([`AgentExecutor::use_upstream_links`](super::AgentExecutor::use_upstream_links)).

use async_trait::async_trait;

use crate::scope::Scope;

/// The agent's side of one gateway task: its task id, its context id and the runtime
/// session the task's calls use (gateway ids are never the agent's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamLink {
    /// The agent's task id.
    pub upstream_task_id: String,
    /// The agent's context id.
    pub upstream_context_id: String,
    /// The runtime session id every call of the task uses (for an AgentCore runtime the
    /// session header; else the id the gateway derived, for the record).
    pub session_id: String,
}

/// Why a link could not be read or written: the store's failure, readable, never a
/// secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LinkError(pub String);

/// The durable map gateway task (in its caller's scope) → [`UpstreamLink`]. A link is
/// deleted with its task (the retention purge).
#[async_trait]
pub trait UpstreamLinks: Send + Sync + std::fmt::Debug + 'static {
    /// Records (or replaces) the link of `task_id` in `scope`.
    ///
    /// # Errors
    /// The store's failure.
    async fn put_link(
        &self,
        scope: &Scope,
        task_id: &str,
        link: &UpstreamLink,
    ) -> Result<(), LinkError>;

    /// The link of `task_id` in `scope`, if one was recorded.
    ///
    /// # Errors
    /// The store's failure.
    async fn link(&self, scope: &Scope, task_id: &str) -> Result<Option<UpstreamLink>, LinkError>;
}
