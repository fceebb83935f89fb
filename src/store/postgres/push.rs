//! [`PushStore`](crate::store::PushStore) on PostgreSQL: every instance sharing the database
//! claims deliveries with `FOR UPDATE SKIP LOCKED`, so no delivery is sent by two
//! instances within a lease, and none waits for another's claim.

use sqlx::PgPool;

/// Push state of a [`PostgresTaskStore`](crate::store::PostgresTaskStore).
#[derive(Debug, Clone)]
pub struct PgPush {
    pool: PgPool,
}

impl PgPush {
    /// The push state on the store's pool.
    pub(crate) fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    fn writer(&self) -> &PgPool {
        &self.pool
    }

    fn reader(&self) -> &PgPool {
        &self.pool
    }

    /// Senders on PostgreSQL claim with written leases: any number may run.
    fn reserve(&self) -> bool {
        true
    }

    fn release(&self) {}

    async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, StoreError> {
        self.pool.begin().await.map_err(db)
    }
}

crate::store::sql::push::sql_push!(
    PgPush,
    sqlx::Postgres,
    crate::store::sql::push::claim_sql!("FOR UPDATE SKIP LOCKED"),
    false
);
