//! The PostgreSQL side of several instances ([`crate::cluster`]): instance
//! heartbeats and task leases (`migrations/postgres/0003_cluster.sql`), runtime
//! session leases (`0004_session_leases.sql`),
//! `NOTIFY` through the pool and one `LISTEN` session connection.
//!
//! `LISTEN` needs a session of its own: through PgBouncer in transaction mode it
//! would not survive the transaction, so `[store] listen_url` may name a direct
//! connection to the same database ([`PostgresTaskStore::with_listen_url`]).
//! `NOTIFY` is transactional and delivered after commit: the event notifications
//! are part of each batch's single write statement (see the `postgres` module), so
//! a notification never announces an event that was not committed.
//!
//! Every timestamp is the database's `now()`, so instances need not agree on the
//! time.

use std::str::FromStr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};

use super::PostgresTaskStore;
use crate::protocol::TaskState;
use crate::scope::Scope;
use crate::store::StoreError;
use crate::store::cluster::{CHANNEL, ClusterBackend, Holder, Listener, Orphan};
use crate::store::sql::db;

impl PostgresTaskStore {
    /// Listens through `url` instead of the pool's own settings (a direct connection
    /// when the pool goes through PgBouncer in transaction mode).
    ///
    /// # Errors
    /// [`StoreError::Backend`] for a malformed URL (not repeated: it may hold a
    /// password).
    pub fn with_listen_url(mut self, url: &str) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url).map_err(|e| {
            StoreError::Backend(format!("invalid PostgreSQL URL in store.listen_url: {e}"))
        })?;
        self.listen_options = Some(options);
        Ok(self)
    }
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

struct PgListen(PgListener);

#[async_trait]
impl Listener for PgListen {
    async fn recv(&mut self) -> Result<Option<String>, StoreError> {
        match self.0.try_recv().await {
            Ok(Some(n)) => Ok(Some(n.payload().to_owned())),
            Ok(None) => Ok(None),
            Err(e) => Err(db(e)),
        }
    }
}

#[async_trait]
impl ClusterBackend for PostgresTaskStore {
    fn enable_notifications(&self) {
        self.notify.store(true, Ordering::Release);
    }

    async fn heartbeat(&self, instance: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO a2a_instances (id) VALUES ($1) \
             ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()",
        )
        .bind(instance)
        .execute(self.pool())
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn claim(
        &self,
        instance: &str,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Result<(), String>, StoreError> {
        for _ in 0..3 {
            let got: Option<String> = sqlx::query_scalar(
                "INSERT INTO a2a_task_leases (agent, tenant, owner, task_id, instance) \
                 VALUES ($5, $1, $2, $3, $4) \
                 ON CONFLICT (agent, tenant, owner, task_id) DO UPDATE SET claimed_at = now() \
                 WHERE a2a_task_leases.instance = EXCLUDED.instance \
                 RETURNING instance",
            )
            .bind(&scope.tenant)
            .bind(&scope.owner)
            .bind(task_id)
            .bind(instance)
            .bind(&scope.agent)
            .fetch_optional(self.pool())
            .await
            .map_err(db)?;
            if got.is_some() {
                return Ok(Ok(()));
            }
            let holder: Option<String> = sqlx::query_scalar(
                "SELECT instance FROM a2a_task_leases \
                 WHERE agent = $4 AND tenant = $1 AND owner = $2 AND task_id = $3",
            )
            .bind(&scope.tenant)
            .bind(&scope.owner)
            .bind(task_id)
            .bind(&scope.agent)
            .fetch_optional(self.pool())
            .await
            .map_err(db)?;
            if let Some(holder) = holder {
                return Ok(Err(holder));
            }
            // Released in between: try again.
        }
        Err(StoreError::Backend(
            "the task's lease changed hands three times during one claim".into(),
        ))
    }

    async fn release(
        &self,
        instance: &str,
        scope: &Scope,
        task_id: &str,
        tag: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "WITH gone AS (DELETE FROM a2a_task_leases \
               WHERE agent = $7 AND tenant = $1 AND owner = $2 AND task_id = $3 \
                 AND instance = $4 RETURNING 1) \
             SELECT pg_notify($5, $6), (SELECT count(*) FROM gone)",
        )
        .bind(&scope.tenant)
        .bind(&scope.owner)
        .bind(task_id)
        .bind(instance)
        .bind(CHANNEL)
        .bind(format!("r:{tag}"))
        .bind(&scope.agent)
        .execute(self.pool())
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn holder(
        &self,
        scope: &Scope,
        task_id: &str,
        lease: Duration,
    ) -> Result<Option<Holder>, StoreError> {
        let row = sqlx::query(
            "SELECT l.instance, \
                    COALESCE(i.heartbeat_at > now() - $4::float8 * interval '1 millisecond', false), \
                    (EXTRACT(EPOCH FROM (now() - i.heartbeat_at)) * 1000)::float8 \
             FROM a2a_task_leases l LEFT JOIN a2a_instances i ON i.id = l.instance \
             WHERE l.agent = $5 AND l.tenant = $1 AND l.owner = $2 AND l.task_id = $3",
        )
        .bind(&scope.tenant)
        .bind(&scope.owner)
        .bind(task_id)
        .bind(ms(lease))
        .bind(&scope.agent)
        .fetch_optional(self.pool())
        .await
        .map_err(db)?;
        Ok(row.map(|r| Holder {
            instance: r.get(0),
            alive: r.get(1),
            heartbeat_age: r
                .get::<Option<f64>, _>(2)
                .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0)),
        }))
    }

    async fn orphans(&self, lease: Duration, limit: usize) -> Result<Vec<Orphan>, StoreError> {
        // Session leases of instances long dead (a live claim takes them over anyway;
        // this keeps sessions never used again from piling up).
        sqlx::query(
            "DELETE FROM a2a_session_leases s \
             WHERE NOT EXISTS (SELECT 1 FROM a2a_instances i WHERE i.id = s.instance \
                 AND i.heartbeat_at >= now() - $1::float8 * 10 * interval '1 millisecond')",
        )
        .bind(ms(lease))
        .execute(self.pool())
        .await
        .map_err(db)?;
        sqlx::query(
            "DELETE FROM a2a_instances i \
             WHERE i.heartbeat_at < now() - $1::float8 * 10 * interval '1 millisecond' \
               AND NOT EXISTS (SELECT 1 FROM a2a_task_leases l WHERE l.instance = i.id)",
        )
        .bind(ms(lease))
        .execute(self.pool())
        .await
        .map_err(db)?;
        let rows = sqlx::query(
            "SELECT t.tenant, t.owner, t.id, l.instance, t.agent \
             FROM a2a_tasks t \
             LEFT JOIN a2a_task_leases l \
               ON l.agent = t.agent AND l.tenant = t.tenant AND l.owner = t.owner AND l.task_id = t.id \
             LEFT JOIN a2a_instances i ON i.id = l.instance \
             WHERE t.state IN ($1, $2, $3) \
               AND (l.instance IS NULL OR i.id IS NULL \
                    OR i.heartbeat_at <= now() - $4::float8 * interval '1 millisecond') \
             LIMIT $5",
        )
        .bind(TaskState::Submitted.as_str())
        .bind(TaskState::Working.as_str())
        .bind(TaskState::AuthRequired.as_str())
        .bind(ms(lease))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await
        .map_err(db)?;
        Ok(rows
            .iter()
            .map(|r| Orphan {
                scope: Scope::new(r.get::<String, _>(0), r.get::<String, _>(1))
                    .with_agent(r.get::<String, _>(4)),
                task_id: r.get(2),
                lost: r.get(3),
            })
            .collect())
    }

    async fn take_over(&self, instance: &str, orphan: &Orphan) -> Result<bool, StoreError> {
        let (s, id) = (&orphan.scope, &orphan.task_id);
        let taken = match &orphan.lost {
            Some(lost) => sqlx::query(
                "UPDATE a2a_task_leases SET instance = $4, claimed_at = now() \
                 WHERE agent = $6 AND tenant = $1 AND owner = $2 AND task_id = $3 \
                   AND instance = $5",
            )
            .bind(&s.tenant)
            .bind(&s.owner)
            .bind(id)
            .bind(instance)
            .bind(lost)
            .bind(&s.agent),
            None => sqlx::query(
                "INSERT INTO a2a_task_leases (agent, tenant, owner, task_id, instance) \
                 VALUES ($5, $1, $2, $3, $4) ON CONFLICT DO NOTHING",
            )
            .bind(&s.tenant)
            .bind(&s.owner)
            .bind(id)
            .bind(instance)
            .bind(&s.agent),
        }
        .execute(self.pool())
        .await
        .map_err(db)?;
        Ok(taken.rows_affected() == 1)
    }

    async fn claim_session(
        &self,
        instance: &str,
        agent: &str,
        session: &str,
        token: i64,
        lease: Duration,
    ) -> Result<Result<Option<String>, String>, StoreError> {
        // One statement: insert, re-take this instance's own row, or take over a row
        // whose instance has no heartbeat within the lease. `prev` (the statement's
        // snapshot) names the holder for the log and the refusal.
        let row = sqlx::query(
            "WITH prev AS (SELECT instance FROM a2a_session_leases \
                           WHERE agent = $5 AND session_id = $1), \
             got AS ( \
               INSERT INTO a2a_session_leases (agent, session_id, instance, token) \
               VALUES ($5, $1, $2, $4) \
               ON CONFLICT (agent, session_id) DO UPDATE \
                 SET instance = EXCLUDED.instance, token = EXCLUDED.token, claimed_at = now() \
                 WHERE a2a_session_leases.instance = EXCLUDED.instance \
                    OR NOT EXISTS (SELECT 1 FROM a2a_instances i \
                                   WHERE i.id = a2a_session_leases.instance \
                                     AND i.heartbeat_at > now() - $3::float8 * interval '1 millisecond') \
               RETURNING 1) \
             SELECT EXISTS (SELECT 1 FROM got), (SELECT instance FROM prev)",
        )
        .bind(session)
        .bind(instance)
        .bind(ms(lease))
        .bind(token)
        .bind(agent)
        .fetch_one(self.pool())
        .await
        .map_err(db)?;
        let (got, prev): (bool, Option<String>) = (row.get(0), row.get(1));
        Ok(match (got, prev) {
            (true, Some(p)) if p != instance => Ok(Some(p)),
            (true, _) => Ok(None),
            (false, p) => Err(p.unwrap_or_else(|| "another instance".to_owned())),
        })
    }

    async fn release_session(
        &self,
        agent: &str,
        session: &str,
        token: i64,
        tag: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "WITH gone AS (DELETE FROM a2a_session_leases \
               WHERE agent = $5 AND session_id = $1 AND token = $2 RETURNING 1) \
             SELECT pg_notify($3, $4), (SELECT count(*) FROM gone)",
        )
        .bind(session)
        .bind(token)
        .bind(CHANNEL)
        .bind(format!("s:{tag}"))
        .bind(agent)
        .execute(self.pool())
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn notify(&self, payload: &str) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(payload)
            .execute(self.pool())
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn listen(&self) -> Result<Box<dyn Listener>, StoreError> {
        let options = match &self.listen_options {
            Some(o) => o.clone(),
            None => (*self.pool().connect_options()).clone(),
        };
        // A pool of one session connection, kept for as long as the listener lives.
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .max_lifetime(None)
            .idle_timeout(None)
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy_with(options);
        let mut listener = PgListener::connect_with(&pool).await.map_err(|e| {
            StoreError::Backend(format!(
                "cannot open the PostgreSQL notification listener (store.listen_url or store.url): {}",
                crate::store::sql::db_message(&e)
            ))
        })?;
        listener.ignore_pool_close_event(true);
        listener.listen(CHANNEL).await.map_err(db)?;
        Ok(Box::new(PgListen(listener)))
    }

    async fn leave(&self, instance: &str) -> Result<(), StoreError> {
        for table in ["a2a_task_leases", "a2a_session_leases"] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE instance = $1"
            )))
            .bind(instance)
            .execute(self.pool())
            .await
            .map_err(db)?;
        }
        sqlx::query("DELETE FROM a2a_instances WHERE id = $1")
            .bind(instance)
            .execute(self.pool())
            .await
            .map_err(db)?;
        Ok(())
    }
}
