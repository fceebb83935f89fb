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
//! all the appends waiting for it in one transaction (group commit, see the `batch`
//! module); each caller gets its answer after that commit.
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

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, Row};

use super::lock::StoreLock;
use super::memory::shape_for_list;
use super::sql::batch::{
    Append, BatchError, BatchOps, BatchResults, BatchWriter, Batcher, CompactRange, HeldConnection,
    TaskRow, Writes, to_read, write_batch,
};
use super::sql::{
    db, db_message, fold_artifacts, folds_artifacts, from_json, kind, migrate_error, to_i64,
    to_json, to_u64,
};
use super::{
    FoldedArtifacts, PageCursor, StoreError, StoredEvent, TaskHead, TaskPage, TaskQuery,
    TaskRecord, TaskStore,
};
use crate::protocol::time::Timestamp;
use crate::protocol::{StreamResponse, Task, TaskState};
use crate::scope::{Scope, TaskKey};

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
async fn writable(writer: &SqlitePool) -> Result<(), StoreError> {
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

/// A [`TaskStore`] in a SQLite database (see the module docs).
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
    /// migrations. The file's one-process lock (see [`super::lock`]) is taken first
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
            .log_slow_statements(super::SLOW_STATEMENT_LEVEL, super::SLOW_STATEMENT)
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
                    .log_slow_statements(super::SLOW_STATEMENT_LEVEL, super::SLOW_STATEMENT)
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
            .connect_with(
                options
                    .busy_timeout(BUSY_TIMEOUT)
                    .log_slow_statements(super::SLOW_STATEMENT_LEVEL, super::SLOW_STATEMENT),
            )
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
            push: push::SqlitePush::new(writer.clone(), reader.clone()),
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

super::sql::reads::sql_reads!(sqlx::SqliteConnection, sqlx::sqlite::SqliteRow);

#[async_trait]
impl TaskStore for SqliteTaskStore {
    async fn append_all(
        &self,
        scope: &Scope,
        task_id: &str,
        events: &[Arc<StoredEvent>],
    ) -> Result<(), StoreError> {
        self.batcher
            .append_events(scope, task_id, events, None)
            .await
    }

    async fn append_all_folded(
        &self,
        scope: &Scope,
        task_id: &str,
        events: &[Arc<StoredEvent>],
        artifacts: &FoldedArtifacts,
    ) -> Result<(), StoreError> {
        self.batcher
            .append_events(scope, task_id, events, Some(artifacts))
            .await
    }

    async fn get(&self, scope: &Scope, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
        read_task(&mut conn, scope, task_id).await
    }

    async fn head(&self, scope: &Scope, task_id: &str) -> Result<Option<TaskHead>, StoreError> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
        read_head(&mut conn, scope, task_id).await
    }

    async fn events_after(
        &self,
        scope: &Scope,
        task_id: &str,
        after: u64,
        limit: usize,
        max_bytes: u64,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
        read_events_after(&mut conn, scope, task_id, after, limit, max_bytes).await
    }

    async fn list(&self, scope: &Scope, query: &TaskQuery) -> Result<TaskPage, StoreError> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
        read_list(&mut conn, scope, query).await
    }

    async fn unsettled(&self, limit: usize) -> Result<Vec<TaskKey>, StoreError> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
        read_unsettled(&mut conn, limit).await
    }

    async fn purge_expired(&self, older_than: Timestamp, batch: usize) -> Result<u64, StoreError> {
        let batch = batch.max(1);
        let mut purged = 0u64;
        loop {
            let mut tx = self
                .writer
                .begin_with("BEGIN IMMEDIATE")
                .await
                .map_err(db)?;
            let rows = sqlx::query(
                "SELECT tenant, owner, id FROM a2a_tasks \
                 WHERE state IN ($1, $2, $3, $4) AND status_ms < $5 LIMIT $6 + 0",
            )
            .bind(TaskState::Completed.as_str())
            .bind(TaskState::Failed.as_str())
            .bind(TaskState::Canceled.as_str())
            .bind(TaskState::Rejected.as_str())
            .bind(older_than.timestamp_millis())
            .bind(to_i64(batch as u64))
            .fetch_all(&mut *tx)
            .await
            .map_err(db)?;
            let found = rows.len();
            for (scope, id) in scoped_ids(rows) {
                for sql in [
                    "DELETE FROM a2a_task_events WHERE tenant = $1 AND owner = $2 AND task_id = $3",
                    "DELETE FROM a2a_task_artifacts WHERE tenant = $1 AND owner = $2 AND task_id = $3",
                    "DELETE FROM a2a_push_outbox WHERE tenant = $1 AND owner = $2 AND task_id = $3",
                    "DELETE FROM a2a_push_configs WHERE tenant = $1 AND owner = $2 AND task_id = $3",
                    "DELETE FROM a2a_tasks WHERE tenant = $1 AND owner = $2 AND id = $3",
                ] {
                    sqlx::query(sql)
                        .bind(&scope.tenant)
                        .bind(&scope.owner)
                        .bind(&id)
                        .execute(&mut *tx)
                        .await
                        .map_err(db)?;
                }
            }
            tx.commit().await.map_err(db)?;
            purged += found as u64;
            if found < batch {
                return Ok(purged);
            }
            tokio::task::yield_now().await;
        }
    }

    async fn expired_input_required(
        &self,
        older_than: Timestamp,
        limit: usize,
    ) -> Result<Vec<TaskKey>, StoreError> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
        read_expired_input_required(&mut conn, older_than, limit).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        writable(&self.writer).await
    }

    async fn close(&self) {
        SqliteTaskStore::close(self).await;
    }

    fn push_store(&self) -> Option<&dyn super::PushStore> {
        Some(&self.push)
    }
}

/// The writer lane of a SQLite store: every batch is one `BEGIN IMMEDIATE`
/// transaction on the writer connection.
struct SqliteWriter {
    conn: HeldConnection<sqlx::Sqlite>,
}

#[async_trait]
impl BatchWriter for SqliteWriter {
    async fn write(&mut self, batch: &[Append]) -> Result<BatchResults, BatchError> {
        let conn = self
            .conn
            .take()
            .await
            .map_err(|e| BatchError::Write(db(e)))?;
        let mut ops = SqliteOps { conn, open: false };
        let result = write_batch(&mut ops, batch).await;
        if result.is_ok() && !ops.open {
            self.conn.keep(ops.conn);
        }
        result
    }

    fn idle(&mut self) {
        self.conn.release();
    }
}

/// The appends of a batch's events array (`$2`, see [`EventGroup`]), one row each,
/// for the statements that expand them into their events.
macro_rules! event_groups {
    () => {
        "WITH a AS MATERIALIZED (SELECT value->>0 AS tenant, value->>1 AS owner, \
         value->>2 AS id, value->>3 AS seq, value->>4 AS now, value AS v \
         FROM jsonb_each($2)) "
    };
}

/// The statements of a batch's writes, ending with `COMMIT` (see [`SqliteOps`]).
macro_rules! write_sql {
    () => {
        concat!(
            "INSERT INTO a2a_tasks (tenant, owner, id, context_id, state, status_ms, created_ms, \
             updated_ms, last_seq, snapshot, art_seq, art_bytes, pending_bytes) \
             SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6, \
                    value->>6, value->>10, CAST(substr($5, value->>7, value->>11) AS TEXT), \
                    value->>10, value->>8, 0 \
             FROM jsonb_each($1); \
             INSERT INTO a2a_task_artifacts (tenant, owner, task_id, artifacts) \
             SELECT value->>0, value->>1, value->>2, CAST(substr($5, value->>9, value->>8) AS TEXT) \
             FROM jsonb_each($1); \
             ", event_groups!(), " \
             INSERT INTO a2a_task_events (tenant, owner, task_id, seq, kind, folds_artifacts, \
             event, created_ms) \
             SELECT a.tenant, a.owner, a.id, a.seq + e.value->>4, e.value->>2, e.value->>3, \
                    CAST(substr($5, e.value->>0, e.value->>1) AS TEXT), a.now \
             FROM a CROSS JOIN jsonb_each(a.v, '$[5]') AS e; \
             ", event_groups!(), " \
             INSERT INTO a2a_push_outbox \
               (tenant, owner, task_id, config_id, seq, created_ms, next_ms, attempts) \
             SELECT c.tenant, c.owner, c.task_id, c.id, a.seq + e.value, a.now, a.now, 0 \
             FROM a CROSS JOIN a2a_push_configs c CROSS JOIN jsonb_each(a.v, '$[6]') AS e \
             WHERE c.tenant = a.tenant AND c.owner = a.owner AND c.task_id = a.id \
               AND c.enabled = 1; \
             UPDATE a2a_task_artifacts SET artifacts = k.artifacts \
             FROM (SELECT value->>0 AS tenant, value->>1 AS owner, value->>2 AS id, \
                          CAST(substr($5, value->>3, value->>4) AS TEXT) AS artifacts \
                   FROM jsonb_each($3)) AS k \
             WHERE a2a_task_artifacts.tenant = k.tenant AND a2a_task_artifacts.owner = k.owner \
               AND a2a_task_artifacts.task_id = k.id; \
             UPDATE a2a_tasks SET last_seq = k.last_seq, state = k.state, \
                    status_ms = k.status_ms, updated_ms = k.now, \
                    snapshot = COALESCE(k.snapshot, a2a_tasks.snapshot), art_seq = k.art_seq, \
                    art_bytes = k.art_bytes, pending_bytes = k.pending \
             FROM (SELECT value->>0 AS tenant, value->>1 AS owner, value->>2 AS id, \
                          value->>3 AS last_seq, value->>4 AS state, value->>5 AS status_ms, \
                          value->>6 AS now, \
                          CAST(substr($5, value->>7, value->>11) AS TEXT) AS snapshot, \
                          value->>8 AS art_seq, \
                          value->>9 AS art_bytes, value->>10 AS pending \
                   FROM jsonb_each($4)) AS k \
             WHERE a2a_tasks.tenant = k.tenant AND a2a_tasks.owner = k.owner \
               AND a2a_tasks.id = k.id; \
             COMMIT"
        )
    };
}

/// Rewrites one task's artifact checkpoint with its text bound as is: `$1` tenant, `$2`
/// owner, `$3` task id, `$4` the checkpoint (see [`OWN_STATEMENT_BYTES`]).
macro_rules! checkpoint_sql {
    () => {
        "UPDATE a2a_task_artifacts SET artifacts = $4 \
         WHERE tenant = $1 AND owner = $2 AND task_id = $3"
    };
}

/// `sql` (a literal), preceded by `BEGIN IMMEDIATE` when the batch's transaction is not
/// open yet (no read began it); marks it open (see [`SqliteOps`]).
macro_rules! in_transaction {
    ($ops:expr, $($sql:tt)+) => {
        if std::mem::replace(&mut $ops.open, true) {
            $($sql)+
        } else {
            concat!("BEGIN IMMEDIATE; ", $($sql)+)
        }
    };
}

/// A rewritten checkpoint of at least this many bytes (256 KiB) is written by a
/// statement of its own ([`checkpoint_sql`]) with its text moved into the parameter,
/// instead of being copied into the texts blob and sliced out of it again: each
/// copy of a streamed reply of many megabytes counts in the gateway's peak memory,
/// and one more statement is nothing beside writing that many bytes.
const OWN_STATEMENT_BYTES: usize = 256 * 1024;

/// The batch round trips on SQLite. Each statement takes its rows as one JSON array
/// bound as a single parameter and unpacked with `jsonb_each` (which parses the array
/// once; `json_each` would render each element back to text for `->>` to parse
/// again), so every statement has a fixed text (prepared once) whatever the batch
/// size; the JSON texts the rows carry (snapshots, checkpoints, events) are not in
/// those arrays but in one blob parameter that each row slices by offset and length;
/// the statements of a round trip go to the connection as one multi-statement
/// query. The transaction is
/// begun and committed by those queries (not by a `sqlx::Transaction`), so that
/// beginning rides with the first read and committing with the writes.
struct SqliteOps {
    conn: sqlx::pool::PoolConnection<sqlx::Sqlite>,
    /// Whether `BEGIN IMMEDIATE` ran and no `COMMIT` or `ROLLBACK` yet.
    open: bool,
}

/// One log row of an append: offset and length of its text in the texts blob, its
/// kind and `folds_artifacts`, and the index in the append of its last event.
type LogRow = (usize, usize, &'static str, i32, u64);

/// The events of one append as the events and outbox statements unpack them:
/// `[tenant, owner, task id, first seq, now, rows, deliverable]`, where `rows` are the
/// append's log rows (`[offset, length, kind, folds, last index]`: a row is one event,
/// or consecutive artifact updates folded into one row as [`fold::row_sizes`] cuts
/// them, see [Folded rows](super::sql#folded-rows); its number is the first seq plus
/// the index of its last event) and `deliverable` the indexes of the events that are
/// pushed (all but user messages), one outbox row each.
struct EventGroup<'a> {
    /// The append; its first event's number is `append.seq` (an append is written whole).
    append: &'a Append,
    rows: Vec<LogRow>,
    deliverable: Vec<u64>,
}

impl serde::Serialize for EventGroup<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let a = self.append;
        let (tenant, owner, id) = (&a.scope.tenant, &a.scope.owner, &a.task_id);
        (
            tenant,
            owner,
            id,
            a.seq,
            a.now,
            &self.rows,
            &self.deliverable,
        )
            .serialize(s)
    }
}

/// Encodes batch rows as the JSON array the statements unpack.
fn rows_json<T: serde::Serialize>(rows: &[T]) -> Result<String, StoreError> {
    to_json(&rows)
}

/// The key of a returned row (columns 0..3).
fn row_key(r: &sqlx::sqlite::SqliteRow) -> TaskKey {
    (
        Scope::new(r.get::<String, _>(0), r.get::<String, _>(1)),
        r.get(2),
    )
}

#[async_trait]
impl BatchOps for SqliteOps {
    async fn rows(&mut self, batch: &[Append]) -> Result<Vec<(TaskKey, TaskRow)>, StoreError> {
        let keys: Vec<_> = to_read(batch)
            .map(|a| (&a.scope.tenant, &a.scope.owner, &a.task_id))
            .collect();
        if keys.is_empty() {
            // Nothing to read: the transaction begins with the writes.
            return Ok(Vec::new());
        }
        self.open = true;
        let rows = sqlx::query(
            "BEGIN IMMEDIATE; \
             WITH k AS (SELECT value->>0 AS tenant, value->>1 AS owner, value->>2 AS id \
                        FROM jsonb_each($1)) \
             SELECT t.tenant, t.owner, t.id, t.last_seq, t.state, t.status_ms, t.snapshot, \
                    t.art_seq, t.art_bytes, t.pending_bytes \
             FROM k CROSS JOIN a2a_tasks t \
               ON t.tenant = k.tenant AND t.owner = k.owner AND t.id = k.id",
        )
        .bind(rows_json(&keys)?)
        .fetch_all(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(rows
            .iter()
            .map(|r| {
                let row = TaskRow {
                    last_seq: r.get(3),
                    state: TaskState::parse(r.get::<&str, _>(4)).unwrap_or(TaskState::Unspecified),
                    status_ms: r.get(5),
                    snapshot: r.get(6),
                    art_seq: r.get(7),
                    art_bytes: r.get(8),
                    pending_bytes: r.get(9),
                };
                (row_key(r), row)
            })
            .collect())
    }

    async fn compaction_input(
        &mut self,
        ranges: &[CompactRange<'_>],
    ) -> Result<Vec<(TaskKey, i64, String)>, StoreError> {
        let keys: Vec<_> = ranges
            .iter()
            .map(|(a, after, upto)| (&a.scope.tenant, &a.scope.owner, &a.task_id, after, upto))
            .collect();
        let rows = sqlx::query(
            "WITH k AS (SELECT value->>0 AS tenant, value->>1 AS owner, value->>2 AS id, \
                               value->>3 AS after, value->>4 AS upto FROM jsonb_each($1)) \
             SELECT a.tenant, a.owner, a.task_id, 0, a.artifacts \
             FROM k CROSS JOIN a2a_task_artifacts a \
               ON a.tenant = k.tenant AND a.owner = k.owner AND a.task_id = k.id \
             UNION ALL \
             SELECT e.tenant, e.owner, e.task_id, 1, \
                    '[' || group_concat(e.event, ',' ORDER BY e.seq) || ']' \
             FROM k CROSS JOIN a2a_task_events e \
               ON e.tenant = k.tenant AND e.owner = k.owner AND e.task_id = k.id \
              AND e.seq > k.after AND e.seq <= k.upto \
             WHERE e.folds_artifacts = 1 \
             GROUP BY e.tenant, e.owner, e.task_id",
        )
        .bind(rows_json(&keys)?)
        .fetch_all(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(rows
            .iter()
            .map(|r| (row_key(r), r.get(3), r.get(4)))
            .collect())
    }

    async fn write(&mut self, mut w: Writes<'_>) -> Result<(), BatchError> {
        let (large, small): (Vec<_>, Vec<_>) = std::mem::take(&mut w.artifacts)
            .into_iter()
            .partition(|(_, artifacts)| artifacts.len() >= OWN_STATEMENT_BYTES);
        w.artifacts = small;
        for (a, artifacts) in large {
            sqlx::query(in_transaction!(self, checkpoint_sql!()))
                .bind(a.scope.tenant.as_str())
                .bind(a.scope.owner.as_str())
                .bind(a.task_id.as_str())
                .bind(artifacts)
                .execute(&mut *self.conn)
                .await
                .map_err(|e| BatchError::Write(db(e)))?;
        }
        let encode = |r: Result<String, StoreError>| r.map_err(BatchError::Write);
        // The JSON texts (snapshots, checkpoints, events) go in one blob, bound as `$5`,
        // each row naming its slice by a 1-based offset and a length in bytes: inside the
        // rows' JSON arrays each text would be escaped here, parsed by `jsonb_each` and
        // unescaped by `->>` again.
        let mut texts = Vec::new();
        let mut put = |text: &str| {
            let offset = texts.len() + 1;
            texts.extend_from_slice(text.as_bytes());
            offset
        };
        let tasks: Vec<_> = w
            .creates
            .iter()
            .map(|(a, c)| {
                (
                    &a.scope.tenant,
                    &a.scope.owner,
                    &a.task_id,
                    &c.context_id,
                    c.state.as_str(),
                    c.status_ms,
                    a.now,
                    put(&c.snapshot),
                    c.artifacts.len(),
                    put(&c.artifacts),
                    c.last_seq,
                    c.snapshot.len(),
                )
            })
            .collect();
        // One entry per append: its key, first sequence number and time once, then its
        // log rows, so SQLite extracts five values per row instead of repeating the
        // task's key in every one; the outbox statement reads the same array and looks
        // up a task's push configs once per append, not per event. A run of
        // consecutive artifact updates of an append is cut into rows by
        // `fold::row_sizes`; a row's texts are adjacent in the blob, joined by commas
        // (see [Folded rows](super::sql#folded-rows)).
        let mut events: Vec<EventGroup<'_>> = Vec::new();
        let mut rest = &w.events[..];
        while let Some(&(a, first, _)) = rest.first() {
            debug_assert_eq!(first.seq, a.seq);
            let n = rest
                .iter()
                .take_while(|(b, _, _)| std::ptr::eq(*b, a))
                .count();
            let (append, after) = rest.split_at(n);
            rest = after;
            let local =
                fold::local_budget(a.scope.tenant.len() + a.scope.owner.len() + a.task_id.len());
            let mut group = EventGroup {
                append: a,
                rows: Vec::new(),
                deliverable: Vec::new(),
            };
            let mut i = 0;
            while i < append.len() {
                let is_chunk =
                    |e: &StoredEvent| matches!(e.event, StreamResponse::ArtifactUpdate(_));
                let run = if is_chunk(append[i].1) {
                    append[i..]
                        .iter()
                        .take_while(|(_, e, _)| is_chunk(e))
                        .count()
                } else {
                    1
                };
                let lens: Vec<usize> = append[i..i + run].iter().map(|(_, _, j)| j.len()).collect();
                for size in fold::row_sizes(&lens, local) {
                    let row = &append[i..i + size];
                    let (_, e, json) = row[0];
                    let offset = put(json);
                    let mut len = json.len();
                    for (_, _, json) in &row[1..] {
                        put(",");
                        put(json);
                        len += 1 + json.len();
                    }
                    let last = row[size - 1].1.seq - a.seq;
                    group.rows.push((
                        offset,
                        len,
                        kind(&e.event),
                        i32::from(folds_artifacts(&e.event)),
                        last,
                    ));
                    i += size;
                }
            }
            group.deliverable = append
                .iter()
                .filter(|(_, e, _)| !matches!(e.event, StreamResponse::Message(_)))
                .map(|(_, e, _)| e.seq - a.seq)
                .collect();
            events.push(group);
        }
        let artifacts: Vec<_> = w
            .artifacts
            .iter()
            .map(|(a, artifacts)| {
                (
                    &a.scope.tenant,
                    &a.scope.owner,
                    &a.task_id,
                    put(artifacts),
                    artifacts.len(),
                )
            })
            .collect();
        let updates: Vec<_> = w
            .updates
            .iter()
            .map(|(a, u)| {
                (
                    &a.scope.tenant,
                    &a.scope.owner,
                    &a.task_id,
                    u.seq,
                    u.state.as_str(),
                    u.status_ms,
                    a.now,
                    u.snapshot.as_deref().map(&mut put),
                    u.art_seq,
                    u.art_bytes,
                    u.pending_bytes,
                    u.snapshot.as_ref().map(String::len),
                )
            })
            .collect();
        // Without a read before it, this statement begins the transaction too.
        sqlx::query(in_transaction!(self, write_sql!()))
            .bind(encode(rows_json(&tasks))?)
            .bind(encode(rows_json(&events))?)
            .bind(encode(rows_json(&artifacts))?)
            .bind(encode(rows_json(&updates))?)
            .bind(texts)
            .execute(&mut *self.conn)
            .await
            .map_err(|e| BatchError::Write(db(e)))?;
        // A failed COMMIT leaves the transaction open or rolled back, never
        // committed: `abort` ends it, and nothing was written.
        self.open = false;
        Ok(())
    }

    async fn abort(&mut self) {
        if !std::mem::take(&mut self.open) {
            return;
        }
        match sqlx::query("ROLLBACK").execute(&mut *self.conn).await {
            Ok(_) => {}
            // BEGIN itself failed (another process held the database past the busy
            // timeout) or SQLite already rolled the transaction back: the connection is
            // in autocommit mode, as good as new.
            Err(e) if no_transaction(&e) => {}
            Err(e) => {
                // The transaction may still be open: the connection is never used again
                // (not kept by the lane, closed when dropped, not given back to the pool).
                tracing::warn!(error = %db_message(&e), "ROLLBACK failed; closing the SQLite writer connection");
                self.conn.close_on_drop();
                self.open = true;
            }
        }
    }
}

/// Whether `e` is SQLite's refusal of a ROLLBACK because no transaction is open.
fn no_transaction(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.message().contains("no transaction is active"))
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
        let store = super::SqliteTaskStore::open_path(&dir.path().join("t.db"), 2)
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

    /// A ROLLBACK without a transaction (BEGIN failed, or SQLite already rolled
    /// back) leaves the connection in use, and that refusal is told apart from other
    /// failures (which retire the connection); a successful ROLLBACK keeps it.
    #[tokio::test]
    async fn rollback_keeps_the_connection_unless_a_transaction_may_be_left_open() {
        use super::BatchOps;
        let dir = tempfile::tempdir().unwrap();
        let store = super::SqliteTaskStore::open_path(&dir.path().join("t.db"), 1)
            .await
            .unwrap();
        let pool = store.writer_pool().clone();
        assert_eq!(pool.size(), 1);
        let conn = pool.acquire().await.unwrap();
        // No transaction was begun: SQLite refuses the ROLLBACK, and says why.
        let mut ops = super::SqliteOps { conn, open: true };
        ops.abort().await;
        assert!(!ops.open, "no transaction: the connection stays in use");
        drop(ops);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(pool.size(), 1, "not closed");
        // The refusal is told apart from other failures.
        let mut conn = pool.acquire().await.unwrap();
        let refused = sqlx::query("ROLLBACK")
            .execute(&mut *conn)
            .await
            .unwrap_err();
        assert!(super::no_transaction(&refused), "{refused}");
        let other = sqlx::query("SELECT * FROM no_such_table")
            .execute(&mut *conn)
            .await
            .unwrap_err();
        assert!(!super::no_transaction(&other), "{other}");
        // A successful ROLLBACK keeps the connection for reuse.
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut *conn)
            .await
            .unwrap();
        let mut ops = super::SqliteOps { conn, open: true };
        ops.abort().await;
        assert!(!ops.open);
        drop(ops);
        store.close().await;
    }

    #[tokio::test]
    async fn conformance_in_memory() {
        let store = super::SqliteTaskStore::open("sqlite::memory:", 1)
            .await
            .unwrap();
        super::super::conformance::run_all(&store).await;
    }
}
