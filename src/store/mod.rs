//! Task storage shaped around an append-only event log per task.
//!
//! Every event a task goes through (its creation as a `Task`, status updates,
//! artifact updates, and user messages that continue it) is appended with a
//! per-task sequence number starting at 1. The task snapshot is a projection of the
//! log ([`projection::apply`]). Every key includes the caller's [`Scope`]
//! (tenant, owner): a task of another caller is indistinguishable from a missing one.
//!
//! The folder:
//! - the traits a store implements: [`TaskStore`] (here), [`PushStore`] (what push
//!   delivery keeps in it, [`push`]) and [`ClusterBackend`] (what several instances
//!   share through it, [`cluster`]);
//! - one folder per backend: [`memory`], [`sqlite`] (open, writes, the trait impl),
//!   [`postgres`] (with its cluster side); and what the SQL ones share: the `sql` module
//!   (table layout, write batches, reads, the retention purge, the push statements);
//! - [`conformance`]: the one suite every backend passes (feature `test-util`);
//! - [`projection`] (events to snapshot), [`open_store`] (a backend from `[store] url`),
//!   [`lock`] (one process per SQLite file), [`owners`] (the owner step of migration
//!   0008).

pub mod cluster;
mod cursor;
pub mod links;
pub mod lock;
pub mod memory;
pub mod open;
pub mod owners;
pub mod postgres;
pub mod projection;
pub mod push;
pub(crate) mod sql;
pub mod sqlite;

#[cfg(any(test, feature = "test-util"))]
pub mod conformance;

pub use cluster::ClusterBackend;
pub use cursor::PageCursor;
pub use links::StoreUpstreamLinks;
pub use memory::MemoryTaskStore;
pub use open::open_store;
pub use postgres::PostgresTaskStore;
pub use push::PushStore;
pub use sqlite::{SqliteTaskStore, Synchronous};

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::executor::UpstreamLink;
use crate::protocol::time::Timestamp;
use crate::protocol::{Artifact, StreamResponse, Task, TaskState};
use crate::scope::{Scope, TaskKey};

/// One entry of a task's event log.
///
/// `event` is a `Task` (creation, seq 1, or a full replacement), a `statusUpdate`, an
/// `artifactUpdate`, or a `message`: a user message appended to the history of an
/// existing task (never sent to stream subscribers).
///
/// An event is shared (`Arc<StoredEvent>`) by the store write, the task's bus and
/// every subscriber. A SQL store makes its JSON text once ([`StoredEvent::json`]) to
/// write it, and the HTTP+JSON and JSON-RPC streams send that same text
/// ([`StoredEvent::cached_json`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredEvent {
    /// Per-task sequence number, 1-based, without gaps.
    pub seq: u64,
    /// The event.
    pub event: StreamResponse,
    /// `event` as JSON text, made on first use.
    #[serde(skip)]
    json: std::sync::OnceLock<String>,
}

impl StoredEvent {
    /// Event number `seq` of its task.
    pub fn new(seq: u64, event: StreamResponse) -> Self {
        Self {
            seq,
            event,
            json: std::sync::OnceLock::new(),
        }
    }

    /// Event number `seq` read back from a store with the JSON text it was stored as
    /// (made by [`StoredEvent::json`] when it was written), so that sending it again
    /// does not serialize it again.
    pub(crate) fn with_json(seq: u64, event: StreamResponse, json: String) -> Self {
        Self {
            seq,
            event,
            json: std::sync::OnceLock::from(json),
        }
    }

    /// [`StoredEvent::json`]'s text if it was made already (by a SQL store's write),
    /// without making it: a stream sends that text rather than serializing the event
    /// again, and an event of the memory store (which keeps its events) never holds
    /// a second copy of itself as text.
    pub fn cached_json(&self) -> Option<&str> {
        self.json.get().map(String::as_str)
    }

    /// The event as compact JSON text (the `StreamResponse` in its HTTP+JSON form,
    /// spec §11.7), serialized on the first call and kept for every later one.
    ///
    /// # Errors
    /// The serializer's error (a map key that is not a string cannot occur in the
    /// protocol types; the error is passed on rather than assumed away).
    pub fn json(&self) -> Result<&str, serde_json::Error> {
        if let Some(j) = self.json.get() {
            return Ok(j);
        }
        let text = serde_json::to_string(&self.event)?;
        // Two threads may race to make it; either text is the same.
        Ok(self.json.get_or_init(|| text))
    }
}

/// Equal when the number and the event are (the cached text does not count).
impl PartialEq for StoredEvent {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq && self.event == other.event
    }
}

/// A task's artifacts once an append's events are folded in, as the task driver that
/// appends them keeps them (`None`: the task has no artifacts); see
/// [`TaskStore::append_all_folded`].
pub type FoldedArtifacts = Arc<Option<Vec<Artifact>>>;

/// A task snapshot and the sequence number of the last event folded into it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// The snapshot, with full history and artifacts.
    pub task: Task,
    /// The last applied event's sequence number.
    pub last_seq: u64,
}

/// What a task is at, without its snapshot: its state and the sequence number of
/// its last event ([`TaskStore::head`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskHead {
    /// The task's current state (`status.state`).
    pub state: TaskState,
    /// The last event's sequence number.
    pub last_seq: u64,
}

/// Filters and paging of a ListTasks call, already validated.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskQuery {
    /// Only this context.
    pub context_id: Option<String>,
    /// Only this state.
    pub status: Option<TaskState>,
    /// Only tasks whose status timestamp is at or after this time.
    pub status_timestamp_after: Option<Timestamp>,
    /// Page size, 1..=100.
    pub page_size: usize,
    /// Start after this position (exclusive).
    pub cursor: Option<PageCursor>,
    /// Keep artifacts in the returned tasks (otherwise `artifacts` is `None`).
    pub include_artifacts: bool,
    /// Apply `historyLength` to each task.
    pub history_length: Option<u32>,
    /// The page's byte bound: the page ends before the task that would take the
    /// tasks it holds past this many bytes (counted as their stored JSON: the task
    /// without artifacts, its whole history included whatever `history_length`
    /// keeps, plus its artifacts when `include_artifacts`), with
    /// [`TaskPage::next`] set; its first task is always included, however large.
    /// `None`: no bound but `page_size`. The handler sets it from
    /// `server.max_list_page_bytes`.
    pub max_bytes: Option<u64>,
}

/// One page of ListTasks, ordered by (status timestamp desc, id asc).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskPage {
    /// The tasks.
    pub tasks: Vec<Task>,
    /// The cursor of the last task when more may follow.
    pub next: Option<PageCursor>,
    /// Tasks matching the filters over all pages.
    pub total: u64,
}

/// A store failure. Its text is logged, never sent to clients.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// `seq` was not the next sequence number (another writer appended first), or a
    /// task with this id already exists.
    #[error("event sequence conflict on task {task_id}: expected {expected}, got {got}")]
    Conflict {
        /// The task.
        task_id: String,
        /// The next free sequence number.
        expected: u64,
        /// The number offered.
        got: u64,
    },
    /// An append to a task that does not exist in this scope (seq > 1).
    #[error("task {0} does not exist")]
    NotFound(String),
    /// The first event of a task was not a `Task`.
    #[error("invalid event: {0}")]
    InvalidEvent(String),
    /// The database failed.
    #[error("database error: {0}")]
    Backend(String),
}

/// The sequence number of the first of `events`, after checking that the numbers
/// are consecutive (`None` for no events).
///
/// # Errors
/// [`StoreError::InvalidEvent`] when they are not.
pub(crate) fn first_seq(events: &[Arc<StoredEvent>]) -> Result<Option<u64>, StoreError> {
    let Some(first) = events.first() else {
        return Ok(None);
    };
    for (i, e) in events.iter().enumerate() {
        if e.seq != first.seq + i as u64 {
            return Err(StoreError::InvalidEvent(format!(
                "sequence numbers of one append must be consecutive: {} follows {}",
                e.seq,
                first.seq + i as u64 - 1
            )));
        }
    }
    Ok(Some(first.seq))
}

/// sqlx's own slow-statement line carries the whole SQL text: it is kept at `debug`.
/// The `warn` a slow task-log write gets names its kind and duration only (see
/// [`crate::telemetry::tasks`]).
pub(crate) const SLOW_STATEMENT_LEVEL: log::LevelFilter = log::LevelFilter::Debug;
/// How long a statement takes before sqlx logs it as slow.
pub(crate) const SLOW_STATEMENT: std::time::Duration = std::time::Duration::from_secs(1);

/// Persistent task state (see the module docs). Implementations: [`MemoryTaskStore`],
/// SQLite and PostgreSQL. All run the same [`conformance`] suite.
#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Appends `events` to the task's log and updates the snapshot, atomically: all
    /// of them or none. Their sequence numbers must be consecutive; the first must be
    /// the task's next number. A first number of 1 creates the task and the first
    /// event must then be a `Task`. An empty slice does nothing.
    ///
    /// Writing several events at once is how the task driver persists everything an
    /// executor queued while the previous write was in flight: one round trip and,
    /// on the SQL stores, one row update per task instead of one per event.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the first number is not the next one,
    /// [`StoreError::NotFound`] for a first number above 1 on an unknown task,
    /// [`StoreError::InvalidEvent`] for a first event of a new task that is not a
    /// `Task`, or numbers that are not consecutive,
    /// [`StoreError::Backend`] on database failure. Nothing is written on any other
    /// error; after a `Backend` error the events are either all written or none (a
    /// commit whose answer was lost leaves the outcome unknown, as with any database).
    async fn append_all(
        &self,
        scope: &Scope,
        task_id: &str,
        events: &[Arc<StoredEvent>],
    ) -> Result<(), StoreError>;

    /// [`append_all`](Self::append_all) by a writer that keeps the task's projection
    /// (the task driver does): `artifacts` are the task's artifacts once `events` are
    /// folded in, as [`projection::apply`] leaves them. A SQL store that compacts its
    /// artifact checkpoint with this append writes them as the new checkpoint instead
    /// of reading the events since the last checkpoint back and folding them again
    /// (see [`sql`]). A store holds no reference to `artifacts` once it returns, so the
    /// caller can take them back without a copy. The default ignores them.
    ///
    /// # Errors
    /// As [`append_all`](Self::append_all).
    async fn append_all_folded(
        &self,
        scope: &Scope,
        task_id: &str,
        events: &[Arc<StoredEvent>],
        artifacts: &FoldedArtifacts,
    ) -> Result<(), StoreError> {
        let _ = artifacts;
        self.append_all(scope, task_id, events).await
    }

    /// Appends one `event` as number `seq` of the task's log: [`append_all`] with
    /// one event.
    ///
    /// [`append_all`]: Self::append_all
    ///
    /// # Errors
    /// As [`append_all`](Self::append_all).
    async fn append(
        &self,
        scope: &Scope,
        task_id: &str,
        seq: u64,
        event: &StreamResponse,
    ) -> Result<(), StoreError> {
        let one = Arc::new(StoredEvent::new(seq, event.clone()));
        self.append_all(scope, task_id, std::slice::from_ref(&one))
            .await
    }

    /// The snapshot of a task, or `None` when it does not exist in this scope.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn get(&self, scope: &Scope, task_id: &str) -> Result<Option<TaskRecord>, StoreError>;

    /// The task's state and last event number, or `None` when it does not exist in
    /// this scope: what a check needs without reading the snapshot, its history and
    /// its artifacts (which [`TaskStore::get`] reads whole, however large). The
    /// default reads them through `get`; the stores here read one row.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn head(&self, scope: &Scope, task_id: &str) -> Result<Option<TaskHead>, StoreError> {
        Ok(self.get(scope, task_id).await?.map(|r| TaskHead {
            state: r.task.status.state,
            last_seq: r.last_seq,
        }))
    }

    /// Up to `limit` events with `seq > after`, in order, ending before the event that
    /// would take their JSON past `max_bytes` bytes (counted as stored; the memory store
    /// counts a folded chunk by its text): a read of large events holds about
    /// `max_bytes`, not `limit` of them. Never empty while an event with `seq > after`
    /// exists (the first is returned whatever its size), so a reader pages on from the
    /// last event it got until a read comes back empty. Empty for an unknown task.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn events_after(
        &self,
        scope: &Scope,
        task_id: &str,
        after: u64,
        limit: usize,
        max_bytes: u64,
    ) -> Result<Vec<StoredEvent>, StoreError>;

    /// One page of the scope's tasks matching `query`.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn list(&self, scope: &Scope, query: &TaskQuery) -> Result<TaskPage, StoreError>;

    /// Tasks of every scope in SUBMITTED or WORKING state (for recovery after a
    /// restart), at most `limit`.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn unsettled(&self, limit: usize) -> Result<Vec<TaskKey>, StoreError>;

    /// Deletes terminal tasks (COMPLETED, FAILED, CANCELED, REJECTED) of every scope
    /// whose status timestamp is before `older_than`, together with their events.
    /// Works in transactions of at most `batch` tasks (at least one), so that
    /// concurrent appends are never held up for long, and repeats until no such task
    /// is left. Returns the number of tasks deleted.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure (batches already committed stay
    /// deleted).
    async fn purge_expired(&self, older_than: Timestamp, batch: usize) -> Result<u64, StoreError>;

    /// Tasks of every scope in INPUT_REQUIRED state whose status timestamp is before
    /// `older_than`, at most `limit`: abandoned interactions for the handler to close
    /// (it appends the closing status event through [`append`](Self::append), so the
    /// sequence check arbitrates against a client that answers at the same moment).
    ///
    /// # Errors
    /// [`StoreError::Backend`] on database failure.
    async fn expired_input_required(
        &self,
        older_than: Timestamp,
        limit: usize,
    ) -> Result<Vec<TaskKey>, StoreError>;

    /// Closes the store's connections at shutdown, after the last write. SQLite first
    /// folds its write-ahead log into the database file, so the `.db` file alone
    /// holds everything. The default does nothing.
    async fn close(&self) {}

    /// The store's push state (webhook configs, outbox, signing key; see
    /// [`push`]), or `None` for a store without it.
    fn push_store(&self) -> Option<&dyn PushStore> {
        None
    }

    /// Records (or replaces) which task of an upstream A2A agent the task `task_id` of
    /// `scope` is ([`UpstreamLink`]); deleted with the task by the retention purge.
    /// The default keeps nothing (a store without links: a follow-up after a restart
    /// starts a new task of the agent).
    ///
    /// # Errors
    /// [`StoreError::Backend`].
    async fn put_upstream_link(
        &self,
        scope: &Scope,
        task_id: &str,
        link: &UpstreamLink,
    ) -> Result<(), StoreError> {
        let _ = (scope, task_id, link);
        Ok(())
    }

    /// The link [`put_upstream_link`](Self::put_upstream_link) recorded for `task_id`
    /// of `scope`, if any.
    ///
    /// # Errors
    /// [`StoreError::Backend`].
    async fn upstream_link(
        &self,
        scope: &Scope,
        task_id: &str,
    ) -> Result<Option<UpstreamLink>, StoreError> {
        let _ = (scope, task_id);
        Ok(None)
    }

    /// Executes the owner step of migration 0008 once per database ([`owners`]): when
    /// no decision is recorded, runs `plan` and records its decision, in one
    /// transaction that holds the database's write lock (PostgreSQL: an advisory
    /// lock, so two instances starting together decide once); otherwise changes
    /// nothing. The default (a store that keeps nothing across restarts) answers
    /// [`owners::OwnerOutcome::NotPersistent`].
    ///
    /// # Errors
    /// [`StoreError::Backend`]; nothing is changed then.
    async fn namespace_owners(
        &self,
        plan: &owners::OwnerPlan,
    ) -> Result<owners::OwnerOutcome, StoreError> {
        let _ = plan;
        Ok(owners::OwnerOutcome::NotPersistent)
    }

    /// Whether the store answers and takes writes (for readiness checks): the SQL
    /// stores also refuse a read-only database (a read-only SQLite file, a PostgreSQL
    /// standby or `default_transaction_read_only`).
    ///
    /// # Errors
    /// [`StoreError::Backend`] when it does not.
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
