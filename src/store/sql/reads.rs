//! The read side shared by the SQL stores. SQLite and PostgreSQL run the same
//! statements (both take `$n` placeholders), so the queries are written once and
//! instantiated per backend by [`sql_reads!`] with the backend's connection and row
//! types (a macro, because sqlx's executor traits make a generic version harder to
//! read than the queries themselves).

/// Defines, in the calling module, the read functions of a SQL store for one
/// backend: `read_task`, `read_head`, `read_events_after`, `read_list`, `read_unsettled`,
/// `read_expired_input_required`, `ping`, `materialize`, `pending_events` and
/// `scoped_ids`, each taking a
/// `&mut $conn` connection.
macro_rules! sql_reads {
    ($conn:ty, $row:ty) => {
        use $crate::store::sql::StoredRow;

        /// The artifact events in `(art_seq, upto]`, in order (rows of one event or
        /// folded runs, see [`row_events`](crate::store::sql::row_events)).
        pub(crate) async fn pending_events(
            conn: &mut $conn,
            scope: &Scope,
            task_id: &str,
            art_seq: i64,
            upto: i64,
        ) -> Result<Vec<StreamResponse>, StoreError> {
            let rows = sqlx::query(
                "SELECT seq, event FROM a2a_task_events \
                 WHERE agent = $6 AND tenant = $1 AND owner = $2 AND task_id = $3 \
                   AND seq > $4 AND seq <= $5 AND folds_artifacts = 1 ORDER BY seq",
            )
            .bind(&scope.tenant)
            .bind(&scope.owner)
            .bind(task_id)
            .bind(art_seq)
            .bind(upto)
            .bind(&scope.agent)
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
            let mut events = Vec::with_capacity(rows.len());
            for r in &rows {
                let text: &str = r.get(1);
                for (seq, json) in $crate::store::sql::row_events(to_u64(r.get(0)), text)? {
                    if seq > to_u64(art_seq) {
                        events.push(from_json::<StreamResponse>(json)?);
                    }
                }
            }
            Ok(events)
        }
        /// The task of a stored row: the snapshot with the artifacts folded in when
        /// `row.artifacts` was read.
        pub(crate) async fn materialize(
            conn: &mut $conn,
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
        /// `(scope, id)` pairs from rows of `tenant, owner, id, agent`.
        pub(crate) fn scoped_ids(rows: Vec<$row>) -> Vec<TaskKey> {
            rows.into_iter()
                .map(|r| {
                    (
                        Scope::new(r.get::<String, _>(0), r.get::<String, _>(1))
                            .with_agent(r.get::<String, _>(3)),
                        r.get::<String, _>(2),
                    )
                })
                .collect()
        }
        /// `TaskStore::head` on `conn`: one row of `a2a_tasks`, no texts.
        pub(crate) async fn read_head(
            conn: &mut $conn,
            scope: &Scope,
            task_id: &str,
        ) -> Result<Option<$crate::store::TaskHead>, StoreError> {
            let row = sqlx::query(
                "SELECT state, last_seq FROM a2a_tasks \
                 WHERE agent = $4 AND tenant = $1 AND owner = $2 AND id = $3",
            )
            .bind(&scope.tenant)
            .bind(&scope.owner)
            .bind(task_id)
            .bind(&scope.agent)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db)?;
            Ok(row.map(|r| $crate::store::TaskHead {
                state: TaskState::parse(r.get::<&str, _>(0)).unwrap_or(TaskState::Unspecified),
                last_seq: to_u64(r.get(1)),
            }))
        }
        /// `TaskStore::get` on `conn`.
        pub(crate) async fn read_task(
            conn: &mut $conn,
            scope: &Scope,
            task_id: &str,
        ) -> Result<Option<TaskRecord>, StoreError> {
            let row = sqlx::query(
                "SELECT t.last_seq, t.snapshot, t.art_seq, t.pending_bytes, a.artifacts \
                 FROM a2a_tasks t JOIN a2a_task_artifacts a \
                   ON a.agent = t.agent AND a.tenant = t.tenant AND a.owner = t.owner \
                  AND a.task_id = t.id \
                 WHERE t.agent = $4 AND t.tenant = $1 AND t.owner = $2 AND t.id = $3",
            )
            .bind(&scope.tenant)
            .bind(&scope.owner)
            .bind(task_id)
            .bind(&scope.agent)
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
            let task = materialize(conn, scope, task_id, stored).await?;
            Ok(Some(TaskRecord {
                task,
                last_seq: to_u64(last_seq),
            }))
        }
        /// `TaskStore::events_after` on `conn`. A folded row (see
        /// [`row_events`](crate::store::sql::row_events)) is keyed by its last event, so
        /// the first row read may hold events at or before `after`: they are skipped.
        /// `limit` rows hold at least `limit` events; the events past `limit` are left
        /// for the next read. `max_bytes` bounds the rows' texts: the lengths of the next
        /// `limit` rows (`octet_length`, which both databases take from the row's header
        /// or TOAST pointer without reading the text) are read first, and a running sum
        /// finds the last row within the bound (the first row always); the texts are
        /// then read as one range of the primary key up to that row, a plan that does
        /// not depend on table statistics (a join back by key went through every event
        /// of the task for each row on a PostgreSQL table not yet analyzed).
        pub(crate) async fn read_events_after(
            conn: &mut $conn,
            scope: &Scope,
            task_id: &str,
            after: u64,
            limit: usize,
            max_bytes: u64,
        ) -> Result<Vec<StoredEvent>, StoreError> {
            let rows = sqlx::query(
                "WITH k AS (SELECT seq, octet_length(event) AS n FROM a2a_task_events \
                            WHERE agent = $7 AND tenant = $1 AND owner = $2 \
                              AND task_id = $3 AND seq > $4 \
                            ORDER BY seq LIMIT $5 + 0), \
                 r AS (SELECT seq, sum(n) OVER (ORDER BY seq) AS upto, \
                              row_number() OVER (ORDER BY seq) AS i FROM k) \
                 SELECT seq, event FROM a2a_task_events \
                 WHERE agent = $7 AND tenant = $1 AND owner = $2 AND task_id = $3 AND seq > $4 \
                   AND seq <= (SELECT max(seq) FROM r WHERE upto <= $6 OR i = 1) \
                 ORDER BY seq",
            )
            .bind(&scope.tenant)
            .bind(&scope.owner)
            .bind(task_id)
            .bind(to_i64(after))
            .bind(to_i64(limit as u64))
            .bind(to_i64(max_bytes))
            .bind(&scope.agent)
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
            let mut events = Vec::with_capacity(rows.len().min(limit));
            'rows: for r in &rows {
                let text: &str = r.get(1);
                for (seq, json) in $crate::store::sql::row_events(to_u64(r.get(0)), text)? {
                    if seq <= after {
                        continue;
                    }
                    if events.len() == limit {
                        break 'rows;
                    }
                    events.push(StoredEvent::with_json(seq, from_json(json)?, json.to_owned()));
                }
            }
            Ok(events)
        }
        /// `TaskStore::list` on `conn`.
        pub(crate) async fn read_list(
            conn: &mut $conn,
            scope: &Scope,
            query: &TaskQuery,
        ) -> Result<TaskPage, StoreError> {
            let state = query
                .status
                .filter(|s| *s != TaskState::Unspecified)
                .map(TaskState::as_str);
            let after = query.status_timestamp_after.map(|t| t.timestamp_millis());
            let total: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM a2a_tasks WHERE agent = $6 AND tenant = $1 AND owner = $2 \
                 AND ($3 IS NULL OR context_id = $3) AND ($4 IS NULL OR state = $4) \
                 AND ($5 IS NULL OR status_ms >= $5)",
            )
            .bind(&scope.tenant)
            .bind(&scope.owner)
            .bind(query.context_id.as_deref())
            .bind(state)
            .bind(after)
            .bind(&scope.agent)
            .fetch_one(&mut *conn)
            .await
            .map_err(db)?;
            // The page's rows in order (one more than the page, to tell whether more
            // follow), each with its stored size and the running sum of the sizes up to
            // it; only rows within the byte bound (and the first, whatever its size)
            // carry their texts, the first row without them ends the page. The texts
            // are read by key for each row within the bound (a scalar subquery, not a
            // join, and by `status_ms` too so that either index finds the row at once:
            // on a PostgreSQL table not yet analyzed the join's plan went through every
            // task of the scope for each row of the page, 1.1 to 1.4 s a page of 20,000
            // tasks). The cursor is also a bound on `status_ms` alone, which the
            // status-time index takes as where to start: a page deep in a scope reads
            // its own rows, not every row before it (its `OR` form alone was a filter).
            let rows = sqlx::query(
                "WITH p AS (SELECT t.id, t.status_ms, t.last_seq, t.art_seq, t.pending_bytes, \
                                   octet_length(t.snapshot) + CASE WHEN $8 \
                                     THEN t.art_bytes + t.pending_bytes ELSE 0 END AS size \
                            FROM a2a_tasks t \
                            WHERE t.agent = $11 AND t.tenant = $1 AND t.owner = $2 \
                              AND ($3 IS NULL OR t.context_id = $3) \
                              AND ($4 IS NULL OR t.state = $4) \
                              AND ($5 IS NULL OR t.status_ms >= $5) \
                              AND t.status_ms <= COALESCE($6, 9223372036854775807) \
                              AND ($6 IS NULL OR t.status_ms < $6 OR t.id > $7) \
                            ORDER BY t.status_ms DESC, t.id ASC LIMIT $9 + 0), \
                      q AS (SELECT p.id, p.status_ms, p.last_seq, p.art_seq, p.pending_bytes, \
                                   (ROW_NUMBER() OVER w = 1 \
                                   OR SUM(p.size) OVER w <= $10 + 0) AS fits \
                            FROM p WINDOW w AS (ORDER BY p.status_ms DESC, p.id ASC \
                                                ROWS UNBOUNDED PRECEDING)) \
                 SELECT q.id, q.status_ms, q.last_seq, \
                        CASE WHEN q.fits THEN (SELECT t.snapshot FROM a2a_tasks t \
                          WHERE t.agent = $11 AND t.tenant = $1 AND t.owner = $2 \
                            AND t.status_ms = q.status_ms \
                            AND t.id = q.id) END, \
                        q.art_seq, q.pending_bytes, \
                        CASE WHEN $8 AND q.fits THEN (SELECT a.artifacts FROM a2a_task_artifacts a \
                          WHERE a.agent = $11 AND a.tenant = $1 AND a.owner = $2 \
                            AND a.task_id = q.id) END \
                 FROM q ORDER BY q.status_ms DESC, q.id ASC",
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
            .bind(query.max_bytes.map_or(i64::MAX, to_i64))
            .bind(&scope.agent)
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
            let mut more = rows.len() > query.page_size;
            let mut tasks = Vec::with_capacity(query.page_size.min(rows.len()));
            let mut next = None;
            for row in rows.iter().take(query.page_size) {
                let id: &str = row.get(0);
                let Some(snapshot) = row.get::<Option<&str>, _>(3) else {
                    // Past the byte bound: the page ends before this task.
                    more = true;
                    break;
                };
                let stored = StoredRow {
                    snapshot,
                    artifacts: row.get(6),
                    art_seq: row.get(4),
                    last_seq: row.get(2),
                    pending_bytes: row.get(5),
                };
                let task = materialize(conn, scope, id, stored).await?;
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
        /// `TaskStore::unsettled` on `conn`.
        pub(crate) async fn read_unsettled(
            conn: &mut $conn,
            limit: usize,
        ) -> Result<Vec<TaskKey>, StoreError> {
            let rows =
                sqlx::query("SELECT tenant, owner, id, agent FROM a2a_tasks WHERE state IN ($1, $2) LIMIT $3 + 0")
                    .bind(TaskState::Submitted.as_str())
                    .bind(TaskState::Working.as_str())
                    .bind(to_i64(limit as u64))
                    .fetch_all(&mut *conn)
                    .await
                    .map_err(db)?;
            Ok(scoped_ids(rows))
        }
        /// `TaskStore::expired_input_required` on `conn`.
        pub(crate) async fn read_expired_input_required(
            conn: &mut $conn,
            older_than: Timestamp,
            limit: usize,
        ) -> Result<Vec<TaskKey>, StoreError> {
            let rows = sqlx::query(
                "SELECT tenant, owner, id, agent FROM a2a_tasks WHERE state = $1 AND status_ms < $2 \
                 LIMIT $3 + 0",
            )
            .bind(TaskState::InputRequired.as_str())
            .bind(older_than.timestamp_millis())
            .bind(to_i64(limit as u64))
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
            Ok(scoped_ids(rows))
        }
    };
}

pub(crate) use sql_reads;
