//! Group commit for the SQL stores: appends are handed to a store-owned writer task
//! that takes every append waiting (up to [`MAX_BATCH`]), writes them in one
//! transaction with a constant number of statements, commits once and then answers
//! each caller. A caller's `append` returns only after the commit of the
//! transaction that holds its event, so "every event is in the store before any
//! subscriber sees it" holds exactly as with one transaction per append.
//!
//! Per-append semantics are kept:
//!
//! - an append carries one or more consecutive events of one task
//!   ([`super::TaskStore::append_all`]), planned in order against the task's row
//!   and written as one row update plus one event row each;
//! - a batch holds at most one append per task (a second one for the same task
//!   waits for the next batch, in arrival order), so each append is checked against
//!   the row as the previous append of that task left it;
//! - sequence conflicts, unknown tasks and invalid first events are found by
//!   [`plan`] before anything is written, and only that append is refused; the
//!   exception is a task created in a batch of several, which is planned without
//!   reading its row ([`to_read`]): if it exists after all, the batch's write fails
//!   on the primary key and the retry below reports the conflict;
//! - when the transaction fails before its commit (a database error on any
//!   statement, or, on PostgreSQL, a row changed by another instance since it was
//!   read), nothing of it was written and each append of the batch is retried alone
//!   in its own transaction (planned again on fresh rows), so an error or conflict
//!   reaches only the append it concerns. A failed commit is reported to every
//!   append of the batch (its outcome is unknown, as it is for a single append).
//!
//! A store may run several writer lanes (PostgreSQL, to use its pool); the lane of an
//! append is chosen by hashing its task key, so appends to one task always go
//! through the same lane, in order.

use std::collections::{HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};

use super::{encode_error, should_compact, to_i64, to_json, to_u64, touches_base};
use crate::protocol::{StreamResponse, Task, TaskState};
use crate::scope::{Scope, TaskKey};
use crate::store::memory::status_millis;
use crate::store::{FoldedArtifacts, StoreError, StoredEvent, projection};

/// The most appends one transaction takes.
pub(crate) const MAX_BATCH: usize = 128;

/// Appends that may wait in a lane's queue before callers wait to enqueue.
const QUEUE: usize = 1024;

/// One append: consecutive events of one task, each already encoded.
#[derive(Debug)]
pub(crate) struct Append {
    pub scope: Scope,
    pub task_id: String,
    /// The sequence number of the first event.
    pub seq: u64,
    /// The events, in order (at least one), numbered from `seq`.
    pub events: Vec<Arc<StoredEvent>>,
    /// The append's wall-clock time, milliseconds since the Unix epoch.
    pub now: i64,
    /// The task's artifacts after this append as its writer folded them, when it
    /// keeps them ([`TaskStore::append_all_folded`]): a compaction with this append
    /// takes them as the new checkpoint without reading anything back.
    ///
    /// [`TaskStore::append_all_folded`]: super::TaskStore::append_all_folded
    pub folded: Option<FoldedArtifacts>,
}

impl Append {
    /// Encodes `events` (consecutive, see [`super::first_seq`]) for the writer;
    /// `None` when there are none.
    ///
    /// # Errors
    /// [`StoreError::InvalidEvent`] for numbers that are not consecutive,
    /// [`StoreError::Backend`] when an event cannot be encoded.
    pub(crate) fn encode(
        scope: &Scope,
        task_id: &str,
        events: &[Arc<StoredEvent>],
    ) -> Result<Option<Self>, StoreError> {
        let Some(seq) = crate::store::first_seq(events)? else {
            return Ok(None);
        };
        // Made here (once per event, shared with the streams that send it), so an
        // event that cannot be encoded fails its append before the writer sees it.
        for e in events {
            e.json().map_err(encode_error)?;
        }
        Ok(Some(Self {
            scope: scope.clone(),
            task_id: task_id.to_owned(),
            seq,
            events: events.to_vec(),
            now: crate::protocol::time::now().timestamp_millis(),
            folded: None,
        }))
    }

    /// This append with the artifacts its writer folded (see [`Append::folded`]).
    pub(crate) fn folded(mut self, artifacts: &FoldedArtifacts) -> Self {
        self.folded = Some(artifacts.clone());
        self
    }

    /// The events with their JSON text, in order.
    pub(crate) fn encoded(&self) -> impl Iterator<Item = (&StoredEvent, &str)> {
        self.events
            .iter()
            .map(|e| (&**e, e.json().expect("encoded in Append::encode")))
    }

    /// The sequence number of the last event.
    pub(crate) fn last_seq(&self) -> u64 {
        self.seq + self.events.len() as u64 - 1
    }

    /// The task key (agent, tenant, owner, id), borrowed.
    pub(crate) fn key(&self) -> (&str, &str, &str, &str) {
        (
            &self.scope.agent,
            &self.scope.tenant,
            &self.scope.owner,
            &self.task_id,
        )
    }
}

/// The columns of an existing task row that an append reads.
#[derive(Debug)]
pub(crate) struct TaskRow {
    pub last_seq: i64,
    pub state: TaskState,
    pub status_ms: i64,
    pub snapshot: String,
    pub art_seq: i64,
    pub art_bytes: i64,
    pub pending_bytes: i64,
}

/// A new task row (an append from sequence number 1). Its artifact checkpoint
/// covers every event of the append, so nothing is pending.
#[derive(Debug)]
pub(crate) struct NewTask {
    /// The last sequence number of the append (the new `last_seq` and `art_seq`).
    pub last_seq: i64,
    pub context_id: String,
    pub state: TaskState,
    pub status_ms: i64,
    /// The snapshot without artifacts.
    pub snapshot: String,
    /// The artifact checkpoint (JSON `null` or an array).
    pub artifacts: String,
}

/// The new values of an existing task row.
#[derive(Debug)]
pub(crate) struct TaskUpdate {
    /// The `last_seq` the row had when planned (the append's first number - 1).
    pub prev_seq: i64,
    /// The last appended event's sequence number (the new `last_seq`).
    pub seq: i64,
    pub state: TaskState,
    pub status_ms: i64,
    /// The new snapshot without artifacts, when the event changes it.
    pub snapshot: Option<String>,
    /// The checkpoint's sequence number (before a compaction).
    pub art_seq: i64,
    pub art_bytes: i64,
    pub pending_bytes: i64,
    /// Whether the checkpoint is compacted up to `seq` with this append; the
    /// executor then sets `art_seq`, `art_bytes` and `pending_bytes`.
    pub compact: bool,
}

/// What one accepted append writes besides its event row.
#[derive(Debug)]
pub(crate) enum RowWrite {
    /// Creates the task.
    Create(NewTask),
    /// Updates the task.
    Update(TaskUpdate),
}

/// Checks `append` against the task's current row (`None`: no such task) and works
/// out the row it leaves, folding its events in order, without writing anything.
///
/// # Errors
/// [`StoreError::NotFound`], [`StoreError::Conflict`] and
/// [`StoreError::InvalidEvent`] as [`super::TaskStore::append_all`] documents them;
/// [`StoreError::Backend`] for a stored snapshot that does not parse.
pub(crate) fn plan(append: &Append, row: Option<&TaskRow>) -> Result<RowWrite, StoreError> {
    let last_seq = to_i64(append.last_seq());
    let Some(row) = row else {
        if append.seq != 1 {
            return Err(StoreError::NotFound(append.task_id.clone()));
        }
        // Everything the new task holds is in this append: fold it whole.
        let mut events = append.events.iter();
        let first = events.next().map(|e| &e.event);
        let Some(StreamResponse::Task(task)) = first else {
            return Err(StoreError::InvalidEvent(
                "the first event of a task must be a Task".into(),
            ));
        };
        let mut base = task.clone();
        for e in events {
            projection::apply_to(&mut base, &e.event);
        }
        let artifacts = to_json(&base.artifacts.take())?;
        return Ok(RowWrite::Create(NewTask {
            last_seq,
            context_id: base.context_id.clone(),
            state: base.status.state,
            status_ms: status_millis(&base),
            snapshot: to_json(&base)?,
            artifacts,
        }));
    };
    let expected = to_u64(row.last_seq) + 1;
    if append.seq != expected {
        return Err(StoreError::Conflict {
            task_id: append.task_id.clone(),
            expected,
            got: append.seq,
        });
    }
    let mut state = row.state;
    let mut status_ms = row.status_ms;
    let mut pending_bytes = row.pending_bytes;
    let mut base: Option<Task> = None;
    for (e, json) in append.encoded() {
        if touches_base(&e.event) {
            let mut next = match base.take() {
                Some(b) => b,
                None => super::from_json(&row.snapshot)?,
            };
            projection::apply_to(&mut next, &e.event);
            next.artifacts = None;
            base = Some(next);
        }
        if super::folds_artifacts(&e.event) {
            pending_bytes += json.len() as i64;
        }
    }
    let snapshot = match base {
        Some(base) => {
            state = base.status.state;
            status_ms = status_millis(&base);
            Some(to_json(&base)?)
        }
        None => None,
    };
    Ok(RowWrite::Update(TaskUpdate {
        prev_seq: row.last_seq,
        seq: last_seq,
        state,
        status_ms,
        snapshot,
        art_seq: row.art_seq,
        art_bytes: row.art_bytes,
        pending_bytes,
        compact: should_compact(pending_bytes, row.art_bytes, state),
    }))
}

/// Why a batch transaction wrote nothing or may not have been written.
#[derive(Debug)]
pub(crate) enum BatchError {
    /// A statement failed before the commit: nothing was written.
    Write(StoreError),
    /// Another writer changed a row after it was read (a backend that reads without
    /// locking): nothing was written, and planning again gives each append its answer.
    Stale(StoreError),
    /// The commit failed: the outcome is unknown.
    Commit(StoreError),
}

/// The results of a committed batch, one per append, in order (a refused append
/// wrote nothing).
pub(crate) type BatchResults = Vec<Result<(), StoreError>>;

/// Writes a batch of appends (to distinct tasks) in one transaction.
#[async_trait]
pub(crate) trait BatchWriter: Send + 'static {
    /// Writes `batch` in one transaction and commits it.
    ///
    /// # Errors
    /// [`BatchError`] when the transaction as a whole failed.
    async fn write(&mut self, batch: &[Append]) -> Result<BatchResults, BatchError>;

    /// Called when the lane's queue has been empty for [`IDLE_RELEASE`], before it
    /// waits on for the next append:
    /// a writer that kept its connection between batches gives it back to its pool
    /// here (see [`HeldConnection`]).
    fn idle(&mut self) {}
}

/// The longest a writer lane keeps one pooled connection across consecutive
/// batches before giving it back to the pool (and queueing for it again behind any
/// other user of the pool).
const HOLD_MAX: std::time::Duration = std::time::Duration::from_millis(50);

/// How long a writer lane waits with nothing queued before it gives its connection
/// back ([`BatchWriter::idle`]). Under load the queue is empty for moments between a
/// commit and the appends its answers lead to; giving the connection back in each
/// of those would cost the round trip [`HeldConnection`] exists to avoid.
const IDLE_RELEASE: std::time::Duration = std::time::Duration::from_millis(2);

/// A writer lane's connection between batches. Giving a connection back to an sqlx
/// pool is not free: the pool tests it with a ping from a spawned task before it can
/// be acquired again, so a lane that acquired and released one per batch waited for
/// that round trip in front of every batch (about 1 ms of each group commit at 64
/// clients on SQLite, see BENCHMARKS.md, "Issue 14, sixth pass"). The lane therefore
/// keeps the connection while appends keep coming, and gives it back when its queue
/// stays empty for [`IDLE_RELEASE`] ([`BatchWriter::idle`]), after a batch that
/// failed, when the pool is closing, and after the first batch that ends
/// [`HOLD_MAX`] or more after the connection was acquired. The pool's other users
/// (push deliveries, retention, readiness checks, on SQLite's one writer connection)
/// thus wait about [`HOLD_MAX`] plus one batch at most under a steady load.
pub(crate) struct HeldConnection<DB: sqlx::Database> {
    pool: sqlx::Pool<DB>,
    /// Whether connections are kept between batches at all (not when the pool's one
    /// connection also serves every read, as for `sqlite::memory:`).
    hold: bool,
    /// The connection kept since the last batch.
    held: Option<sqlx::pool::PoolConnection<DB>>,
    /// When the connection in use (held or taken) was acquired.
    since: Option<tokio::time::Instant>,
    /// [`HOLD_MAX`] (shorter in tests).
    hold_max: std::time::Duration,
}

impl<DB: sqlx::Database> HeldConnection<DB> {
    /// Nothing held yet; connections come from `pool` and are kept between batches
    /// when `hold` is true (otherwise each goes back after its batch).
    pub(crate) fn new(pool: sqlx::Pool<DB>, hold: bool) -> Self {
        Self {
            pool,
            hold,
            held: None,
            since: None,
            hold_max: HOLD_MAX,
        }
    }

    /// The held connection, or one acquired from the pool when none is held, the
    /// pool is closing, or the held one was acquired [`HOLD_MAX`] ago or longer (it
    /// goes back to the pool first, so the pool's waiting users are served before
    /// this lane).
    ///
    /// # Errors
    /// The pool's acquire error (closed, or timed out).
    pub(crate) async fn take(&mut self) -> Result<sqlx::pool::PoolConnection<DB>, sqlx::Error> {
        if let (Some(conn), Some(since)) = (self.held.take(), self.since)
            && since.elapsed() < self.hold_max
            && !self.pool.is_closed()
        {
            return Ok(conn);
        }
        self.since = None;
        let conn = self.pool.acquire().await?;
        self.since = Some(tokio::time::Instant::now());
        Ok(conn)
    }

    /// Keeps `conn` (taken with [`take`](Self::take) and left with no transaction
    /// open) for the next batch, when this lane holds connections at all.
    pub(crate) fn keep(&mut self, conn: sqlx::pool::PoolConnection<DB>) {
        if self.hold {
            self.held = Some(conn);
        }
    }

    /// Gives the held connection back to the pool.
    pub(crate) fn release(&mut self) {
        self.held = None;
        self.since = None;
    }
}

impl From<StoreError> for BatchError {
    /// A refusal by the database before anything was written.
    fn from(e: StoreError) -> Self {
        BatchError::Write(e)
    }
}

/// An append waiting for its lane's writer.
struct Job {
    append: Append,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

/// The queues of a store's writer lanes (cheap to clone).
#[derive(Clone)]
pub(crate) struct Batcher {
    lanes: Arc<[mpsc::Sender<Job>]>,
    hasher: std::hash::RandomState,
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("lanes", &self.lanes.len())
            .finish()
    }
}

impl Batcher {
    /// Spawns one writer task per writer (at least one). Each task ends when the last
    /// clone of the returned handle is dropped.
    pub(crate) fn spawn<W: BatchWriter>(writers: Vec<W>) -> Self {
        assert!(!writers.is_empty(), "a store needs a writer");
        let lanes: Vec<_> = writers
            .into_iter()
            .map(|w| {
                let (tx, rx) = mpsc::channel(QUEUE);
                tokio::spawn(run_lane(w, rx));
                tx
            })
            .collect();
        Self {
            lanes: lanes.into(),
            hasher: std::hash::RandomState::new(),
        }
    }

    /// [`TaskStore::append_all`](super::TaskStore::append_all) (with the writer's
    /// `folded` artifacts, [`TaskStore::append_all_folded`](super::TaskStore::append_all_folded))
    /// on a store whose writes go through these lanes: encodes the events and appends
    /// them. Nothing to do for no events.
    ///
    /// # Errors
    /// As [`Append::encode`] and [`Batcher::append`].
    pub(crate) async fn append_events(
        &self,
        scope: &Scope,
        task_id: &str,
        events: &[Arc<StoredEvent>],
        folded: Option<&FoldedArtifacts>,
    ) -> Result<(), StoreError> {
        let Some(mut append) = Append::encode(scope, task_id, events)? else {
            return Ok(());
        };
        if let Some(artifacts) = folded {
            append = append.folded(artifacts);
        }
        self.append(append).await
    }

    /// Appends through the writer lane of the task and waits for the commit.
    ///
    /// # Errors
    /// As [`super::TaskStore::append`].
    pub(crate) async fn append(&self, append: Append) -> Result<(), StoreError> {
        let lane = if self.lanes.len() == 1 {
            0
        } else {
            (self.hasher.hash_one(append.key()) % self.lanes.len() as u64) as usize
        };
        let (reply, answer) = oneshot::channel();
        self.lanes[lane]
            .send(Job { append, reply })
            .await
            .map_err(|_| StoreError::Backend("the store writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Backend("the store writer stopped before answering".into()))?
    }
}

/// A writer lane: takes the waiting appends, writes a batch, answers, repeats.
async fn run_lane<W: BatchWriter>(mut writer: W, mut rx: mpsc::Receiver<Job>) {
    // Appends taken from the queue but not yet written (a second append of a task
    // already in the batch, or beyond the batch size), in arrival order.
    let mut waiting: VecDeque<Job> = VecDeque::new();
    loop {
        if waiting.is_empty() {
            let job = match rx.try_recv() {
                Ok(job) => Some(job),
                // Nothing waiting: the writer keeps its connection for the next
                // append unless none comes within IDLE_RELEASE.
                Err(_) => match tokio::time::timeout(IDLE_RELEASE, rx.recv()).await {
                    Ok(job) => job,
                    Err(_) => {
                        writer.idle();
                        rx.recv().await
                    }
                },
            };
            match job {
                Some(job) => waiting.push_back(job),
                None => return,
            }
        }
        while waiting.len() < 2 * MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => waiting.push_back(job),
                Err(_) => break,
            }
        }
        let (appends, replies) = take_batch(&mut waiting);
        let results = match writer.write(&appends).await {
            Ok(results) => results,
            Err(BatchError::Commit(e)) => appends
                .iter()
                .map(|_| Err(StoreError::Backend(e.to_string())))
                .collect(),
            Err(BatchError::Write(e)) if appends.len() == 1 => vec![Err(e)],
            Err(BatchError::Write(_) | BatchError::Stale(_)) => {
                // Each alone in its own transaction: a database error reaches only the
                // append that causes it, and rows changed by another writer are read
                // again.
                let mut results = Vec::with_capacity(appends.len());
                for a in &appends {
                    results.push(write_alone(&mut writer, a).await);
                }
                results
            }
        };
        // Dropped before anyone is answered: a caller's folded artifacts are shared
        // with its append, and a caller that takes them back must find them unshared.
        drop(appends);
        for (reply, result) in replies.into_iter().zip(results) {
            let _ = reply.send(result);
        }
    }
}

/// How often an append written alone is planned again after another writer changed
/// its row in between.
const STALE_RETRIES: usize = 3;

/// Writes one append in a transaction of its own.
async fn write_alone<W: BatchWriter>(writer: &mut W, a: &Append) -> Result<(), StoreError> {
    let mut tries = 0;
    loop {
        match writer.write(std::slice::from_ref(a)).await {
            Ok(mut r) => return r.pop().unwrap_or(Ok(())),
            Err(BatchError::Stale(e)) if tries >= STALE_RETRIES => return Err(e),
            Err(BatchError::Stale(_)) => tries += 1,
            Err(BatchError::Write(e) | BatchError::Commit(e)) => return Err(e),
        }
    }
}

/// Takes up to [`MAX_BATCH`] waiting appends of distinct tasks, oldest first; the
/// others keep their order.
fn take_batch(
    waiting: &mut VecDeque<Job>,
) -> (Vec<Append>, Vec<oneshot::Sender<Result<(), StoreError>>>) {
    let mut appends = Vec::with_capacity(waiting.len().min(MAX_BATCH));
    let mut replies = Vec::with_capacity(appends.capacity());
    let mut keys: HashSet<TaskKey> = HashSet::new();
    let mut rest = VecDeque::new();
    while let Some(job) = waiting.pop_front() {
        if appends.len() < MAX_BATCH && keys.insert(task_key(&job.append)) {
            appends.push(job.append);
            replies.push(job.reply);
        } else {
            rest.push_back(job);
        }
    }
    *waiting = rest;
    (appends, replies)
}

/// The task key of an append.
pub(crate) fn task_key(a: &Append) -> TaskKey {
    (a.scope.clone(), a.task_id.clone())
}

/// The appends of `batch` whose task rows must be read before planning. In a batch
/// of several, a task's first append (sequence number 1) is planned as new without
/// reading: if the task exists after all, its insert fails the write as a whole (a
/// primary key violation) and the lane retries each append alone, which reads every
/// row and reports the conflict to that append only. A batch in which every append
/// creates its task (the common case: a short task written in one group) thus costs
/// no read at all.
pub(crate) fn to_read(batch: &[Append]) -> impl Iterator<Item = &Append> {
    let several = batch.len() > 1;
    batch.iter().filter(move |a| !several || a.seq > 1)
}

/// A new task's row.
pub(crate) type Create<'a> = (&'a Append, &'a NewTask);

/// A compaction to read for: the task, the checkpoint's sequence number and the
/// last sequence number stored before this batch (the append's first number - 1).
pub(crate) type CompactRange<'a> = (&'a Append, i64, i64);

/// One event row to insert: its append, the event and its JSON text.
pub(crate) type EventRow<'a> = (&'a Append, &'a StoredEvent, &'a str);

/// Everything a batch writes.
#[derive(Debug, Default)]
pub(crate) struct Writes<'a> {
    /// New tasks (their rows and checkpoints).
    pub creates: Vec<Create<'a>>,
    /// Every event of every accepted append, in order.
    pub events: Vec<EventRow<'a>>,
    /// Rewritten checkpoints.
    pub artifacts: Vec<(&'a Append, String)>,
    /// Existing task rows: the new values (`prev_seq` is the `last_seq` they replace).
    pub updates: Vec<(&'a Append, TaskUpdate)>,
}

/// The round trips of a batch: read the rows, read what compactions fold, write
/// everything and commit. Each covers every row of the batch it concerns, so a batch
/// costs the same few round trips whatever its size.
#[async_trait]
pub(crate) trait BatchOps: Send {
    /// Begins the transaction where the backend needs it, and reads the current rows
    /// of the batch's tasks.
    async fn rows(&mut self, batch: &[Append]) -> Result<Vec<(TaskKey, TaskRow)>, StoreError>;
    /// For each range, as (task, kind, JSON) rows: the checkpoint (kind 0) and, when
    /// there are any, the stored artifact-folding events in `(after, upto]` as one
    /// JSON array in sequence order (kind 1), aggregated by the database so that a
    /// compaction reads one row per task rather than one per event.
    async fn compaction_input(
        &mut self,
        ranges: &[CompactRange<'_>],
    ) -> Result<Vec<(TaskKey, i64, String)>, StoreError>;
    /// Writes everything and commits, atomically. A write that finds a row changed
    /// since [`rows`](Self::rows) read it fails as a whole. `writes` is given, not
    /// lent, so that a backend can move a large text (a checkpoint of many megabytes)
    /// into a statement's parameters instead of copying it.
    async fn write(&mut self, writes: Writes<'_>) -> Result<(), BatchError>;
    /// Ends the transaction after a failure or when nothing is written.
    async fn abort(&mut self);
}

/// Writes `batch` (appends to distinct tasks) through `tx`: reads the rows, refuses
/// the appends that [`plan`] refuses, folds the checkpoints that are due, then writes
/// all the rest and commits at once.
///
/// # Errors
/// [`BatchError::Write`] when a round trip fails before the commit (nothing is
/// written), [`BatchError::Commit`] when the outcome of the commit is unknown.
pub(crate) async fn write_batch<T: BatchOps>(
    tx: &mut T,
    batch: &[Append],
) -> Result<BatchResults, BatchError> {
    use std::collections::HashMap;
    let rows: HashMap<TaskKey, TaskRow> = match tx.rows(batch).await {
        Ok(rows) => rows.into_iter().collect(),
        Err(e) => {
            tx.abort().await;
            return Err(BatchError::Write(e));
        }
    };
    let mut results: BatchResults = Vec::with_capacity(batch.len());
    let mut planned: Vec<(&Append, RowWrite)> = Vec::with_capacity(batch.len());
    for a in batch {
        match plan(a, rows.get(&task_key(a))) {
            Ok(w) => {
                planned.push((a, w));
                results.push(Ok(()));
            }
            Err(e) => results.push(Err(e)),
        }
    }
    if planned.is_empty() {
        tx.abort().await;
        return Ok(results);
    }
    let ranges: Vec<CompactRange<'_>> = planned
        .iter()
        .filter_map(|(a, w)| match w {
            RowWrite::Update(u) if u.compact => Some((*a, u.art_seq, u.prev_seq)),
            _ => None,
        })
        .collect();
    let mut writes = Writes::default();
    let mut compacted: HashMap<TaskKey, i64> = HashMap::new();
    // A compaction whose append carries its writer's fold takes it as it is; the others
    // read the checkpoint and the events since, and fold them. Debug builds read and
    // fold those too and check that both agree.
    let (given, to_read): (Vec<CompactRange<'_>>, Vec<CompactRange<'_>>) = ranges
        .into_iter()
        .partition(|(a, _, _)| a.folded.is_some() && !cfg!(debug_assertions));
    for (a, _, _) in given {
        let folded = a.folded.as_deref().expect("partitioned by it");
        match to_json(folded) {
            Ok(artifacts) => {
                compacted.insert(task_key(a), artifacts.len() as i64);
                writes.artifacts.push((a, artifacts));
            }
            Err(e) => {
                tx.abort().await;
                return Err(BatchError::Write(e));
            }
        }
    }
    if !to_read.is_empty() {
        let input = match tx.compaction_input(&to_read).await {
            Ok(input) => input,
            Err(e) => {
                tx.abort().await;
                return Err(BatchError::Write(e));
            }
        };
        match fold_compactions(&to_read, input) {
            Ok(folded) => {
                for (a, artifacts) in folded {
                    if let Some(given) = &a.folded {
                        debug_assert_eq!(
                            to_json(&**given).ok().as_deref(),
                            Some(artifacts.as_str()),
                            "task {}: the writer's fold of its artifacts differs from the log's",
                            a.task_id
                        );
                    }
                    compacted.insert(task_key(a), artifacts.len() as i64);
                    writes.artifacts.push((a, artifacts));
                }
            }
            Err(e) => {
                tx.abort().await;
                return Err(BatchError::Write(e));
            }
        }
    }
    let mut creates = Vec::new();
    for (a, w) in planned {
        writes
            .events
            .extend(a.encoded().map(|(e, json)| (a, e, json)));
        match w {
            RowWrite::Create(c) => creates.push((a, c)),
            RowWrite::Update(mut u) => {
                if let Some(bytes) = compacted.get(&task_key(a)) {
                    u.art_seq = u.seq;
                    u.art_bytes = *bytes;
                    u.pending_bytes = 0;
                }
                writes.updates.push((a, u));
            }
        }
    }
    writes.creates = creates.iter().map(|(a, c)| (*a, c)).collect();
    match tx.write(writes).await {
        Ok(()) => Ok(results),
        Err(e) => {
            if !matches!(e, BatchError::Commit(_)) {
                tx.abort().await;
            }
            Err(e)
        }
    }
}

/// A task's checkpoint and its stored artifact events (a JSON array), when read.
type CompactionInput = (Option<String>, Option<String>);

/// Folds each range's checkpoint, its stored artifact events and the batch's own
/// event into the new checkpoint (JSON).
fn fold_compactions<'a>(
    ranges: &[CompactRange<'a>],
    input: Vec<(TaskKey, i64, String)>,
) -> Result<Vec<(&'a Append, String)>, StoreError> {
    use crate::store::sql::{fold_artifacts, folds_artifacts, from_json};
    use std::collections::HashMap;
    let mut by_key: HashMap<TaskKey, CompactionInput> = HashMap::new();
    for (k, kind, text) in input {
        let entry = by_key.entry(k).or_default();
        if kind == 0 {
            entry.0 = Some(text);
        } else {
            entry.1 = Some(text);
        }
    }
    let mut out = Vec::with_capacity(ranges.len());
    for (a, _, _) in ranges {
        let (checkpoint, stored) = by_key.remove(&task_key(a)).unwrap_or_default();
        let checkpoint = checkpoint.ok_or_else(|| {
            StoreError::Backend(format!(
                "the artifact checkpoint of task {} is missing",
                a.task_id
            ))
        })?;
        let mut events: Vec<StreamResponse> = match stored {
            Some(array) => from_json(&array)?,
            None => Vec::new(),
        };
        events.extend(
            a.events
                .iter()
                .filter(|e| folds_artifacts(&e.event))
                .map(|e| e.event.clone()),
        );
        let artifacts = to_json(&fold_artifacts(from_json(&checkpoint)?, events))?;
        out.push((*a, artifacts));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A writer that accepts every batch and counts its `idle` calls.
    struct Counting {
        idle: Arc<AtomicUsize>,
    }

    #[async_trait]
    impl BatchWriter for Counting {
        async fn write(&mut self, batch: &[Append]) -> Result<BatchResults, BatchError> {
            Ok(batch.iter().map(|_| Ok(())).collect())
        }

        fn idle(&mut self) {
            self.idle.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn append(task: &str) -> Append {
        let ev = Arc::new(StoredEvent::new(
            1,
            StreamResponse::Task(crate::store::conformance::task_at(
                task,
                "ctx",
                crate::protocol::time::now(),
            )),
        ));
        Append::encode(&Scope::new("", "alice"), task, &[ev])
            .unwrap()
            .unwrap()
    }

    /// The lane keeps its writer's connection while appends follow each other within
    /// `IDLE_RELEASE`, and gives it back once its queue stayed empty that long.
    #[tokio::test(start_paused = true)]
    async fn lane_goes_idle_only_after_an_empty_spell() {
        let idle = Arc::new(AtomicUsize::new(0));
        let batcher = Batcher::spawn(vec![Counting { idle: idle.clone() }]);
        for i in 0..5 {
            batcher.append(append(&format!("t{i}"))).await.unwrap();
            tokio::time::advance(IDLE_RELEASE / 2).await;
            assert_eq!(idle.load(Ordering::SeqCst), 0, "append {i} came in time");
        }
        tokio::time::sleep(IDLE_RELEASE).await;
        assert_eq!(
            idle.load(Ordering::SeqCst),
            1,
            "released after the empty spell"
        );
        // Released once per spell, not again while nothing comes.
        tokio::time::sleep(IDLE_RELEASE * 10).await;
        assert_eq!(idle.load(Ordering::SeqCst), 1);
        batcher.append(append("later")).await.unwrap();
        tokio::time::sleep(IDLE_RELEASE * 2).await;
        assert_eq!(idle.load(Ordering::SeqCst), 2);
    }

    /// A SQLite pool of one connection, on a file in a fresh folder (kept with it).
    async fn one_connection_pool() -> (tempfile::TempDir, sqlx::SqlitePool) {
        let dir = tempfile::tempdir().unwrap();
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(
                sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(dir.path().join("held.db"))
                    .create_if_missing(true),
            )
            .await
            .unwrap();
        (dir, pool)
    }

    /// A kept connection is taken again without the pool (whose only connection it
    /// is), and released it is the pool's again.
    #[tokio::test]
    async fn held_connection_is_kept_until_released() {
        let (_dir, pool) = one_connection_pool().await;
        let mut held = HeldConnection::new(pool.clone(), true);
        let conn = held.take().await.unwrap();
        held.keep(conn);
        // A dropped connection would be back in the pool within this (its return
        // pings the SQLite worker thread); a kept one is not.
        let short = std::time::Duration::from_millis(200);
        assert!(
            tokio::time::timeout(short, pool.acquire()).await.is_err(),
            "the lane holds the pool's only connection"
        );
        let mut conn = tokio::time::timeout(short, held.take())
            .await
            .expect("taken again without waiting for the pool")
            .unwrap();
        sqlx::query("SELECT 1").execute(&mut *conn).await.unwrap();
        held.keep(conn);
        held.release();
        let again = tokio::time::timeout(std::time::Duration::from_secs(10), pool.acquire())
            .await
            .expect("released to the pool")
            .unwrap();
        drop(again);
        pool.close().await;
    }

    /// A connection kept for [`HOLD_MAX`] or longer goes back to the pool at the next
    /// take, so a user of the pool waiting behind the lane is served before it.
    #[tokio::test]
    async fn a_connection_held_too_long_goes_back_to_the_pools_waiters_first() {
        let (_dir, pool) = one_connection_pool().await;
        let mut held = HeldConnection::new(pool.clone(), true);
        // Every connection is held "too long" at once.
        held.hold_max = std::time::Duration::ZERO;
        let conn = held.take().await.unwrap();
        held.keep(conn);
        let (got_tx, got_rx) = tokio::sync::oneshot::channel();
        let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
        let waiter = {
            let pool = pool.clone();
            tokio::spawn(async move {
                let conn = pool.acquire().await.unwrap();
                let _ = got_tx.send(());
                let _ = release_rx.await;
                drop(conn);
            })
        };
        // The waiter queues for the pool's only connection, which the lane holds.
        let short = std::time::Duration::from_millis(200);
        let mut got_rx = got_rx;
        assert!(
            tokio::time::timeout(short, &mut got_rx).await.is_err(),
            "the lane still holds the connection"
        );
        let lane = tokio::spawn(async move {
            let conn = held.take().await.unwrap();
            drop(conn);
        });
        tokio::time::timeout(std::time::Duration::from_secs(10), got_rx)
            .await
            .expect("the waiter was served once the lane's hold expired")
            .unwrap();
        assert!(!lane.is_finished(), "the lane queues behind the waiter");
        release_tx.send(()).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), lane)
            .await
            .expect("the lane gets the connection after the waiter")
            .unwrap();
        waiter.await.unwrap();
        pool.close().await;
    }
}
