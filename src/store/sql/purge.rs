//! The retention purge of the SQL stores ([`TaskStore::purge_expired`]), written once for
//! SQLite and PostgreSQL: terminal tasks whose status is older than the bound are deleted
//! with everything kept for them (events, artifact checkpoint, push configs and outbox
//! rows, upstream links), a batch of tasks per transaction, until a batch comes back short.
//!
//! [`TaskStore::purge_expired`]: crate::store::TaskStore::purge_expired

use std::future::Future;

use crate::store::StoreError;

/// Defines, in the calling module, `purge_batch(conn, older_than, batch)`: deletes up to
/// `batch` terminal tasks (COMPLETED, FAILED, CANCELED, REJECTED) whose status timestamp
/// is before `older_than`, on `conn` (inside the caller's transaction), and returns how
/// many it found. `$limit` ends the statement that selects them: `LIMIT $6` and what
/// the backend adds (PostgreSQL locks the rows it takes with `FOR UPDATE SKIP LOCKED`,
/// so that instances purging at once never wait on each other or on a task being
/// written; SQLite writes `+ 0`, see the `sql` module docs). The calling module has the
/// reads of [`sql_reads!`](super::reads::sql_reads) (`scoped_ids`) and imports
/// `Timestamp`, `TaskState`, `StoreError`, `db` and `to_i64`.
macro_rules! sql_purge {
    ($conn:ty, $limit:literal) => {
        /// One batch of the retention purge on `conn` (see `store::sql::purge`).
        pub(crate) async fn purge_batch(
            conn: &mut $conn,
            older_than: Timestamp,
            batch: usize,
        ) -> Result<usize, StoreError> {
            let rows = sqlx::query(concat!(
                "SELECT tenant, owner, id, agent FROM a2a_tasks \
                 WHERE state IN ($1, $2, $3, $4) AND status_ms < $5 ",
                $limit
            ))
            .bind(TaskState::Completed.as_str())
            .bind(TaskState::Failed.as_str())
            .bind(TaskState::Canceled.as_str())
            .bind(TaskState::Rejected.as_str())
            .bind(older_than.timestamp_millis())
            .bind(to_i64(batch as u64))
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
            let found = rows.len();
            for (scope, id) in scoped_ids(rows) {
                for sql in [
                    "DELETE FROM a2a_task_events WHERE agent = $4 AND tenant = $1 AND owner = $2 AND task_id = $3",
                    "DELETE FROM a2a_task_artifacts WHERE agent = $4 AND tenant = $1 AND owner = $2 AND task_id = $3",
                    "DELETE FROM a2a_push_outbox WHERE agent = $4 AND tenant = $1 AND owner = $2 AND task_id = $3",
                    "DELETE FROM a2a_push_configs WHERE agent = $4 AND tenant = $1 AND owner = $2 AND task_id = $3",
                    "DELETE FROM a2a_upstream_links WHERE agent = $4 AND tenant = $1 AND owner = $2 AND task_id = $3",
                    "DELETE FROM a2a_tasks WHERE agent = $4 AND tenant = $1 AND owner = $2 AND id = $3",
                ] {
                    sqlx::query(sql)
                        .bind(&scope.tenant)
                        .bind(&scope.owner)
                        .bind(&id)
                        .bind(&scope.agent)
                        .execute(&mut *conn)
                        .await
                        .map_err(db)?;
                }
            }
            Ok(found)
        }
    };
}

pub(crate) use sql_purge;

/// The purge's loop: runs `one` (one batch of at most `batch` tasks, at least one, in a
/// transaction of its own; it answers how many tasks the batch found) until a batch finds
/// fewer, yielding between batches so that appends waiting for the writer are not held
/// up for long. Returns the number of tasks deleted; batches committed before an error
/// stay deleted.
///
/// # Errors
/// The first error of `one`.
pub(crate) async fn in_batches<F, Fut>(batch: usize, mut one: F) -> Result<u64, StoreError>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<usize, StoreError>>,
{
    let batch = batch.max(1);
    let mut purged = 0u64;
    loop {
        let found = one(batch).await?;
        purged += found as u64;
        if found < batch {
            return Ok(purged);
        }
        tokio::task::yield_now().await;
    }
}
