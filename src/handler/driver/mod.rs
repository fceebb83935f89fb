//! The task driver: one tokio task per active task, the single writer of its event
//! log. It runs the executor for each message in turn (a message to a task whose
//! turn is running is recorded and answered at once, and queued as the next turn,
//! never run concurrently; see [`super::turns`]), validates and persists every
//! executor event before publishing it on the task's bus, handles cancel, and leaves
//! no run without a final state.
//!
//! Events are written in groups: when the driver wakes for an executor event it also
//! takes every event already queued behind it (up to `MAX_GROUP`, in [`turn`]),
//! validates and folds them in order, writes them with one [`TaskStore::append_all`]
//! and only then publishes them and answers a waiting caller. The executor is polled
//! on during the write, so what it queues meanwhile is the next group. An executor
//! that emits faster than the store writes thus costs one write per group, not per
//! event, while a lone event is written at once (no waiting for company).
//!
//! The driver's files: [`command`] its vocabulary (what the handler sends it, what it
//! answers), `write` the store writes and their retries, `turn` one executor run,
//! `cancel` CancelTask and expiry, `lease` its part in several instances,
//! `executor_run` the executor's future as the driver polls it; this file the loop.
//!
//! [`TaskStore::append_all`]: crate::store::TaskStore::append_all

mod cancel;
pub(crate) mod command;
mod executor_run;
mod lease;
mod turn;
mod write;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc;
use tokio::sync::broadcast;

use super::shared::Inner;
use crate::executor::new_agent_text_message;
use crate::protocol::{StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent};
use crate::scope::Scope;
use crate::store::StoredEvent;
use crate::telemetry::tasks::TurnMetrics;
use command::{Command, EventGroup, Handle, Run, TaskKey};

/// How long an idle driver with live subscribers waits before re-checking whether
/// it may exit.
const IDLE_RECHECK: Duration = Duration::from_secs(5);

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
        let outcomes = TurnMetrics::for_agent(&key.0.agent);
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
            outcomes,
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
                lease::release(self.inner.cluster(), &self.key).await;
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
            match lease::claim(self.inner.cluster(), &self.key).await {
                lease::Claim::Kept => {}
                lease::Claim::Fresh => {
                    if let Err(e) = self.reload().await {
                        lease::refuse(cmd, e.to_string());
                        continue;
                    }
                }
                lease::Claim::Refused(why) => {
                    lease::refuse(cmd, why);
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
        let mut reg = self.inner.lock_registry();
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
}
