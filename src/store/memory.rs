//! In-process task store (tests, demos, `store.url = "memory:"`). Nothing survives
//! a restart.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{
    PageCursor, Scope, StoreError, StoredEvent, TaskPage, TaskQuery, TaskRecord, TaskStore,
    projection,
};
use crate::protocol::time::Timestamp;
use crate::protocol::{Task, TaskState};

#[derive(Debug)]
struct Entry {
    task: Task,
    events: Vec<Arc<StoredEvent>>,
}

/// Shards of a [`MemoryTaskStore`]: each task lives in the shard its key hashes to.
const SHARDS: usize = 64;

/// Entries are boxed so that a resize moves a key and a pointer per task, not the
/// task itself (about 420 bytes).
type Shard = HashMap<(Scope, String), Box<Entry>>;

/// A [`TaskStore`] in process memory: the tasks in [`SHARDS`] maps, each behind its
/// own mutex. Sharded, with boxed entries, so that a map growing under load (the
/// store keeps every task until the retention purge) resizes one small shard at a
/// time: a single map of a few hundred thousand tasks moved about 100 MB while
/// holding its one lock, and every request waited for it (the p99 spikes of 0.15-0.4
/// s in BENCHMARKS.md).
#[derive(Debug)]
pub struct MemoryTaskStore {
    shards: Box<[Mutex<Shard>]>,
    hasher: std::hash::RandomState,
    push: crate::push::memory::MemoryPush,
}

impl Default for MemoryTaskStore {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: std::hash::RandomState::new(),
            push: Default::default(),
        }
    }
}

impl MemoryTaskStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The shard holding the task `(scope, task_id)`, locked.
    fn lock(&self, scope: &Scope, task_id: &str) -> std::sync::MutexGuard<'_, Shard> {
        use std::hash::BuildHasher;
        let i = self.hasher.hash_one((scope, task_id)) as usize % self.shards.len();
        lock(&self.shards[i])
    }

    /// Every shard, locked in order (the only order in which several are held).
    fn lock_all(&self) -> Vec<std::sync::MutexGuard<'_, Shard>> {
        self.shards.iter().map(lock).collect()
    }

    /// The keys of up to `limit` tasks that `keep` selects, one shard locked at a time:
    /// not one snapshot of the whole store, which the sweeps using it do not need (a
    /// task may change right after it is listed, as with any read).
    fn each_shard_up_to(
        &self,
        limit: usize,
        keep: impl Fn(&Entry) -> bool,
    ) -> Vec<(Scope, String)> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            if out.len() >= limit {
                break;
            }
            let tasks = lock(shard);
            out.extend(
                tasks
                    .iter()
                    .filter(|(_, e)| keep(e))
                    .take(limit - out.len())
                    .map(|((s, id), _)| (s.clone(), id.clone())),
            );
        }
        out
    }
}

fn lock(shard: &Mutex<Shard>) -> std::sync::MutexGuard<'_, Shard> {
    shard.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn status_millis(task: &Task) -> i64 {
    task.status
        .timestamp
        .map(|t| t.timestamp_millis())
        .unwrap_or(0)
}

/// Shapes a stored snapshot for a ListTasks page.
pub(crate) fn shape_for_list(mut task: Task, query: &TaskQuery) -> Task {
    if !query.include_artifacts {
        task.artifacts = None;
    }
    task.apply_history_length(query.history_length);
    task
}

/// Whether a snapshot passes the ListTasks filters (not the cursor).
pub(crate) fn matches(task: &Task, query: &TaskQuery) -> bool {
    query
        .context_id
        .as_ref()
        .is_none_or(|c| &task.context_id == c)
        && query
            .status
            .is_none_or(|s| s == TaskState::Unspecified || task.status.state == s)
        && query
            .status_timestamp_after
            .is_none_or(|t| status_millis(task) >= t.timestamp_millis())
}

#[async_trait]
impl TaskStore for MemoryTaskStore {
    async fn append_all(
        &self,
        scope: &Scope,
        task_id: &str,
        events: &[Arc<StoredEvent>],
    ) -> Result<(), StoreError> {
        let Some(seq) = super::first_seq(events)? else {
            return Ok(());
        };
        let mut tasks = self.lock(scope, task_id);
        let key = (scope.clone(), task_id.to_owned());
        match tasks.get_mut(&key) {
            None if seq == 1 => {
                let mut task = projection::apply(None, &events[0].event).ok_or_else(|| {
                    StoreError::InvalidEvent("the first event of a task must be a Task".into())
                })?;
                for e in &events[1..] {
                    task = projection::apply(Some(task), &e.event).expect("existing task");
                }
                tasks.insert(
                    key,
                    Box::new(Entry {
                        task,
                        events: events.to_vec(),
                    }),
                );
                self.push.enqueue(scope, task_id, events);
                Ok(())
            }
            None => Err(StoreError::NotFound(task_id.to_owned())),
            Some(entry) => {
                let expected = entry.events.len() as u64 + 1;
                if seq != expected {
                    return Err(StoreError::Conflict {
                        task_id: task_id.to_owned(),
                        expected,
                        got: seq,
                    });
                }
                let mut cur = std::mem::replace(&mut entry.task, placeholder());
                for e in events {
                    cur = projection::apply(Some(cur), &e.event).expect("existing task");
                }
                entry.task = cur;
                entry.events.extend_from_slice(events);
                self.push.enqueue(scope, task_id, events);
                Ok(())
            }
        }
    }

    async fn get(&self, scope: &Scope, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let tasks = self.lock(scope, task_id);
        Ok(tasks
            .get(&(scope.clone(), task_id.to_owned()))
            .map(|e| TaskRecord {
                task: e.task.clone(),
                last_seq: e.events.len() as u64,
            }))
    }

    async fn events_after(
        &self,
        scope: &Scope,
        task_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let tasks = self.lock(scope, task_id);
        Ok(tasks
            .get(&(scope.clone(), task_id.to_owned()))
            .map(|e| {
                e.events
                    .iter()
                    .skip(after as usize)
                    .take(limit)
                    .map(|e| StoredEvent::clone(e))
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn list(&self, scope: &Scope, query: &TaskQuery) -> Result<TaskPage, StoreError> {
        let shards = self.lock_all();
        let mut hits: Vec<(i64, &Task)> = shards
            .iter()
            .flat_map(|s| s.iter())
            .filter(|((s, _), e)| s == scope && matches(&e.task, query))
            .map(|(_, e)| (status_millis(&e.task), &e.task))
            .collect();
        let total = hits.len() as u64;
        hits.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
        let start = match &query.cursor {
            None => 0,
            Some(c) => hits
                .iter()
                .position(|(m, t)| c.is_before(*m, &t.id))
                .unwrap_or(hits.len()),
        };
        let page: Vec<(i64, &Task)> = hits[start..]
            .iter()
            .take(query.page_size)
            .cloned()
            .collect();
        let more = start + page.len() < hits.len();
        let next = if more {
            page.last().map(|(m, t)| PageCursor {
                status_millis: *m,
                id: t.id.clone(),
            })
        } else {
            None
        };
        Ok(TaskPage {
            tasks: page
                .into_iter()
                .map(|(_, t)| shape_for_list(t.clone(), query))
                .collect(),
            next,
            total,
        })
    }

    async fn unsettled(&self, limit: usize) -> Result<Vec<(Scope, String)>, StoreError> {
        Ok(self.each_shard_up_to(limit, |e| {
            matches!(
                e.task.status.state,
                TaskState::Submitted | TaskState::Working
            )
        }))
    }

    async fn purge_expired(&self, older_than: Timestamp, _batch: usize) -> Result<u64, StoreError> {
        let bound = older_than.timestamp_millis();
        let push = &self.push;
        let mut purged = 0;
        for shard in self.shards.iter() {
            let mut tasks = lock(shard);
            let before = tasks.len();
            tasks.retain(|(scope, id), e| {
                let expired = e.task.status.state.is_terminal() && status_millis(&e.task) < bound;
                if expired {
                    push.forget_task(scope, id);
                }
                !expired
            });
            purged += (before - tasks.len()) as u64;
        }
        Ok(purged)
    }

    async fn expired_input_required(
        &self,
        older_than: Timestamp,
        limit: usize,
    ) -> Result<Vec<(Scope, String)>, StoreError> {
        let bound = older_than.timestamp_millis();
        Ok(self.each_shard_up_to(limit, |e| {
            e.task.status.state == TaskState::InputRequired && status_millis(&e.task) < bound
        }))
    }

    fn push_store(&self) -> Option<&dyn crate::push::PushStore> {
        Some(&self.push)
    }
}

fn placeholder() -> Task {
    Task {
        id: String::new(),
        context_id: String::new(),
        status: crate::protocol::TaskStatus {
            state: TaskState::Unspecified,
            message: None,
            timestamp: None,
        },
        artifacts: None,
        history: None,
        metadata: None,
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn conformance() {
        super::super::conformance::run_all(&super::MemoryTaskStore::new()).await;
    }
}
