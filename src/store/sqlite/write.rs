//! The writes of a SQLite store: its writer lane, and the batch statements that lane
//! runs in one `BEGIN IMMEDIATE` transaction per batch (see [`SqliteOps`]).

use async_trait::async_trait;
use sqlx::Row;

use crate::protocol::{StreamResponse, TaskState};
use crate::scope::{Scope, TaskKey};
use crate::store::sql::batch::{
    Append, BatchError, BatchOps, BatchResults, BatchWriter, CompactRange, HeldConnection, TaskRow,
    Writes, to_read, write_batch,
};
use crate::store::sql::{db, db_message, folds_artifacts, kind, to_json};
use crate::store::{StoreError, StoredEvent};

/// The writer lane of a SQLite store: every batch is one `BEGIN IMMEDIATE`
/// transaction on the writer connection.
pub(super) struct SqliteWriter {
    pub(super) conn: HeldConnection<sqlx::Sqlite>,
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
        "WITH a AS MATERIALIZED (SELECT value->>7 AS agent, value->>0 AS tenant, \
         value->>1 AS owner, value->>2 AS id, value->>3 AS seq, value->>4 AS now, value AS v \
         FROM jsonb_each($2)) "
    };
}

/// The statements of a batch's writes, ending with `COMMIT` (see [`SqliteOps`]).
macro_rules! write_sql {
    () => {
        concat!(
            "INSERT INTO a2a_tasks (agent, tenant, owner, id, context_id, state, status_ms, \
             created_ms, updated_ms, last_seq, snapshot, art_seq, art_bytes, pending_bytes) \
             SELECT value->>12, value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6, \
                    value->>6, value->>10, CAST(substr($5, value->>7, value->>11) AS TEXT), \
                    value->>10, value->>8, 0 \
             FROM jsonb_each($1); \
             INSERT INTO a2a_task_artifacts (agent, tenant, owner, task_id, artifacts) \
             SELECT value->>12, value->>0, value->>1, value->>2, CAST(substr($5, value->>9, value->>8) AS TEXT) \
             FROM jsonb_each($1); \
             ", event_groups!(), " \
             INSERT INTO a2a_task_events (agent, tenant, owner, task_id, seq, kind, \
             folds_artifacts, event, created_ms) \
             SELECT a.agent, a.tenant, a.owner, a.id, a.seq + e.value->>4, e.value->>2, e.value->>3, \
                    CAST(substr($5, e.value->>0, e.value->>1) AS TEXT), a.now \
             FROM a CROSS JOIN jsonb_each(a.v, '$[5]') AS e; \
             ", event_groups!(), " \
             INSERT INTO a2a_push_outbox \
               (agent, tenant, owner, task_id, config_id, seq, created_ms, next_ms, attempts) \
             SELECT c.agent, c.tenant, c.owner, c.task_id, c.id, a.seq + e.value, a.now, a.now, 0 \
             FROM a CROSS JOIN a2a_push_configs c CROSS JOIN jsonb_each(a.v, '$[6]') AS e \
             WHERE c.agent = a.agent AND c.tenant = a.tenant AND c.owner = a.owner AND c.task_id = a.id \
               AND c.enabled = 1; \
             UPDATE a2a_task_artifacts SET artifacts = k.artifacts \
             FROM (SELECT value->>5 AS agent, value->>0 AS tenant, value->>1 AS owner, \
                          value->>2 AS id, \
                          CAST(substr($5, value->>3, value->>4) AS TEXT) AS artifacts \
                   FROM jsonb_each($3)) AS k \
             WHERE a2a_task_artifacts.agent = k.agent AND a2a_task_artifacts.tenant = k.tenant AND a2a_task_artifacts.owner = k.owner \
               AND a2a_task_artifacts.task_id = k.id; \
             UPDATE a2a_tasks SET last_seq = k.last_seq, state = k.state, \
                    status_ms = k.status_ms, updated_ms = k.now, \
                    snapshot = COALESCE(k.snapshot, a2a_tasks.snapshot), art_seq = k.art_seq, \
                    art_bytes = k.art_bytes, pending_bytes = k.pending \
             FROM (SELECT value->>12 AS agent, value->>0 AS tenant, value->>1 AS owner, \
                          value->>2 AS id, value->>3 AS last_seq, value->>4 AS state, value->>5 AS status_ms, \
                          value->>6 AS now, \
                          CAST(substr($5, value->>7, value->>11) AS TEXT) AS snapshot, \
                          value->>8 AS art_seq, \
                          value->>9 AS art_bytes, value->>10 AS pending \
                   FROM jsonb_each($4)) AS k \
             WHERE a2a_tasks.agent = k.agent AND a2a_tasks.tenant = k.tenant AND a2a_tasks.owner = k.owner \
               AND a2a_tasks.id = k.id; \
             COMMIT"
        )
    };
}

/// Rewrites one task's artifact checkpoint with its text bound as is: `$1` tenant, `$2`
/// owner, `$3` task id, `$4` the checkpoint, `$5` agent (see [`OWN_STATEMENT_BYTES`]).
macro_rules! checkpoint_sql {
    () => {
        "UPDATE a2a_task_artifacts SET artifacts = $4 \
         WHERE agent = $5 AND tenant = $1 AND owner = $2 AND task_id = $3"
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
/// `[tenant, owner, task id, first seq, now, rows, deliverable, agent]`, where `rows` are the
/// append's log rows (`[offset, length, kind, folds, last index]`: a row is one event,
/// or consecutive artifact updates folded into one row as [`super::fold::row_sizes`] cuts
/// them, see [Folded rows](crate::store::sql#folded-rows); its number is the first seq plus
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
            &a.scope.agent,
        )
            .serialize(s)
    }
}

/// Encodes batch rows as the JSON array the statements unpack.
fn rows_json<T: serde::Serialize>(rows: &[T]) -> Result<String, StoreError> {
    to_json(&rows)
}

/// The key of a returned row: tenant, owner and id in columns 0..3, the agent in
/// column `agent`.
fn row_key(r: &sqlx::sqlite::SqliteRow, agent: usize) -> TaskKey {
    (
        Scope::new(r.get::<String, _>(0), r.get::<String, _>(1))
            .with_agent(r.get::<String, _>(agent)),
        r.get(2),
    )
}

#[async_trait]
impl BatchOps for SqliteOps {
    async fn rows(&mut self, batch: &[Append]) -> Result<Vec<(TaskKey, TaskRow)>, StoreError> {
        let keys: Vec<_> = to_read(batch)
            .map(|a| (&a.scope.tenant, &a.scope.owner, &a.task_id, &a.scope.agent))
            .collect();
        if keys.is_empty() {
            // Nothing to read: the transaction begins with the writes.
            return Ok(Vec::new());
        }
        self.open = true;
        let rows = sqlx::query(
            "BEGIN IMMEDIATE; \
             WITH k AS (SELECT value->>0 AS tenant, value->>1 AS owner, value->>2 AS id, \
                               value->>3 AS agent FROM jsonb_each($1)) \
             SELECT t.tenant, t.owner, t.id, t.last_seq, t.state, t.status_ms, t.snapshot, \
                    t.art_seq, t.art_bytes, t.pending_bytes, t.agent \
             FROM k CROSS JOIN a2a_tasks t \
               ON t.agent = k.agent AND t.tenant = k.tenant AND t.owner = k.owner AND t.id = k.id",
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
                (row_key(r, 10), row)
            })
            .collect())
    }

    async fn compaction_input(
        &mut self,
        ranges: &[CompactRange<'_>],
    ) -> Result<Vec<(TaskKey, i64, String)>, StoreError> {
        let keys: Vec<_> = ranges
            .iter()
            .map(|(a, after, upto)| {
                (
                    &a.scope.tenant,
                    &a.scope.owner,
                    &a.task_id,
                    after,
                    upto,
                    &a.scope.agent,
                )
            })
            .collect();
        let rows = sqlx::query(
            "WITH k AS (SELECT value->>0 AS tenant, value->>1 AS owner, value->>2 AS id, \
                               value->>3 AS after, value->>4 AS upto, value->>5 AS agent \
                        FROM jsonb_each($1)) \
             SELECT a.tenant, a.owner, a.task_id, 0, a.artifacts, a.agent \
             FROM k CROSS JOIN a2a_task_artifacts a \
               ON a.agent = k.agent AND a.tenant = k.tenant AND a.owner = k.owner AND a.task_id = k.id \
             UNION ALL \
             SELECT e.tenant, e.owner, e.task_id, 1, \
                    '[' || group_concat(e.event, ',' ORDER BY e.seq) || ']', e.agent \
             FROM k CROSS JOIN a2a_task_events e \
               ON e.agent = k.agent AND e.tenant = k.tenant AND e.owner = k.owner AND e.task_id = k.id \
              AND e.seq > k.after AND e.seq <= k.upto \
             WHERE e.folds_artifacts = 1 \
             GROUP BY e.agent, e.tenant, e.owner, e.task_id",
        )
        .bind(rows_json(&keys)?)
        .fetch_all(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(rows
            .iter()
            .map(|r| (row_key(r, 5), r.get(3), r.get(4)))
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
                .bind(a.scope.agent.as_str())
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
                    &a.scope.agent,
                )
            })
            .collect();
        // One entry per append: its key, first sequence number and time once, then its
        // log rows, so SQLite extracts five values per row instead of repeating the
        // task's key in every one; the outbox statement reads the same array and looks
        // up a task's push configs once per append, not per event. A run of
        // consecutive artifact updates of an append is cut into rows by
        // `super::fold::row_sizes`; a row's texts are adjacent in the blob, joined by commas
        // (see [Folded rows](crate::store::sql#folded-rows)).
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
            let local = super::fold::local_budget(
                a.scope.agent.len() + a.scope.tenant.len() + a.scope.owner.len() + a.task_id.len(),
            );
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
                for size in super::fold::row_sizes(&lens, local) {
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
                    &a.scope.agent,
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
                    &a.scope.agent,
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
    /// A ROLLBACK without a transaction (BEGIN failed, or SQLite already rolled
    /// back) leaves the connection in use, and that refusal is told apart from other
    /// failures (which retire the connection); a successful ROLLBACK keeps it.
    #[tokio::test]
    async fn rollback_keeps_the_connection_unless_a_transaction_may_be_left_open() {
        use super::BatchOps;
        let dir = tempfile::tempdir().unwrap();
        let store = super::super::SqliteTaskStore::open_path(&dir.path().join("t.db"), 1)
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
}
