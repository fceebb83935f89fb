//! In-process task store (tests, demos, `store.url = "memory:"`). Nothing survives
//! a restart.
//!
//! **Chunk runs.** A streamed reply is mostly artifact chunks that each add a few
//! words of text to the artifact of the event before them. The store keeps such a
//! chunk as its text and `lastChunk` flag only ([`Logged::Chunk`], about 60 bytes
//! with the text) instead of the whole event the driver published (about 700 bytes
//! in six allocations: the event, its task, context and artifact ids, its parts);
//! the published event is freed once its subscribers have it. Reads give every
//! event back whole, equal to the one appended, with its own number, in order: the
//! task and context ids are the task's, the artifact id is that of the run's first
//! event, kept whole ([`Entry::run_head`]). Nothing else changes: an append is in the
//! store before its events are published, and an event that is not exactly such a
//! chunk (metadata, a name, several parts, a media type, another artifact, ...) is
//! kept as published.

pub mod push;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{
    PageCursor, StoreError, StoredEvent, TaskHead, TaskPage, TaskQuery, TaskRecord, TaskStore,
    projection,
};
use crate::protocol::time::Timestamp;
use crate::protocol::{
    Artifact, Part, PartContent, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState,
};
use crate::scope::{Scope, TaskKey};

#[derive(Debug)]
struct Entry {
    task: Task,
    /// Event number `i + 1` at index `i`.
    events: Vec<Logged>,
    /// The index in `events` of the [`Logged::Shared`] artifact update that heads
    /// the run the last event belongs to (the artifact a next chunk may continue),
    /// or `None` when the last event is not an artifact update.
    run_head: Option<usize>,
}

/// One event of a task's log as the memory store keeps it (see the module docs).
#[derive(Debug)]
enum Logged {
    /// The event as the driver published it (shared with its subscribers).
    Shared(Arc<StoredEvent>),
    /// An artifact update with `append: true` and nothing but one plain text part,
    /// continuing the artifact of its run's head: the rest of the event is the
    /// task's (`taskId`, `contextId`) and the head's (`artifactId`).
    Chunk { text: Box<str>, last_chunk: bool },
}

impl Entry {
    fn new(task: Task) -> Self {
        Self {
            task,
            events: Vec::new(),
            run_head: None,
        }
    }

    /// Folds `events[folded..]` into the snapshot (a new entry's snapshot was made
    /// from its first event), cuts a final snapshot's vectors to size, and logs every
    /// event of `events`.
    fn record(&mut self, events: &[Arc<StoredEvent>], folded: usize) {
        for e in &events[folded..] {
            projection::apply_to(&mut self.task, &e.event);
        }
        shrink_if_final(&mut self.task);
        events.iter().for_each(|e| self.log(e));
    }

    /// Logs `e` as the next event, as a [`Logged::Chunk`] where it is one.
    fn log(&mut self, e: &Arc<StoredEvent>) {
        let StreamResponse::ArtifactUpdate(update) = &e.event else {
            self.run_head = None;
            self.events.push(Logged::Shared(e.clone()));
            return;
        };
        if let Some(head) = self.run_head
            && let Some(text) = chunk_text(update, &self.task, self.artifact_id(head))
        {
            self.events.push(Logged::Chunk {
                text: text.into(),
                last_chunk: update.last_chunk,
            });
            return;
        }
        self.run_head = Some(self.events.len());
        self.events.push(Logged::Shared(e.clone()));
    }

    /// The artifact id of the run head at `head` (a [`Logged::Shared`] artifact
    /// update by construction).
    fn artifact_id(&self, head: usize) -> &str {
        match &self.events[head] {
            Logged::Shared(e) => match &e.event {
                StreamResponse::ArtifactUpdate(u) => &u.artifact.artifact_id,
                _ => unreachable!("a run head is an artifact update"),
            },
            Logged::Chunk { .. } => unreachable!("a run head is kept whole"),
        }
    }

    /// Events `after + 1 ..` (at most `limit`), whole, ending before the one that
    /// would take them past `max_bytes` (a whole event by its JSON, a chunk kept as its
    /// text by that text; the first event whatever its size).
    fn events_after(&self, after: u64, limit: usize, max_bytes: u64) -> Vec<StoredEvent> {
        let start = usize::try_from(after)
            .unwrap_or(usize::MAX)
            .min(self.events.len());
        let end = start.saturating_add(limit).min(self.events.len());
        // The head of a run the first event continues: the nearest whole event before it.
        let mut head = self.events[..start]
            .iter()
            .rposition(|l| matches!(l, Logged::Shared(_)));
        let mut out = Vec::with_capacity(end - start);
        let mut bytes = 0u64;
        for (i, logged) in self.events[start..end].iter().enumerate() {
            let seq = (start + i) as u64 + 1;
            let size = match logged {
                Logged::Shared(e) => e.json().map_or(0, str::len),
                Logged::Chunk { text, .. } => text.len(),
            } as u64;
            bytes = bytes.saturating_add(size);
            if bytes > max_bytes && !out.is_empty() {
                break;
            }
            match logged {
                Logged::Shared(e) => {
                    head = Some(start + i);
                    out.push(StoredEvent::clone(e));
                }
                Logged::Chunk { text, last_chunk } => {
                    let artifact_id = self.artifact_id(head.expect("a chunk follows its run head"));
                    out.push(StoredEvent::new(
                        seq,
                        chunk_event(&self.task, artifact_id, text, *last_chunk),
                    ));
                }
            }
        }
        out
    }
}

/// The text of `update` when it is exactly a plain text chunk appended to artifact
/// `run_artifact` of `task` (so that [`chunk_event`] makes it again).
fn chunk_text<'a>(
    update: &'a TaskArtifactUpdateEvent,
    task: &Task,
    run_artifact: &str,
) -> Option<&'a str> {
    let a = &update.artifact;
    let [part] = a.parts.as_slice() else {
        return None;
    };
    let whole = update.append
        && update.metadata.is_none()
        && update.task_id == task.id
        && update.context_id == task.context_id
        && a.artifact_id == run_artifact
        && a.name.is_none()
        && a.description.is_none()
        && a.metadata.is_none()
        && a.extensions.is_empty()
        && part.media_type.is_none()
        && part.filename.is_none()
        && part.metadata.is_none();
    match &part.content {
        PartContent::Text(t) if whole => Some(t),
        _ => None,
    }
}

/// The artifact update a [`Logged::Chunk`] stands for.
fn chunk_event(task: &Task, artifact_id: &str, text: &str, last_chunk: bool) -> StreamResponse {
    StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        artifact: Artifact {
            artifact_id: artifact_id.to_owned(),
            name: None,
            description: None,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: Vec::new(),
        },
        append: true,
        last_chunk,
        metadata: None,
    })
}

/// Cuts the history and artifact vectors of a task in a final state to their
/// length: it takes no more events, and a vector grows to a capacity of 4 with its
/// first element (a hello-world task kept 1.3 KB of its 5.5 KB as spare capacity,
/// BENCHMARKS.md, issue 14, fourteenth pass).
fn shrink_if_final(task: &mut Task) {
    if task.status.state.is_terminal() {
        if let Some(history) = &mut task.history {
            history.shrink_to_fit();
        }
        if let Some(artifacts) = &mut task.artifacts {
            artifacts.shrink_to_fit();
        }
    }
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
    push: push::MemoryPush,
    /// Upstream links ([`TaskStore::put_upstream_link`]), deleted with their task.
    links: Mutex<std::collections::HashMap<(Scope, String), crate::executor::UpstreamLink>>,
}

impl Default for MemoryTaskStore {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: std::hash::RandomState::new(),
            push: Default::default(),
            links: Mutex::default(),
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
    fn each_shard_up_to(&self, limit: usize, keep: impl Fn(&Entry) -> bool) -> Vec<TaskKey> {
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

/// A copy of `task`, with its artifacts only when `keep` (they are not copied
/// to be dropped).
fn without_artifacts(task: &Task, keep: bool) -> Task {
    if keep {
        return task.clone();
    }
    let Task {
        id,
        context_id,
        status,
        artifacts: _,
        history,
        metadata,
    } = task;
    Task {
        id: id.clone(),
        context_id: context_id.clone(),
        status: status.clone(),
        artifacts: None,
        history: history.clone(),
        metadata: metadata.clone(),
    }
}

/// The length in bytes of `task` as compact JSON (what a ListTasks page's byte
/// bound counts on this store), without keeping the text.
fn json_len(task: &Task) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Serializing a Task to a writer that cannot fail does not fail.
    let _ = serde_json::to_writer(&mut count, task);
    count.0
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
                let task = projection::apply(None, &events[0].event).ok_or_else(|| {
                    StoreError::InvalidEvent("the first event of a task must be a Task".into())
                })?;
                let mut entry = Box::new(Entry::new(task));
                entry.record(events, 1);
                tasks.insert(key, entry);
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
                entry.record(events, 0);
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

    async fn head(&self, scope: &Scope, task_id: &str) -> Result<Option<TaskHead>, StoreError> {
        let tasks = self.lock(scope, task_id);
        Ok(tasks
            .get(&(scope.clone(), task_id.to_owned()))
            .map(|e| TaskHead {
                state: e.task.status.state,
                last_seq: e.events.len() as u64,
            }))
    }

    async fn events_after(
        &self,
        scope: &Scope,
        task_id: &str,
        after: u64,
        limit: usize,
        max_bytes: u64,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let tasks = self.lock(scope, task_id);
        Ok(tasks
            .get(&(scope.clone(), task_id.to_owned()))
            .map(|e| e.events_after(after, limit, max_bytes))
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
        let budget = query.max_bytes.unwrap_or(u64::MAX);
        let (mut tasks, mut used, mut next) = (Vec::new(), 0u64, None);
        let mut cut = false;
        for (m, t) in hits[start..].iter().take(query.page_size) {
            // Counted as stored, as on the SQL stores: before historyLength applies.
            let task = without_artifacts(t, query.include_artifacts);
            let size = json_len(&task);
            if !tasks.is_empty() && used.saturating_add(size) > budget {
                cut = true;
                break;
            }
            used = used.saturating_add(size);
            next = Some(PageCursor {
                status_millis: *m,
                id: t.id.clone(),
            });
            tasks.push(shape_for_list(task, query));
        }
        let more = cut || start + tasks.len() < hits.len();
        Ok(TaskPage {
            tasks,
            next: if more { next } else { None },
            total,
        })
    }

    async fn unsettled(&self, limit: usize) -> Result<Vec<TaskKey>, StoreError> {
        Ok(self.each_shard_up_to(limit, |e| {
            matches!(
                e.task.status.state,
                TaskState::Submitted | TaskState::Working
            )
        }))
    }

    async fn put_upstream_link(
        &self,
        scope: &Scope,
        task_id: &str,
        link: &crate::executor::UpstreamLink,
    ) -> Result<(), StoreError> {
        self.links
            .lock()
            .expect("links lock")
            .insert((scope.clone(), task_id.to_owned()), link.clone());
        Ok(())
    }

    async fn upstream_link(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Option<crate::executor::UpstreamLink>, StoreError> {
        Ok(self
            .links
            .lock()
            .expect("links lock")
            .get(&(scope.clone(), task_id.to_owned()))
            .cloned())
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
                    self.links
                        .lock()
                        .expect("links lock")
                        .remove(&(scope.clone(), id.clone()));
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
    ) -> Result<Vec<TaskKey>, StoreError> {
        let bound = older_than.timestamp_millis();
        Ok(self.each_shard_up_to(limit, |e| {
            e.task.status.state == TaskState::InputRequired && status_millis(&e.task) < bound
        }))
    }

    fn push_store(&self) -> Option<&dyn super::PushStore> {
        Some(&self.push)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::{chunk, status, task_at};

    /// The snapshot of a task that ended keeps no spare capacity in its history and
    /// artifacts; one still running grows them as usual.
    #[tokio::test]
    async fn a_final_snapshot_keeps_no_spare_capacity() {
        let store = MemoryTaskStore::new();
        let scope = Scope::new("t", "alice");
        let now = crate::protocol::time::now();
        let events = [
            StreamResponse::Task(task_at("x", "ctx", now)),
            status("x", "ctx", TaskState::Working, now),
            chunk("x", "ctx", "hello", false, true),
            status("x", "ctx", TaskState::Completed, now),
        ];
        let stored: Vec<Arc<StoredEvent>> = events
            .iter()
            .enumerate()
            .map(|(i, e)| Arc::new(StoredEvent::new(i as u64 + 1, e.clone())))
            .collect();
        let spare = |store: &MemoryTaskStore| {
            let tasks = store.lock(&scope, "x");
            let task = &tasks[&(scope.clone(), "x".to_owned())].task;
            let h = task.history.as_ref().unwrap();
            let a = task.artifacts.as_ref().unwrap();
            (h.len(), h.capacity() - h.len(), a.capacity() - a.len())
        };
        store.append_all(&scope, "x", &stored[..3]).await.unwrap();
        let (len, history_spare, artifacts_spare) = spare(&store);
        assert_eq!(len, 2);
        assert!(
            history_spare > 0 && artifacts_spare > 0,
            "grown as usual while working"
        );
        store.append_all(&scope, "x", &stored[3..]).await.unwrap();
        assert_eq!(spare(&store), (3, 0, 0));
        let got = store.get(&scope, "x").await.unwrap().unwrap();
        assert_eq!(got.task.status.state, TaskState::Completed);
        assert_eq!(got.task.history.unwrap().len(), 3);
    }

    #[tokio::test]
    async fn conformance() {
        super::super::conformance::run_all(&MemoryTaskStore::new()).await;
    }

    /// Plain chunks continuing their run are kept as text only, anything else whole,
    /// and every event reads back equal to the one appended.
    #[tokio::test]
    async fn plain_chunks_are_kept_as_text() {
        let store = MemoryTaskStore::new();
        let scope = Scope::new("t", "alice");
        let now = crate::protocol::time::now();
        let plain = |text: &str| {
            let mut c = chunk("x", "ctx", text, true, false);
            if let StreamResponse::ArtifactUpdate(u) = &mut c {
                u.artifact.name = None;
            }
            c
        };
        let mut events = vec![
            StreamResponse::Task(task_at("x", "ctx", now)),
            chunk("x", "ctx", "first", false, false),
        ];
        events.extend((0..10).map(|i| plain(&format!("a{i}"))));
        let mut with_meta = plain("meta");
        if let StreamResponse::ArtifactUpdate(u) = &mut with_meta {
            u.metadata = Some(serde_json::from_value(serde_json::json!({"k": 1})).unwrap());
        }
        events.push(with_meta);
        events.extend((0..5).map(|i| plain(&format!("b{i}"))));
        let stored: Vec<Arc<StoredEvent>> = events
            .iter()
            .enumerate()
            .map(|(i, e)| Arc::new(StoredEvent::new(i as u64 + 1, e.clone())))
            .collect();
        store.append_all(&scope, "x", &stored[..3]).await.unwrap();
        store.append_all(&scope, "x", &stored[3..]).await.unwrap();
        {
            let tasks = store.lock(&scope, "x");
            let entry = &tasks[&(scope.clone(), "x".to_owned())];
            let kept_as_text = entry
                .events
                .iter()
                .filter(|l| matches!(l, Logged::Chunk { .. }))
                .count();
            assert_eq!(kept_as_text, 15);
        }
        for after in 0..=events.len() {
            let got = store
                .events_after(&scope, "x", after as u64, 4, u64::MAX)
                .await
                .unwrap();
            let want: Vec<(u64, &StreamResponse)> = events
                .iter()
                .enumerate()
                .skip(after)
                .take(4)
                .map(|(i, e)| (i as u64 + 1, e))
                .collect();
            assert_eq!(
                got.iter().map(|e| (e.seq, &e.event)).collect::<Vec<_>>(),
                want,
                "after {after}"
            );
        }
    }
}
