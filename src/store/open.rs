//! Choosing a store backend from `[store] url`.

use std::sync::Arc;

use super::{MemoryTaskStore, PostgresTaskStore, SqliteTaskStore, StoreError, TaskStore};

/// Opens the task store named by `url` and runs its pending migrations:
///
/// - `memory:` (or `memory`): in process memory (nothing survives a restart);
/// - `sqlite://path/to/file.db` (or `sqlite:path`): a SQLite file in WAL mode,
///   created if missing, the path taken literally as `[store] url` parses it
///   ([`crate::config::StoreUrl`]); `sqlite::memory:` for a private in-memory SQLite
///   database;
/// - `postgres://…` or `postgresql://…`: PostgreSQL.
///
/// `max_connections` bounds the pool (for SQLite: the reader connections; writes go
/// through one writer connection).
///
/// # Errors
/// [`StoreError::Backend`] for an unknown scheme, a malformed URL, an unreachable
/// database, a failed migration, or a database last migrated by a newer build. The
/// message never repeats the URL (it may hold a password).
pub async fn open_store(url: &str, max_connections: u32) -> Result<Arc<dyn TaskStore>, StoreError> {
    let url = url.trim();
    if url == "memory" {
        return Ok(Arc::new(MemoryTaskStore::new()));
    }
    let scheme = url
        .split_once(':')
        .map(|(s, _)| s.to_ascii_lowercase())
        .unwrap_or_default();
    match scheme.as_str() {
        "memory" if url == "memory:" => Ok(Arc::new(MemoryTaskStore::new())),
        "sqlite" => Ok(Arc::new(SqliteTaskStore::open(url, max_connections).await?)),
        "postgres" | "postgresql" => Ok(Arc::new(
            PostgresTaskStore::open(url, max_connections).await?,
        )),
        _ => Err(StoreError::Backend(format!(
            "unsupported store URL scheme {scheme:?}: use memory:, sqlite://PATH, sqlite::memory: or postgres://…"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn schemes() {
        open_store("memory:", 4)
            .await
            .unwrap()
            .ping()
            .await
            .unwrap();
        open_store("sqlite::memory:", 4)
            .await
            .unwrap()
            .ping()
            .await
            .unwrap();
        let err = open_store("mysql://user:secret@host/db", 4)
            .await
            .err()
            .expect("refused");
        let text = err.to_string();
        assert!(text.contains("mysql") && !text.contains("secret"), "{text}");
    }
}
