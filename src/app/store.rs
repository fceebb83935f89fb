//! The task store `[store]` describes: memory, SQLite or PostgreSQL, migrated on open
//! ([`build_store`]); with its cluster side for several instances
//! ([`build_store_for_cluster`]); or opened to be read beside a running `serve`
//! ([`read_store`]).

use std::sync::Arc;

use secrecy::ExposeSecret;

use crate::config::{Config, SqliteLocation, SqliteSynchronous, StoreUrl};
use crate::store::cluster::ClusterBackend;
use crate::store::{
    MemoryTaskStore, PostgresTaskStore, SqliteTaskStore, Synchronous, TaskStore, open_store,
};

use super::AppError;

/// Opens the task store named by `store.url` (running its migrations): memory,
/// SQLite (a file, created if missing, or `sqlite::memory:`) or PostgreSQL.
///
/// # Errors
/// The store cannot be opened or migrated (the message never shows a password).
pub async fn build_store(config: &Config) -> Result<Arc<dyn TaskStore>, AppError> {
    check_store_location(config)?;
    let max = config.store.max_connections;
    let store = match &config.store.url {
        StoreUrl::Memory => Arc::new(MemoryTaskStore::new()) as Arc<dyn TaskStore>,
        StoreUrl::Sqlite(SqliteLocation::Memory) => open_store("sqlite::memory:", max).await?,
        StoreUrl::Sqlite(SqliteLocation::File(path)) => Arc::new(
            SqliteTaskStore::open_path_with(
                path,
                max,
                synchronous(config.store.sqlite_synchronous),
            )
            .await?,
        ) as Arc<dyn TaskStore>,
        StoreUrl::Postgres(url) => open_store(url.expose_secret(), max).await?,
    };
    Ok(store)
}

/// The store's `synchronous` setting for `store.sqlite_synchronous`.
fn synchronous(s: SqliteSynchronous) -> Synchronous {
    match s {
        SqliteSynchronous::Full => Synchronous::Full,
        SqliteSynchronous::Normal => Synchronous::Normal,
    }
}

/// Like [`build_store`], and for a PostgreSQL store that several instances share
/// (`store.cluster`, the default) also its cluster side: leases, heartbeats and
/// notifications (`store.listen_url` for the listener).
///
/// # Errors
/// As [`build_store`], or a malformed `store.listen_url`.
pub async fn build_store_for_cluster(
    config: &Config,
) -> Result<(Arc<dyn TaskStore>, Option<Arc<dyn ClusterBackend>>), AppError> {
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

/// Refuses a SQLite file store whose directory does not exist or cannot be written
/// (SQLite would only say "unable to open database file"), or whose file exists but
/// cannot be written. Other stores pass: PostgreSQL is checked when it is connected.
///
/// # Errors
/// One line naming `store.url`, the directory or file, and what is wrong with it.
pub fn check_store_location(config: &Config) -> Result<(), AppError> {
    let StoreUrl::Sqlite(SqliteLocation::File(path)) = &config.store.url else {
        return Ok(());
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => std::path::PathBuf::from("."),
    };
    let refuse =
        |what: String| -> AppError { format!("store.url {}: {what}", config.store.url).into() };
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(refuse(format!("{} is not a directory", dir.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refuse(format!(
                "the directory {} does not exist (create it, or point store.url elsewhere)",
                dir.display()
            )));
        }
        Err(e) => return Err(refuse(format!("cannot read {}: {e}", dir.display()))),
    }
    if path.exists() {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| refuse(format!("cannot open {} for writing: {e}", path.display())))?;
    }
    // SQLite writes its journal beside the file: the directory must take new files.
    let probe = dir.join(format!(".a2a-gateway-write-check-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(refuse(format!(
            "cannot create files in {}: {e}",
            dir.display()
        ))),
    }
}

/// Opens the task store to read it beside a `serve` that runs on it (`push-status`): a
/// SQLite file read-only and without its one-process lock (SQLite's WAL lets readers
/// work beside the one writer), any other store as [`build_store`] opens it.
///
/// # Errors
/// As [`build_store`]; for a SQLite file, also a file that does not exist or whose
/// schema is not this build's.
pub async fn read_store(config: &Config) -> Result<Arc<dyn TaskStore>, AppError> {
    match &config.store.url {
        StoreUrl::Sqlite(SqliteLocation::File(path)) => {
            Ok(Arc::new(SqliteTaskStore::open_read_only(path, 1).await?) as Arc<dyn TaskStore>)
        }
        _ => build_store(config).await,
    }
}
