//! A turn: one executor run for one user message. The driver starts the executor,
//! takes its events in groups (validating, normalizing and staging each), writes each
//! group while it goes on polling the executor, answers the caller once the run's first
//! event is stored, queues messages that arrive meanwhile as later turns (see
//! [`crate::handler::turns`]) and leaves no run without a final state.

use futures::StreamExt;
use tokio::sync::{broadcast, oneshot};

use super::Driver;
use super::command::{
    Command, EventGroup, Run, RunStart, already_ended, send_once, stopped, terminal_refusal,
};
use super::executor_run::{ExecutorRun, RunEnd};
use crate::error::A2aError;
use crate::executor::{EventQueue, RequestContext};
use crate::handler::turns;
use crate::protocol::{Message, StreamResponse, Task, TaskState, time};
use crate::telemetry::tasks;

/// The FAILED reason of a task whose run the gateway's shutdown ended.
const SHUTDOWN_REASON: &str =
    "the gateway shut down before the task finished; send the message again";
/// The most queued executor events taken into one store write: the
/// [`EventQueue`]'s default capacity, so one write takes what a full queue holds (a
/// task's first group may stage one more, the Task implied by its first event). A
/// group is published as one [`EventGroup`].
const MAX_GROUP: usize = 64;

/// Why the executor's run ended, for the failure reason.
enum Outcome {
    Returned,
    Failed(String),
    Panicked(String),
}

/// The turn in progress: the executor's run, its queue, and the caller waiting for
/// its first event.
pub(super) struct Running {
    pub(super) ctx: Box<RequestContext>,
    pub(super) queue: EventQueue,
    pub(super) events: crate::executor::EventReceiver,
    /// The executor's run, polled by this driver (see [`super::executor_run`]).
    pub(super) exec: ExecutorRun,
    pub(super) reply: Option<oneshot::Sender<Result<RunStart, A2aError>>>,
    pub(super) sub: Option<broadcast::Receiver<EventGroup>>,
    /// The answer for the caller once the staged events are written. Boxed: it holds
    /// a task snapshot (about 360 bytes) for a moment, in a struct every open task's
    /// driver keeps for the whole run.
    pub(super) start: Option<Box<RunStart>>,
    pub(super) message_only: bool,
    pub(super) closed: bool,
    /// The turn reported a settling state that was held open for a queued message
    /// (see [`crate::handler::turns`]): the run has ended its turn, not failed to.
    pub(super) turn_ended: bool,
}

impl Running {
    /// Accepts no more executor events; what is already queued is still taken.
    fn close_queue(&mut self) {
        self.events.close();
        self.closed = true;
    }
}

impl Driver {
    /// Writes the staged events of a run, then gives a caller waiting for the run's
    /// first event its answer. On a store failure the run is stopped and a waiting
    /// caller gets the error.
    pub(super) async fn commit(&mut self, r: &mut Running) {
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

    pub(super) async fn run(&mut self, run: Box<Run>) {
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
            let events = sub.take().expect("subscribed");
            if !self
                .record_message(&ctx.message, &mut reply, events, false)
                .await
            {
                return;
            }
        }

        self.outcomes.begin(&*ctx);
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
    /// [`crate::handler::turns`]). The caller never waits for the running turn to learn
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
        let events = self.bus.subscribe();
        if self
            .record_message(&run.ctx.message, &mut run.reply, events, true)
            .await
        {
            run.recorded = true;
            self.pending.push_back(run);
        }
    }

    /// Records a user message to the existing task in its log (a follow-up, or
    /// `queued` behind the running turn) and answers the caller waiting in `reply`
    /// with the snapshot that holds it and `events` (the bus, subscribed before the
    /// write). Returns whether it was recorded; on a store failure the caller gets the
    /// error instead.
    async fn record_message(
        &mut self,
        message: &Message,
        reply: &mut Option<oneshot::Sender<Result<RunStart, A2aError>>>,
        events: broadcast::Receiver<EventGroup>,
        queued: bool,
    ) -> bool {
        if let Err(e) = self.persist(StreamResponse::Message(message.clone())).await {
            send_once(reply, Err(e));
            return false;
        }
        let start = RunStart::Task {
            snapshot: self.task.clone().expect("task exists"),
            seq: self.seq,
            events,
            fresh: false,
            queued,
        };
        send_once(reply, Ok(start));
        true
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
                        // The agent refused: the run goes on.
                        let refused = matches!(result, Err(A2aError::TaskNotCancelable { .. }));
                        let _ = reply.send(result);
                        if refused {
                            continue;
                        }
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
    pub(super) fn on_event(&mut self, r: &mut Running, ev: StreamResponse) {
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

fn outcome_of(end: RunEnd) -> Outcome {
    match end {
        RunEnd::Returned(Ok(())) => Outcome::Returned,
        RunEnd::Returned(Err(e)) => Outcome::Failed(e.to_string()),
        RunEnd::Panicked(e) => Outcome::Panicked(e),
        RunEnd::Aborted => Outcome::Panicked("the run was aborted".into()),
    }
}
