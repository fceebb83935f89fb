//! PostgreSQL task store, for several gateway instances sharing one database.
//!
//! Table layout, the lazily folded artifacts and why appending one event costs in
//! proportion to that event: see the `sql` module docs (shared with SQLite).
//!
//! Appends are committed in batches (group commit, see `sql/batch.rs`) by
//! writer lanes, one transaction per batch: half the pool's connections (at least
//! one), each lane holding one connection while it writes. A task's appends always go
//! through the same lane. Each caller gets its answer after the commit of the batch
//! that holds its event.
//!
//! Concurrency: a batch reads its task rows without locking them and writes
//! everything in one statement that fails as a whole when another writer (another
//! instance) appended to one of its tasks in between: the primary keys refuse a
//! duplicate `seq` or task, and every task row update checks the `last_seq` it was
//! planned on. The lane then retries each append alone, so the conflict is reported
//! as [`StoreError::Conflict`] to the append it concerns and the others are written. The purge takes its batches with `FOR UPDATE SKIP
//! LOCKED`, so it never waits on (or blocks) a task being written, and several
//! instances may purge at once. Migrations take sqlx's advisory lock, so instances
//! starting together migrate once.
//!
//! Text keys use the `"C"` collation (bytewise order, as the page cursor compares ids).

mod cluster;
pub mod push;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use sqlx::Row;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::memory::shape_for_list;
use super::sql::batch::{
    Append, BatchError, BatchOps, BatchResults, BatchWriter, Batcher, CompactRange, HeldConnection,
    TaskRow, Writes, to_read, write_batch,
};
use super::sql::{
    db, db_message, fold_artifacts, folds_artifacts, from_json, is_unique_violation, kind,
    migrate_error, purge, to_i64, to_u64,
};
use super::{
    FoldedArtifacts, PageCursor, StoreError, StoredEvent, TaskHead, TaskPage, TaskQuery,
    TaskRecord, TaskStore,
};
use crate::protocol::time::Timestamp;
use crate::protocol::{StreamResponse, Task, TaskState};
use crate::scope::{Scope, TaskKey};

/// The embedded PostgreSQL migrations (`migrations/postgres`).
pub static MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

/// The writer lanes of a pool of `max_connections`: half of it (at least one), so
/// that reads keep connections of their own.
fn writer_lanes(max_connections: u32) -> usize {
    (max_connections / 2).max(1) as usize
}

/// A [`TaskStore`] in a PostgreSQL database (see the module docs).
#[derive(Debug, Clone)]
pub struct PostgresTaskStore {
    pool: PgPool,
    /// Send an event notification with every batch (set when the instance joins a
    /// cluster, see `postgres/cluster.rs`).
    pub(super) notify: Arc<AtomicBool>,
    /// `[store] listen_url`: where the notification listener connects.
    pub(super) listen_options: Option<PgConnectOptions>,
    /// The writer lanes that commit appends in batches.
    batcher: Batcher,
    /// Webhook configs, outbox and signing key.
    push: push::PgPush,
}

impl PostgresTaskStore {
    /// Connects to a `postgres://` or `postgresql://` URL with a pool of up to
    /// `max_connections`, and runs pending migrations.
    ///
    /// # Errors
    /// [`StoreError::Backend`] for a malformed URL, an unreachable server, a failed
    /// migration, or a database migrated by a newer build (refused).
    pub async fn open(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Backend(format!("invalid PostgreSQL store URL: {e}")))?;
        Self::connect_with(options, max_connections).await
    }

    /// Connects with these options (e.g. a `search_path` set through
    /// [`PgConnectOptions::options`]) and runs pending migrations.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn connect_with(
        options: PgConnectOptions,
        max_connections: u32,
    ) -> Result<Self, StoreError> {
        let target = format!("{}:{}", options.get_host(), options.get_port());
        let options = sqlx::ConnectOptions::log_slow_statements(
            options,
            super::SLOW_STATEMENT_LEVEL,
            super::SLOW_STATEMENT,
        );
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(|e| {
                StoreError::Backend(format!(
                    "cannot connect to the PostgreSQL store at {target} (store.url): {}",
                    describe_connect_error(&e)
                ))
            })?;
        let known = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| migrate_error("PostgreSQL", known, e))?;
        let notify = Arc::new(AtomicBool::new(false));
        let lanes = (0..writer_lanes(max_connections))
            .map(|_| PgWriter {
                conn: HeldConnection::new(pool.clone(), true),
                notify: notify.clone(),
            })
            .collect();
        Ok(Self {
            batcher: Batcher::spawn(lanes),
            push: push::PgPush::new(pool.clone()),
            pool,
            notify,
            listen_options: None,
        })
    }

    /// The connection pool (for `LISTEN/NOTIFY`, tests and maintenance).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

super::sql::reads::sql_reads!(sqlx::PgConnection, sqlx::postgres::PgRow);
super::sql::purge::sql_purge!(sqlx::PgConnection, "LIMIT $6 FOR UPDATE SKIP LOCKED");
super::sql::links::sql_links!(sqlx::PgConnection);
super::owners::sql_owners!(
    sqlx::PgConnection,
    super::owners::POSTGRES_OWNER_TABLES,
    "SELECT json_array_elements_text($2::json)"
);

/// The transaction-level advisory lock key of the owner step (`store::owners`): two
/// instances starting together take it in turn, and the second finds the first's
/// decision.
const OWNER_STEP_LOCK: i64 = 0x6132_615f_6f77_6e72; // the ASCII of a2a_ownr

#[async_trait]
impl TaskStore for PostgresTaskStore {
    async fn close(&self) {
        PostgresTaskStore::close(self).await;
    }

    fn push_store(&self) -> Option<&dyn super::PushStore> {
        Some(&self.push)
    }

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
        let mut conn = self.pool.acquire().await.map_err(db)?;
        let read = read_task(&mut conn, scope, task_id).await;
        shrink(&mut conn);
        read
    }

    async fn head(&self, scope: &Scope, task_id: &str) -> Result<Option<TaskHead>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
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
        let mut conn = self.pool.acquire().await.map_err(db)?;
        let read = read_events_after(&mut conn, scope, task_id, after, limit, max_bytes).await;
        shrink(&mut conn);
        read
    }

    async fn list(&self, scope: &Scope, query: &TaskQuery) -> Result<TaskPage, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        let read = read_list(&mut conn, scope, query).await;
        shrink(&mut conn);
        read
    }

    async fn unsettled(&self, limit: usize) -> Result<Vec<TaskKey>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        read_unsettled(&mut conn, limit).await
    }

    async fn purge_expired(&self, older_than: Timestamp, batch: usize) -> Result<u64, StoreError> {
        purge::in_batches(batch, |batch| async move {
            let mut tx = self.pool.begin().await.map_err(db)?;
            let found = purge_batch(&mut tx, older_than, batch).await?;
            tx.commit().await.map_err(db)?;
            Ok(found)
        })
        .await
    }

    async fn expired_input_required(
        &self,
        older_than: Timestamp,
        limit: usize,
    ) -> Result<Vec<TaskKey>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        read_expired_input_required(&mut conn, older_than, limit).await
    }

    async fn put_upstream_link(
        &self,
        scope: &Scope,
        task_id: &str,
        link: &crate::executor::UpstreamLink,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        put_link(&mut conn, scope, task_id, link).await
    }

    async fn upstream_link(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Option<crate::executor::UpstreamLink>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        read_link(&mut conn, scope, task_id).await
    }

    async fn namespace_owners(
        &self,
        plan: &super::owners::OwnerPlan,
    ) -> Result<super::owners::OwnerOutcome, StoreError> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(OWNER_STEP_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let outcome = namespace_owners_in(&mut tx, plan).await?;
        tx.commit().await.map_err(db)?;
        Ok(outcome)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        let read_only: bool = sqlx::query_scalar(
            "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'",
        )
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
        if read_only {
            // A connection opened while the database refused writes keeps refusing
            // them: let the pool open a new one.
            conn.close_on_drop();
            return Err(StoreError::Backend(
                "the PostgreSQL store is read-only (a standby, or default_transaction_read_only)"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// A writer connection that sent at least this many bytes (1 MiB) of JSON text in one
/// batch gives its socket buffers' extra capacity back afterwards ([`shrink`]; reads
/// always do): a buffer keeps the largest size it ever grew to, so one large artifact
/// checkpoint written or read would otherwise stay resident, on each pooled connection
/// that handled one, for as long as it lives. Below it, the writer keeps its buffers
/// between batches rather than grow them again for each.
const SHRINK_AFTER_BYTES: usize = 1024 * 1024;

/// Gives a pooled connection's socket buffers their extra capacity back after a read
/// (see [`SHRINK_AFTER_BYTES`]): a task of many megabytes read once would otherwise
/// keep a read buffer of its size on that connection. Checks two capacities and does
/// nothing when the buffers did not grow.
fn shrink(conn: &mut sqlx::pool::PoolConnection<sqlx::Postgres>) {
    sqlx::Connection::shrink_buffers(&mut **conn);
}

/// A writer lane of a PostgreSQL store.
struct PgWriter {
    conn: HeldConnection<sqlx::Postgres>,
    notify: Arc<AtomicBool>,
}

#[async_trait]
impl BatchWriter for PgWriter {
    async fn write(&mut self, batch: &[Append]) -> Result<BatchResults, BatchError> {
        let conn = self
            .conn
            .take()
            .await
            .map_err(|e| BatchError::Write(db(e)))?;
        let mut ops = PgOps {
            conn,
            read_only: false,
            notify: self.notify.load(Ordering::Acquire),
        };
        let result = write_batch(&mut ops, batch).await;
        if ops.read_only {
            // The session refused writes (opened while the database was read-only,
            // or a standby): replace it rather than fail every later batch with it.
            ops.conn.close_on_drop();
        } else if result.is_ok() {
            self.conn.keep(ops.conn);
        }
        result
    }

    fn idle(&mut self) {
        self.conn.release();
    }
}

/// The batch round trips on PostgreSQL: two or three statements, each its own
/// implicit transaction. Each binds one array per column and unpacks them with
/// `UNNEST`, so every statement has a fixed text (prepared once per connection)
/// whatever the batch size.
///
/// The rows are read without a lock; the single write statement then stands or falls
/// as a whole (one implicit transaction, so one commit and one WAL flush per batch):
/// it fails, writing nothing, when another writer got in between, because either the
/// event's primary key is taken (the same sequence number was appended) or a task row
/// no longer has the `last_seq` the append was planned on (the statement then
/// divides by zero on purpose). The lane then retries each append alone, which reads
/// the rows again and reports the conflict to the append it concerns.
struct PgOps {
    conn: sqlx::pool::PoolConnection<sqlx::Postgres>,
    /// The server refused the write because the session is read-only (SQLSTATE
    /// 25006).
    read_only: bool,
    /// Send an event notification per task written (see `postgres/cluster.rs`).
    notify: bool,
}

/// The key columns of batch rows, as arrays: tenant, owner, id and agent.
type KeyArrays<'a> = (Vec<&'a str>, Vec<&'a str>, Vec<&'a str>, Vec<&'a str>);

/// The key columns of batch rows, as arrays ([`KeyArrays`]).
fn key_arrays<'a>(keys: impl Iterator<Item = &'a Append>) -> KeyArrays<'a> {
    let mut t = Vec::new();
    let mut o = Vec::new();
    let mut i = Vec::new();
    let mut g = Vec::new();
    for a in keys {
        t.push(a.scope.tenant.as_str());
        o.push(a.scope.owner.as_str());
        i.push(a.task_id.as_str());
        g.push(a.scope.agent.as_str());
    }
    (t, o, i, g)
}

/// The key of a returned row: tenant, owner and id in columns 0..3, the agent in
/// column `agent`.
fn row_key(r: &sqlx::postgres::PgRow, agent: usize) -> TaskKey {
    (
        Scope::new(r.get::<String, _>(0), r.get::<String, _>(1))
            .with_agent(r.get::<String, _>(agent)),
        r.get(2),
    )
}

/// Whether the write statement failed on its `last_seq` check (see [`PgOps`]).
fn is_division_by_zero(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == "22012")
}

/// Whether the statement's failure leaves its outcome unknown (the connection
/// failed) rather than reported by the server (nothing written).
fn outcome_unknown(e: &sqlx::Error) -> bool {
    e.as_database_error().is_none()
}

#[async_trait]
impl BatchOps for PgOps {
    async fn rows(&mut self, batch: &[Append]) -> Result<Vec<(TaskKey, TaskRow)>, StoreError> {
        let read: Vec<&Append> = to_read(batch).collect();
        if read.is_empty() {
            return Ok(Vec::new());
        }
        let (t, o, i, g) = key_arrays(read.into_iter());
        let rows = sqlx::query(
            "SELECT t.tenant, t.owner, t.id, t.last_seq, t.state, t.status_ms, t.snapshot, \
                    t.art_seq, t.art_bytes, t.pending_bytes, t.agent \
             FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[]) \
                  AS k(tenant, owner, id, agent) \
             JOIN a2a_tasks t \
               ON t.agent = k.agent COLLATE \"C\" AND t.tenant = k.tenant COLLATE \"C\" AND t.owner = k.owner COLLATE \"C\" \
              AND t.id = k.id COLLATE \"C\"",
        )
        .bind(t)
        .bind(o)
        .bind(i)
        .bind(g)
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
                (row_key(r, 10), row)
            })
            .collect())
    }

    async fn compaction_input(
        &mut self,
        ranges: &[CompactRange<'_>],
    ) -> Result<Vec<(TaskKey, i64, String)>, StoreError> {
        let (t, o, i, g) = key_arrays(ranges.iter().map(|(a, _, _)| *a));
        let after: Vec<i64> = ranges.iter().map(|(_, after, _)| *after).collect();
        let upto: Vec<i64> = ranges.iter().map(|(_, _, upto)| *upto).collect();
        let rows = sqlx::query(
            "WITH k AS (SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::int8[], \
                                             $5::int8[], $6::text[]) \
                        AS k(tenant, owner, id, after, upto, agent)) \
             SELECT a.tenant, a.owner, a.task_id, 0::int8, a.artifacts, a.agent \
             FROM k JOIN a2a_task_artifacts a \
               ON a.agent = k.agent COLLATE \"C\" AND a.tenant = k.tenant COLLATE \"C\" AND a.owner = k.owner COLLATE \"C\" \
              AND a.task_id = k.id COLLATE \"C\" \
             UNION ALL \
             SELECT e.tenant, e.owner, e.task_id, 1::int8, \
                    '[' || string_agg(e.event, ',' ORDER BY e.seq) || ']', e.agent \
             FROM k JOIN a2a_task_events e \
               ON e.agent = k.agent COLLATE \"C\" AND e.tenant = k.tenant COLLATE \"C\" AND e.owner = k.owner COLLATE \"C\" \
              AND e.task_id = k.id COLLATE \"C\" AND e.seq > k.after AND e.seq <= k.upto \
             WHERE e.folds_artifacts = 1 \
             GROUP BY e.agent, e.tenant, e.owner, e.task_id",
        )
        .bind(t)
        .bind(o)
        .bind(i)
        .bind(after)
        .bind(upto)
        .bind(g)
        .fetch_all(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(rows
            .iter()
            .map(|r| (row_key(r, 5), r.get(3), r.get(4)))
            .collect())
    }

    async fn write(&mut self, w: Writes<'_>) -> Result<(), BatchError> {
        let w = &w;
        // New tasks in key order, so that racing creators wait on each other in one
        // order.
        let mut creates: Vec<_> = w.creates.iter().collect();
        creates.sort_by(|x, y| x.0.key().cmp(&y.0.key()));
        let (ct, co, ci, cg) = key_arrays(creates.iter().map(|c| c.0));
        let c_context: Vec<&str> = creates.iter().map(|(_, c)| c.context_id.as_str()).collect();
        let c_state: Vec<&str> = creates.iter().map(|(_, c)| c.state.as_str()).collect();
        let c_status: Vec<i64> = creates.iter().map(|(_, c)| c.status_ms).collect();
        let c_now: Vec<i64> = creates.iter().map(|(a, _)| a.now).collect();
        let c_snapshot: Vec<&str> = creates.iter().map(|(_, c)| c.snapshot.as_str()).collect();
        let c_artifacts: Vec<&str> = creates.iter().map(|(_, c)| c.artifacts.as_str()).collect();
        let c_art_bytes: Vec<i64> = creates
            .iter()
            .map(|(_, c)| c.artifacts.len() as i64)
            .collect();
        let c_last_seq: Vec<i64> = creates.iter().map(|(_, c)| c.last_seq).collect();

        let (et, eo, ei, eg) = key_arrays(w.events.iter().map(|(a, _, _)| *a));
        let e_seq: Vec<i64> = w.events.iter().map(|(_, e, _)| to_i64(e.seq)).collect();
        let e_kind: Vec<&str> = w.events.iter().map(|(_, e, _)| kind(&e.event)).collect();
        let e_folds: Vec<i32> = w
            .events
            .iter()
            .map(|(_, e, _)| i32::from(folds_artifacts(&e.event)))
            .collect();
        let e_json: Vec<&str> = w.events.iter().map(|(_, _, json)| *json).collect();
        let e_now: Vec<i64> = w.events.iter().map(|(a, _, _)| a.now).collect();

        let (at, ao, ai, ag) = key_arrays(w.artifacts.iter().map(|(a, _)| *a));
        let a_artifacts: Vec<&str> = w.artifacts.iter().map(|(_, s)| s.as_str()).collect();

        let (ut, uo, ui, ug) = key_arrays(w.updates.iter().map(|(a, _)| *a));
        let u_seq: Vec<i64> = w.updates.iter().map(|(_, u)| u.seq).collect();
        let u_prev: Vec<i64> = w.updates.iter().map(|(_, u)| u.prev_seq).collect();
        let u_state: Vec<&str> = w.updates.iter().map(|(_, u)| u.state.as_str()).collect();
        let u_status: Vec<i64> = w.updates.iter().map(|(_, u)| u.status_ms).collect();
        let u_now: Vec<i64> = w.updates.iter().map(|(a, _)| a.now).collect();
        let u_snapshot: Vec<Option<&str>> = w
            .updates
            .iter()
            .map(|(_, u)| u.snapshot.as_deref())
            .collect();
        let u_art_seq: Vec<i64> = w.updates.iter().map(|(_, u)| u.art_seq).collect();
        let u_art_bytes: Vec<i64> = w.updates.iter().map(|(_, u)| u.art_bytes).collect();
        let u_pending: Vec<i64> = w.updates.iter().map(|(_, u)| u.pending_bytes).collect();
        let u_count = w.updates.len() as i64;
        let text_bytes: usize = c_snapshot
            .iter()
            .chain(&c_artifacts)
            .map(|s| s.len())
            .sum::<usize>()
            + e_json
                .iter()
                .chain(&a_artifacts)
                .map(|s| s.len())
                .sum::<usize>()
            + u_snapshot.iter().flatten().map(|s| s.len()).sum::<usize>();
        // After commit, one wake-up per task written: its tag and last sequence number.
        let wakeups: Vec<String> = if self.notify {
            creates
                .iter()
                .map(|(a, c)| (*a, c.last_seq))
                .chain(w.updates.iter().map(|(a, u)| (*a, u.seq)))
                .map(|(a, seq)| {
                    super::cluster::event_payload(&super::cluster::tag(&a.scope, &a.task_id), seq)
                })
                .collect()
        } else {
            Vec::new()
        };

        let done = sqlx::query(
            "WITH new_tasks AS ( \
               INSERT INTO a2a_tasks (agent, tenant, owner, id, context_id, state, status_ms, \
                 created_ms, updated_ms, last_seq, snapshot, art_seq, art_bytes, pending_bytes) \
               SELECT agent, tenant, owner, id, context_id, state, status_ms, now, now, \
                      last_seq, snapshot, last_seq, art_bytes, 0 \
               FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
                           $6::int8[], $7::int8[], $8::text[], $9::int8[], $35::int8[], \
                           $39::text[]) \
                    AS v(tenant, owner, id, context_id, state, status_ms, now, snapshot, \
                         art_bytes, last_seq, agent)), \
             new_artifacts AS ( \
               INSERT INTO a2a_task_artifacts (agent, tenant, owner, task_id, artifacts) \
               SELECT * FROM UNNEST($39::text[], $1::text[], $2::text[], $3::text[], \
                                    $10::text[])), \
             events AS ( \
               INSERT INTO a2a_task_events (agent, tenant, owner, task_id, seq, kind, \
                 folds_artifacts, event, created_ms) \
               SELECT * FROM UNNEST($40::text[], $11::text[], $12::text[], $13::text[], $14::int8[], \
                                    $15::text[], $16::int4[], $17::text[], $18::int8[])), \
             outbox AS ( \
               INSERT INTO a2a_push_outbox (agent, tenant, owner, task_id, config_id, seq, \
                 created_ms, next_ms, attempts) \
               SELECT c.agent, c.tenant, c.owner, c.task_id, c.id, e.seq, e.now, e.now, 0 \
               FROM UNNEST($11::text[], $12::text[], $13::text[], $14::int8[], \
                           $15::text[], $18::int8[], $40::text[]) \
                    AS e(tenant, owner, id, seq, kind, now, agent) \
               JOIN a2a_push_configs c ON c.agent = e.agent COLLATE \"C\" \
                 AND c.tenant = e.tenant COLLATE \"C\" \
                 AND c.owner = e.owner COLLATE \"C\" AND c.task_id = e.id COLLATE \"C\" \
               WHERE e.kind <> 'message' AND c.enabled = 1), \
             checkpoints AS ( \
               UPDATE a2a_task_artifacts a SET artifacts = k.artifacts \
               FROM UNNEST($19::text[], $20::text[], $21::text[], $22::text[], $41::text[]) \
                    AS k(tenant, owner, id, artifacts, agent) \
               WHERE a.agent = k.agent COLLATE \"C\" AND a.tenant = k.tenant COLLATE \"C\" AND a.owner = k.owner COLLATE \"C\" \
                 AND a.task_id = k.id COLLATE \"C\"), \
             updated AS ( \
               UPDATE a2a_tasks t SET last_seq = k.last_seq, state = k.state, \
                      status_ms = k.status_ms, updated_ms = k.now, \
                      snapshot = COALESCE(k.snapshot, t.snapshot), art_seq = k.art_seq, \
                      art_bytes = k.art_bytes, pending_bytes = k.pending \
               FROM UNNEST($23::text[], $24::text[], $25::text[], $26::int8[], $27::text[], \
                           $28::int8[], $29::int8[], $30::text[], $31::int8[], $32::int8[], \
                           $33::int8[], $36::int8[], $42::text[]) \
                    AS k(tenant, owner, id, last_seq, state, status_ms, now, snapshot, \
                         art_seq, art_bytes, pending, prev_seq, agent) \
               WHERE t.agent = k.agent COLLATE \"C\" AND t.tenant = k.tenant COLLATE \"C\" AND t.owner = k.owner COLLATE \"C\" \
                 AND t.id = k.id COLLATE \"C\" AND t.last_seq = k.prev_seq \
               RETURNING 1), \
             wakeups AS (SELECT pg_notify($38, n) FROM UNNEST($37::text[]) AS n) \
             SELECT 1 / ((SELECT count(*) FROM updated) = $34)::int, \
                    (SELECT count(*) FROM wakeups)",
        )
        .bind(&ct)
        .bind(&co)
        .bind(&ci)
        .bind(c_context)
        .bind(c_state)
        .bind(c_status)
        .bind(c_now)
        .bind(c_snapshot)
        .bind(c_art_bytes)
        .bind(c_artifacts)
        .bind(et)
        .bind(eo)
        .bind(ei)
        .bind(e_seq)
        .bind(e_kind)
        .bind(e_folds)
        .bind(e_json)
        .bind(e_now)
        .bind(at)
        .bind(ao)
        .bind(ai)
        .bind(a_artifacts)
        .bind(ut)
        .bind(uo)
        .bind(ui)
        .bind(u_seq)
        .bind(u_state)
        .bind(u_status)
        .bind(u_now)
        .bind(u_snapshot)
        .bind(u_art_seq)
        .bind(u_art_bytes)
        .bind(u_pending)
        .bind(u_count)
        .bind(c_last_seq)
        .bind(u_prev)
        .bind(wakeups)
        .bind(super::cluster::CHANNEL)
        .bind(cg)
        .bind(eg)
        .bind(ag)
        .bind(ug)
        .execute(&mut *self.conn)
        .await;
        if text_bytes >= SHRINK_AFTER_BYTES {
            // The connection's write buffer grew to hold this batch (twice its size at
            // most) and would keep that capacity for the connection's lifetime.
            shrink(&mut self.conn);
        }
        if let Err(e) = &done
            && e.as_database_error()
                .and_then(|d| d.code())
                .is_some_and(|c| c == "25006")
        {
            self.read_only = true;
        }
        done.map_err(|e| {
            if outcome_unknown(&e) {
                BatchError::Commit(db(e))
            } else if is_unique_violation(&e) || is_division_by_zero(&e) {
                BatchError::Stale(db(e))
            } else {
                BatchError::Write(db(e))
            }
        })?;
        Ok(())
    }

    async fn abort(&mut self) {}
}

/// The cause of a failed first connection, without the URL (it may hold a password).
fn describe_connect_error(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Io(io) => io.to_string(),
        sqlx::Error::PoolTimedOut => "no connection within 10 s (is the server reachable?)".into(),
        other => db_message(other),
    }
}

#[cfg(test)]
mod tests {

    #[tokio::test]
    async fn an_unreachable_server_fails_fast_naming_the_address_not_the_password() {
        let started = std::time::Instant::now();
        let err = match PostgresTaskStore::open("postgres://u:hunter2@127.0.0.1:1/db", 2).await {
            Ok(_) => panic!("port 1 refuses connections"),
            Err(e) => e.to_string(),
        };
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "{err}"
        );
        assert!(
            err.contains("127.0.0.1:1") && err.contains("store.url"),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
    }
    use std::str::FromStr;
    use std::sync::Arc;

    use sqlx::postgres::PgConnectOptions;

    use super::PostgresTaskStore;
    use crate::executor::new_id;
    use crate::protocol::time;
    use crate::protocol::{StreamResponse, TaskState, TaskStatus, TaskStatusUpdateEvent};
    use crate::store::{Scope, StoreError, TaskStore, conformance};

    /// Two stores on one database (two gateway instances) race for the same sequence
    /// numbers of many tasks, in batches: each number is won exactly once, the loser
    /// gets `Conflict`, and the other appends of the loser's batches are written.
    #[tokio::test]
    async fn instances_racing_in_batches() {
        let Some(url) = std::env::var("A2A_GATEWAY_TEST_POSTGRES_URL")
            .ok()
            .filter(|u| !u.trim().is_empty())
        else {
            eprintln!("note: skipping: A2A_GATEWAY_TEST_POSTGRES_URL is not set");
            return;
        };
        let admin = sqlx::PgPool::connect(&url).await.unwrap();
        let schema = format!("a2a_test_{}", new_id().replace('-', ""));
        let ddl = format!("CREATE SCHEMA \"{schema}\"");
        sqlx::query(sqlx::AssertSqlSafe(ddl))
            .execute(&admin)
            .await
            .unwrap();
        let options = PgConnectOptions::from_str(&url)
            .unwrap()
            .options([("search_path", schema.as_str())]);
        let a: Arc<dyn TaskStore> = Arc::new(
            PostgresTaskStore::connect_with(options.clone(), 4)
                .await
                .unwrap(),
        );
        let b: Arc<dyn TaskStore> =
            Arc::new(PostgresTaskStore::connect_with(options, 4).await.unwrap());
        let scope = Scope::new("t", "alice");
        let ids: Vec<String> = (0..40).map(|_| new_id()).collect();
        for id in &ids {
            let task = conformance::task_at(id, "ctx", time::now());
            a.append(&scope, id, 1, &StreamResponse::Task(task))
                .await
                .unwrap();
        }
        let mut joins = Vec::new();
        for store in [a.clone(), b.clone()] {
            for id in ids.clone() {
                let (store, scope) = (store.clone(), scope.clone());
                joins.push(tokio::spawn(async move {
                    let mut won = Vec::new();
                    for seq in 2..=4u64 {
                        let e = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                            task_id: id.clone(),
                            context_id: "ctx".into(),
                            status: TaskStatus::new(TaskState::Working),
                            metadata: None,
                        });
                        match store.append(&scope, &id, seq, &e).await {
                            Ok(()) => won.push(seq),
                            Err(StoreError::Conflict { .. }) => {}
                            Err(e) => panic!("unexpected error: {e}"),
                        }
                    }
                    (id, won)
                }));
            }
        }
        let mut wins: std::collections::HashMap<String, Vec<u64>> = Default::default();
        for j in joins {
            let (id, won) = j.await.unwrap();
            wins.entry(id).or_default().extend(won);
        }
        for id in &ids {
            let mut won = wins.remove(id).unwrap_or_default();
            won.sort_unstable();
            assert_eq!(won, vec![2, 3, 4], "task {id}");
            let rec = a.get(&scope, id).await.unwrap().unwrap();
            assert_eq!(rec.last_seq, 4);
            let events = b.events_after(&scope, id, 0, 100, u64::MAX).await.unwrap();
            let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
            assert_eq!(seqs, vec![1, 2, 3, 4]);
        }
        drop((a, b));
        let ddl = format!("DROP SCHEMA \"{schema}\" CASCADE");
        sqlx::query(sqlx::AssertSqlSafe(ddl))
            .execute(&admin)
            .await
            .unwrap();
    }
}
