//! [`Relay`]: the agent's events become the gateway task's events. Ids are rewritten
//! to the gateway's (task and context; artifact ids are kept: they are unique within a
//! task); a direct Message reply stays a direct Message reply; a status, an artifact
//! chunk (`append`, `lastChunk`) or a whole task snapshot (the first event of a
//! resubscription, a GetTask answer) is relayed once: the relay counts the parts of each
//! artifact it relayed and sends only what a snapshot has beyond them.

use std::collections::HashMap;

use super::links::UpstreamTask;
use crate::executor::{QueueClosed, RequestContext, TaskUpdater};
use crate::protocol::{Message, StreamResponse, Task, TaskState};

/// Where the task stands after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// More is to come.
    More,
    /// The agent's task is terminal or interrupted, or the answer was a direct Message.
    Settled,
}

/// Relays one run's events onto the gateway task.
pub struct Relay<'a> {
    updater: &'a TaskUpdater,
    /// The gateway Task exists (a follow-up, or published by this run).
    started: bool,
    upstream: Option<UpstreamTask>,
    /// Parts relayed per artifact id.
    parts: HashMap<String, usize>,
    state: Option<TaskState>,
    /// The interrupted state a follow-up starts from, until the agent reports another
    /// or sends a status update: a task snapshot still showing it (the first event of a
    /// follow-up's stream, say) is not the answer to the follow-up.
    waiting_in: Option<TaskState>,
    chunks: u64,
    /// What went wrong before, for a FAILED without a status message (see
    /// [`Relay::hint`]).
    hint: Option<String>,
    /// [`Relay::notice`] told the client already.
    noticed: bool,
}

impl<'a> Relay<'a> {
    /// A relay for the run of `ctx`, publishing through `updater`; `upstream` is the
    /// agent's task when this is a follow-up.
    pub fn new(
        ctx: &RequestContext,
        updater: &'a TaskUpdater,
        upstream: Option<UpstreamTask>,
    ) -> Self {
        // A follow-up: the agent's snapshots still hold the earlier turns' artifacts,
        // which the gateway task has already.
        let parts = ctx
            .current_task
            .as_ref()
            .map(|t| {
                t.artifacts()
                    .iter()
                    .map(|a| (a.artifact_id.clone(), a.parts.len()))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            updater,
            started: ctx.current_task.is_some(),
            upstream,
            parts,
            state: ctx.current_task.as_ref().map(|t| t.status.state),
            waiting_in: ctx
                .current_task
                .as_ref()
                .map(|t| t.status.state)
                .filter(|s| s.is_interrupted()),
            chunks: 0,
            hint: None,
            noticed: false,
        }
    }

    /// Tells the client `text` as a WORKING status message of the gateway task, once per
    /// run (later calls do nothing): that the agent's answer broke off and the gateway
    /// is getting the task back. The state relayed from the agent stays as it was (a
    /// task the agent left SUBMITTED still counts as such).
    ///
    /// # Errors
    /// [`QueueClosed`].
    pub async fn notice(&mut self, text: String) -> Result<(), QueueClosed> {
        if std::mem::replace(&mut self.noticed, true) {
            return Ok(());
        }
        self.start().await?;
        let message = self.updater.new_agent_text(text);
        self.updater
            .update_status(TaskState::Working, Some(message))
            .await
    }

    /// What went wrong before (a public reason, e.g. the broken answer's), told when the
    /// agent then fails its task without a status message.
    pub fn hint(&mut self, why: String) {
        self.hint = Some(why);
    }

    /// The agent's task, once known.
    pub fn upstream(&self) -> Option<&UpstreamTask> {
        self.upstream.as_ref()
    }

    /// The last state relayed.
    pub fn state(&self) -> Option<TaskState> {
        self.state
    }

    /// Artifact updates relayed.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// Publishes the gateway Task (SUBMITTED) when it does not exist yet.
    ///
    /// # Errors
    /// [`QueueClosed`].
    pub async fn start(&mut self) -> Result<(), QueueClosed> {
        if !self.started {
            self.updater.submit().await?;
            self.started = true;
        }
        Ok(())
    }

    fn learn(&mut self, task_id: &str, context_id: &str) {
        if self.upstream.as_ref().is_none_or(|u| u.task_id != task_id) {
            self.upstream = Some(UpstreamTask {
                task_id: task_id.to_owned(),
                context_id: context_id.to_owned(),
            });
        }
    }

    /// The agent's message as the gateway task's.
    fn own(&self, mut m: Message) -> Message {
        m.task_id = Some(self.updater.task_id().to_owned());
        m.context_id = Some(self.updater.context_id().to_owned());
        m
    }

    fn settled(&self, state: TaskState) -> Step {
        if self.waiting_in == Some(state) {
            return Step::More;
        }
        if state.is_terminal() || state.is_interrupted() {
            Step::Settled
        } else {
            Step::More
        }
    }

    /// Notes that the agent reported `state`: a follow-up's wait is over once it is
    /// another state than the one the task waited in.
    fn moved_to(&mut self, state: TaskState) {
        if self.waiting_in.is_some_and(|w| w != state) {
            self.waiting_in = None;
        }
    }

    /// The status message of a FAILED the agent gave without one: a readable reason
    /// (with [`hint`](Self::hint) when known) and a correlation id, also logged.
    fn unexplained_failure(&self) -> Message {
        let reason = match &self.hint {
            Some(why) => format!("the A2A agent failed its task without saying why ({why})"),
            None => "the A2A agent failed its task without saying why".to_owned(),
        };
        let id = crate::telemetry::correlation_id();
        let reason = crate::telemetry::with_correlation(&reason, &id);
        tracing::warn!(correlation_id = %id, %reason, "the A2A agent failed its task without a status message");
        self.updater.new_agent_text(reason)
    }

    async fn status(
        &mut self,
        state: TaskState,
        message: Option<Message>,
    ) -> Result<Step, QueueClosed> {
        // The Task is published SUBMITTED already; the agent's own SUBMITTED adds nothing.
        let message = match message {
            None if state == TaskState::Failed => Some(self.unexplained_failure()),
            Some(m) if state == TaskState::Failed => Some(correlated(m)),
            m => m,
        };
        if state != TaskState::Submitted || message.is_some() {
            let message = message.map(|m| self.own(m));
            self.updater.update_status(state, message).await?;
        }
        self.state = Some(state);
        Ok(self.settled(state))
    }

    /// Relays one event of the agent.
    ///
    /// # Errors
    /// [`QueueClosed`].
    pub async fn apply(&mut self, event: StreamResponse) -> Result<Step, QueueClosed> {
        match event {
            StreamResponse::Message(m) => {
                if !self.started {
                    self.updater.reply_message(m.parts).await?;
                    return Ok(Step::Settled);
                }
                let state = self.state.unwrap_or(TaskState::Working);
                let m = self.own(m);
                self.updater.update_status(state, Some(m)).await?;
                Ok(self.settled(state))
            }
            StreamResponse::Task(t) => self.snapshot(t).await,
            StreamResponse::StatusUpdate(e) => {
                self.learn(&e.task_id, &e.context_id);
                self.start().await?;
                // A status update is the agent's news (a snapshot may be stale).
                self.waiting_in = None;
                if self.state == Some(e.status.state) && e.status.message.is_none() {
                    return Ok(self.settled(e.status.state));
                }
                self.status(e.status.state, e.status.message).await
            }
            StreamResponse::ArtifactUpdate(e) => {
                self.learn(&e.task_id, &e.context_id);
                self.start().await?;
                let a = e.artifact;
                let n = a.parts.len();
                let have = self.parts.entry(a.artifact_id.clone()).or_default();
                *have = if e.append { *have + n } else { n };
                self.chunks += 1;
                self.updater
                    .add_artifact(a.parts, Some(a.artifact_id), a.name, e.append, e.last_chunk)
                    .await?;
                Ok(Step::More)
            }
        }
    }

    /// Relays what a snapshot of the agent's task has beyond what was relayed: its
    /// state (when it changed) and the parts of each artifact not relayed yet.
    ///
    /// # Errors
    /// [`QueueClosed`].
    pub async fn snapshot(&mut self, task: Task) -> Result<Step, QueueClosed> {
        self.learn(&task.id, &task.context_id);
        self.start().await?;
        let state = task.status.state;
        self.moved_to(state);
        let settled = self.settled(state) == Step::Settled;
        for a in task.artifacts.unwrap_or_default() {
            let have = self.parts.get(&a.artifact_id).copied().unwrap_or(0);
            if a.parts.len() > have {
                let new: Vec<_> = a.parts.into_iter().skip(have).collect();
                self.parts.insert(a.artifact_id.clone(), have + new.len());
                self.chunks += 1;
                self.updater
                    .add_artifact(new, Some(a.artifact_id), a.name, have > 0, settled)
                    .await?;
            }
        }
        if self.state != Some(state) {
            return self.status(state, task.status.message).await;
        }
        Ok(self.settled(state))
    }
}

/// The agent's own FAILED status message `m` with a correlation id appended (a text part
/// ` [correlation id …]`), as every failure reason the gateway gives carries one; the
/// agent's words are logged under it.
fn correlated(mut m: Message) -> Message {
    let id = crate::telemetry::correlation_id();
    let words: String = m.parts.iter().filter_map(|p| p.as_text()).collect();
    tracing::warn!(
        correlation_id = %id,
        reason = %crate::telemetry::prefix_chars(&words, 300),
        "the A2A agent failed its task"
    );
    m.parts.push(crate::protocol::Part::text(format!(
        " [correlation id {id}]"
    )));
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::{CallContext, EventQueue, new_user_text_message};
    use crate::protocol::{Artifact, Part, TaskArtifactUpdateEvent, TaskStatus};

    fn agent_task(state: TaskState, parts: &[&str]) -> Task {
        Task {
            id: "agent-task".into(),
            context_id: "agent-ctx".into(),
            status: TaskStatus::new(state),
            artifacts: (!parts.is_empty()).then(|| {
                vec![Artifact {
                    artifact_id: "a".into(),
                    name: None,
                    description: None,
                    parts: parts.iter().map(|p| Part::text(*p)).collect(),
                    metadata: None,
                    extensions: Vec::new(),
                }]
            }),
            history: None,
            metadata: None,
        }
    }

    fn chunk(text: &str, append: bool) -> StreamResponse {
        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: "agent-task".into(),
            context_id: "agent-ctx".into(),
            artifact: Artifact {
                artifact_id: "a".into(),
                name: None,
                description: None,
                parts: vec![Part::text(text)],
                metadata: None,
                extensions: Vec::new(),
            },
            append,
            last_chunk: false,
            metadata: None,
        })
    }

    fn texts(events: &[StreamResponse]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                StreamResponse::ArtifactUpdate(a) => Some(
                    a.artifact
                        .parts
                        .iter()
                        .filter_map(|p| p.as_text())
                        .collect(),
                ),
                _ => None,
            })
            .collect()
    }

    /// Chunks relayed from the stream are not relayed again from a later snapshot (a
    /// resubscription's first event, a GetTask answer); the parts beyond them are, once,
    /// and the ids are the gateway's.
    #[tokio::test]
    async fn a_snapshot_relays_only_what_is_new() {
        let ctx = RequestContext::new(
            new_user_text_message("go"),
            "gw-task".into(),
            "gw-ctx".into(),
            CallContext::new("", "alice"),
        );
        let (queue, mut rx) = EventQueue::bounded(64);
        let updater = TaskUpdater::from_context(&ctx, queue);
        let mut relay = Relay::new(&ctx, &updater, None);
        let working = agent_task(TaskState::Working, &[]);
        assert_eq!(
            relay.apply(StreamResponse::Task(working)).await.unwrap(),
            Step::More
        );
        relay.apply(chunk("one ", false)).await.unwrap();
        relay.apply(chunk("two ", true)).await.unwrap();
        let snap = agent_task(TaskState::Working, &["one ", "two ", "three "]);
        assert_eq!(relay.snapshot(snap.clone()).await.unwrap(), Step::More);
        assert_eq!(relay.snapshot(snap).await.unwrap(), Step::More);
        let done = agent_task(TaskState::Completed, &["one ", "two ", "three ", "four"]);
        assert_eq!(relay.snapshot(done).await.unwrap(), Step::Settled);
        assert_eq!(relay.upstream().unwrap().task_id, "agent-task");
        drop(relay);
        drop(updater);
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            events.push(e);
        }
        assert_eq!(texts(&events), ["one ", "two ", "three ", "four"]);
        assert!(
            events.iter().all(|e| e.task_id() == Some("gw-task")),
            "{events:?}"
        );
        assert_eq!(events.last().unwrap().state(), Some(TaskState::Completed));
    }

    /// A follow-up to an INPUT_REQUIRED task: a snapshot still INPUT_REQUIRED is not the
    /// answer; a status update is.
    #[tokio::test]
    async fn a_follow_ups_stale_snapshot_does_not_end_the_turn() {
        let mut ctx = RequestContext::new(
            new_user_text_message("42"),
            "gw-task".into(),
            "gw-ctx".into(),
            CallContext::new("", "alice"),
        );
        let mut waiting = agent_task(TaskState::InputRequired, &[]);
        waiting.id = "gw-task".into();
        ctx.current_task = Some(Box::new(waiting));
        let (queue, _rx) = EventQueue::bounded(64);
        let updater = TaskUpdater::from_context(&ctx, queue);
        let mut relay = Relay::new(&ctx, &updater, None);
        let stale = agent_task(TaskState::InputRequired, &[]);
        assert_eq!(
            relay.apply(StreamResponse::Task(stale)).await.unwrap(),
            Step::More
        );
        let asked_again = StreamResponse::StatusUpdate(crate::protocol::TaskStatusUpdateEvent {
            task_id: "agent-task".into(),
            context_id: "agent-ctx".into(),
            status: TaskStatus::new(TaskState::InputRequired),
            metadata: None,
        });
        assert_eq!(relay.apply(asked_again).await.unwrap(), Step::Settled);
    }

    #[tokio::test]
    async fn a_failure_without_a_message_gets_a_reason_and_a_correlation_id() {
        let ctx = RequestContext::new(
            new_user_text_message("go"),
            "gw-task".into(),
            "gw-ctx".into(),
            CallContext::new("", "alice"),
        );
        let (queue, mut rx) = EventQueue::bounded(64);
        let updater = TaskUpdater::from_context(&ctx, queue);
        let mut relay = Relay::new(&ctx, &updater, None);
        relay.hint("the A2A agent answered JSON-RPC error -32603: boom".into());
        let failed = agent_task(TaskState::Failed, &[]);
        assert_eq!(relay.snapshot(failed).await.unwrap(), Step::Settled);
        drop(relay);
        drop(updater);
        let mut last = None;
        while let Some(e) = rx.recv().await {
            last = Some(e);
        }
        let Some(StreamResponse::StatusUpdate(e)) = last else {
            panic!("{last:?}");
        };
        assert_eq!(e.status.state, TaskState::Failed);
        let text: String = e
            .status
            .message
            .expect("a status message")
            .parts
            .iter()
            .filter_map(|p| p.as_text())
            .collect();
        assert!(text.contains("without saying why"), "{text}");
        assert!(text.contains("boom"), "{text}");
        assert!(text.contains("[correlation id "), "{text}");
        let m = correlated(new_user_text_message("failed on purpose"));
        let text: String = m.parts.iter().filter_map(|p| p.as_text()).collect();
        assert!(
            text.starts_with("failed on purpose [correlation id "),
            "{text}"
        );
    }
}
