//! Opening a SQLite store: a database file (its one-process lock, the writer and the
//! reader pools, migrations, the background WAL checkpointer), a file read-only, or a
//! private in-memory database; and closing it.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use sqlx::{ConnectOptions, Row};

use super::write::SqliteWriter;
use super::{SqliteTaskStore, Synchronous};
use crate::store::StoreError;
use crate::store::lock::StoreLock;
use crate::store::sql::batch::{Batcher, HeldConnection};
use crate::store::sql::{db, db_message, migrate_error};

/// The embedded SQLite migrations (`migrations/sqlite`).
pub static MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");

/// How often the background checkpointer copies committed WAL frames into the
/// database file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// The WAL size, in pages, at which the writer checkpoints by itself (only when the
/// background checkpointer falls behind; SQLite's default is 1,000).
const WRITER_CHECKPOINT_PAGES: u32 = 10_000;

/// Runs `PRAGMA wal_checkpoint(PASSIVE)` every [`CHECKPOINT_EVERY`] on a reader
/// connection until the store is dropped or closed. A passive checkpoint neither
/// waits for nor blocks the writer, so copying the WAL into the database happens
/// beside the appends instead of inside a commit; the writer's own automatic
/// checkpoint stays as a backstop at [`WRITER_CHECKPOINT_PAGES`].
fn spawn_checkpointer(pool: SqlitePool, alive: std::sync::Weak<()>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tick.tick().await;
            if alive.strong_count() == 0 || pool.is_closed() {
                return;
            }
            match checkpoint(&pool).await {
                // Said once per failing spell: the WAL then grows up to the writer's
                // own checkpoint threshold.
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "background WAL checkpoint failed; the writer will checkpoint by itself");
                }
                Err(_) => {}
                Ok(_) => failing = false,
            }
        }
    });
}

/// Whether the database takes writes: takes the write lock and runs a write that
/// changes nothing, then rolls back. A read-only file or connection fails the write
/// ("attempt to write a readonly database"); a lock another process holds fails
/// after the busy timeout.
pub(super) async fn writable(writer: &SqlitePool) -> Result<(), StoreError> {
    let message = |e: sqlx::Error| StoreError::Backend(db_message(&e));
    let mut conn = writer.acquire().await.map_err(db)?;
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut *conn)
        .await
        .map_err(message)?;
    let probe = sqlx::raw_sql("UPDATE a2a_tasks SET state = state WHERE 0")
        .execute(&mut *conn)
        .await;
    // Ends the transaction either way.
    let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await;
    probe.map_err(message)?;
    Ok(())
}

/// One passive checkpoint: the WAL's frames and how many of them are now in the
/// database file.
async fn checkpoint(pool: &SqlitePool) -> Result<(i64, i64), StoreError> {
    let row = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(pool)
        .await
        .map_err(db)?;
    Ok((row.get(1), row.get(2)))
}

/// Pool options for every SQLite pool of the store: no liveness test before each
/// acquire. sqlx pings a connection before handing it out by default; for SQLite a
/// ping is a round trip to the connection's worker thread that proves nothing (the
/// database is a local file, not a socket that can drop), paid by every read. A
/// connection given back is still pinged by sqlx on its way back into the pool (and
/// closed if that fails); the writer lane avoids paying that per batch, see
/// [`HeldConnection`].
fn pool_options() -> SqlitePoolOptions {
    SqlitePoolOptions::new().test_before_acquire(false)
}

/// The error for a database file `file` SQLite could not open.
fn open_error(file: &str, e: &sqlx::Error) -> StoreError {
    StoreError::Backend(format!(
        "cannot open the SQLite store {file} (store.url): {}",
        db_message(e)
    ))
}

/// The newest migration of this build (the schema version it reads and writes).
fn known_version() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// How long a connection waits for another process's lock on the file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

impl SqliteTaskStore {
    /// Opens the database at a `sqlite:` URL, read as `[store] url` is:
    /// `sqlite://PATH` or `sqlite:PATH` (a file, created if missing; the path is
    /// taken literally, without percent-decoding or query parameters) or
    /// `sqlite::memory:`. Up to `max_connections` reader connections run beside the
    /// writer. Runs pending migrations.
    ///
    /// # Errors
    /// [`StoreError::Backend`] for a malformed URL, a database that cannot be opened,
    /// a failed migration, or a database migrated by a newer build (refused).
    pub async fn open(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let rest = url
            .trim()
            .strip_prefix("sqlite:")
            .ok_or_else(|| StoreError::Backend("a SQLite store URL starts with sqlite:".into()))?;
        if rest == ":memory:" || rest == "//:memory:" {
            let options = SqliteConnectOptions::from_str("sqlite::memory:").map_err(db)?;
            return Self::open_in_memory(options).await;
        }
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.is_empty() || path.contains('?') {
            return Err(StoreError::Backend(
                "a SQLite store URL is sqlite://PATH (no query parameters) or sqlite::memory:"
                    .into(),
            ));
        }
        Self::open_path(Path::new(path), max_connections).await
    }

    /// Opens (creating if missing) the database file at `path` with up to
    /// `max_readers` reader connections and `synchronous = FULL`, and runs pending
    /// migrations.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_path(path: &Path, max_readers: u32) -> Result<Self, StoreError> {
        Self::open_path_with(path, max_readers, Synchronous::Full).await
    }

    /// [`open_path`](Self::open_path) with the given [`Synchronous`] setting.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_path_with(
        path: &Path,
        max_readers: u32,
        synchronous: Synchronous,
    ) -> Result<Self, StoreError> {
        Self::open_file(
            SqliteConnectOptions::new().filename(path),
            max_readers,
            synchronous,
        )
        .await
    }

    /// Opens a database file with these options (created if missing, WAL, the given
    /// `synchronous`), with up to `max_readers` reader connections, and runs pending
    /// migrations. The file's one-process lock (see [`crate::store::lock`]) is taken first
    /// and held until [`close`](Self::close) or the last clone is dropped.
    ///
    /// # Errors
    /// As [`open`](Self::open), and when another process holds the file's lock (the
    /// message names the file and that process's id).
    pub async fn open_file(
        options: SqliteConnectOptions,
        max_readers: u32,
        synchronous: Synchronous,
    ) -> Result<Self, StoreError> {
        let file = options.get_filename().display().to_string();
        let lock = Arc::new(StoreLock::acquire(options.get_filename())?);
        let base = options
            .create_if_missing(true)
            .busy_timeout(BUSY_TIMEOUT)
            .log_slow_statements(
                crate::store::SLOW_STATEMENT_LEVEL,
                crate::store::SLOW_STATEMENT,
            )
            .synchronous(synchronous.into());
        let writer = pool_options()
            .max_connections(1)
            .connect_with(
                base.clone()
                    .journal_mode(SqliteJournalMode::Wal)
                    .pragma("wal_autocheckpoint", WRITER_CHECKPOINT_PAGES.to_string()),
            )
            .await
            .map_err(|e| open_error(&file, &e))?;
        Self::migrate(&writer).await?;
        writable(&writer).await.map_err(|e| {
            StoreError::Backend(format!(
                "the SQLite store {file} (store.url) cannot be written (check the file, its \
                 -wal and -shm files and their directory): {e}"
            ))
        })?;
        let reader = pool_options()
            .max_connections(max_readers.max(1))
            .connect_with(base.pragma("query_only", "ON"))
            .await
            .map_err(db)?;
        let mut store = Self::with_pools(writer, reader, true);
        let alive = Arc::new(());
        spawn_checkpointer(store.reader.clone(), Arc::downgrade(&alive));
        store._checkpointer = Some(alive);
        store.lock = Some(lock);
        Ok(store)
    }

    /// Opens an existing database file for reading only, without its one-process
    /// lock and without migrating it, so that a command that only reads (`push-status`)
    /// works beside the `serve` that holds the lock (SQLite's WAL lets readers and the
    /// one writer work at once). The store's writes fail (`attempt to write a readonly
    /// database`).
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the file does not exist or cannot be opened, or
    /// its schema is not this build's (never migrated, migrated by an older build that
    /// `serve` or `migrate` has not brought up to date, or by a newer build).
    pub async fn open_read_only(path: &Path, max_readers: u32) -> Result<Self, StoreError> {
        let file = path.display().to_string();
        if !path.is_file() {
            return Err(StoreError::Backend(format!(
                "there is no SQLite store at {file} (store.url)"
            )));
        }
        let pool = pool_options()
            .max_connections(max_readers.max(1))
            .connect_with(
                SqliteConnectOptions::new()
                    .filename(path)
                    .read_only(true)
                    .busy_timeout(BUSY_TIMEOUT)
                    .log_slow_statements(
                        crate::store::SLOW_STATEMENT_LEVEL,
                        crate::store::SLOW_STATEMENT,
                    )
                    .pragma("query_only", "ON"),
            )
            .await
            .map_err(|e| open_error(&file, &e))?;
        let known = known_version();
        let version: Option<i64> =
            sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
                .fetch_one(&pool)
                .await
                .unwrap_or(None);
        if version != Some(known) {
            pool.close().await;
            let found = version.map_or("none".to_owned(), |v| v.to_string());
            return Err(StoreError::Backend(format!(
                "the SQLite store {file} (store.url) has schema version {found}, this build \
                 reads version {known}: `a2a-gateway migrate` (or `serve`) with the build \
                 that serves it brings it up to date"
            )));
        }
        let mut store = Self::with_pools(pool.clone(), pool, false);
        store.read_only = true;
        Ok(store)
    }

    /// Opens a private in-memory database on one connection that lives as long as
    /// the store, and creates the schema.
    ///
    /// # Errors
    /// [`StoreError::Backend`] when SQLite fails.
    pub async fn open_in_memory(options: SqliteConnectOptions) -> Result<Self, StoreError> {
        let pool = pool_options()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.busy_timeout(BUSY_TIMEOUT).log_slow_statements(
                crate::store::SLOW_STATEMENT_LEVEL,
                crate::store::SLOW_STATEMENT,
            ))
            .await
            .map_err(db)?;
        Self::migrate(&pool).await?;
        Ok(Self::with_pools(pool.clone(), pool, false))
    }

    /// The store on these pools, with its writer lane on `writer`, which keeps its
    /// connection between batches when `hold` (not when `writer` is also the pool
    /// every read uses: reads would wait for the lane).
    fn with_pools(writer: SqlitePool, reader: SqlitePool, hold: bool) -> Self {
        let batcher = Batcher::spawn(vec![SqliteWriter {
            conn: HeldConnection::new(writer.clone(), hold),
        }]);
        Self {
            push: super::push::SqlitePush::new(writer.clone(), reader.clone()),
            writer,
            reader,
            batcher,
            _checkpointer: None,
            lock: None,
            read_only: false,
        }
    }

    async fn migrate(pool: &SqlitePool) -> Result<(), StoreError> {
        let known = known_version();
        MIGRATOR
            .run(pool)
            .await
            .map_err(|e| migrate_error("SQLite", known, e))
    }

    /// The writer pool (one connection), for tests and maintenance.
    pub fn writer_pool(&self) -> &SqlitePool {
        &self.writer
    }

    /// Folds the WAL into the database file (a `TRUNCATE` checkpoint: the `-wal`
    /// file is left empty; not for a store opened read-only), closes every
    /// connection and releases the file's one-process lock.
    pub async fn close(&self) {
        if !self.read_only
            && let Err(e) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(&self.writer)
                .await
        {
            tracing::warn!(error = %e, "final WAL checkpoint failed; the -wal file holds the latest writes");
        }
        self.reader.close().await;
        self.writer.close().await;
        if let Some(lock) = &self.lock {
            lock.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::protocol::StreamResponse;
    use crate::store::TaskStore;
    use crate::store::conformance::task_at;

    /// The background checkpointer's statement works on the `query_only` reader
    /// connections and copies every committed frame.
    #[tokio::test]
    async fn readers_checkpoint_the_wal() {
        let dir = tempfile::tempdir().unwrap();
        let store = super::super::SqliteTaskStore::open_path(&dir.path().join("t.db"), 2)
            .await
            .unwrap();
        assert!(store._checkpointer.is_some());
        let scope = crate::scope::Scope::new("", "alice");
        for i in 0..20 {
            let id = format!("task-{i}");
            let ev = StreamResponse::Task(task_at(&id, "ctx", crate::protocol::time::now()));
            store.append(&scope, &id, 1, &ev).await.unwrap();
        }
        let (frames, copied) = super::checkpoint(&store.reader).await.unwrap();
        assert!(frames > 0, "appends went to the WAL");
        assert_eq!(copied, frames, "every committed frame is checkpointed");
        store.close().await;
    }
}
