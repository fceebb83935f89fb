//! [`RequestHandler`]: the transport-independent handler every binding calls, a cheap
//! handle to the state its task drivers share; its operations are written one family
//! a file beside this one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::config::HandlerConfig;
use super::run_limits::RunLimits;
use super::shared::Inner;
use super::write_budget::WriteBudget;
use crate::error::A2aError;
use crate::executor::AgentExecutor;
use crate::scope::Scope;
use crate::store::TaskStore;

/// The transport-independent A2A request handler. Cheap to clone.
#[derive(Clone)]
pub struct RequestHandler {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for RequestHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestHandler")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl RequestHandler {
    /// A handler running `executor` over `store`.
    pub fn new(
        executor: Arc<dyn AgentExecutor>,
        store: Arc<dyn TaskStore>,
        config: HandlerConfig,
    ) -> Self {
        let permits = Arc::new(Semaphore::new(config.max_concurrent_tasks.max(1)));
        executor.use_upstream_links(Arc::new(crate::store::StoreUpstreamLinks(store.clone())));
        Self {
            inner: Arc::new(Inner {
                executor,
                store,
                terms: super::card_terms::LiveTerms::of(&config),
                registry: Arc::new(Mutex::new(HashMap::new())),
                permits,
                run_limits: Arc::new(RunLimits::new(
                    config.caller_task_limit(),
                    config.tenant_task_limit(),
                )),
                write_budget: WriteBudget::new(config.max_message_bytes_per_caller_per_minute),
                config,
                shutdown: CancellationToken::new(),
                closing: std::sync::atomic::AtomicBool::new(false),
                cluster: Arc::new(std::sync::OnceLock::new()),
            }),
        }
    }

    /// A handler for another agent of the same gateway (`[agents.<id>]`): it runs
    /// `executor` under `config` (its own card, limits and run permits, and
    /// `config.agent`), over this handler's store, sharing its registry of live task
    /// drivers and its cluster. So the jobs of the first handler (the retention job,
    /// the recovery, cancels and orphans from other instances) serve every agent's
    /// tasks, and each agent's runs are bounded by its own `max_concurrent_tasks`.
    pub fn sibling(&self, executor: Arc<dyn AgentExecutor>, config: HandlerConfig) -> Self {
        let permits = Arc::new(Semaphore::new(config.max_concurrent_tasks.max(1)));
        // Its upstream task links in the shared store, as `new` gives the first
        // handler's (an `a2a` agent's follow-ups and cancels after a restart need them).
        executor.use_upstream_links(Arc::new(crate::store::StoreUpstreamLinks(
            self.inner.store.clone(),
        )));
        if let Some(cluster) = self.inner.cluster.get() {
            executor.use_session_leases(Arc::new(cluster.session_leases(&config.agent)));
        }
        Self {
            inner: Arc::new(Inner {
                executor,
                store: self.inner.store.clone(),
                terms: super::card_terms::LiveTerms::of(&config),
                registry: self.inner.registry.clone(),
                permits,
                run_limits: Arc::new(RunLimits::new(
                    config.caller_task_limit(),
                    config.tenant_task_limit(),
                )),
                write_budget: WriteBudget::new(config.max_message_bytes_per_caller_per_minute),
                config,
                shutdown: CancellationToken::new(),
                closing: std::sync::atomic::AtomicBool::new(false),
                cluster: self.inner.cluster.clone(),
            }),
        }
    }

    /// Gives this handler's executor the session leases of the cluster its first
    /// handler joined ([`RequestHandler::join_cluster`]), for a
    /// [sibling](Self::sibling) made before the join. Does nothing outside a cluster.
    pub fn use_cluster_session_leases(&self) {
        if let Some(cluster) = self.inner.cluster.get() {
            self.inner
                .executor
                .use_session_leases(Arc::new(cluster.session_leases(self.agent())));
        }
    }

    /// The agent this handler serves ([`HandlerConfig::agent`]).
    pub fn agent(&self) -> &str {
        &self.inner.config.agent
    }

    /// The ListTasks page bound, in bytes ([`HandlerConfig::max_list_page_bytes`]),
    /// for a binding that applies it to its own encoding too (gRPC).
    pub fn max_list_page_bytes(&self) -> u64 {
        self.inner.config.max_list_page_bytes
    }

    /// The task store.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.inner.store
    }

    /// Executor runs in progress.
    pub fn active_runs(&self) -> usize {
        self.inner.config.max_concurrent_tasks.max(1) - self.inner.permits.available_permits()
    }

    /// The caller's task `id`'s state and last event number ([`TaskStore::head`]), or
    /// TaskNotFound (also for another caller's task): a check that the task exists,
    /// without reading its snapshot and artifacts.
    ///
    /// # Errors
    /// TaskNotFound; Internal on a store failure.
    pub(super) async fn head(
        &self,
        scope: &Scope,
        id: &str,
    ) -> Result<crate::store::TaskHead, A2aError> {
        self.inner
            .store
            .head(scope, id)
            .await
            .map_err(A2aError::internal)?
            .ok_or_else(|| A2aError::TaskNotFound(id.to_owned()))
    }

    /// The caller's task `id`, or TaskNotFound (also for another caller's task).
    pub(super) async fn load(
        &self,
        scope: &Scope,
        id: &str,
    ) -> Result<crate::store::TaskRecord, A2aError> {
        self.inner
            .store
            .get(scope, id)
            .await
            .map_err(A2aError::internal)?
            .ok_or_else(|| A2aError::TaskNotFound(id.to_owned()))
    }
}
