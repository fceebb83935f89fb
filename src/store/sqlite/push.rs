//! [`PushStore`](crate::store::PushStore) on SQLite: writes (and claims) go through the store's
//! one writer connection, reads through its readers.

use sqlx::SqlitePool;

/// Push state of a [`SqliteTaskStore`](crate::store::SqliteTaskStore).
#[derive(Debug, Clone)]
pub struct SqlitePush {
    writer: SqlitePool,
    reader: SqlitePool,
    /// Whether a sender keeps its claims in memory on this store (shared by clones).
    sender: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl SqlitePush {
    /// The push state on the store's pools.
    pub(crate) fn new(writer: SqlitePool, reader: SqlitePool) -> Self {
        Self {
            writer,
            reader,
            sender: Default::default(),
        }
    }

    fn writer(&self) -> &SqlitePool {
        &self.writer
    }

    fn reader(&self) -> &SqlitePool {
        &self.reader
    }

    fn reserve(&self) -> bool {
        !self.sender.swap(true, std::sync::atomic::Ordering::AcqRel)
    }

    fn release(&self) {
        self.sender
            .store(false, std::sync::atomic::Ordering::Release);
    }

    async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, StoreError> {
        self.writer.begin_with("BEGIN IMMEDIATE").await.map_err(db)
    }
}

// One process per database file (the store's file lock): claims are kept in memory.
crate::store::sql::push::sql_push!(
    SqlitePush,
    sqlx::Sqlite,
    crate::store::sql::push::claim_sql!(""),
    true
);
