//! PostgreSQL task store, for several gateway instances sharing one database.
//!
//! Table layout, the lazily folded artifacts and why appending one event costs in
//! proportion to that event: see the `sql` module docs (shared with SQLite).
//!
//! Concurrency: `append` locks the task row (`SELECT … FOR UPDATE`) so appends to one
//! task serialize across instances while other tasks proceed; the primary keys are the
//! last line of defence (a duplicate `seq` or task is reported as
//! [`StoreError::Conflict`]). The purge takes its batches with `FOR UPDATE SKIP
//! LOCKED`, so it never waits on (or blocks) a task being written, and several
//! instances may purge at once. Migrations take sqlx's advisory lock, so instances
//! starting together migrate once.
//!
//! Text keys use the `"C"` collation (bytewise order, as the page cursor compares ids).

use std::str::FromStr;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::memory::{shape_for_list, status_millis};
use super::sql::{
    db, fold_artifacts, folds_artifacts, from_json, is_unique_violation, kind, migrate_error,
    should_compact, to_i64, to_json, to_u64, touches_base,
};
use super::{
    PageCursor, Scope, StoreError, StoredEvent, TaskPage, TaskQuery, TaskRecord, TaskStore,
    projection,
};
use crate::protocol::time::{self, Timestamp};
use crate::protocol::{StreamResponse, Task, TaskState};

/// The embedded PostgreSQL migrations (`migrations/postgres`).
pub static MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

/// A [`TaskStore`] in a PostgreSQL database (see the module docs).
#[derive(Debug, Clone)]
pub struct PostgresTaskStore {
    pool: PgPool,
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
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .connect_with(options)
            .await
            .map_err(db)?;
        let known = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| migrate_error("PostgreSQL", known, e))?;
        Ok(Self { pool })
    }

    /// The connection pool (for `LISTEN/NOTIFY`, tests and maintenance).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// The task of a stored row: the snapshot with the artifacts folded in when
    /// `row.artifacts` was read.
    async fn materialize(
        conn: &mut sqlx::PgConnection,
        scope: &Scope,
        task_id: &str,
        row: StoredRow<'_>,
    ) -> Result<Task, StoreError> {
        let mut task: Task = from_json(row.snapshot)?;
        let Some(artifacts) = row.artifacts else {
            return Ok(task);
        };
        let checkpoint = from_json(artifacts)?;
        task.artifacts = if row.pending_bytes > 0 {
            let events = pending_events(conn, scope, task_id, row.art_seq, row.last_seq).await?;
            fold_artifacts(checkpoint, events)
        } else {
            checkpoint
        };
        Ok(task)
    }

    async fn create(
        tx: &mut sqlx::PgConnection,
        scope: &Scope,
        task_id: &str,
        event: &StreamResponse,
        event_json: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        let StreamResponse::Task(task) = event else {
            return Err(StoreError::InvalidEvent(
                "the first event of a task must be a Task".into(),
            ));
        };
        let mut base = task.clone();
        let artifacts = to_json(&base.artifacts.take())?;
        let conflict = || StoreError::Conflict {
            task_id: task_id.to_owned(),
            expected: 2,
            got: 1,
        };
        sqlx::query(
            "INSERT INTO a2a_tasks (tenant, owner, id, context_id, state, status_ms, created_ms, updated_ms, \
             last_seq, snapshot, art_seq, art_bytes, pending_bytes) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7, 1, $8, 1, $9, 0)",
        )
        .bind(&scope.tenant)
        .bind(&scope.owner)
        .bind(task_id)
        .bind(&base.context_id)
        .bind(base.status.state.as_str())
        .bind(status_millis(&base))
        .bind(now)
        .bind(to_json(&base)?)
        .bind(artifacts.len() as i64)
        .execute(&mut *tx)
        .await
        .map_err(|e| if is_unique_violation(&e) { conflict() } else { db(e) })?;
        sqlx::query("INSERT INTO a2a_task_artifacts (tenant, owner, task_id, artifacts) VALUES ($1, $2, $3, $4)")
            .bind(&scope.tenant)
            .bind(&scope.owner)
            .bind(task_id)
            .bind(&artifacts)
            .execute(&mut *tx)
            .await
            .map_err(|e| if is_unique_violation(&e) { conflict() } else { db(e) })?;
        Self::insert_event(tx, scope, task_id, 1, event, event_json, now).await
    }

    async fn insert_event(
        tx: &mut sqlx::PgConnection,
        scope: &Scope,
        task_id: &str,
        seq: i64,
        event: &StreamResponse,
        event_json: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO a2a_task_events (tenant, owner, task_id, seq, kind, folds_artifacts, event, created_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&scope.tenant)
        .bind(&scope.owner)
        .bind(task_id)
        .bind(seq)
        .bind(kind(event))
        .bind(i32::from(folds_artifacts(event)))
        .bind(event_json)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            if is_unique_violation(&e) {
                StoreError::Conflict { task_id: task_id.to_owned(), expected: to_u64(seq) + 1, got: to_u64(seq) }
            } else {
                db(e)
            }
        })?;
        Ok(())
    }
}

/// The columns of a task row needed to build its snapshot.
struct StoredRow<'r> {
    snapshot: &'r str,
    /// The artifact checkpoint, when artifacts are wanted.
    artifacts: Option<&'r str>,
    art_seq: i64,
    last_seq: i64,
    pending_bytes: i64,
}

fn scoped_ids(rows: Vec<sqlx::postgres::PgRow>) -> Vec<(Scope, String)> {
    rows.into_iter()
        .map(|r| {
            (
                Scope::new(r.get::<String, _>(0), r.get::<String, _>(1)),
                r.get::<String, _>(2),
            )
        })
        .collect()
}

#[async_trait]
impl TaskStore for PostgresTaskStore {
    async fn append(
        &self,
        scope: &Scope,
        task_id: &str,
        seq: u64,
        event: &StreamResponse,
    ) -> Result<(), StoreError> {
        let event_json = to_json(event)?;
        let now = time::now().timestamp_millis();
        let mut tx = self.pool.begin().await.map_err(db)?;
        let row = sqlx::query(
            "SELECT last_seq, state, status_ms, snapshot, art_seq, art_bytes, pending_bytes FROM a2a_tasks \
             WHERE tenant = $1 AND owner = $2 AND id = $3 FOR UPDATE",
        )
        .bind(&scope.tenant)
        .bind(&scope.owner)
        .bind(task_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
        let Some(row) = row else {
            if seq != 1 {
                return Err(StoreError::NotFound(task_id.to_owned()));
            }
            Self::create(&mut tx, scope, task_id, event, &event_json, now).await?;
            return tx.commit().await.map_err(db);
        };
        let last_seq: i64 = row.get(0);
        let expected = to_u64(last_seq) + 1;
        if seq != expected {
            return Err(StoreError::Conflict {
                task_id: task_id.to_owned(),
                expected,
                got: seq,
            });
        }
        let seq = last_seq + 1;
        let mut state = TaskState::parse(row.get::<&str, _>(1)).unwrap_or(TaskState::Unspecified);
        let mut status_ms: i64 = row.get(2);
        let (mut art_seq, mut art_bytes, mut pending): (i64, i64, i64) =
            (row.get(4), row.get(5), row.get(6));
        let snapshot = if touches_base(event) {
            let base: Task = from_json(row.get::<&str, _>(3))?;
            let mut base = projection::apply(Some(base), event).expect("existing task");
            base.artifacts = None;
            state = base.status.state;
            status_ms = status_millis(&base);
            Some(to_json(&base)?)
        } else {
            None
        };
        Self::insert_event(&mut tx, scope, task_id, seq, event, &event_json, now).await?;
        if folds_artifacts(event) {
            pending += event_json.len() as i64;
        }
        if should_compact(pending, art_bytes, state) {
            let checkpoint: String = sqlx::query_scalar(
                "SELECT artifacts FROM a2a_task_artifacts WHERE tenant = $1 AND owner = $2 AND task_id = $3",
            )
            .bind(&scope.tenant)
            .bind(&scope.owner)
            .bind(task_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
            let events = pending_events(&mut tx, scope, task_id, art_seq, seq).await?;
            let artifacts = to_json(&fold_artifacts(from_json(&checkpoint)?, events))?;
            sqlx::query(
                "UPDATE a2a_task_artifacts SET artifacts = $4 WHERE tenant = $1 AND owner = $2 AND task_id = $3",
            )
            .bind(&scope.tenant)
            .bind(&scope.owner)
            .bind(task_id)
            .bind(&artifacts)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
            art_seq = seq;
            art_bytes = artifacts.len() as i64;
            pending = 0;
        }
        sqlx::query(
            "UPDATE a2a_tasks SET last_seq = $4, state = $5, status_ms = $6, updated_ms = $7, \
             snapshot = COALESCE($8, snapshot), art_seq = $9, art_bytes = $10, pending_bytes = $11 \
             WHERE tenant = $1 AND owner = $2 AND id = $3",
        )
        .bind(&scope.tenant)
        .bind(&scope.owner)
        .bind(task_id)
        .bind(seq)
        .bind(state.as_str())
        .bind(status_ms)
        .bind(now)
        .bind(snapshot)
        .bind(art_seq)
        .bind(art_bytes)
        .bind(pending)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)
    }

    async fn get(&self, scope: &Scope, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        let row = sqlx::query(
            "SELECT t.last_seq, t.snapshot, t.art_seq, t.pending_bytes, a.artifacts \
             FROM a2a_tasks t JOIN a2a_task_artifacts a \
               ON a.tenant = t.tenant AND a.owner = t.owner AND a.task_id = t.id \
             WHERE t.tenant = $1 AND t.owner = $2 AND t.id = $3",
        )
        .bind(&scope.tenant)
        .bind(&scope.owner)
        .bind(task_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
        let Some(row) = row else { return Ok(None) };
        let last_seq: i64 = row.get(0);
        let stored = StoredRow {
            snapshot: row.get(1),
            artifacts: Some(row.get(4)),
            art_seq: row.get(2),
            last_seq,
            pending_bytes: row.get(3),
        };
        let task = Self::materialize(&mut conn, scope, task_id, stored).await?;
        Ok(Some(TaskRecord {
            task,
            last_seq: to_u64(last_seq),
        }))
    }

    async fn events_after(
        &self,
        scope: &Scope,
        task_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let rows = sqlx::query(
            "SELECT seq, event FROM a2a_task_events \
             WHERE tenant = $1 AND owner = $2 AND task_id = $3 AND seq > $4 ORDER BY seq LIMIT $5",
        )
        .bind(&scope.tenant)
        .bind(&scope.owner)
        .bind(task_id)
        .bind(to_i64(after))
        .bind(to_i64(limit as u64))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|r| {
                Ok(StoredEvent {
                    seq: to_u64(r.get(0)),
                    event: from_json(r.get::<&str, _>(1))?,
                })
            })
            .collect()
    }

    async fn list(&self, scope: &Scope, query: &TaskQuery) -> Result<TaskPage, StoreError> {
        let state = query
            .status
            .filter(|s| *s != TaskState::Unspecified)
            .map(TaskState::as_str);
        let after = query.status_timestamp_after.map(|t| t.timestamp_millis());
        let mut conn = self.pool.acquire().await.map_err(db)?;
        let total: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM a2a_tasks WHERE tenant = $1 AND owner = $2 \
             AND ($3 IS NULL OR context_id = $3) AND ($4 IS NULL OR state = $4) \
             AND ($5 IS NULL OR status_ms >= $5)",
        )
        .bind(&scope.tenant)
        .bind(&scope.owner)
        .bind(query.context_id.as_deref())
        .bind(state)
        .bind(after)
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
        let rows = sqlx::query(
            "SELECT t.id, t.status_ms, t.last_seq, t.snapshot, t.art_seq, t.pending_bytes, \
                    CASE WHEN $8 THEN a.artifacts END \
             FROM a2a_tasks t JOIN a2a_task_artifacts a \
               ON a.tenant = t.tenant AND a.owner = t.owner AND a.task_id = t.id \
             WHERE t.tenant = $1 AND t.owner = $2 \
               AND ($3 IS NULL OR t.context_id = $3) AND ($4 IS NULL OR t.state = $4) \
               AND ($5 IS NULL OR t.status_ms >= $5) \
               AND ($6 IS NULL OR t.status_ms < $6 OR (t.status_ms = $6 AND t.id > $7)) \
             ORDER BY t.status_ms DESC, t.id ASC LIMIT $9",
        )
        .bind(&scope.tenant)
        .bind(&scope.owner)
        .bind(query.context_id.as_deref())
        .bind(state)
        .bind(after)
        .bind(query.cursor.as_ref().map(|c| c.status_millis))
        .bind(query.cursor.as_ref().map(|c| c.id.as_str()))
        .bind(query.include_artifacts)
        .bind(to_i64(query.page_size as u64 + 1))
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
        let more = rows.len() > query.page_size;
        let mut tasks = Vec::with_capacity(query.page_size.min(rows.len()));
        let mut next = None;
        for row in rows.iter().take(query.page_size) {
            let id: &str = row.get(0);
            let stored = StoredRow {
                snapshot: row.get(3),
                artifacts: row.get(6),
                art_seq: row.get(4),
                last_seq: row.get(2),
                pending_bytes: row.get(5),
            };
            let task = Self::materialize(&mut conn, scope, id, stored).await?;
            next = Some(PageCursor {
                status_millis: row.get(1),
                id: id.to_owned(),
            });
            tasks.push(shape_for_list(task, query));
        }
        Ok(TaskPage {
            tasks,
            next: if more { next } else { None },
            total: to_u64(total),
        })
    }

    async fn unsettled(&self, limit: usize) -> Result<Vec<(Scope, String)>, StoreError> {
        let rows =
            sqlx::query("SELECT tenant, owner, id FROM a2a_tasks WHERE state IN ($1, $2) LIMIT $3")
                .bind(TaskState::Submitted.as_str())
                .bind(TaskState::Working.as_str())
                .bind(to_i64(limit as u64))
                .fetch_all(&self.pool)
                .await
                .map_err(db)?;
        Ok(scoped_ids(rows))
    }

    async fn purge_expired(&self, older_than: Timestamp, batch: usize) -> Result<u64, StoreError> {
        let batch = batch.max(1);
        let mut purged = 0u64;
        loop {
            let mut tx = self.pool.begin().await.map_err(db)?;
            let rows = sqlx::query(
                "SELECT tenant, owner, id FROM a2a_tasks \
                 WHERE state IN ($1, $2, $3, $4) AND status_ms < $5 LIMIT $6 FOR UPDATE SKIP LOCKED",
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
    ) -> Result<Vec<(Scope, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, owner, id FROM a2a_tasks WHERE state = $1 AND status_ms < $2 LIMIT $3",
        )
        .bind(TaskState::InputRequired.as_str())
        .bind(older_than.timestamp_millis())
        .bind(to_i64(limit as u64))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        Ok(scoped_ids(rows))
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }
}

/// The artifact events in `(art_seq, upto]`, in order.
async fn pending_events(
    conn: &mut sqlx::PgConnection,
    scope: &Scope,
    task_id: &str,
    art_seq: i64,
    upto: i64,
) -> Result<Vec<StreamResponse>, StoreError> {
    let rows = sqlx::query(
        "SELECT event FROM a2a_task_events \
         WHERE tenant = $1 AND owner = $2 AND task_id = $3 AND seq > $4 AND seq <= $5 \
           AND folds_artifacts = 1 ORDER BY seq",
    )
    .bind(&scope.tenant)
    .bind(&scope.owner)
    .bind(task_id)
    .bind(art_seq)
    .bind(upto)
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    rows.iter()
        .map(|r| from_json::<StreamResponse>(r.get::<&str, _>(0)))
        .collect()
}
