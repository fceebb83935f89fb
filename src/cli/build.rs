//! Building the live parts a [`Config`] describes: the task store and the executor.
//!
//! - [`build_store`]: memory, SQLite or PostgreSQL, migrated on open.
//! - [`build_executor`]: the AgentCore executor and its readiness check ("a token
//!   is obtainable").

use std::sync::Arc;

use secrecy::ExposeSecret;

use crate::cluster::ClusterBackend;
use crate::config::{Config, SqliteLocation, StoreUrl};
use crate::executor::AgentExecutor;
use crate::server::ReadinessCheck;
use crate::store::{MemoryTaskStore, PostgresTaskStore, SqliteTaskStore, TaskStore, open_store};
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

/// Like [`build_store`], and for a PostgreSQL store that several instances share
/// (`store.cluster`, the default) also its cluster side: leases, heartbeats and
/// notifications (`store.listen_url` for the listener).
///
/// # Errors
/// As [`build_store`], or a malformed `store.listen_url`.
pub async fn build_store_for_cluster(
    config: &Config,
) -> Result<(Arc<dyn TaskStore>, Option<Arc<dyn ClusterBackend>>), CliError> {
    if let (true, StoreUrl::Postgres(url)) = (config.store.clustered(), &config.store.url) {
        let mut pg =
            PostgresTaskStore::open(url.expose_secret(), config.store.max_connections).await?;
        if let Some(StoreUrl::Postgres(listen)) = &config.store.listen_url {
            pg = pg.with_listen_url(listen.expose_secret())?;
        }
        let pg = Arc::new(pg);
        return Ok((pg.clone(), Some(pg)));
    }
    Ok((build_store(config).await?, None))
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
