//! [`Links`]: which task and context of the agent each gateway task is (gateway ids are
//! never the agent's), so that a follow-up message (INPUT_REQUIRED, or a new message
//! in the same context) goes to the same task and context of the agent, and a cancel
//! to its task.
//!
//! A task's link is kept in this process and, once the handler handed the executor the
//! task store's [`UpstreamLinks`], durably with the task (migration 0006): a follow-up
//! or a cancel after a restart, or on another instance, still reaches the agent's task.
//! The context map (a new task in a context the agent already knows) is this process's
//! only.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use crate::executor::{UpstreamLink, UpstreamLinks};
use crate::scope::Scope;

/// The agent's side of one gateway task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamTask {
    /// The agent's task id.
    pub task_id: String,
    /// The agent's context id.
    pub context_id: String,
}

/// Most entries of either in-process map; past it the map starts over (the durable
/// links stay; a new message in a forgotten context starts a new context of the agent).
const MAX_ENTRIES: usize = 65_536;

/// The mapping gateway task → agent task, and gateway context → agent context (per
/// caller scope).
#[derive(Debug, Default)]
pub struct Links {
    tasks: Mutex<HashMap<String, UpstreamTask>>,
    contexts: Mutex<HashMap<String, String>>,
    /// The gateway tasks this process linked per context and has not forgotten yet.
    members: Mutex<HashMap<String, HashSet<String>>>,
    durable: OnceLock<Arc<dyn UpstreamLinks>>,
}

/// The key of a gateway context: the same context id of two callers is two contexts.
pub fn context_key(scope: &Scope, context_id: &str) -> String {
    format!(
        "{}:{}\u{0}{}\u{0}{context_id}",
        scope.tenant.len(),
        scope.tenant,
        scope.owner
    )
}

fn task_key(scope: &Scope, task_id: &str) -> String {
    context_key(scope, task_id)
}

fn bounded_insert<V>(map: &Mutex<HashMap<String, V>>, key: String, value: V) {
    let mut m = map.lock().expect("links");
    if m.len() >= MAX_ENTRIES && !m.contains_key(&key) {
        m.clear();
    }
    m.insert(key, value);
}

impl Links {
    /// Keeps links durably in `durable` from now on (the first call wins).
    pub fn use_durable(&self, durable: Arc<dyn UpstreamLinks>) {
        let _ = self.durable.set(durable);
    }

    /// The agent's task behind gateway task `task_id` of `scope`: from this process,
    /// else from the durable links (a store failure is logged and reads as none).
    pub async fn task(&self, scope: &Scope, task_id: &str) -> Option<UpstreamTask> {
        let key = task_key(scope, task_id);
        if let Some(t) = self.tasks.lock().expect("links").get(&key).cloned() {
            return Some(t);
        }
        let durable = self.durable.get()?;
        match durable.link(scope, task_id).await {
            Ok(Some(l)) => {
                let t = UpstreamTask {
                    task_id: l.upstream_task_id,
                    context_id: l.upstream_context_id,
                };
                bounded_insert(&self.tasks, key, t.clone());
                Some(t)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(task.id = %task_id, reason = %e, "cannot read the task's upstream link");
                None
            }
        }
    }

    /// The agent's context behind the gateway context `context_id` of `scope`.
    pub fn context(&self, scope: &Scope, context_id: &str) -> Option<String> {
        self.contexts
            .lock()
            .expect("links")
            .get(&context_key(scope, context_id))
            .cloned()
    }

    /// Records that gateway task `task_id` (in `context_id` of `scope`) is `upstream`,
    /// whose calls use `session`: in this process, and durably when it is new or
    /// changed (a store failure is logged: the run goes on).
    pub async fn link(
        &self,
        scope: &Scope,
        task_id: &str,
        context_id: &str,
        upstream: &UpstreamTask,
        session: &str,
    ) {
        let key = task_key(scope, task_id);
        let known = self.tasks.lock().expect("links").get(&key) == Some(upstream);
        bounded_insert(
            &self.contexts,
            context_key(scope, context_id),
            upstream.context_id.clone(),
        );
        {
            let mut members = self.members.lock().expect("links");
            let ctx = context_key(scope, context_id);
            if members.len() >= MAX_ENTRIES && !members.contains_key(&ctx) {
                members.clear();
            }
            members.entry(ctx).or_default().insert(task_id.to_owned());
        }
        if known {
            return;
        }
        bounded_insert(&self.tasks, key, upstream.clone());
        if let Some(durable) = self.durable.get() {
            let link = UpstreamLink {
                upstream_task_id: upstream.task_id.clone(),
                upstream_context_id: upstream.context_id.clone(),
                session_id: session.to_owned(),
            };
            if let Err(e) = durable.put_link(scope, task_id, &link).await {
                tracing::warn!(task.id = %task_id, reason = %e, "cannot store the task's upstream link; a follow-up after a restart starts a new task of the agent");
            }
        }
    }

    /// Forgets gateway task `task_id` of `context_id` in this process (it ended; its
    /// durable link goes with the task).
    pub fn forget(&self, scope: &Scope, task_id: &str, context_id: &str) {
        self.tasks
            .lock()
            .expect("links")
            .remove(&task_key(scope, task_id));
        let mut members = self.members.lock().expect("links");
        let ctx = context_key(scope, context_id);
        if let Some(set) = members.get_mut(&ctx) {
            set.remove(task_id);
            if set.is_empty() {
                members.remove(&ctx);
            }
        }
    }

    /// Whether `task_id` is the only task of `context_id` this process linked and has
    /// not forgotten (after a restart nothing is known: `false`).
    pub fn alone_in_context(&self, scope: &Scope, task_id: &str, context_id: &str) -> bool {
        let members = self.members.lock().expect("links");
        members
            .get(&context_key(scope, context_id))
            .is_some_and(|set| set.len() == 1 && set.contains(task_id))
    }
}
