//! Building the live parts a [`Config`] describes: the task store and the executor.
//!
//! - [`build_store`]: memory, SQLite or PostgreSQL, migrated on open.
//! - [`build_executor`]: the AgentCore executor and its readiness check ("a token
//!   is obtainable").

use std::sync::Arc;

use secrecy::ExposeSecret;

use crate::config::{Config, SqliteLocation, StoreUrl};
use crate::executor::AgentExecutor;
use crate::server::ReadinessCheck;
use crate::store::{MemoryTaskStore, SqliteTaskStore, TaskStore, open_store};
use crate::upstream::{AgentCoreExecutor, AgentCoreSettings};

use super::CliError;

/// Opens the task store named by `store.url` (running its migrations): memory,
/// SQLite (a file, created if missing, or `sqlite::memory:`) or PostgreSQL.
///
/// # Errors
/// The store cannot be opened or migrated (the message never shows a password).
pub async fn build_store(config: &Config) -> Result<Arc<dyn TaskStore>, CliError> {
    let max = config.store.max_connections;
    let store = match &config.store.url {
        StoreUrl::Memory => Arc::new(MemoryTaskStore::new()) as Arc<dyn TaskStore>,
        StoreUrl::Sqlite(SqliteLocation::Memory) => open_store("sqlite::memory:", max).await?,
        StoreUrl::Sqlite(SqliteLocation::File(path)) => Arc::new(
            SqliteTaskStore::open_path_with(path, max, config.store.sqlite_synchronous).await?,
        ) as Arc<dyn TaskStore>,
        StoreUrl::Postgres(url) => open_store(url.expose_secret(), max).await?,
    };
    Ok(store)
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
    let probe = executor.clone();
    let ready: ReadinessCheck = Arc::new(move || {
        let probe = probe.clone();
        Box::pin(async move { probe.token_ready().await })
    });
    Ok((Arc::new(executor), Some(ready)))
}
