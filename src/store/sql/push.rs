//! [`PushStore`](crate::store::PushStore) on the SQL stores. SQLite and PostgreSQL run the same
//! statements (`$n` placeholders, `ON CONFLICT`, `UPDATE ... FROM`), instantiated per
//! backend by [`sql_push!`]; only the claim differs (PostgreSQL locks the rows it
//! claims with `FOR UPDATE SKIP LOCKED`, so instances claiming at once never wait for
//! nor take each other's rows; SQLite has one writer). The outbox rows themselves are
//! written by the stores' batch writers, in the transaction of the events.

/// The claim of due queue heads. `$1` now, `$2` the lease's end, `$3` the limit, `$4`
/// the claim token; `$lock` is appended to the inner select (`FOR UPDATE SKIP LOCKED`
/// on PostgreSQL).
macro_rules! claim_sql {
    ($lock:literal) => {
        concat!(
            "UPDATE a2a_push_outbox SET next_ms = $2, claim = $4 \
             FROM (SELECT o.agent AS ka, o.tenant AS kt, o.owner AS ko, o.task_id AS ki, \
                          o.config_id AS kc, o.seq AS ks \
                   FROM a2a_push_outbox o \
                   WHERE o.next_ms <= $1 AND NOT EXISTS ( \
                     SELECT 1 FROM a2a_push_outbox p \
                     WHERE p.agent = o.agent AND p.tenant = o.tenant AND p.owner = o.owner AND p.task_id = o.task_id \
                       AND p.config_id = o.config_id AND p.seq < o.seq) \
                   ORDER BY o.next_ms LIMIT $3 + 0 ",
            $lock,
            ") AS k \
             WHERE agent = k.ka AND tenant = k.kt AND owner = k.ko AND task_id = k.ki AND config_id = k.kc \
               AND seq = k.ks"
        )
    };
}
pub(crate) use claim_sql;

/// The select of claimed (or due) deliveries with their config and event, up to its
/// `WHERE`; the columns are read by `claimed_at` in [`sql_push!`]. The event is read
/// from the log row that holds it: the first row numbered at or after it (a row of
/// one event, or a folded run keyed by its last event, see
/// [`row_events`](crate::store::sql::row_events)), with that row's number.
macro_rules! claimed_columns {
    () => {
        "SELECT o.tenant, o.owner, o.config_id, o.seq, o.attempts, o.created_ms, \
           c.task_id, c.id, c.url, c.token, c.auth_scheme, c.auth_credentials, \
           c.enabled, c.failures, c.last_error, c.created_ms, e.event, e.seq, o.range_end, \
           o.agent \
         FROM a2a_push_outbox o \
         JOIN a2a_push_configs c ON c.agent = o.agent AND c.tenant = o.tenant AND c.owner = o.owner \
           AND c.task_id = o.task_id AND c.id = o.config_id \
         LEFT JOIN a2a_task_events e ON e.agent = o.agent AND e.tenant = o.tenant AND e.owner = o.owner \
           AND e.task_id = o.task_id \
           AND e.seq = (SELECT min(x.seq) FROM a2a_task_events x \
                        WHERE x.agent = o.agent AND x.tenant = o.tenant AND x.owner = o.owner \
                          AND x.task_id = o.task_id AND x.seq >= o.seq)"
    };
}
pub(crate) use claimed_columns;

/// Implements [`PushStore`](crate::store::PushStore) for `$ty`, whose `writer()` and
/// `reader()` give pools of database `$db`, and whose `begin()` opens a write
/// transaction; `$claim` is the claim statement ([`claim_sql!`]); `$single` is what
/// [`PushStore::single_process`](crate::store::PushStore::single_process) answers.
macro_rules! sql_push {
    ($ty:ty, $db:ty, $claim:expr, $single:expr) => {
        use sqlx::Row as _;
        use $crate::store::push::{
            Claimed, DeliveryKey, PendingDelivery, PushStatus, PushStore, Settle, Settled,
            StoredPushConfig,
        };
        use $crate::store::StoreError;
        use $crate::scope::Scope;

        fn db(e: sqlx::Error) -> StoreError {
            StoreError::Backend(e.to_string())
        }

        fn config_at(r: &<$db as sqlx::Database>::Row, i: usize) -> StoredPushConfig {
            StoredPushConfig {
                task_id: r.get(i),
                id: r.get(i + 1),
                url: r.get(i + 2),
                token: r.get(i + 3),
                auth_scheme: r.get(i + 4),
                auth_credentials: r.get(i + 5),
                enabled: r.get::<i64, _>(i + 6) != 0,
                failures: u32::try_from(r.get::<i64, _>(i + 7)).unwrap_or(u32::MAX),
                last_error: r.get(i + 8),
                created_ms: r.get(i + 9),
            }
        }

        /// The text of event `seq`, taken out of the log row read at columns `at` (its
        /// text) and `at + 1` (its number); `None` (the event is gone, as after a purge)
        /// when no row holds it.
        fn event_at(r: &<$db as sqlx::Database>::Row, at: usize, seq: u64) -> Option<String> {
            r.get::<Option<&str>, _>(at)
                .zip(r.get::<Option<i64>, _>(at + 1))
                .and_then(|(text, row_seq)| {
                    let events = $crate::store::sql::row_events(
                        u64::try_from(row_seq).unwrap_or(0),
                        text,
                    );
                    events.ok()?.into_iter().find(|(s, _)| *s == seq)
                })
                .map(|(_, json)| json.to_owned())
        }

        fn claimed_at(r: &<$db as sqlx::Database>::Row) -> Claimed {
            let config = config_at(r, 6);
            let seq = u64::try_from(r.get::<i64, _>(3)).unwrap_or(0);
            let event = event_at(r, 16, seq);
            Claimed {
                key: DeliveryKey {
                    scope: Scope::new(r.get::<String, _>(0), r.get::<String, _>(1))
                        .with_agent(r.get::<String, _>(19)),
                    task_id: config.task_id.clone(),
                    config_id: r.get(2),
                    seq,
                },
                attempts: u32::try_from(r.get::<i64, _>(4)).unwrap_or(u32::MAX),
                created_ms: r.get(5),
                range_end: r
                    .get::<Option<i64>, _>(18)
                    .and_then(|e| u64::try_from(e).ok()),
                event,
                config,
            }
        }

        async fn drop_pending(
            conn: &mut <$db as sqlx::Database>::Connection,
            key: &DeliveryKey,
        ) -> Result<u64, StoreError> {
            Ok(sqlx::query(
                "DELETE FROM a2a_push_outbox \
                 WHERE agent = $5 AND tenant = $1 AND owner = $2 AND task_id = $3 \
                   AND config_id = $4",
            )
            .bind(&key.scope.tenant)
            .bind(&key.scope.owner)
            .bind(&key.task_id)
            .bind(&key.config_id)
            .bind(&key.scope.agent)
            .execute(&mut *conn)
            .await
            .map_err(db)?
            .rows_affected())
        }

        /// Configs reset by one statement of [`reset_failures`] at most (5 parameters
        /// each).
        const BATCH_CHUNK: usize = 128;

        /// `n` row values of `width` placeholders each: `($1, $2), ($3, $4)`.
        fn placeholders(n: usize, width: usize) -> String {
            (0..n)
                .map(|i| {
                    let cols: Vec<String> =
                        (1..=width).map(|c| format!("${}", i * width + c)).collect();
                    format!("({})", cols.join(", "))
                })
                .collect::<Vec<_>>()
                .join(", ")
        }

        /// Ends the failure run of the configs of `keys` (delivered deliveries) inside
        /// the caller's transaction; only configs with a run are written.
        async fn reset_failures(
            conn: &mut <$db as sqlx::Database>::Connection,
            keys: &[&DeliveryKey],
        ) -> Result<(), StoreError> {
            if keys.is_empty() {
                return Ok(());
            }
            let sql = format!(
                "UPDATE a2a_push_configs SET failures = 0 WHERE failures <> 0 \
                 AND (agent, tenant, owner, task_id, id) IN (VALUES {})",
                placeholders(keys.len(), 5)
            );
            // Only placeholders are formatted in; every value is bound.
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for key in keys {
                q = q
                    .bind(&key.scope.agent)
                    .bind(&key.scope.tenant)
                    .bind(&key.scope.owner)
                    .bind(&key.task_id)
                    .bind(&key.config_id);
            }
            q.execute(&mut *conn).await.map_err(db)?;
            Ok(())
        }

        /// One settlement (see [`PushStore::settle`]) inside the caller's transaction; a
        /// delivery that is gone is left alone (nothing is written for it).
        async fn settle_in(
            conn: &mut <$db as sqlx::Database>::Connection,
            key: &DeliveryKey,
            outcome: &Settle,
            reset_one: bool,
        ) -> Result<(Settled, bool), StoreError> {
            let seq = i64::try_from(key.seq).unwrap_or(i64::MAX);
            let mut settled = Settled::default();
            match outcome {
                Settle::Retry { next_ms, error } => {
                    sqlx::query(
                        "UPDATE a2a_push_outbox SET attempts = attempts + 1, next_ms = $6, \
                           last_error = $7, claim = NULL \
                         WHERE agent = $8 AND tenant = $1 AND owner = $2 AND task_id = $3 \
                           AND config_id = $4 AND seq = $5",
                    )
                    .bind(&key.scope.tenant)
                    .bind(&key.scope.owner)
                    .bind(&key.task_id)
                    .bind(&key.config_id)
                    .bind(seq)
                    .bind(*next_ms)
                    .bind(error)
                    .bind(&key.scope.agent)
                    .execute(&mut *conn)
                    .await
                    .map_err(db)?;
                }
                _ => {
                    // The head, with the rest of its coalesced range when it is
                    // delivered or given up (a disabled config drops every row below).
                    let range = matches!(outcome, Settle::Delivered | Settle::GiveUp { .. });
                    let gone = sqlx::query(
                        "DELETE FROM a2a_push_outbox WHERE agent = $7 AND tenant = $1 AND owner = $2 \
                           AND task_id = $3 AND config_id = $4 AND seq >= $5 \
                           AND seq <= CASE WHEN $6 THEN COALESCE((SELECT h.range_end \
                             FROM a2a_push_outbox h WHERE h.agent = $7 AND h.tenant = $1 AND h.owner = $2 \
                               AND h.task_id = $3 AND h.config_id = $4 AND h.seq = $5), $5) \
                             ELSE $5 END",
                    )
                    .bind(&key.scope.tenant)
                    .bind(&key.scope.owner)
                    .bind(&key.task_id)
                    .bind(&key.config_id)
                    .bind(seq)
                    .bind(range)
                    .bind(&key.scope.agent)
                    .execute(&mut *conn)
                    .await
                    .map_err(db)?
                    .rows_affected();
                    if gone == 0 {
                        return Ok((settled, false));
                    }
                    if *outcome == Settle::Delivered {
                        if !reset_one {
                            return Ok((settled, true));
                        }
                        // The failure run ends; the row is written only when there was one.
                        sqlx::query(
                            "UPDATE a2a_push_configs SET failures = 0 \
                             WHERE agent = $5 AND tenant = $1 AND owner = $2 AND task_id = $3 \
                               AND id = $4 AND failures <> 0",
                        )
                        .bind(&key.scope.tenant)
                        .bind(&key.scope.owner)
                        .bind(&key.task_id)
                        .bind(&key.config_id)
                        .bind(&key.scope.agent)
                        .execute(&mut *conn)
                        .await
                        .map_err(db)?;
                        return Ok((settled, true));
                    }
                    let (error, disable_after, now) = match outcome {
                        Settle::GiveUp {
                            error,
                            disable_after,
                        } => (error.as_str(), i64::from(*disable_after), false),
                        Settle::Disable { error } => (error.as_str(), 0, true),
                        Settle::Delivered | Settle::Retry { .. } => {
                            unreachable!("handled above")
                        }
                    };
                    let row = sqlx::query(
                        "UPDATE a2a_push_configs SET \
                           failures = CASE WHEN $5 THEN failures ELSE failures + 1 END, \
                           last_error = $6, \
                           enabled = CASE WHEN $5 OR failures + 1 >= $7 THEN 0 ELSE enabled END \
                         WHERE agent = $8 AND tenant = $1 AND owner = $2 AND task_id = $3 \
                           AND id = $4 \
                         RETURNING enabled",
                    )
                    .bind(&key.scope.tenant)
                    .bind(&key.scope.owner)
                    .bind(&key.task_id)
                    .bind(&key.config_id)
                    .bind(now)
                    .bind(error)
                    .bind(disable_after)
                    .bind(&key.scope.agent)
                    .fetch_optional(&mut *conn)
                    .await
                    .map_err(db)?;
                    if row.is_some_and(|r| r.get::<i64, _>(0) == 0) {
                        settled.disabled = true;
                        settled.dropped = drop_pending(conn, key).await?;
                    }
                }
            }
            Ok((settled, true))
        }

        #[async_trait::async_trait]
        impl PushStore for $ty {
            async fn put_config(
                &self,
                scope: &Scope,
                c: &StoredPushConfig,
            ) -> Result<(), StoreError> {
                sqlx::query(
                    "INSERT INTO a2a_push_configs (agent, tenant, owner, task_id, id, url, token, \
                       auth_scheme, auth_credentials, enabled, failures, last_error, created_ms) \
                     VALUES ($10, $1, $2, $3, $4, $5, $6, $7, $8, 1, 0, NULL, $9) \
                     ON CONFLICT (agent, tenant, owner, task_id, id) DO UPDATE SET \
                       url = excluded.url, token = excluded.token, \
                       auth_scheme = excluded.auth_scheme, \
                       auth_credentials = excluded.auth_credentials, enabled = 1, failures = 0, \
                       last_error = NULL, created_ms = excluded.created_ms",
                )
                .bind(&scope.tenant)
                .bind(&scope.owner)
                .bind(&c.task_id)
                .bind(&c.id)
                .bind(&c.url)
                .bind(&c.token)
                .bind(&c.auth_scheme)
                .bind(&c.auth_credentials)
                .bind(c.created_ms)
                .bind(&scope.agent)
                .execute(self.writer())
                .await
                .map_err(db)?;
                Ok(())
            }

            async fn get_config(
                &self,
                scope: &Scope,
                task_id: &str,
                id: &str,
            ) -> Result<Option<StoredPushConfig>, StoreError> {
                let row = sqlx::query(
                    "SELECT task_id, id, url, token, auth_scheme, auth_credentials, \
                       enabled, failures, last_error, created_ms FROM a2a_push_configs \
                     WHERE agent = $5 AND tenant = $1 AND owner = $2 AND task_id = $3 AND id = $4",
                )
                .bind(&scope.tenant)
                .bind(&scope.owner)
                .bind(task_id)
                .bind(id)
                .bind(&scope.agent)
                .fetch_optional(self.reader())
                .await
                .map_err(db)?;
                Ok(row.map(|r| config_at(&r, 0)))
            }

            async fn list_configs(
                &self,
                scope: &Scope,
                task_id: &str,
                after: Option<&str>,
                limit: usize,
            ) -> Result<Vec<StoredPushConfig>, StoreError> {
                let rows = sqlx::query(
                    "SELECT task_id, id, url, token, auth_scheme, auth_credentials, \
                       enabled, failures, last_error, created_ms FROM a2a_push_configs \
                     WHERE agent = $6 AND tenant = $1 AND owner = $2 AND task_id = $3 AND id > $4 \
                     ORDER BY id LIMIT $5 + 0",
                )
                .bind(&scope.tenant)
                .bind(&scope.owner)
                .bind(task_id)
                .bind(after.unwrap_or(""))
                .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                .bind(&scope.agent)
                .fetch_all(self.reader())
                .await
                .map_err(db)?;
                Ok(rows.iter().map(|r| config_at(r, 0)).collect())
            }

            async fn delete_config(
                &self,
                scope: &Scope,
                task_id: &str,
                id: &str,
            ) -> Result<bool, StoreError> {
                let mut tx = self.begin().await?;
                let key = DeliveryKey {
                    scope: scope.clone(),
                    task_id: task_id.to_owned(),
                    config_id: id.to_owned(),
                    seq: 0,
                };
                drop_pending(&mut tx, &key).await?;
                let n = sqlx::query(
                    "DELETE FROM a2a_push_configs \
                     WHERE agent = $5 AND tenant = $1 AND owner = $2 AND task_id = $3 AND id = $4",
                )
                .bind(&scope.tenant)
                .bind(&scope.owner)
                .bind(task_id)
                .bind(id)
                .bind(&scope.agent)
                .execute(&mut *tx)
                .await
                .map_err(db)?
                .rows_affected();
                tx.commit().await.map_err(db)?;
                Ok(n > 0)
            }

            async fn claim(
                &self,
                now_ms: i64,
                lease_ms: i64,
                limit: usize,
            ) -> Result<Vec<Claimed>, StoreError> {
                let token = uuid::Uuid::new_v4().simple().to_string();
                let until = now_ms + lease_ms;
                let n = sqlx::query($claim)
                    .bind(now_ms)
                    .bind(until)
                    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                    .bind(&token)
                    .execute(self.writer())
                    .await
                    .map_err(db)?
                    .rows_affected();
                if n == 0 {
                    return Ok(Vec::new());
                }
                let rows = sqlx::query(concat!(
                    $crate::store::sql::push::claimed_columns!(),
                    " WHERE o.next_ms = $1 AND o.claim = $2 ORDER BY o.created_ms"
                ))
                .bind(until)
                .bind(&token)
                .fetch_all(self.writer())
                .await
                .map_err(db)?;
                Ok(rows.iter().map(claimed_at).collect())
            }

            async fn pending_after(
                &self,
                head: &DeliveryKey,
                limit: usize,
            ) -> Result<Vec<(u64, Option<String>)>, StoreError> {
                let rows = sqlx::query(
                    "SELECT o.seq, e.event, e.seq FROM a2a_push_outbox o \
                     LEFT JOIN a2a_task_events e ON e.agent = o.agent AND e.tenant = o.tenant AND e.owner = o.owner \
                       AND e.task_id = o.task_id \
                       AND e.seq = (SELECT min(x.seq) FROM a2a_task_events x \
                                    WHERE x.agent = o.agent AND x.tenant = o.tenant AND x.owner = o.owner \
                                      AND x.task_id = o.task_id AND x.seq >= o.seq) \
                     WHERE o.agent = $7 AND o.tenant = $1 AND o.owner = $2 AND o.task_id = $3 \
                       AND o.config_id = $4 AND o.seq > $5 \
                     ORDER BY o.seq LIMIT $6 + 0",
                )
                .bind(&head.scope.tenant)
                .bind(&head.scope.owner)
                .bind(&head.task_id)
                .bind(&head.config_id)
                .bind(i64::try_from(head.seq).unwrap_or(i64::MAX))
                .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                .bind(&head.scope.agent)
                .fetch_all(self.reader())
                .await
                .map_err(db)?;
                Ok(rows
                    .iter()
                    .map(|r| {
                        let seq = u64::try_from(r.get::<i64, _>(0)).unwrap_or(0);
                        (seq, event_at(r, 1, seq))
                    })
                    .collect())
            }

            async fn fix_range(&self, head: &DeliveryKey, last: u64) -> Result<u64, StoreError> {
                let row = sqlx::query(
                    "UPDATE a2a_push_outbox SET range_end = COALESCE(range_end, $6) \
                     WHERE agent = $7 AND tenant = $1 AND owner = $2 AND task_id = $3 \
                       AND config_id = $4 AND seq = $5 \
                     RETURNING range_end",
                )
                .bind(&head.scope.tenant)
                .bind(&head.scope.owner)
                .bind(&head.task_id)
                .bind(&head.config_id)
                .bind(i64::try_from(head.seq).unwrap_or(i64::MAX))
                .bind(i64::try_from(last).unwrap_or(i64::MAX))
                .bind(&head.scope.agent)
                .fetch_optional(self.writer())
                .await
                .map_err(db)?;
                Ok(row
                    .and_then(|r| r.get::<Option<i64>, _>(0))
                    .and_then(|e| u64::try_from(e).ok())
                    .unwrap_or(head.seq))
            }

            async fn unclaim(
                &self,
                keys: &[DeliveryKey],
                claimed_until: i64,
                now_ms: i64,
            ) -> Result<(), StoreError> {
                if keys.is_empty() {
                    return Ok(());
                }
                let mut tx = self.begin().await?;
                for key in keys {
                    sqlx::query(
                        "UPDATE a2a_push_outbox SET next_ms = $6, claim = NULL \
                         WHERE agent = $8 AND tenant = $1 AND owner = $2 AND task_id = $3 \
                           AND config_id = $4 AND seq = $5 AND next_ms = $7",
                    )
                    .bind(&key.scope.tenant)
                    .bind(&key.scope.owner)
                    .bind(&key.task_id)
                    .bind(&key.config_id)
                    .bind(i64::try_from(key.seq).unwrap_or(i64::MAX))
                    .bind(now_ms)
                    .bind(claimed_until)
                    .bind(&key.scope.agent)
                    .execute(&mut *tx)
                    .await
                    .map_err(db)?;
                }
                tx.commit().await.map_err(db)?;
                Ok(())
            }

            fn single_process(&self) -> bool {
                $single
            }

            fn reserve_sender(&self) -> bool {
                self.reserve()
            }

            fn release_sender(&self) {
                self.release()
            }

            async fn due_heads(
                &self,
                now_ms: i64,
                limit: usize,
                skip: &std::collections::HashSet<DeliveryKey>,
            ) -> Result<Vec<Claimed>, StoreError> {
                if limit == 0 {
                    return Ok(Vec::new());
                }
                // First the keys alone (no config, no event text), past the skipped
                // ones; then the rows of the keys wanted, in one statement.
                let keys = sqlx::query(
                    "SELECT o.tenant, o.owner, o.task_id, o.config_id, o.seq, o.agent \
                     FROM a2a_push_outbox o WHERE o.next_ms <= $1 AND NOT EXISTS ( \
                       SELECT 1 FROM a2a_push_outbox p \
                       WHERE p.agent = o.agent AND p.tenant = o.tenant AND p.owner = o.owner \
                         AND p.task_id = o.task_id AND p.config_id = o.config_id \
                         AND p.seq < o.seq) \
                     ORDER BY o.next_ms LIMIT $2 + 0",
                )
                .bind(now_ms)
                .bind(i64::try_from(limit.saturating_add(skip.len())).unwrap_or(i64::MAX))
                .fetch_all(self.reader())
                .await
                .map_err(db)?;
                let wanted: Vec<DeliveryKey> = keys
                    .iter()
                    .map(|r| DeliveryKey {
                        scope: Scope::new(r.get::<String, _>(0), r.get::<String, _>(1))
                            .with_agent(r.get::<String, _>(5)),
                        task_id: r.get(2),
                        config_id: r.get(3),
                        seq: u64::try_from(r.get::<i64, _>(4)).unwrap_or(0),
                    })
                    .filter(|k| !skip.contains(k))
                    .take(limit)
                    .collect();
                if wanted.is_empty() {
                    return Ok(Vec::new());
                }
                let sql = format!(
                    "{} WHERE (o.agent, o.tenant, o.owner, o.task_id, o.config_id, o.seq) \
                     IN (VALUES {}) \
                     ORDER BY o.next_ms",
                    $crate::store::sql::push::claimed_columns!(),
                    placeholders(wanted.len(), 6)
                );
                // Only placeholders are formatted in; every value is bound.
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                for k in &wanted {
                    q = q
                        .bind(&k.scope.agent)
                        .bind(&k.scope.tenant)
                        .bind(&k.scope.owner)
                        .bind(&k.task_id)
                        .bind(&k.config_id)
                        .bind(i64::try_from(k.seq).unwrap_or(i64::MAX));
                }
                let rows = q.fetch_all(self.reader()).await.map_err(db)?;
                Ok(rows.iter().map(claimed_at).collect())
            }

            async fn has_configs(&self) -> Result<bool, StoreError> {
                Ok(sqlx::query("SELECT 1 FROM a2a_push_configs WHERE enabled = 1 LIMIT 1")
                    .fetch_optional(self.reader())
                    .await
                    .map_err(db)?
                    .is_some())
            }

            async fn any_due(&self, now_ms: i64) -> Result<bool, StoreError> {
                Ok(sqlx::query("SELECT 1 FROM a2a_push_outbox WHERE next_ms <= $1 LIMIT 1")
                    .bind(now_ms)
                    .fetch_optional(self.reader())
                    .await
                    .map_err(db)?
                    .is_some())
            }

            async fn settle(
                &self,
                key: &DeliveryKey,
                outcome: &Settle,
            ) -> Result<Settled, StoreError> {
                let mut tx = self.begin().await?;
                let (settled, _) = settle_in(&mut tx, key, outcome, true).await?;
                tx.commit().await.map_err(db)?;
                Ok(settled)
            }

            async fn settle_many(
                &self,
                items: &[(&DeliveryKey, &Settle)],
            ) -> Result<Vec<Settled>, StoreError> {
                if items.is_empty() {
                    return Ok(Vec::new());
                }
                let mut tx = self.begin().await?;
                let mut out = Vec::with_capacity(items.len());
                let mut delivered = Vec::new();
                for (key, outcome) in items {
                    let (settled, found) = settle_in(&mut tx, key, outcome, false).await?;
                    out.push(settled);
                    if found && **outcome == Settle::Delivered {
                        delivered.push(*key);
                    }
                }
                // The failure runs the batch's deliveries end, in one statement per
                // BATCH_CHUNK (a batch holds at most one delivery per (task, config),
                // so no later item of it reads what this writes).
                for chunk in delivered.chunks(BATCH_CHUNK) {
                    reset_failures(&mut tx, chunk).await?;
                }
                tx.commit().await.map_err(db)?;
                Ok(out)
            }
            async fn status(
                &self,
                task_id: Option<&str>,
                limit: usize,
            ) -> Result<PushStatus, StoreError> {
                let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                let rows = sqlx::query(
                    "SELECT tenant, owner, task_id, config_id, seq, attempts, created_ms, \
                       next_ms, last_error, agent FROM a2a_push_outbox \
                     WHERE ($1 IS NULL OR task_id = $1) ORDER BY created_ms, task_id, seq LIMIT $2 + 0",
                )
                .bind(task_id)
                .bind(limit)
                .fetch_all(self.reader())
                .await
                .map_err(db)?;
                let pending = rows
                    .iter()
                    .map(|r| PendingDelivery {
                        key: DeliveryKey {
                            scope: Scope::new(r.get::<String, _>(0), r.get::<String, _>(1))
                                .with_agent(r.get::<String, _>(9)),
                            task_id: r.get(2),
                            config_id: r.get(3),
                            seq: u64::try_from(r.get::<i64, _>(4)).unwrap_or(0),
                        },
                        attempts: u32::try_from(r.get::<i64, _>(5)).unwrap_or(u32::MAX),
                        created_ms: r.get(6),
                        next_ms: r.get(7),
                        last_error: r.get(8),
                    })
                    .collect();
                let totals = sqlx::query(
                    "SELECT COUNT(*), MIN(created_ms) FROM a2a_push_outbox \
                     WHERE ($1 IS NULL OR task_id = $1)",
                )
                .bind(task_id)
                .fetch_one(self.reader())
                .await
                .map_err(db)?;
                let troubled = sqlx::query(
                    "SELECT tenant, owner, task_id, id, url, token, auth_scheme, auth_credentials, \
                       enabled, failures, last_error, created_ms, agent FROM a2a_push_configs \
                     WHERE ($1 IS NULL OR task_id = $1) \
                       AND (enabled = 0 OR last_error IS NOT NULL) \
                     ORDER BY created_ms DESC LIMIT $2 + 0",
                )
                .bind(task_id)
                .bind(limit)
                .fetch_all(self.reader())
                .await
                .map_err(db)?
                .iter()
                .map(|r| {
                    (
                        Scope::new(r.get::<String, _>(0), r.get::<String, _>(1))
                            .with_agent(r.get::<String, _>(12)),
                        config_at(r, 2),
                    )
                })
                .collect();
                Ok(PushStatus {
                    pending,
                    troubled,
                    pending_total: u64::try_from(totals.get::<i64, _>(0)).unwrap_or(0),
                    oldest_pending_ms: totals.get(1),
                })
            }

            async fn signing_key(&self, candidate: &[u8]) -> Result<Vec<u8>, StoreError> {
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD;
                sqlx::query(
                    "INSERT INTO a2a_push_keys (id, pkcs8, created_ms) VALUES (1, $1, $2) \
                     ON CONFLICT (id) DO NOTHING",
                )
                .bind(b64.encode(candidate))
                .bind(crate::protocol::time::now().timestamp_millis())
                .execute(self.writer())
                .await
                .map_err(db)?;
                let kept: String = sqlx::query("SELECT pkcs8 FROM a2a_push_keys WHERE id = 1")
                    .fetch_one(self.writer())
                    .await
                    .map_err(db)?
                    .get(0);
                b64.decode(kept.as_bytes())
                    .map_err(|e| StoreError::Backend(format!("the stored signing key: {e}")))
            }
        }
    };
}
pub(crate) use sql_push;
