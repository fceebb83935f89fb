//! SQLite task store: one database file in WAL mode (the default for `serve` and
//! `demo`), or a private in-memory database.
//!
//! Table layout, the lazily folded artifacts and why appending one event costs in
//! proportion to that event: see the `sql` module docs (shared with PostgreSQL).
//!
//! Connections: one writer connection (every write is a `BEGIN IMMEDIATE`
//! transaction, so SQLite's single-writer lock is taken up front and never upgraded
//! mid-transaction) and a pool of `query_only` reader connections, which WAL lets run
//! alongside the writer. Appends go through a store-owned writer task that commits
//! all the appends waiting for it in one transaction (group commit, see
//! `sql/batch.rs`); each caller gets its answer after that commit.
//!
//! Durability: `synchronous = FULL` by default (`[store] sqlite_synchronous`, see
//! [`Synchronous`]): every commit is synced to disk before it returns, so an append
//! a caller was answered for survives a process crash and a power loss. `NORMAL`
//! syncs only at checkpoints: a committed append still survives a process crash
//! (the WAL is in the OS page cache), but a power loss or OS crash can roll back the
//! last transactions. WAL frames are copied into the database file by a
//! passive checkpoint on a reader connection every 250 ms, beside the writer rather
//! than inside one of its commits (the writer checkpoints by itself only if the WAL
//! reaches 10,000 pages). `busy_timeout` is 5 s for locks held by other tools on
//! the file (a backup, the `sqlite3` shell).
//!
//! One process per file: opening a database file takes the exclusive lock of
//! [`super::lock`] first, and another process holding it is refused by name and pid.
//!
//! `sqlite::memory:` uses a single connection for everything (each SQLite connection
//! would otherwise see its own empty database), kept open for the store's lifetime.

pub mod push;

mod fold;
mod open;
mod task_store;
mod write;

pub use open::MIGRATOR;

use std::sync::Arc;

use sqlx::sqlite::{SqlitePool, SqliteSynchronous};

use super::lock::StoreLock;
use super::sql::batch::Batcher;

/// SQLite's `synchronous` setting for a database file (`[store] sqlite_synchronous`),
/// in WAL mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// Every commit is synced to disk (`fsync`) before the append returns: an event
    /// a client has received survives a process crash, an OS crash and a power loss.
    /// The default.
    #[default]
    Full,
    /// The WAL is synced only at checkpoints: a committed event survives a process
    /// crash, but an OS crash or power loss can roll back the last commits (events
    /// clients may already have received). Faster per commit; see BENCHMARKS.md.
    Normal,
}

impl From<Synchronous> for SqliteSynchronous {
    fn from(s: Synchronous) -> Self {
        match s {
            Synchronous::Full => SqliteSynchronous::Full,
            Synchronous::Normal => SqliteSynchronous::Normal,
        }
    }
}

/// A [`TaskStore`](super::TaskStore) in a SQLite database (see the module docs).
#[derive(Debug, Clone)]
pub struct SqliteTaskStore {
    writer: SqlitePool,
    reader: SqlitePool,
    /// The writer lane that commits appends in batches.
    batcher: Batcher,
    /// Keeps the background WAL checkpointer running (file databases only).
    _checkpointer: Option<Arc<()>>,
    /// The one-process lock of the database file (file databases only).
    lock: Option<Arc<StoreLock>>,
    /// Webhook configs, outbox and signing key.
    push: push::SqlitePush,
    /// Opened by [`open_read_only`](SqliteTaskStore::open_read_only): closing it
    /// does not checkpoint the WAL (the process that writes the file does).
    read_only: bool,
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn conformance_in_memory() {
        let store = super::SqliteTaskStore::open("sqlite::memory:", 1)
            .await
            .unwrap();
        super::super::conformance::run_all(&store).await;
    }
}
