//! [`Links`]: which task and context of the agent each gateway task is (gateway ids are
//! never the agent's), so that a follow-up message (INPUT_REQUIRED, or a new message
//! in the same context) goes to the same task and context of the agent, and a cancel
//! to its task.
//!
//! Kept in this process's memory: after a restart a follow-up starts a new task of the
//! agent (the durable mapping in the task store is not done yet).

use std::collections::HashMap;
use std::sync::Mutex;

/// The agent's side of one gateway task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamTask {
    /// The agent's task id.
    pub task_id: String,
    /// The agent's context id.
    pub context_id: String,
}

/// Most contexts remembered; past it the map starts over (a new message in a forgotten
/// context starts a new context of the agent).
const MAX_CONTEXTS: usize = 65_536;

/// The mapping gateway task → agent task, and gateway context → agent context (per
/// caller scope).
#[derive(Debug, Default)]
pub struct Links {
    tasks: Mutex<HashMap<String, UpstreamTask>>,
    contexts: Mutex<HashMap<String, String>>,
}

/// The key of a gateway context: the same context id of two callers is two contexts.
pub fn context_key(tenant: &str, owner: &str, context_id: &str) -> String {
    format!("{}:{tenant}\u{0}{owner}\u{0}{context_id}", tenant.len())
}

impl Links {
    /// The agent's task behind gateway task `task_id`.
    pub fn task(&self, task_id: &str) -> Option<UpstreamTask> {
        self.tasks.lock().expect("links").get(task_id).cloned()
    }

    /// The agent's context behind the gateway context `key` ([`context_key`]).
    pub fn context(&self, key: &str) -> Option<String> {
        self.contexts.lock().expect("links").get(key).cloned()
    }

    /// Records that gateway task `task_id` (in the context `key`) is `upstream`.
    pub fn link(&self, task_id: &str, key: &str, upstream: &UpstreamTask) {
        self.tasks
            .lock()
            .expect("links")
            .insert(task_id.to_owned(), upstream.clone());
        let mut contexts = self.contexts.lock().expect("links");
        if contexts.len() >= MAX_CONTEXTS {
            contexts.clear();
        }
        contexts.insert(key.to_owned(), upstream.context_id.clone());
    }

    /// Forgets gateway task `task_id` (it ended; its context stays).
    pub fn forget(&self, task_id: &str) {
        self.tasks.lock().expect("links").remove(task_id);
    }
}
