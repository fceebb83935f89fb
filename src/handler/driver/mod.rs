//! The task driver: one tokio task per active task, the single writer of its event
//! log. It runs the executor for each message in turn (a message to a task whose
//! turn is running is recorded and answered at once, and queued as the next turn,
//! never run concurrently; see [`super::turns`]), validates and persists every
//! executor event before publishing it on the task's bus, handles cancel, and leaves
//! no run without a final state.
//!
//! Events are written in groups: when the driver wakes for an executor event it also
//! takes every event already queued behind it (up to [`MAX_GROUP`]), validates and
//! folds them in order, writes them with one [`TaskStore::append_all`] and only then
//! publishes them and answers a waiting caller. The executor is polled on during
//! the write, so what it queues meanwhile is the next group. An executor that emits
//! faster than the store writes thus costs one write per group, not per event, while
//! a lone event is written at once (no waiting for company).
//!
//! [`TaskStore::append_all`]: crate::store::TaskStore::append_all

mod executor_run;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc;
use tokio::sync::{OwnedSemaphorePermit, broadcast, oneshot};

use super::{Inner, turns};
use crate::error::A2aError;
use crate::executor::{EventQueue, ExecutorError, RequestContext, new_agent_text_message};
use crate::protocol::time::Timestamp;
use crate::protocol::{
    Message, StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent, time,
};
use crate::store::{FoldedArtifacts, Scope, StoreError, StoredEvent, projection};
use crate::telemetry::tasks::{self, TurnMetrics};
use executor_run::{ExecutorRun, RunEnd};

/// What the driver publishes on a task's bus: the events of one store write, in
/// sequence order (consecutive numbers), shared by every subscriber. One bus message per
/// write, not per event: a burst of events costs one send and one wake-up per
/// subscriber, and the bus's slots ([`HandlerConfig::subscriber_buffer`]) count writes.
///
/// [`HandlerConfig::subscriber_buffer`]: super::HandlerConfig::subscriber_buffer
pub(crate) type EventGroup = Arc<Vec<Arc<StoredEvent>>>;

/// How long an idle driver with live subscribers waits before re-checking whether
/// it may exit.
const IDLE_RECHECK: Duration = Duration::from_secs(5);
/// The FAILED reason of a task whose run the gateway's shutdown ended.
const SHUTDOWN_REASON: &str =
    "the gateway shut down before the task finished; send the message again";
/// How long `AgentExecutor::cancel` may take before the run is aborted anyway.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(10);
/// The most queued executor events taken into one store write: the
/// [`EventQueue`]'s default capacity, so one write takes what a full queue holds (a
/// task's first group may stage one more, the Task implied by its first event). A
/// group is published as one [`EventGroup`].
const MAX_GROUP: usize = 64;
/// The pauses between attempts of a store write that failed with a database error
/// (a lock held by a backup or `VACUUM`, a failover): about 8 s of retrying, plus
/// each attempt's own wait for locks, before the run is given up.
const WRITE_RETRY_DELAYS: [Duration; 4] = [
    Duration::from_millis(100),
    Duration::from_millis(400),
    Duration::from_millis(1500),
    Duration::from_secs(6),
];
/// How long a driver whose run was stopped by a store failure keeps trying to record
/// the task FAILED once the store works again, before it leaves that to the stale-task
/// sweep.
const STORE_RECOVERY: Duration = Duration::from_secs(300);
/// The longest pause between those attempts.
const STORE_RECOVERY_MAX_DELAY: Duration = Duration::from_secs(30);

pub(crate) type TaskKey = (Scope, String);

/// A command to a task's driver.
pub(crate) enum Command {
    Run(Box<Run>),
    Cancel(oneshot::Sender<Result<Task, A2aError>>),
    /// Close an abandoned or stalled task (see [`Expire`]). Boxed, like `Run`, so that
    /// a `Command` is 16 bytes (each message is a node of the channel).
    Expire(Box<Expire>),
}

/// Closes the task FAILED with `reason` if it is still in one of `states` with a
/// status timestamp before `older_than` and no message is being processed here. The
/// answer says whether it was closed. Going through the driver keeps it the single
/// writer: a follow-up that reaches the driver first wins (the task is no longer
/// idle), one that comes after finds a terminal task and is refused like any message
/// to one. Used for abandoned INPUT_REQUIRED tasks and for SUBMITTED/WORKING tasks
/// that stalled because the instance running them stopped.
pub(crate) struct Expire {
    pub states: &'static [TaskState],
    pub older_than: Timestamp,
    pub reason: String,
    pub reply: oneshot::Sender<Result<bool, A2aError>>,
}

/// One message to process.
pub(crate) struct Run {
    /// Boxed: a `RequestContext` is about 540 bytes, and the driver's future would
    /// otherwise hold it in several of its states for every open task.
    pub ctx: Box<RequestContext>,
    pub permit: OwnedSemaphorePermit,
    /// The caller waiting for the run's start; `None` once it was answered (a
    /// message queued behind a running turn).
    pub reply: Option<oneshot::Sender<Result<RunStart, A2aError>>>,
    /// The user message is already in the task's log (recorded when it was queued).
    pub recorded: bool,
}

/// What a caller of SendMessage gets once the run has produced its first event.
pub(crate) enum RunStart {
    /// A Message-only response; nothing is stored.
    Message(Message),
    /// The task exists: its snapshot at `seq`, and the bus subscribed before `seq`
    /// was published. `fresh`: the snapshot is this run's first event. `queued`: the
    /// message was recorded behind a running turn and waits for its own; the
    /// snapshot (WORKING, the message in its history) is current.
    Task {
        snapshot: Task,
        seq: u64,
        events: broadcast::Receiver<EventGroup>,
        fresh: bool,
        queued: bool,
    },
}

/// The handle kept in the registry. Commands go through a `futures` unbounded
/// channel: a node per message and under 100 bytes of state, where tokio's
/// preallocates a block of 32 slots (about 1 KB measured for every open task, for a
/// channel that carries a message or two in a task's life).
#[derive(Clone)]
pub(crate) struct Handle {
    pub cmd: mpsc::UnboundedSender<Command>,
    pub bus: broadcast::Sender<EventGroup>,
}

pub(crate) struct Driver {
    inner: Arc<Inner>,
    key: TaskKey,
    rx: mpsc::UnboundedReceiver<Command>,
    bus: broadcast::Sender<EventGroup>,
    task: Option<Task>,
    seq: u64,
    pending: VecDeque<Run>,
    /// Events folded into `task` (and counted in `seq`) but not yet written: the
    /// next [`flush`](Driver::flush) writes and publishes them.
    staged: Vec<Arc<StoredEvent>>,
    /// Set when the store failed: the driver stops writing.
    broken: bool,
    /// Why a store failure stopped the run, until the task is recorded FAILED.
    store_failure: Option<String>,
    /// Counts the states this driver writes (`a2a_tasks_total`).
    outcomes: TurnMetrics,
}

/// What [`Driver::unregister`] did.
enum Unregister {
    /// Removed from the registry: the driver ends.
    Done,
    /// Not removed: the driver waits for commands.
    Stays,
    /// Not removed: this command was waiting (taken from the channel by the check).
    Waiting(Command),
}

/// Moves the value out of `b` and frees the box now.
#[allow(clippy::boxed_local)] // taking the box is the point: it is freed on return
pub(super) fn unbox<T>(b: Box<T>) -> T {
    *b
}

/// Why the executor's run ended, for the failure reason.
enum Outcome {
    Returned,
    Failed(String),
    Panicked(String),
}

struct Running {
    ctx: Box<RequestContext>,
    queue: EventQueue,
    events: crate::executor::EventReceiver,
    /// The executor's run, polled by this driver (see [`executor_run`]).
    exec: ExecutorRun,
    reply: Option<oneshot::Sender<Result<RunStart, A2aError>>>,
    sub: Option<broadcast::Receiver<EventGroup>>,
    /// The answer for the caller once the staged events are written. Boxed: it holds
    /// a task snapshot (about 360 bytes) for a moment, in a struct every open task's
    /// driver keeps for the whole run.
    start: Option<Box<RunStart>>,
    message_only: bool,
    closed: bool,
    /// The turn reported a settling state that was held open for a queued message
    /// (see [`super::turns`]): the run has ended its turn, not failed to.
    turn_ended: bool,
}

impl Running {
    /// Accepts no more executor events; what is already queued is still taken.
    fn close_queue(&mut self) {
        self.events.close();
        self.closed = true;
    }
}

impl Driver {
    /// Starts a driver for `key` and returns its handle. `known_new`: the task does
    /// not exist yet (skip loading it).
    pub(crate) fn spawn(inner: Arc<Inner>, key: TaskKey, known_new: bool) -> Handle {
        let (cmd, rx) = mpsc::unbounded();
        let (bus, _) = broadcast::channel(inner.config.subscriber_buffer.max(1));
        let handle = Handle {
            cmd,
            bus: bus.clone(),
        };
        let driver = Driver {
            inner,
            key,
            rx,
            bus,
            task: None,
            seq: 0,
            pending: VecDeque::new(),
            staged: Vec::new(),
            broken: false,
            store_failure: None,
            outcomes: TurnMetrics::default(),
        };
        // Boxed: an `async fn` taking `self` by value keeps it twice in its future
        // (the argument and the moved local), about 630 bytes each for every task.
        tokio::spawn(Box::new(driver).main(known_new));
        handle
    }

    async fn main(mut self: Box<Self>, known_new: bool) {
        if !known_new {
            match self.inner.store.get(&self.key.0, &self.key.1).await {
                Ok(Some(rec)) => {
                    self.task = Some(rec.task);
                    self.seq = rec.last_seq;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(task.id = %self.key.1, error = %e, "cannot load task");
                    self.broken = true;
                }
            }
        }
        loop {
            let cmd = if let Some(run) = self.pending.pop_front() {
                Command::Run(Box::new(run))
            } else if let Ok(cmd) = self.rx.try_recv() {
                cmd
            } else {
                super::remote::release(self.inner.cluster(), &self.key).await;
                let exit = if self.may_exit() {
                    self.unregister()
                } else {
                    Unregister::Stays
                };
                match exit {
                    Unregister::Done => return,
                    // Found by the check under the lock: it runs now, before
                    // anything sent after it.
                    Unregister::Waiting(cmd) => cmd,
                    Unregister::Stays => tokio::select! {
                        cmd = self.rx.next() => match cmd {
                            Some(cmd) => cmd,
                            None => return,
                        },
                        _ = tokio::time::sleep(IDLE_RECHECK) => continue,
                    },
                }
            };
            // Several instances: act only under the task's lease, on what is stored.
            match super::remote::claim(self.inner.cluster(), &self.key).await {
                super::remote::Claim::Kept => {}
                super::remote::Claim::Fresh => {
                    if let Err(e) = self.reload().await {
                        super::remote::refuse(cmd, e.to_string());
                        continue;
                    }
                }
                super::remote::Claim::Refused(why) => {
                    super::remote::refuse(cmd, why);
                    continue;
                }
            }
            match cmd {
                Command::Run(run) => self.run(run).await,
                Command::Cancel(reply) => {
                    let r = Box::pin(self.cancel_idle()).await;
                    let _ = reply.send(r);
                }
                Command::Expire(x) => {
                    let r = self.expire_idle(x.states, x.older_than, &x.reason).await;
                    let _ = x.reply.send(r);
                }
            }
            if self.store_failure.is_some() {
                self.close_after_store_failure().await;
            }
        }
    }

    fn may_exit(&self) -> bool {
        self.broken
            || self
                .task
                .as_ref()
                .is_none_or(|t| t.status.state.is_terminal())
            || self.bus.receiver_count() == 0
    }

    /// Removes this driver from the registry unless it may not exit after all or a
    /// command is waiting (handed back to run next). Commands sent through a stale
    /// handle afterwards fail, and their senders retry.
    fn unregister(&mut self) -> Unregister {
        let mut reg = self
            .inner
            .registry
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // Re-checked under the lock that senders and subscribers hold.
        if !self.may_exit() {
            return Unregister::Stays;
        }
        if let Ok(cmd) = self.rx.try_recv() {
            return Unregister::Waiting(cmd);
        }
        if reg
            .get(&self.key)
            .is_some_and(|h| h.bus.same_channel(&self.bus))
        {
            reg.remove(&self.key);
        }
        self.rx.close();
        Unregister::Done
    }

    fn scope(&self) -> &Scope {
        &self.key.0
    }

    fn task_id(&self) -> &str {
        &self.key.1
    }

    fn state(&self) -> Option<TaskState> {
        self.task.as_ref().map(|t| t.status.state)
    }

    /// Folds `event` into the snapshot in place (the first event, a Task, makes it).
    fn fold(&mut self, event: &StreamResponse) {
        match &mut self.task {
            Some(task) => projection::apply_to(task, event),
            None => self.task = projection::apply(None, event),
        }
    }

    /// Folds `event` into the snapshot as the next sequence number and stages it;
    /// nothing is published before [`flush`](Self::flush) wrote it.
    fn stage(&mut self, event: StreamResponse) {
        let seq = self.seq + 1;
        self.fold(&event);
        self.seq = seq;
        self.staged.push(Arc::new(StoredEvent::new(seq, event)));
    }

    /// Writes every staged event in one append, then publishes them in order. The
    /// store write comes first: no subscriber sees an event that is not durable. On
    /// failure the driver stops writing (its snapshot is ahead of the store).
    async fn flush(&mut self) -> Result<(), A2aError> {
        if self.staged.is_empty() {
            return Ok(());
        }
        if self.broken {
            self.staged.clear();
            return Err(stopped());
        }
        let staged = std::mem::take(&mut self.staged);
        let started = std::time::Instant::now();
        let span = self.outcomes.write_span(self.task_id(), staged.len());
        // The snapshot's artifacts are lent to the store for the write (a SQL store
        // compacting its checkpoint takes them instead of folding its log again) and
        // taken back after it: the store holds no reference by then, so nothing is
        // copied. Nothing reads the snapshot meanwhile (`self` is borrowed here).
        let artifacts: FoldedArtifacts =
            Arc::new(self.task.as_mut().and_then(|t| t.artifacts.take()));
        let written =
            tracing::Instrument::instrument(self.write_retrying(&staged, &artifacts), span).await;
        if let Some(task) = self.task.as_mut() {
            task.artifacts = Arc::try_unwrap(artifacts).unwrap_or_else(|shared| (*shared).clone());
        }
        self.outcomes.store_write(
            &self.key.1,
            staged.len(),
            started.elapsed(),
            written.is_ok(),
        );
        if let Err(e) = written {
            self.broken = true;
            let what = format!("events {}..={}", staged[0].seq, self.seq);
            if matches!(e, StoreError::Backend(_)) {
                // The caller sees the category and an id; the store's own error
                // (file names, addresses) is logged under that id.
                let id = crate::telemetry::correlation_id();
                tracing::error!(task.id = %self.task_id(), correlation_id = %id, error = %e, "the task store failed; stopping the run");
                self.store_failure = Some(crate::telemetry::with_correlation(
                    &format!(
                        "the task store failed to record {what} of this task; the run was stopped"
                    ),
                    &id,
                ));
            }
            return Err(A2aError::internal(format!(
                "persisting {what} of task {}: {e}",
                self.task_id()
            )));
        }
        self.outcomes.written(staged.iter().map(|e| &e.event));
        self.publish(staged);
        Ok(())
    }

    /// Writes `events`, after which the task's artifacts are `artifacts` (see
    /// [`TaskStore::append_all_folded`](crate::store::TaskStore::append_all_folded)),
    /// retrying database errors after [`WRITE_RETRY_DELAYS`]. A conflict after a failed
    /// attempt may mean that attempt was committed after all (its answer lost): the
    /// write counts as done when the store holds exactly up to the last event.
    async fn write_retrying(
        &self,
        events: &[Arc<StoredEvent>],
        artifacts: &FoldedArtifacts,
    ) -> Result<(), StoreError> {
        let (scope, id) = (self.scope(), self.task_id());
        let mut delays = WRITE_RETRY_DELAYS.iter();
        let mut retried = false;
        loop {
            let appended = self
                .inner
                .store
                .append_all_folded(scope, id, events, artifacts);
            match appended.await {
                Ok(()) => {
                    self.wake_push();
                    return Ok(());
                }
                Err(StoreError::Backend(e)) => {
                    let Some(delay) = delays.next() else {
                        return Err(StoreError::Backend(e));
                    };
                    tracing::warn!(task.id = %id, error = %e, retry_in_ms = delay.as_millis() as u64, "task store write failed; retrying");
                    tokio::time::sleep(*delay).await;
                    retried = true;
                }
                Err(e @ StoreError::Conflict { .. }) if retried => {
                    let last = events.last().map_or(0, |e| e.seq);
                    return match self.inner.store.get(scope, id).await {
                        Ok(Some(rec)) if rec.last_seq == last => Ok(()),
                        _ => Err(e),
                    };
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// After a store failure stopped a run: once the store works again, records the
    /// task FAILED with the reason (on top of what the store holds), so that its
    /// subscribers get a final event and it does not stay WORKING. Retries with
    /// growing pauses for up to [`STORE_RECOVERY`], answering commands meanwhile with
    /// an error; gives up at shutdown or after that (the stale-task sweep closes the
    /// task later).
    async fn close_after_store_failure(&mut self) {
        let Some(reason) = self.store_failure.take() else {
            return;
        };
        let shutdown = self.inner.shutdown.clone();
        let deadline = tokio::time::Instant::now() + STORE_RECOVERY;
        let mut delay = Duration::from_secs(1);
        loop {
            self.staged.clear();
            if let Ok(exists) = self.reload().await {
                if !exists {
                    return;
                }
                if self.state().is_some_and(TaskState::is_terminal) {
                    self.broken = false;
                    return;
                }
                let ev = self.status_event(TaskState::Failed, &reason);
                self.outcomes.cause(tasks::reason::STORE);
                if self.append(ev).await.is_ok() {
                    tracing::warn!(task.id = %self.task_id(), %reason, "task closed FAILED after a store failure");
                    self.broken = false;
                    return;
                }
            }
            let pause = tokio::time::sleep(delay);
            tokio::pin!(pause);
            if tokio::time::Instant::now() + delay > deadline {
                tracing::error!(task.id = %self.task_id(), "the task store is still failing; the task stays as stored until the stale-task sweep closes it");
                return;
            }
            loop {
                tokio::select! {
                    _ = &mut pause => break,
                    _ = shutdown.cancelled() => return,
                    cmd = self.rx.next() => match cmd {
                        Some(cmd) => reject(cmd),
                        None => return,
                    },
                }
            }
            delay = (delay * 2).min(STORE_RECOVERY_MAX_DELAY);
        }
    }

    /// Stages and writes one event (see [`flush`](Self::flush)).
    async fn persist(&mut self, event: StreamResponse) -> Result<(), A2aError> {
        if self.broken {
            return Err(stopped());
        }
        self.stage(event);
        self.flush().await
    }

    /// Writes the staged events of a run, then gives a caller waiting for the run's
    /// first event its answer. On a store failure the run is stopped and a waiting
    /// caller gets the error.
    async fn commit(&mut self, r: &mut Running) {
        let written = self.flush().await;
        self.committed(r, written);
    }

    /// [`commit`](Self::commit) while the executor goes on: it is polled during the
    /// store write (unless it already returned, `outcome`), so what its upstream sends
    /// meanwhile is read and queued, up to the queue's capacity, and goes into the
    /// next write as one group. A store that answers at once (the memory store) is
    /// not slowed: the write is polled first. Should the executor return meanwhile,
    /// its end is noted in `outcome` and its queue closed, as
    /// [`drive`](Self::drive) does.
    ///
    /// Without this, a durable store's write of a streamed reply took one upstream
    /// chunk per write: an HTTP/1.1 body hands over a chunk only when it is read, so
    /// nothing was waiting when the write ended (BENCHMARKS.md, "Issue 14, fifteenth
    /// pass").
    async fn commit_reading_ahead(&mut self, r: &mut Running, outcome: &mut Option<Outcome>) {
        let written = {
            let flush = self.flush();
            tokio::pin!(flush);
            loop {
                tokio::select! {
                    biased;
                    written = &mut flush => break written,
                    end = &mut r.exec, if outcome.is_none() => {
                        *outcome = Some(outcome_of(end));
                        r.close_queue();
                    }
                }
            }
        };
        self.committed(r, written);
    }

    /// Answers a caller waiting for the run's first event once its write ended, or
    /// stops the run after a failed one (see [`commit`](Self::commit)).
    fn committed(&mut self, r: &mut Running, written: Result<(), A2aError>) {
        match written {
            Ok(()) => {
                if let Some(start) = r.start.take() {
                    send_once(&mut r.reply, Ok(*start));
                }
            }
            Err(e) => {
                r.start = None;
                if r.reply.is_some() {
                    self.fail_start(r, e);
                } else {
                    tracing::error!(task.id = %self.task_id(), error = %e, "event lost to a store failure; stopping the run");
                    r.exec.abort();
                }
            }
        }
    }

    /// Tells the push sender that events were stored (their outbox rows with them).
    fn wake_push(&self) {
        if let Some(push) = &self.inner.config.push {
            push.wake();
        }
    }

    /// Appends `event` as the next sequence number at once (nothing may be staged),
    /// then folds and publishes it. Store errors are returned as they are.
    async fn append(&mut self, event: StreamResponse) -> Result<(), StoreError> {
        debug_assert!(self.staged.is_empty());
        let ev = Arc::new(StoredEvent::new(self.seq + 1, event));
        let started = std::time::Instant::now();
        let written = self
            .inner
            .store
            .append_all(self.scope(), self.task_id(), std::slice::from_ref(&ev))
            .await;
        self.outcomes
            .store_write(&self.key.1, 1, started.elapsed(), written.is_ok());
        written?;
        self.outcomes.written([&ev.event]);
        self.wake_push();
        self.fold(&ev.event);
        self.seq = ev.seq;
        self.publish(vec![ev]);
        Ok(())
    }

    /// Publishes written `events` as one [`EventGroup`], when anyone follows the task. A
    /// subscriber that comes after the check reads these events from the store: it
    /// subscribes before it reads, and they were written before the check.
    fn publish(&self, events: Vec<Arc<StoredEvent>>) {
        if self.bus.receiver_count() > 0 {
            let _ = self.bus.send(Arc::new(events));
        }
    }

    /// Re-reads the task from the store (another instance sharing it may have
    /// written since this driver loaded it). `false` when it no longer exists.
    async fn reload(&mut self) -> Result<bool, A2aError> {
        let rec = self
            .inner
            .store
            .get(&self.key.0, &self.key.1)
            .await
            .map_err(A2aError::internal)?;
        Ok(match rec {
            Some(rec) => {
                if rec.last_seq != self.seq {
                    self.task = Some(rec.task);
                    self.seq = rec.last_seq;
                }
                true
            }
            None => false,
        })
    }

    fn status_event(&self, state: TaskState, text: &str) -> StreamResponse {
        let ctx_id = self
            .task
            .as_ref()
            .map(|t| t.context_id.clone())
            .unwrap_or_default();
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: self.task_id().to_owned(),
            context_id: ctx_id.clone(),
            status: TaskStatus::with_message(
                state,
                new_agent_text_message(text, Some(&ctx_id), Some(self.task_id())),
            ),
            metadata: None,
        })
    }

    async fn run(&mut self, run: Box<Run>) {
        let Run {
            mut ctx,
            permit,
            mut reply,
            recorded,
        } = *run;
        if self.broken {
            send_once(&mut reply, Err(stopped()));
            return;
        }
        if let Some(state) = self.state().filter(|s| s.is_terminal()) {
            if recorded {
                // Queued behind a turn that ended the task (FAILED, REJECTED, CANCELED,
                // a shutdown): its caller follows the task and has seen that end.
                tracing::info!(task.id = %self.task_id(), %state, "queued message not run: the task ended before its turn");
            }
            send_once(&mut reply, Err(terminal_refusal(self.task_id(), state)));
            return;
        }
        ctx.current_task = self.task.clone().map(Box::new);
        // A queued message's caller was answered when it was recorded.
        let mut sub = reply.is_some().then(|| self.bus.subscribe());
        if self.task.is_some() && !recorded {
            // A follow-up: record the user's message in the log, then hand the caller
            // the snapshot that contains it.
            if let Err(e) = self
                .persist(StreamResponse::Message(ctx.message.clone()))
                .await
            {
                send_once(&mut reply, Err(e));
                return;
            }
            let start = RunStart::Task {
                snapshot: self.task.clone().expect("task exists"),
                seq: self.seq,
                events: sub.take().expect("subscribed"),
                fresh: false,
                queued: false,
            };
            send_once(&mut reply, Ok(start));
        }

        self.outcomes.begin(&ctx);
        let (queue, events) = EventQueue::bounded(self.inner.config.event_queue_capacity);
        // The context clone stays boxed in the run's future until the executor's own
        // future takes it (not 540 bytes kept beside that future for the whole run).
        let exec = ExecutorRun::start(self.inner.executor.clone(), ctx.clone(), queue.clone());
        let mut r = Running {
            ctx,
            queue,
            events,
            exec,
            reply,
            sub,
            start: None,
            message_only: false,
            closed: false,
            turn_ended: false,
        };
        let outcome = self.drive(&mut r).await;
        drop(permit);
        let Some(outcome) = outcome else { return }; // canceled or shut down: already final
        self.finish(&mut r, outcome).await;
    }

    /// A message for this task while a turn runs. Refused at once when the task has
    /// ended (or the driver stopped); otherwise recorded in the log now (history),
    /// answered with the snapshot that holds it, and queued as a later turn (see
    /// [`super::turns`]). The caller never waits for the running turn to learn
    /// whether its message is taken.
    async fn enqueue(&mut self, mut run: Run) {
        if self.broken {
            send_once(&mut run.reply, Err(stopped()));
            return;
        }
        if let Some(state) = self.state().filter(|s| s.is_terminal()) {
            send_once(&mut run.reply, Err(terminal_refusal(self.task_id(), state)));
            return;
        }
        if self.task.is_none() {
            // Not created yet (cannot happen for a message naming the task, which
            // was read from the store): it waits for its turn to be answered.
            self.pending.push_back(run);
            return;
        }
        let sub = self.bus.subscribe();
        if let Err(e) = self
            .persist(StreamResponse::Message(run.ctx.message.clone()))
            .await
        {
            send_once(&mut run.reply, Err(e));
            return;
        }
        let start = RunStart::Task {
            snapshot: self.task.clone().expect("task exists"),
            seq: self.seq,
            events: sub,
            fresh: false,
            queued: true,
        };
        send_once(&mut run.reply, Ok(start));
        run.recorded = true;
        self.pending.push_back(run);
    }

    /// Processes executor events until the executor returns (`Some(outcome)`) or the
    /// run is canceled or shut down (`None`).
    async fn drive(&mut self, r: &mut Running) -> Option<Outcome> {
        // A child token: polled once per event group, it takes its own lock, not the
        // one every task and connection of the server shares.
        let shutdown = self.inner.shutdown.child_token();
        let mut outcome = None;
        // The event queue is closed and empty (a final state or a Message-only
        // reply was taken); the executor may still be running its clean-up.
        let mut drained = false;
        loop {
            // Set when events were staged: they are committed after the `select!`, so
            // its output (the event) is not kept in this future beside the commit's
            // own (the state an open stream waits in sizes the task, see
            // BENCHMARKS.md, "Issue 14, fourth pass").
            let mut staged = false;
            tokio::select! {
                biased;
                _ = shutdown.cancelled(), if outcome.is_none() => {
                    Box::pin(self.abort(r, TaskState::Failed, SHUTDOWN_REASON)).await;
                    return None;
                }
                cmd = self.rx.next(), if outcome.is_none() => match cmd {
                    Some(Command::Run(run)) => Box::pin(self.enqueue(*run)).await,
                    Some(Command::Cancel(reply)) => {
                        if self.broken {
                            let _ = reply.send(Err(stopped()));
                            continue;
                        }
                        // CancelTask read the task before it reached its final state.
                        if let Some(task) = self.task.clone().filter(|t| t.status.state.is_terminal()) {
                            let _ = reply.send(already_ended(task));
                            continue;
                        }
                        let result = Box::pin(self.cancel_running(r)).await;
                        let _ = reply.send(result);
                        return None;
                    }
                    // A message is being processed: the task is not abandoned.
                    Some(Command::Expire(x)) => {
                        let _ = x.reply.send(Ok(false));
                    }
                    None => {}
                },
                ev = r.events.recv_boxed(), if !drained => match ev {
                    Some(ev) => {
                        self.on_event(r, *ev);
                        // Whatever else is queued already goes into the same write.
                        for _ in 1..MAX_GROUP {
                            match r.events.try_recv() {
                                Ok(ev) => self.on_event(r, ev),
                                Err(_) => break,
                            }
                        }
                        staged = true;
                    }
                    None => {
                        if let Some(o) = outcome.take() {
                            return Some(o);
                        }
                        // Wait for the executor in this select, still serving
                        // commands (a CancelTask must not hang on its clean-up).
                        drained = true;
                    }
                },
                end = &mut r.exec, if outcome.is_none() => {
                    if drained {
                        return Some(outcome_of(end));
                    }
                    outcome = Some(outcome_of(end));
                    // Take what the executor queued, then stop accepting more.
                    r.close_queue();
                }
            }
            if staged {
                self.commit_reading_ahead(r, &mut outcome).await;
            }
        }
    }

    /// Validates one executor event and stages it (with the Task it implies when it
    /// is the run's first); the caller then [`commit`](Self::commit)s.
    fn on_event(&mut self, r: &mut Running, ev: StreamResponse) {
        if self.broken {
            return;
        }
        if r.message_only {
            tracing::warn!(task.id = %self.task_id(), "event after a Message-only response rejected");
            return;
        }
        if let StreamResponse::Message(mut m) = ev {
            if self.task.is_none() {
                // Message-only response: nothing is stored.
                m.context_id.get_or_insert_with(|| r.ctx.context_id.clone());
                m.task_id = None;
                r.message_only = true;
                send_once(&mut r.reply, Ok(RunStart::Message(m)));
                r.close_queue();
            } else {
                tracing::warn!(task.id = %self.task_id(), "a Message event in a task's lifecycle is rejected; use a status message");
            }
            return;
        }
        if ev.task_id() != Some(self.task_id()) {
            tracing::warn!(task.id = %self.task_id(), event.task_id = ?ev.task_id(), "event for another task rejected");
            return;
        }
        if let Some(state) = self.state().filter(|s| s.is_terminal()) {
            tracing::warn!(task.id = %self.task_id(), %state, "event after a terminal state rejected");
            return;
        }
        if self.task.is_none() {
            let first = match ev {
                StreamResponse::Task(t) => self.first_task(t, &r.ctx),
                other => {
                    // Lenient: a first status or artifact event implies the task.
                    let implied =
                        self.first_task(crate::executor::new_task(&r.ctx.message), &r.ctx);
                    self.stage(implied);
                    self.announce(r);
                    other
                }
            };
            self.stage(normalize(first, &r.ctx));
            self.announce(r);
        } else {
            let mut ev = normalize(ev, &r.ctx);
            if !self.pending.is_empty() {
                let (held, ended) = turns::hold_open(ev, &r.ctx.message.message_id);
                ev = held;
                if let Some(ended) = ended {
                    r.turn_ended = true;
                    if ended.is_terminal() && !r.closed {
                        // As after a final state: the turn is over.
                        r.close_queue();
                    }
                }
            }
            self.stage(ev);
        }
        if self.state().is_some_and(TaskState::is_terminal) && !r.closed {
            r.close_queue();
        }
    }

    /// Prepares the caller's answer: the snapshot after this run's first event (sent
    /// once it is written).
    fn announce(&mut self, r: &mut Running) {
        // `sub` is taken once: by the first announcement, or by a follow-up's answer.
        if r.reply.is_some()
            && let Some(sub) = r.sub.take()
        {
            r.start = Some(Box::new(RunStart::Task {
                snapshot: self.task.clone().expect("created"),
                seq: self.seq,
                events: sub,
                fresh: true,
                queued: false,
            }));
        }
    }

    fn fail_start(&mut self, r: &mut Running, e: A2aError) {
        r.exec.abort();
        send_once(&mut r.reply, Err(e));
    }

    /// The creating Task, with the server's ids and the user's message in history.
    fn first_task(&self, mut t: Task, ctx: &RequestContext) -> StreamResponse {
        t.id = self.task_id().to_owned();
        t.context_id = ctx.context_id.clone();
        if t.status.timestamp.is_none() {
            t.status.timestamp = Some(time::now());
        }
        let hist = t.history.get_or_insert_with(Vec::new);
        if !hist.iter().any(|m| m.message_id == ctx.message.message_id) {
            hist.insert(0, ctx.message.clone());
        }
        StreamResponse::Task(t)
    }

    /// After the executor returned: leaves the task in a final or interrupted state.
    async fn finish(&mut self, r: &mut Running, outcome: Outcome) {
        // Drain events the executor queued before returning.
        while let Ok(ev) = r.events.try_recv() {
            self.on_event(r, ev);
        }
        self.commit(r).await;
        if r.message_only || self.broken {
            return;
        }
        // The executor's cancellation is a child of the server's shutdown token: an
        // executor that returned (or failed) because the gateway is shutting down is
        // recorded as the shutdown's, not as an agent that forgot its final state. It
        // can see the shutdown before this driver does (it is polled during a store
        // write too, see `commit_reading_ahead`).
        let shutting_down = self.inner.shutdown.is_cancelled();
        // The executor's error or panic text may hold internals: the caller gets the
        // category and an id, the log line with that id the text.
        let (category, detail, cause) = match outcome {
            Outcome::Returned | Outcome::Failed(_) if shutting_down => {
                (SHUTDOWN_REASON, None, tasks::reason::SHUTDOWN)
            }
            Outcome::Returned => (
                "the agent finished without reporting a final state",
                None,
                tasks::reason::NO_FINAL_STATE,
            ),
            Outcome::Failed(e) => ("the agent failed", Some(e), tasks::reason::AGENT_ERROR),
            Outcome::Panicked(e) => ("the agent crashed", Some(e), tasks::reason::AGENT_PANIC),
        };
        let reason = match detail {
            None => category.to_owned(),
            Some(detail) => {
                let id = crate::telemetry::correlation_id();
                tracing::warn!(task.id = %self.task_id(), correlation_id = %id, %detail, "{category}");
                crate::telemetry::with_correlation(category, &id)
            }
        };
        if self.task.is_none() {
            let implied = self.first_task(crate::executor::new_task(&r.ctx.message), &r.ctx);
            self.stage(implied);
            self.announce(r);
        }
        if !r.turn_ended && !self.state().is_some_and(TaskState::is_settled) {
            tracing::warn!(task.id = %self.task_id(), %reason, "run ended without a final state; failing the task");
            self.outcomes.cause(cause);
            let ev = self.status_event(TaskState::Failed, &reason);
            self.stage(ev);
        }
        self.commit(r).await;
    }

    /// Stops a running executor and records `state` (FAILED on shutdown).
    async fn abort(&mut self, r: &mut Running, state: TaskState, reason: &str) {
        r.ctx.cancellation.cancel();
        r.exec.abort();
        r.events.close();
        while let Ok(ev) = r.events.try_recv() {
            self.on_event(r, ev);
        }
        self.commit(r).await;
        if self.task.is_none() {
            send_once(
                &mut r.reply,
                Err(A2aError::Unavailable("the gateway is shutting down".into())),
            );
            return;
        }
        if !self.state().is_some_and(TaskState::is_terminal) {
            if state == TaskState::Failed {
                self.outcomes.cause(tasks::reason::SHUTDOWN);
            }
            let ev = self.status_event(state, reason);
            if let Err(e) = self.persist(ev).await {
                tracing::error!(task.id = %self.task_id(), error = %e, "cannot record the abort");
            }
        }
    }

    /// CancelTask while the executor runs: signal, call `cancel`, abort, record CANCELED.
    async fn cancel_running(&mut self, r: &mut Running) -> Result<Task, A2aError> {
        r.ctx.cancellation.cancel();
        let mut cancel = {
            let executor = self.inner.executor.clone();
            let (ctx, queue) = (r.ctx.clone(), r.queue.clone());
            tokio::spawn(async move { executor.cancel(unbox(ctx), queue).await })
        };
        let deadline = tokio::time::sleep(CANCEL_TIMEOUT);
        tokio::pin!(deadline);
        // The run goes on (it may see its cancellation and say so) until `cancel`
        // returns; whatever it queues meanwhile is recorded.
        let mut exec_ended = false;
        loop {
            tokio::select! {
                res = &mut cancel => {
                    if let Err(e) = outcome_err(res) {
                        tracing::warn!(task.id = %self.task_id(), error = %e, "executor cancel failed");
                    }
                    break;
                }
                Some(ev) = r.events.recv() => {
                    self.on_event(r, ev);
                    self.commit(r).await;
                }
                _ = &mut r.exec, if !exec_ended => exec_ended = true,
                _ = &mut deadline => {
                    tracing::warn!(task.id = %self.task_id(), "executor cancel timed out");
                    cancel.abort();
                    break;
                }
            }
        }
        self.abort(r, TaskState::Canceled, "canceled by the client")
            .await;
        if self.broken {
            return Err(stopped());
        }
        self.task
            .clone()
            .ok_or_else(|| A2aError::TaskNotFound(self.task_id().to_owned()))
    }

    /// [`Command::Expire`] on a task with no run in progress.
    async fn expire_idle(
        &mut self,
        states: &[TaskState],
        older_than: Timestamp,
        reason: &str,
    ) -> Result<bool, A2aError> {
        if self.broken || !self.reload().await? {
            return Ok(false);
        }
        let waiting = self.task.as_ref().is_some_and(|t| {
            states.contains(&t.status.state) && t.status.timestamp.is_none_or(|ts| ts < older_than)
        });
        if !waiting {
            return Ok(false);
        }
        self.outcomes
            .cause(if states.contains(&TaskState::InputRequired) {
                tasks::reason::INPUT_TIMEOUT
            } else {
                tasks::reason::STALLED
            });
        let ev = self.status_event(TaskState::Failed, reason);
        match self.append(ev).await {
            Ok(()) => {
                tracing::info!(task.id = %self.task_id(), %reason, "idle task closed FAILED");
                Ok(true)
            }
            // Another instance wrote first (a follow-up): not abandoned after all.
            Err(StoreError::Conflict { .. }) => {
                self.reload().await?;
                Ok(false)
            }
            Err(e) => {
                self.broken = true;
                Err(A2aError::internal(format!(
                    "closing task {}: {e}",
                    self.task_id()
                )))
            }
        }
    }

    /// CancelTask on a task with no run in progress.
    async fn cancel_idle(&mut self) -> Result<Task, A2aError> {
        if self.broken {
            return Err(stopped());
        }
        let Some(task) = self.task.clone() else {
            return Err(A2aError::TaskNotFound(self.task_id().to_owned()));
        };
        if task.status.state.is_terminal() {
            return already_ended(task);
        }
        let (queue, mut events) = EventQueue::bounded(self.inner.config.event_queue_capacity);
        let last_message = task
            .history()
            .iter()
            .rev()
            .find(|m| m.role == crate::protocol::Role::User)
            .cloned();
        let message = last_message.unwrap_or_else(|| crate::executor::new_user_text_message(""));
        let mut ctx = RequestContext::new(
            message,
            task.id.clone(),
            task.context_id.clone(),
            crate::executor::CallContext::new(&self.key.0.tenant, &self.key.0.owner),
        );
        ctx.current_task = Some(Box::new(task));
        ctx.cancellation.cancel();
        let executor = self.inner.executor.clone();
        let cancel = tokio::spawn(async move { executor.cancel(ctx, queue).await });
        let res = tokio::time::timeout(CANCEL_TIMEOUT, cancel).await;
        events.close();
        while let Ok(ev) = events.try_recv() {
            if ev.task_id() == Some(self.task_id())
                && !matches!(ev, StreamResponse::Message(_))
                && !self.state().is_some_and(TaskState::is_terminal)
            {
                self.persist(ev).await?;
            }
        }
        match res {
            Ok(res) => {
                if let Err(e) = outcome_err(res) {
                    tracing::warn!(task.id = %self.task_id(), error = %e, "executor cancel failed");
                }
            }
            Err(_) => tracing::warn!(task.id = %self.task_id(), "executor cancel timed out"),
        }
        if !self.state().is_some_and(TaskState::is_terminal) {
            let ev = self.status_event(TaskState::Canceled, "canceled by the client");
            self.persist(ev).await?;
        }
        Ok(self.task.clone().expect("task exists"))
    }
}

/// The refusal of a message to a task in terminal `state`.
pub(crate) fn terminal_refusal(task_id: &str, state: TaskState) -> A2aError {
    A2aError::UnsupportedOperation(format!(
        "task {task_id} is in terminal state {state} and accepts no more messages"
    ))
}

/// CancelTask's answer for a task that has already ended: the task itself when it
/// is CANCELED (cancel is idempotent), TaskNotCancelable when it ended otherwise.
pub(crate) fn already_ended(task: Task) -> Result<Task, A2aError> {
    if task.status.state == TaskState::Canceled {
        return Ok(task);
    }
    Err(A2aError::TaskNotCancelable {
        task_id: task.id.clone(),
        state: task.status.state,
    })
}

/// The error of every operation on a driver whose store write failed: its snapshot
/// may hold events that are not in the store, so it is never shown to a client.
fn stopped() -> A2aError {
    A2aError::internal("task driver stopped after a store failure")
}

/// Answers a command with [`stopped`] without acting on it.
fn reject(cmd: Command) {
    match cmd {
        Command::Run(mut run) => {
            send_once(&mut run.reply, Err(stopped()));
        }
        Command::Cancel(reply) => {
            let _ = reply.send(Err(stopped()));
        }
        Command::Expire(x) => {
            let _ = x.reply.send(Err(stopped()));
        }
    }
}

/// Answers a caller once; a caller that went away is ignored.
fn send_once<T>(slot: &mut Option<oneshot::Sender<T>>, value: T) {
    if let Some(tx) = slot.take() {
        let _ = tx.send(value);
    }
}

/// Fills ids and timestamps the executor left out.
fn normalize(mut ev: StreamResponse, ctx: &RequestContext) -> StreamResponse {
    match &mut ev {
        StreamResponse::StatusUpdate(e) => {
            if e.status.timestamp.is_none() {
                e.status.timestamp = Some(time::now());
            }
            if e.context_id.is_empty() {
                e.context_id = ctx.context_id.clone();
            }
        }
        StreamResponse::ArtifactUpdate(e) => {
            if e.context_id.is_empty() {
                e.context_id = ctx.context_id.clone();
            }
        }
        StreamResponse::Task(t) => {
            if t.status.timestamp.is_none() {
                t.status.timestamp = Some(time::now());
            }
        }
        StreamResponse::Message(_) => {}
    }
    ev
}

fn panic_text(e: tokio::task::JoinError) -> String {
    if e.is_cancelled() {
        return "the run was aborted".into();
    }
    executor_run::panic_message(e.into_panic().as_ref())
}

fn outcome_of(end: RunEnd) -> Outcome {
    match end {
        RunEnd::Returned(Ok(())) => Outcome::Returned,
        RunEnd::Returned(Err(e)) => Outcome::Failed(e.to_string()),
        RunEnd::Panicked(e) => Outcome::Panicked(e),
        RunEnd::Aborted => Outcome::Panicked("the run was aborted".into()),
    }
}

/// How a spawned `AgentExecutor::cancel` ended: its error or panic text.
fn outcome_err(
    res: Result<Result<(), ExecutorError>, tokio::task::JoinError>,
) -> Result<(), String> {
    match res {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(panic_text(e)),
    }
}
