//! The owner step of the first start after migration 0008 (owner namespaces,
//! docs/authentication.md#owner-namespaces): rows a JWT caller wrote before owners were
//! namespaced carry the bare claim value as their owner; that start rewrites them into
//! `jwt:<issuer>#<claim>` once per database, and records what it decided in the
//! `a2a_meta` row [`MARKER`], so that no later start (with another issuer, or JWT
//! configured only later) decides again.
//!
//! The store only executes the plan ([`OwnerPlan`]); which owners are kept and which
//! prefix is written is the gateway's decision (it knows the configured API-key
//! callers and issuer): see `crate::app::owners`.

/// The `a2a_meta` key of the decision.
pub const MARKER: &str = "owner_namespaces";

/// The tables keyed by a caller's scope, whose `owner` column the rewrite changes
/// (both SQL stores).
pub const OWNER_TABLES: [&str; 6] = [
    "a2a_tasks",
    "a2a_task_artifacts",
    "a2a_task_events",
    "a2a_push_configs",
    "a2a_push_outbox",
    "a2a_upstream_links",
];

/// [`OWNER_TABLES`] and the cluster's task leases (PostgreSQL only).
pub const POSTGRES_OWNER_TABLES: [&str; 7] = [
    "a2a_tasks",
    "a2a_task_artifacts",
    "a2a_task_events",
    "a2a_push_configs",
    "a2a_push_outbox",
    "a2a_upstream_links",
    "a2a_task_leases",
];

/// What the owner step does on a database where nothing was decided yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerPlan {
    /// The decision recorded under [`MARKER`] (shown by a later start): e.g.
    /// `"namespaced jwt:https://idp/#"` or `"no jwt"`.
    pub decision: String,
    /// The rewrite, when bare JWT owners are to be namespaced; `None` records the
    /// decision only.
    pub rewrite: Option<OwnerRewrite>,
}

/// Prefix `prefix` to the owner of every row of [`OWNER_TABLES`] whose owner is not in
/// `keep` and does not start with `prefix` already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRewrite {
    /// `jwt:<issuer>#` (`crate::config::jwt_owner_prefix`).
    pub prefix: String,
    /// The owners that stay: the configured API-key callers and `anonymous`.
    pub keep: Vec<String>,
}

/// What [`TaskStore::namespace_owners`](super::TaskStore::namespace_owners) found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerOutcome {
    /// This call decided: the plan's decision is recorded, and `rows` rows (over every
    /// table) were rewritten.
    Decided {
        /// Rows rewritten, over every table.
        rows: u64,
        /// Tasks whose owner is one of the kept names (key callers, `anonymous`) and
        /// stays: where a token's claim equalled a key's caller, its tasks are among
        /// them and stay the key's.
        kept_tasks: u64,
    },
    /// A start before decided already (this decision, as recorded); nothing changed.
    AlreadyDecided(String),
    /// The store keeps nothing across restarts (memory): there is nothing to decide.
    NotPersistent,
}

/// Defines, in the calling module, `namespace_owners_in(conn, plan, keep_set)` on a
/// connection of type `$conn` inside the caller's transaction (which must already hold
/// the database's write lock for the decision), over the tables `$tables`. `$keep_set`
/// is the SQL of the set of owners in the JSON array bound as `$2`. The calling module imports `StoreError` and
/// `db`.
macro_rules! sql_owners {
    ($conn:ty, $tables:expr, $keep_set:literal) => {
        /// Runs the owner plan in the caller's transaction (see `store::owners`).
        pub(crate) async fn namespace_owners_in(
            conn: &mut $conn,
            plan: &crate::store::owners::OwnerPlan,
        ) -> Result<crate::store::owners::OwnerOutcome, StoreError> {
            use crate::store::owners::{MARKER, OwnerOutcome};
            let recorded: Option<String> =
                sqlx::query_scalar("SELECT value FROM a2a_meta WHERE key = $1")
                    .bind(MARKER)
                    .fetch_optional(&mut *conn)
                    .await
                    .map_err(db)?;
            if let Some(decision) = recorded {
                return Ok(OwnerOutcome::AlreadyDecided(decision));
            }
            let (mut rows, mut kept_tasks) = (0, 0);
            if let Some(rewrite) = &plan.rewrite {
                let keep = serde_json::to_string(&rewrite.keep)
                    .map_err(|e| StoreError::Backend(e.to_string()))?;
                let kept: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "SELECT count(*) FROM a2a_tasks WHERE owner IN ({})",
                    $keep_set
                )))
                .bind(&rewrite.prefix)
                .bind(&keep)
                .fetch_one(&mut *conn)
                .await
                .map_err(db)?;
                kept_tasks = u64::try_from(kept).unwrap_or(0);
                for table in $tables {
                    let sql = format!(
                        "UPDATE {table} SET owner = $1 || owner \
                         WHERE owner NOT IN ({}) \
                         AND substr(owner, 1, length($1)) <> $1",
                        $keep_set
                    );
                    // Table names from `$tables` only; values are bound.
                    rows += sqlx::query(sqlx::AssertSqlSafe(sql))
                        .bind(&rewrite.prefix)
                        .bind(&keep)
                        .execute(&mut *conn)
                        .await
                        .map_err(db)?
                        .rows_affected();
                }
            }
            sqlx::query("INSERT INTO a2a_meta (key, value) VALUES ($1, $2)")
                .bind(MARKER)
                .bind(&plan.decision)
                .execute(&mut *conn)
                .await
                .map_err(db)?;
            Ok(OwnerOutcome::Decided { rows, kept_tasks })
        }
    };
}

pub(crate) use sql_owners;
