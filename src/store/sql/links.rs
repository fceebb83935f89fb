//! The upstream links of the SQL stores ([`TaskStore::put_upstream_link`],
//! [`TaskStore::upstream_link`]), written once for SQLite and PostgreSQL (table
//! `a2a_upstream_links`, migrations 0006 and 0007).
//!
//! [`TaskStore::put_upstream_link`]: crate::store::TaskStore::put_upstream_link
//! [`TaskStore::upstream_link`]: crate::store::TaskStore::upstream_link

/// Defines, in the calling module, `put_link(conn, scope, task_id, link)` and
/// `read_link(conn, scope, task_id)` on a connection of type `$conn`. The calling module
/// imports `Scope`, `StoreError` and `db`.
macro_rules! sql_links {
    ($conn:ty) => {
        /// Records (or replaces) the upstream link of a task (see `store::sql::links`).
        pub(crate) async fn put_link(
            conn: &mut $conn,
            scope: &Scope,
            task_id: &str,
            link: &crate::executor::UpstreamLink,
        ) -> Result<(), StoreError> {
            sqlx::query(
                "INSERT INTO a2a_upstream_links \
                 (agent, tenant, owner, task_id, upstream_task_id, upstream_context_id, \
                  session_id) \
                 VALUES ($7, $1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (agent, tenant, owner, task_id) DO UPDATE SET \
                 upstream_task_id = excluded.upstream_task_id, \
                 upstream_context_id = excluded.upstream_context_id, \
                 session_id = excluded.session_id",
            )
            .bind(&scope.tenant)
            .bind(&scope.owner)
            .bind(task_id)
            .bind(&link.upstream_task_id)
            .bind(&link.upstream_context_id)
            .bind(&link.session_id)
            .bind(&scope.agent)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
            Ok(())
        }

        /// The upstream link of a task, if recorded (see `store::sql::links`).
        pub(crate) async fn read_link(
            conn: &mut $conn,
            scope: &Scope,
            task_id: &str,
        ) -> Result<Option<crate::executor::UpstreamLink>, StoreError> {
            let row: Option<(String, String, String)> = sqlx::query_as(
                "SELECT upstream_task_id, upstream_context_id, session_id \
                 FROM a2a_upstream_links \
                 WHERE agent = $4 AND tenant = $1 AND owner = $2 AND task_id = $3",
            )
            .bind(&scope.tenant)
            .bind(&scope.owner)
            .bind(task_id)
            .bind(&scope.agent)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db)?;
            Ok(
                row.map(|(upstream_task_id, upstream_context_id, session_id)| {
                    crate::executor::UpstreamLink {
                        upstream_task_id,
                        upstream_context_id,
                        session_id,
                    }
                }),
            )
        }
    };
}

pub(crate) use sql_links;
