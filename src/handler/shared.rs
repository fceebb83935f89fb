//! What every clone of a [`RequestHandler`](super::RequestHandler) and every task
//! driver share: the executor, the store, the settings, the registry of live drivers,
//! the run permits and the shutdown signal, and the cluster once joined.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::config::HandlerConfig;
use super::driver::command::{EventGroup, Handle, TaskKey};
use super::follow::Follow;
use crate::executor::AgentExecutor;
use crate::scope::Scope;
use crate::store::TaskStore;

pub(crate) struct Inner {
    pub(crate) executor: Arc<dyn AgentExecutor>,
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) config: HandlerConfig,
    /// What of the card is enforced (from `config`, replaced by
    /// [`RequestHandler::publish_card`](super::RequestHandler::publish_card)).
    pub(crate) terms: super::card_terms::LiveTerms,
    /// The live drivers, shared with the handler's siblings (the other agents of one
    /// gateway, [`RequestHandler::sibling`](super::RequestHandler::sibling)): a task's
    /// key holds its agent, and a job of one handler (a cancel from another instance,
    /// the retention job) reaches the driver of any agent's task.
    pub(crate) registry: Arc<Mutex<HashMap<TaskKey, Handle>>>,
    pub(crate) permits: Arc<Semaphore>,
    /// The per-caller and per-tenant shares of `permits`.
    pub(crate) run_limits: Arc<super::run_limits::RunLimits>,
    /// What each caller may still write ([`HandlerConfig::max_message_bytes_per_caller_per_minute`]).
    pub(crate) write_budget: super::write_budget::WriteBudget,
    pub(crate) shutdown: CancellationToken,
    /// Set by [`RequestHandler::shutdown`](super::RequestHandler::shutdown): new
    /// messages are refused.
    pub(crate) closing: std::sync::atomic::AtomicBool,
    /// Several instances on one store (see [`crate::cluster`] and the `remote` module).
    /// Shared with the handler's siblings.
    pub(crate) cluster: Arc<std::sync::OnceLock<crate::cluster::Cluster>>,
}

impl Inner {
    /// The registry of live drivers, locked. A lock poisoned by a panic elsewhere is
    /// taken over as it is: the map holds handles only, each whole or absent.
    pub(crate) fn lock_registry(&self) -> MutexGuard<'_, HashMap<TaskKey, Handle>> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cluster this instance joined, if any.
    pub(crate) fn cluster(&self) -> Option<&crate::cluster::Cluster> {
        self.cluster.get()
    }

    /// A follower of the task's log after `after`, woken by other instances' writes
    /// when in a cluster.
    pub(crate) fn follow(
        &self,
        scope: Scope,
        task_id: String,
        after: u64,
        live: Option<tokio::sync::broadcast::Receiver<EventGroup>>,
        fill_first: bool,
    ) -> Follow {
        let wake = match (&live, self.cluster()) {
            (Some(_), Some(c)) => Some(c.watch(&(scope.clone(), task_id.clone()))),
            _ => None,
        };
        Follow::new(self.store.clone(), scope, task_id, after, live, fill_first).with_wake(wake)
    }
}
