//! Building the live parts a [`Config`] describes: the task store and the executor.
//!
//! SEAMS (filled in as the other branches land):
//! - [`build_store`]: `memory:` today; SQLite and PostgreSQL through
//!   `store::open_store(url, max_connections)` once the `stores` branch is merged.
//! - [`build_executor`]: the AgentCore executor; a readiness check ("a token is
//!   obtainable") once the executor exposes one.

use std::sync::Arc;

use crate::config::{Config, StoreUrl};
use crate::executor::AgentExecutor;
use crate::server::ReadinessCheck;
use crate::store::{MemoryTaskStore, TaskStore};
use crate::upstream::{AgentCoreExecutor, AgentCoreSettings};

use super::CliError;

/// Opens the task store named by `store.url`.
///
/// # Errors
/// The store cannot be opened (or its backend is not built yet).
pub async fn build_store(config: &Config) -> Result<Arc<dyn TaskStore>, CliError> {
    match &config.store.url {
        StoreUrl::Memory => Ok(Arc::new(MemoryTaskStore::new())),
        // SEAM(stores): replace with
        // `open_store(&url_with_secret, config.store.max_connections)`.
        other => Err(format!(
            "store.url {other}: this build has only the memory store so far; \
             set store.url = \"memory:\" (A2A_GATEWAY_STORE__URL=memory:)"
        )
        .into()),
    }
}

/// Builds the executor for `[upstream]`, plus a readiness check ("a token is
/// obtainable") when it has one.
///
/// # Errors
/// No upstream configured, or settings the executor refuses.
pub fn build_executor(
    config: &Config,
) -> Result<(Arc<dyn AgentExecutor>, Option<ReadinessCheck>), CliError> {
    let settings = AgentCoreSettings::try_from(&config.upstream)?;
    let executor = AgentCoreExecutor::new(settings)?;
    // SEAM(readiness): `/readyz` should also check that a token is obtainable for
    // `oauth2`; the executor does not expose its token cache for that yet.
    Ok((Arc::new(executor), None))
}
