//! SendMessage and SendStreamingMessage (spec §3.1.1, §3.1.2): the checks of a
//! message, the task and context it goes to, and the start (or queueing) of its run on
//! the task's driver.

use super::driver::command::{Command, Run, RunStart, terminal_refusal};
use super::request_handler::RequestHandler;
use super::stream::{EventStream, SequencedEvent, StreamEnd, task_stream};
use super::validation::{check_call, history_length, non_empty, validate_message};
use super::{task_size, turns};
use crate::error::A2aError;
use crate::executor::{CallContext, RequestContext, new_id};
use crate::protocol::value_count::JsonSize;
use crate::protocol::{SendMessageRequest, SendMessageResponse, StreamResponse};
use crate::scope::Scope;

impl RequestHandler {
    /// The checks of a message before it is started: required extensions, then every
    /// part's media type against the input modes.
    fn admit(&self, call: &CallContext, req: &SendMessageRequest) -> Result<(), A2aError> {
        self.check_extensions(call)?;
        self.inner.terms.get().input_modes.check(&req.message)
    }

    /// Validates a send, resolves its task and context, and starts (or queues) the
    /// run. Returns what the run produced first.
    async fn start(
        &self,
        call: &CallContext,
        req: SendMessageRequest,
    ) -> Result<RunStart, A2aError> {
        check_call(call)?;
        if self
            .inner
            .closing
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return Err(A2aError::Unavailable("the gateway is shutting down".into()));
        }
        let SendMessageRequest {
            mut message,
            configuration,
            metadata,
            ..
        } = req;
        validate_message(&message)?;
        // historyLength is validated by the callers, which also apply it.
        let inline_push = match configuration
            .as_ref()
            .and_then(|c| c.task_push_notification_config.as_ref())
        {
            Some(v) => Some(self.inline_push_config(v)?),
            None => None,
        };
        let scope = Scope::from(call);
        let (task_id, context_id, known_new) = match non_empty(&message.task_id) {
            Some(task_id) => {
                let rec = self.load(&scope, task_id).await?;
                if let Some(ctx) = non_empty(&message.context_id)
                    && ctx != rec.task.context_id
                {
                    return Err(A2aError::InvalidParams(format!(
                        "message.contextId {ctx:?} does not match the context of task {task_id}"
                    )));
                }
                if rec.task.status.state.is_terminal() {
                    return Err(terminal_refusal(task_id, rec.task.status.state));
                }
                task_size::check(
                    &rec.task,
                    self.inner.config.max_task_values,
                    self.inner.config.max_task_bytes,
                )?;
                (task_id.to_owned(), rec.task.context_id, false)
            }
            None => (
                new_id(),
                non_empty(&message.context_id)
                    .map(str::to_owned)
                    .unwrap_or_else(new_id),
                true,
            ),
        };
        message.task_id = Some(task_id.clone());
        message.context_id = Some(context_id.clone());
        // Charged before anything of the message is stored (its push config either).
        let bytes = JsonSize::of(&message).map_err(A2aError::internal)?.bytes;
        self.inner.write_budget.charge(&scope, bytes)?;
        if let Some(cfg) = &inline_push {
            if !cfg.task_id.is_empty() && cfg.task_id != task_id {
                return Err(A2aError::InvalidParams(
                    "configuration.taskPushNotificationConfig.taskId differs from the message's task"
                        .into(),
                ));
            }
            // Stored before the run starts, so its first event is delivered too.
            self.register_push_config(&scope, &task_id, cfg, known_new)
                .await?;
        }

        let mut related = Vec::new();
        for id in &message.reference_task_ids {
            if let Ok(Some(rec)) = self.inner.store.get(&scope, id).await {
                related.push(rec.task);
            }
        }
        let mut ctx = RequestContext::new(message, task_id.clone(), context_id, call.clone());
        ctx.related_tasks = related;
        ctx.configuration = configuration;
        ctx.metadata = metadata;
        ctx.cancellation = self.inner.shutdown.child_token();

        let key = (scope, task_id);
        if !known_new {
            // Another instance running a turn of this task: run after it.
            self.wait_for_lease(&key).await?;
        }
        let mut refused_busy = false;
        let asked = self
            .ask(&key, known_new, |reply| {
                let permit = self
                    .inner
                    .run_limits
                    .acquire(
                        &key.0,
                        &self.inner.permits,
                        self.inner.config.max_concurrent_tasks,
                    )
                    .inspect_err(|_| refused_busy = true)?;
                let run = Run {
                    ctx: Box::new(ctx.clone()),
                    permit,
                    reply: Some(reply),
                    recorded: false,
                };
                Ok(Command::Run(Box::new(run)))
            })
            .await;
        if refused_busy && asked.is_err() {
            // Refused for want of a run slot before the message was stored: its bytes
            // go back to the caller's budget.
            self.inner.write_budget.refund(&key.0, bytes);
        }
        asked
    }

    /// SendMessage (spec §3.1.1): blocks until the task is terminal or interrupted,
    /// or until the turn of this message ended while another message waits for the
    /// task (see the `turns` module), and returns it with all artifacts; or returns at
    /// once with `configuration.returnImmediately`. A Message-only reply is returned
    /// as is. A message to a task whose turn is running is accepted at once and runs
    /// as the task's next turn.
    ///
    /// # Errors
    /// InvalidParams (bad message, negative historyLength, contextId mismatch),
    /// ExtensionSupportRequired (a required extension not activated),
    /// ContentTypeNotSupported (a part's media type is not an input mode),
    /// TaskNotFound, UnsupportedOperation (terminal task), PushNotificationNotSupported
    /// (inline push config), Unavailable (too many running tasks), Internal.
    pub async fn send_message(
        &self,
        call: &CallContext,
        req: SendMessageRequest,
    ) -> Result<SendMessageResponse, A2aError> {
        self.admit(call, &req)?;
        let immediate = req
            .configuration
            .as_ref()
            .is_some_and(|c| c.returns_immediately());
        let hl = history_length(req.configuration.as_ref().and_then(|c| c.history_length))?;
        let message_id = req.message.message_id.clone();
        let (snapshot, seq, events, fresh, queued) = match self.start(call, req).await? {
            RunStart::Message(m) => return Ok(SendMessageResponse::Message(m)),
            RunStart::Task {
                snapshot,
                seq,
                events,
                fresh,
                queued,
            } => (snapshot, seq, events, fresh, queued),
        };
        let scope = Scope::from(call);
        let mut task = snapshot;
        let settled_now = fresh && task.status.state.is_settled();
        // A follow-up's snapshot still shows the state before this message (often
        // INPUT_REQUIRED): with returnImmediately, wait for the run's first state. A
        // queued message's snapshot is current (WORKING on the turn before it).
        let wait = if immediate {
            !fresh && !queued
        } else {
            !settled_now
        };
        if wait {
            let mut follow =
                self.inner
                    .follow(scope.clone(), task.id.clone(), seq, Some(events), false);
            // Every event after the snapshot arrives, in order: folding them gives the
            // stored task as of the settling event without reading it back.
            while let Some(ev) = follow.next().await {
                let ev = ev?;
                let done = ev
                    .event
                    .state()
                    .is_some_and(|s| immediate || s.is_settled())
                    || turns::ends_turn_of(&ev.event, &message_id);
                crate::store::projection::apply_to(&mut task, &ev.event);
                if done {
                    break;
                }
            }
        }
        task.apply_history_length(hl);
        Ok(SendMessageResponse::Task(task))
    }

    /// SendStreamingMessage (spec §3.1.2): the Task first (or a single Message), then
    /// its status and artifact updates; ends after a terminal state or
    /// INPUT_REQUIRED, or after the update that ends this message's turn while
    /// another message waits (see the `turns` module); stays open through
    /// AUTH_REQUIRED. A message to a task whose turn is running is accepted at once:
    /// the stream opens with the current Task (the message in its history) and
    /// carries the running turn's events, then its own.
    ///
    /// # Errors
    /// As [`send_message`](Self::send_message), plus UnsupportedOperation when
    /// streaming is not offered. Errors after the first event end the stream.
    pub async fn send_streaming_message(
        &self,
        call: &CallContext,
        req: SendMessageRequest,
    ) -> Result<EventStream, A2aError> {
        if !self.inner.terms.get().streaming {
            return Err(A2aError::UnsupportedOperation(
                "streaming is not supported by this agent".into(),
            ));
        }
        self.admit(call, &req)?;
        let hl = history_length(req.configuration.as_ref().and_then(|c| c.history_length))?;
        let message_id = req.message.message_id.clone();
        match self.start(call, req).await? {
            RunStart::Message(m) => {
                let one = SequencedEvent::new(None, StreamResponse::Message(m));
                Ok(Box::pin(futures::stream::iter([Ok(one)])))
            }
            RunStart::Task {
                mut snapshot,
                seq,
                events,
                fresh,
                ..
            } => {
                snapshot.apply_history_length(hl);
                let follow = self.inner.follow(
                    Scope::from(call),
                    snapshot.id.clone(),
                    seq,
                    Some(events),
                    false,
                );
                Ok(task_stream(
                    Some((snapshot, seq)),
                    fresh,
                    Some(message_id),
                    StreamEnd::Interrupted,
                    follow,
                ))
            }
        }
    }
}
