//! The push-notification config operations (spec §3.1.7-3.1.10) and the inline config
//! of SendMessage: scoped like tasks (another caller's task or config is exactly
//! TaskNotFound), validated by [`PushService::check_config`], kept in the task store,
//! secrets redacted in Get and List answers.

use std::sync::Arc;

use super::request_handler::RequestHandler;
use super::validation::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, check_call, check_id, non_empty};
use crate::error::A2aError;
use crate::executor::{CallContext, new_id};
use crate::protocol::{
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig, TaskPushNotificationConfigRequest,
};
use crate::push::{PushService, redacted};
use crate::scope::Scope;
use crate::store::PushStore;

/// Most configs one task may have.
pub const MAX_CONFIGS_PER_TASK: usize = 32;

impl RequestHandler {
    /// The push service, or PushNotificationNotSupported when push is off.
    fn push_service(&self) -> Result<(&Arc<PushService>, &dyn PushStore), A2aError> {
        let svc = self
            .inner
            .config
            .push
            .as_ref()
            .ok_or(A2aError::PushNotificationNotSupported)?;
        let store = self
            .inner
            .store
            .push_store()
            .ok_or(A2aError::PushNotificationNotSupported)?;
        Ok((svc, store))
    }

    /// What every push-config operation on the caller's task `task_id` checks first,
    /// in this order: the caller's tenant, the required extensions, that push is
    /// offered, the task id; then the operation's own checks of its request (`own`,
    /// whose value is handed back); last, that the task exists and is the caller's.
    /// Returns the caller's scope, the config store and what `own` returned.
    ///
    /// # Errors
    /// InvalidParams, ExtensionSupportRequired, PushNotificationNotSupported, what `own`
    /// returns, TaskNotFound (also for another caller's task), Internal.
    async fn push_config_task<T>(
        &self,
        call: &CallContext,
        task_id: &str,
        own: impl FnOnce() -> Result<T, A2aError>,
    ) -> Result<(Scope, &dyn PushStore, T), A2aError> {
        check_call(call)?;
        self.check_extensions(call)?;
        let (_, store) = self.push_service()?;
        check_id("taskId", task_id)?;
        let own = own()?;
        let scope = Scope::from(call);
        self.head(&scope, task_id).await?;
        Ok((scope, store, own))
    }

    /// The push service, when push notifications are offered.
    pub fn push(&self) -> Option<&Arc<PushService>> {
        self.inner.config.push.as_ref()
    }

    /// Checks and stores `cfg` for `task_id` (which the caller owns or is creating;
    /// `new_task`: the id was just made for a task not stored yet, so it has no configs
    /// to count against [`MAX_CONFIGS_PER_TASK`]).
    pub(super) async fn register_push_config(
        &self,
        scope: &Scope,
        task_id: &str,
        cfg: &TaskPushNotificationConfig,
        new_task: bool,
    ) -> Result<String, A2aError> {
        let (svc, store) = self.push_service()?;
        check_id("id", &cfg.id)?;
        let id = if cfg.id.is_empty() {
            new_id()
        } else {
            cfg.id.clone()
        };
        let stored = svc.check_config(task_id, &id, cfg)?;
        let existing = if new_task {
            Vec::new()
        } else {
            store
                .list_configs(scope, task_id, None, MAX_CONFIGS_PER_TASK)
                .await
                .map_err(A2aError::internal)?
        };
        if existing.len() >= MAX_CONFIGS_PER_TASK && !existing.iter().any(|c| c.id == id) {
            return Err(A2aError::InvalidParams(format!(
                "task {task_id} already has {MAX_CONFIGS_PER_TASK} push notification configs"
            )));
        }
        // Armed first: a commit that sees the config then also sees the arming, so its
        // wake-up is not skipped (a failed put costs at most a spurious wake-up).
        svc.arm();
        store
            .put_config(scope, &stored)
            .await
            .map_err(A2aError::internal)?;
        Ok(id)
    }

    /// The inline `configuration.taskPushNotificationConfig` of a send, decoded.
    pub(super) fn inline_push_config(
        &self,
        v: &serde_json::Value,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        self.push_service()?;
        serde_json::from_value(v.clone()).map_err(|e| {
            A2aError::InvalidParams(format!("configuration.taskPushNotificationConfig: {e}"))
        })
    }

    /// CreateTaskPushNotificationConfig (spec §3.1.7): registers (or replaces, same id)
    /// a webhook for the caller's task. The answer carries the config as registered,
    /// with its id.
    ///
    /// # Errors
    /// PushNotificationNotSupported when push is off; TaskNotFound (also another
    /// caller's task); InvalidParams (URL not https, refused address, control characters
    /// in a header value, too many configs); ExtensionSupportRequired; Internal.
    pub async fn create_push_config(
        &self,
        call: &CallContext,
        mut req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        let (scope, _, ()) = self
            .push_config_task(call, &req.task_id, || {
                if req.task_id.is_empty() {
                    return Err(A2aError::InvalidParams("taskId is required".into()));
                }
                Ok(())
            })
            .await?;
        let task_id = req.task_id.clone();
        req.id = self
            .register_push_config(&scope, &task_id, &req, false)
            .await?;
        req.tenant = non_empty(&Some(call.tenant.clone())).map(str::to_owned);
        Ok(req)
    }

    /// GetTaskPushNotificationConfig (spec §3.1.8), secrets redacted.
    ///
    /// # Errors
    /// PushNotificationNotSupported; TaskNotFound for an unknown (or another caller's)
    /// task; PushConfigNotFound (the same code) for an unknown config of the caller's
    /// task; InvalidParams (an empty config `id`, an id too long); ExtensionSupportRequired;
    /// Internal.
    pub async fn get_push_config(
        &self,
        call: &CallContext,
        req: TaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        let (scope, store, ()) = self
            .push_config_task(call, &req.task_id, || check_config_id(&req.id))
            .await?;
        store
            .get_config(&scope, &req.task_id, &req.id)
            .await
            .map_err(A2aError::internal)?
            .map(|c| redacted(&call.tenant, &c))
            .ok_or_else(|| A2aError::PushConfigNotFound {
                task_id: req.task_id.clone(),
                id: req.id.clone(),
            })
    }

    /// ListTaskPushNotificationConfigs (spec §3.1.9): one page in id order, secrets
    /// redacted.
    ///
    /// # Errors
    /// PushNotificationNotSupported; TaskNotFound; InvalidParams (pageSize outside
    /// 1..=100); ExtensionSupportRequired; Internal.
    pub async fn list_push_configs(
        &self,
        call: &CallContext,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, A2aError> {
        let (scope, store, (page_size, after)) = self
            .push_config_task(call, &req.task_id, || page_of(&req))
            .await?;
        let mut page = store
            .list_configs(&scope, &req.task_id, after, page_size as usize + 1)
            .await
            .map_err(A2aError::internal)?;
        let more = page.len() > page_size as usize;
        page.truncate(page_size as usize);
        let next_page_token = if more {
            page.last().map(|c| c.id.clone()).unwrap_or_default()
        } else {
            String::new()
        };
        Ok(ListTaskPushNotificationConfigsResponse {
            configs: page.iter().map(|c| redacted(&call.tenant, c)).collect(),
            next_page_token,
        })
    }

    /// DeleteTaskPushNotificationConfig (spec §3.1.10): idempotent (an unknown config id
    /// of the caller's task is fine); the config's pending deliveries go with it, so
    /// nothing more is sent for it once this returns (an attempt already on the wire
    /// may still complete).
    ///
    /// # Errors
    /// PushNotificationNotSupported; TaskNotFound (an unknown or another caller's task);
    /// InvalidParams (an empty config `id`, an id too long); ExtensionSupportRequired;
    /// Internal.
    pub async fn delete_push_config(
        &self,
        call: &CallContext,
        req: TaskPushNotificationConfigRequest,
    ) -> Result<(), A2aError> {
        let (scope, store, ()) = self
            .push_config_task(call, &req.task_id, || check_config_id(&req.id))
            .await?;
        store
            .delete_config(&scope, &req.task_id, &req.id)
            .await
            .map_err(A2aError::internal)?;
        if let Ok((svc, _)) = self.push_service() {
            svc.forget();
        }
        Ok(())
    }
}

/// The config `id` of a Get or Delete: required (spec 3.1.8, 3.1.10; an empty proto3
/// string is an unset one), and an id like any other ([`check_id`]).
///
/// # Errors
/// InvalidParams.
fn check_config_id(id: &str) -> Result<(), A2aError> {
    if id.is_empty() {
        return Err(A2aError::InvalidParams(
            "id is required: the id of the push notification config".into(),
        ));
    }
    check_id("id", id)
}

/// The page a ListTaskPushNotificationConfigs asks for: its size (50 when unset or 0)
/// and the config id it starts after (its `pageToken`).
///
/// # Errors
/// InvalidParams: a size outside 1..=100, a token that is no id.
fn page_of(req: &ListTaskPushNotificationConfigsRequest) -> Result<(i32, Option<&str>), A2aError> {
    let page_size = match req.page_size {
        None | Some(0) => DEFAULT_PAGE_SIZE,
        Some(n) if (1..=MAX_PAGE_SIZE).contains(&n) => n,
        Some(n) => {
            return Err(A2aError::InvalidParams(format!(
                "pageSize must be between 1 and {MAX_PAGE_SIZE}, got {n}"
            )));
        }
    };
    let after = non_empty(&req.page_token);
    check_id("pageToken", after.unwrap_or(""))?;
    Ok((page_size, after))
}
