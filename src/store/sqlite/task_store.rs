//! [`TaskStore`] on SQLite: appends through the writer lane, reads on the reader pool
//! with the statements shared with PostgreSQL ([`crate::store::sql::reads`]).

use std::sync::Arc;

use async_trait::async_trait;
use sqlx::Row;

use super::SqliteTaskStore;
use super::open::writable;
use crate::protocol::time::Timestamp;
use crate::protocol::{StreamResponse, Task, TaskState};
use crate::scope::{Scope, TaskKey};
use crate::store::memory::shape_for_list;
use crate::store::sql::{db, fold_artifacts, from_json, purge, to_i64, to_u64};
use crate::store::{
    FoldedArtifacts, PageCursor, StoreError, StoredEvent, TaskHead, TaskPage, TaskQuery,
    TaskRecord, TaskStore,
};

crate::store::sql::reads::sql_reads!(sqlx::SqliteConnection, sqlx::sqlite::SqliteRow);
crate::store::sql::purge::sql_purge!(sqlx::SqliteConnection, "LIMIT $6 + 0");
crate::store::sql::links::sql_links!(sqlx::SqliteConnection);
crate::store::owners::sql_owners!(
    sqlx::SqliteConnection,
    crate::store::owners::OWNER_TABLES,
    "SELECT value FROM json_each($2)"
);

#[async_trait]
impl TaskStore for SqliteTaskStore {
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
        let mut conn = self.reader.acquire().await.map_err(db)?;
        read_task(&mut conn, scope, task_id).await
    }

    async fn head(&self, scope: &Scope, task_id: &str) -> Result<Option<TaskHead>, StoreError> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
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
        let mut conn = self.reader.acquire().await.map_err(db)?;
        read_events_after(&mut conn, scope, task_id, after, limit, max_bytes).await
    }

    async fn list(&self, scope: &Scope, query: &TaskQuery) -> Result<TaskPage, StoreError> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
        read_list(&mut conn, scope, query).await
    }

    async fn unsettled(&self, limit: usize) -> Result<Vec<TaskKey>, StoreError> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
        read_unsettled(&mut conn, limit).await
    }

    async fn purge_expired(&self, older_than: Timestamp, batch: usize) -> Result<u64, StoreError> {
        purge::in_batches(batch, |batch| async move {
            let mut tx = self
                .writer
                .begin_with("BEGIN IMMEDIATE")
                .await
                .map_err(db)?;
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
        let mut conn = self.reader.acquire().await.map_err(db)?;
        read_expired_input_required(&mut conn, older_than, limit).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        writable(&self.writer).await
    }

    async fn namespace_owners(
        &self,
        plan: &crate::store::owners::OwnerPlan,
    ) -> Result<crate::store::owners::OwnerOutcome, StoreError> {
        // One process per file (the store lock) and `BEGIN IMMEDIATE`: nobody else
        // writes between the marker's read and its insert.
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db)?;
        let outcome = namespace_owners_in(&mut tx, plan).await?;
        tx.commit().await.map_err(db)?;
        Ok(outcome)
    }

    async fn put_upstream_link(
        &self,
        scope: &Scope,
        task_id: &str,
        link: &crate::executor::UpstreamLink,
    ) -> Result<(), StoreError> {
        let mut conn = self.writer.acquire().await.map_err(db)?;
        put_link(&mut conn, scope, task_id, link).await
    }

    async fn upstream_link(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Option<crate::executor::UpstreamLink>, StoreError> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
        read_link(&mut conn, scope, task_id).await
    }

    async fn close(&self) {
        SqliteTaskStore::close(self).await;
    }

    fn push_store(&self) -> Option<&dyn crate::store::PushStore> {
        Some(&self.push)
    }
}
