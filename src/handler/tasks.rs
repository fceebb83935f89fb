//! GetTask, ListTasks and CancelTask (spec §3.1.3-§3.1.5): the caller's tasks as
//! stored, and the cancel of one through its driver.

use super::driver::command::{Command, TaskKey, already_ended};
use super::request_handler::RequestHandler;
use super::validation::{
    DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, check_call, check_id, history_length, non_empty,
};
use crate::error::A2aError;
use crate::executor::CallContext;
use crate::protocol::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse, Task, TaskState,
};
use crate::scope::Scope;
use crate::store::{PageCursor, TaskQuery};

impl RequestHandler {
    /// GetTask (spec §3.1.3).
    ///
    /// # Errors
    /// TaskNotFound (also for another caller's task), InvalidParams (negative
    /// historyLength), ExtensionSupportRequired, Internal.
    pub async fn get_task(
        &self,
        call: &CallContext,
        req: GetTaskRequest,
    ) -> Result<Task, A2aError> {
        check_call(call)?;
        self.check_extensions(call)?;
        let hl = history_length(req.history_length)?;
        check_id("id", &req.id)?;
        let mut task = self.load(&Scope::from(call), &req.id).await?.task;
        task.apply_history_length(hl);
        Ok(task)
    }

    /// ListTasks (spec §3.1.4): the caller's tasks, newest status first, keyset-paged.
    /// A page holds at most `pageSize` tasks, and fewer when their stored JSON would
    /// pass [`HandlerConfig::max_list_page_bytes`](super::HandlerConfig::max_list_page_bytes) (artifacts count only with
    /// `includeArtifacts`): it then ends early with a `nextPageToken`, so a caller
    /// paging on gets every task once; a page always holds at least one task.
    ///
    /// # Errors
    /// InvalidParams (pageSize outside 1..=100, bad pageToken, negative
    /// historyLength), ExtensionSupportRequired, Internal.
    pub async fn list_tasks(
        &self,
        call: &CallContext,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, A2aError> {
        check_call(call)?;
        self.check_extensions(call)?;
        check_id("contextId", req.context_id.as_deref().unwrap_or(""))?;
        let page_size = req.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
        if !(1..=MAX_PAGE_SIZE).contains(&page_size) {
            return Err(A2aError::InvalidParams(format!(
                "pageSize must be between 1 and {MAX_PAGE_SIZE}, got {page_size}"
            )));
        }
        let cursor = match non_empty(&req.page_token) {
            None => None,
            Some(t) => Some(PageCursor::decode(t).ok_or_else(|| {
                A2aError::InvalidParams("pageToken is not a token this server issued".into())
            })?),
        };
        let query = TaskQuery {
            context_id: non_empty(&req.context_id).map(str::to_owned),
            status: req.status.filter(|s| *s != TaskState::Unspecified),
            status_timestamp_after: req.status_timestamp_after,
            page_size: page_size as usize,
            cursor,
            include_artifacts: req.include_artifacts.unwrap_or(false),
            history_length: history_length(req.history_length)?,
            max_bytes: Some(self.inner.config.max_list_page_bytes),
        };
        let page = self
            .inner
            .store
            .list(&Scope::from(call), &query)
            .await
            .map_err(A2aError::internal)?;
        Ok(ListTasksResponse {
            tasks: page.tasks,
            next_page_token: page.next.map(|c| c.encode()).unwrap_or_default(),
            page_size,
            total_size: i32::try_from(page.total).unwrap_or(i32::MAX),
        })
    }

    /// CancelTask (spec §3.1.5): calls the executor's `cancel`, aborts the run and
    /// leaves the task CANCELED. Cancel is idempotent: repeating it on a CANCELED
    /// task returns that task again, without calling the executor.
    ///
    /// # Errors
    /// TaskNotFound, TaskNotCancelable (a task that ended COMPLETED, FAILED or
    /// REJECTED), ExtensionSupportRequired, Internal.
    pub async fn cancel_task(
        &self,
        call: &CallContext,
        req: CancelTaskRequest,
    ) -> Result<Task, A2aError> {
        check_call(call)?;
        self.check_extensions(call)?;
        check_id("id", &req.id)?;
        let scope = Scope::from(call);
        let rec = self.load(&scope, &req.id).await?;
        if rec.task.status.state.is_terminal() {
            return already_ended(rec.task);
        }
        let key = (scope, req.id.clone());
        if let Some(c) = self.inner.cluster() {
            return self.cancel_in_cluster(c, key).await;
        }
        self.cancel_here(&key).await
    }

    /// CancelTask through this instance's driver of the task.
    pub(super) async fn cancel_here(&self, key: &TaskKey) -> Result<Task, A2aError> {
        self.ask(key, false, |reply| Ok(Command::Cancel(reply)))
            .await
    }
}
