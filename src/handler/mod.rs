//! The request handler: A2A protocol semantics of every operation (spec §3.1),
//! independent of any transport. It owns the task lifecycle rules, the task store,
//! the event log and fan-out to subscribers, and runs executors. It knows nothing of
//! HTTP and nothing of any upstream.

mod driver;
mod follow;
mod input_modes;
mod push;
mod remote;
mod retention;
mod turns;

pub use input_modes::{InputModes, parse_media_range, part_media_type};
pub use push::MAX_CONFIGS_PER_TASK;

pub use retention::{
    DEFAULT_PURGE_BATCH, MaintenanceConfig, MaintenanceReport, stale_reason, ttl_reason,
};
pub use turns::TURN_ENDED_METADATA;

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use tokio::sync::{Semaphore, oneshot};
use tokio_util::sync::CancellationToken;

/// How many task ids the restart-recovery summary line names.
const RECOVERY_SAMPLE: usize = 10;

use crate::error::A2aError;
use crate::executor::{AgentExecutor, CallContext, RequestContext, new_id};
use crate::protocol::{
    AgentCard, CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse, Message,
    Role, SendMessageRequest, SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task,
    TaskState,
};
use crate::store::{PageCursor, Scope, StoredEvent, TaskQuery, TaskStore};

use driver::Driver;
use driver::command::{Command, Handle, Run, RunStart, TaskKey};
use follow::Follow;

/// One event of a response stream with its position in the task's event log
/// (`None` for a Message-only response). Transports send `seq` as the SSE `id:`.
///
/// The event is shared with the task's other subscribers and its store write
/// (see [`StoredEvent`]): reading it copies nothing, and the JSON text a SQL store
/// made for its write ([`SequencedEvent::cached_json`]) is sent as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct SequencedEvent {
    /// The task's event sequence number.
    pub seq: Option<u64>,
    stored: Arc<StoredEvent>,
}

impl SequencedEvent {
    /// `event` at `seq` (`None` for a Message-only response).
    pub fn new(seq: Option<u64>, event: StreamResponse) -> Self {
        Self {
            seq,
            stored: Arc::new(StoredEvent::new(seq.unwrap_or(0), event)),
        }
    }

    /// A stored event as a stream event.
    pub(crate) fn stored(stored: Arc<StoredEvent>) -> Self {
        Self {
            seq: Some(stored.seq),
            stored,
        }
    }

    /// The event.
    pub fn event(&self) -> &StreamResponse {
        &self.stored.event
    }

    /// The event as compact JSON text (its HTTP+JSON form) when the store already
    /// made it for its write (see [`StoredEvent::cached_json`]).
    pub fn cached_json(&self) -> Option<&str> {
        self.stored.cached_json()
    }

    /// The event by value (a copy when other subscribers still share it).
    pub fn into_event(self) -> StreamResponse {
        Arc::try_unwrap(self.stored)
            .map(|s| s.event)
            .unwrap_or_else(|shared| shared.event.clone())
    }
}

/// A response stream: ends after the last event it should carry (a Message, a
/// terminal state, or, for SendStreamingMessage only, INPUT_REQUIRED), or with one
/// final error.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<SequencedEvent, A2aError>> + Send>>;

/// Handler limits and capabilities.
#[derive(Debug, Clone)]
pub struct HandlerConfig {
    /// Offer SendStreamingMessage and SubscribeToTask (`capabilities.streaming`).
    pub streaming: bool,
    /// The extended agent card, when `capabilities.extendedAgentCard` is true.
    pub extended_agent_card: Option<AgentCard>,
    /// Whether the public card sets `capabilities.extendedAgentCard`.
    pub extended_agent_card_enabled: bool,
    /// Most executor runs at once; more are refused with a retryable error.
    pub max_concurrent_tasks: usize,
    /// Capacity of each run's [`EventQueue`](crate::EventQueue), in events.
    pub event_queue_capacity: usize,
    /// Live store writes buffered per subscriber before it falls back to reading the
    /// store: the capacity of each task's broadcast bus (rounded up to a power of two),
    /// allocated when the task's driver starts (about 31 bytes per slot). Each slot holds
    /// the events of one write (one event at model token rates, up to 64 in a burst
    /// with the default `event_queue_capacity`). Default 16.
    pub subscriber_buffer: usize,
    /// Extension URIs the card marks `required` (spec §3.3.4): the task operations
    /// refuse a call whose `A2A-Extensions` does not activate every one of them
    /// (see [`RequestHandler::check_extensions`]).
    pub required_extensions: Vec<String>,
    /// The media types a message part may have (`defaultInputModes` and the skills'
    /// `inputModes`); the default accepts everything.
    pub input_modes: InputModes,
    /// Push notifications (`capabilities.pushNotifications`): `None` refuses the
    /// push-config operations and inline configs with PushNotificationNotSupported.
    pub push: Option<Arc<crate::push::PushService>>,
    /// A ListTasks page's byte bound, in bytes of the listed tasks' stored JSON (see
    /// [`TaskQuery::max_bytes`]): the page ends early, with a `nextPageToken`, before
    /// the task that would take it past this. Default [`DEFAULT_LIST_PAGE_BYTES`].
    pub max_list_page_bytes: u64,
}

/// The default ListTasks page bound, 4 MiB: the message limit that gRPC clients apply
/// by default (gRPC applies the bound to its own encoding too), so their pages arrive
/// unless one task is larger.
pub const DEFAULT_LIST_PAGE_BYTES: u64 = 4 * 1024 * 1024;

impl HandlerConfig {
    /// Takes what the public `card` declares: `capabilities.streaming` (absent means
    /// off, spec §3.3.4), its required extensions and its input modes, so the handler
    /// enforces exactly what the card promises.
    pub fn with_card(mut self, card: &AgentCard) -> Self {
        self.streaming = card.capabilities.streaming.unwrap_or(false);
        self.required_extensions = card
            .capabilities
            .extensions
            .iter()
            .filter(|e| e.required)
            .map(|e| e.uri.clone())
            .collect();
        self.input_modes = InputModes::from_card(card);
        self
    }
}

impl Default for HandlerConfig {
    fn default() -> Self {
        Self {
            streaming: true,
            extended_agent_card: None,
            extended_agent_card_enabled: false,
            max_concurrent_tasks: 1024,
            event_queue_capacity: crate::executor::EventQueue::DEFAULT_CAPACITY,
            subscriber_buffer: 16,
            required_extensions: Vec::new(),
            input_modes: InputModes::default(),
            max_list_page_bytes: DEFAULT_LIST_PAGE_BYTES,
            push: None,
        }
    }
}

pub(crate) struct Inner {
    pub(crate) executor: Arc<dyn AgentExecutor>,
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) config: HandlerConfig,
    pub(crate) registry: Mutex<HashMap<TaskKey, Handle>>,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) shutdown: CancellationToken,
    /// Set by [`RequestHandler::shutdown`]: new messages are refused.
    pub(crate) closing: std::sync::atomic::AtomicBool,
    /// Several instances on one store (see [`crate::cluster`] and the `remote` module).
    pub(crate) cluster: std::sync::OnceLock<crate::cluster::Cluster>,
}

impl Inner {
    /// The cluster this instance joined, if any.
    pub(crate) fn cluster(&self) -> Option<&crate::cluster::Cluster> {
        self.cluster.get()
    }

    /// A follower of the task's log after `after`, woken by other instances' writes
    /// when in a cluster.
    pub(crate) fn follow(
        &self,
        scope: Scope,
        task_id: String,
        after: u64,
        live: Option<tokio::sync::broadcast::Receiver<driver::command::EventGroup>>,
        fill_first: bool,
    ) -> Follow {
        let wake = match (&live, self.cluster()) {
            (Some(_), Some(c)) => Some(c.watch(&(scope.clone(), task_id.clone()))),
            _ => None,
        };
        Follow::new(self.store.clone(), scope, task_id, after, live, fill_first).with_wake(wake)
    }
}

/// The transport-independent A2A request handler. Cheap to clone.
#[derive(Clone)]
pub struct RequestHandler {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RequestHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestHandler")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

const DEFAULT_PAGE_SIZE: i32 = 50;
const MAX_PAGE_SIZE: i32 = 100;

fn history_length(v: Option<i32>) -> Result<Option<u32>, A2aError> {
    match v {
        Some(n) if n < 0 => Err(A2aError::InvalidParams(format!(
            "historyLength must be 0 or more, got {n}"
        ))),
        Some(n) => Ok(Some(n as u32)),
        None => Ok(None),
    }
}

/// Longest id (task, context, message) a client may send, in bytes.
pub const MAX_ID_BYTES: usize = 1024;

/// Refuses an id longer than [`MAX_ID_BYTES`] or holding a NUL character (which no SQL
/// text column stores: PostgreSQL refuses it).
fn check_id(field: &str, id: &str) -> Result<(), A2aError> {
    if id.contains('\0') {
        return Err(A2aError::InvalidParams(format!(
            "{field} contains a NUL character"
        )));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(A2aError::InvalidParams(format!(
            "{field} is {} bytes long; ids are at most {MAX_ID_BYTES} bytes",
            id.len()
        )));
    }
    Ok(())
}

/// Refuses a caller scope whose tenant is longer than an id may be.
fn check_call(call: &CallContext) -> Result<(), A2aError> {
    check_id("tenant", &call.tenant)
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

impl RequestHandler {
    /// A handler running `executor` over `store`.
    pub fn new(
        executor: Arc<dyn AgentExecutor>,
        store: Arc<dyn TaskStore>,
        config: HandlerConfig,
    ) -> Self {
        let permits = Arc::new(Semaphore::new(config.max_concurrent_tasks.max(1)));
        Self {
            inner: Arc::new(Inner {
                executor,
                store,
                config,
                registry: Mutex::new(HashMap::new()),
                permits,
                shutdown: CancellationToken::new(),
                closing: std::sync::atomic::AtomicBool::new(false),
                cluster: std::sync::OnceLock::new(),
            }),
        }
    }

    /// The ListTasks page bound, in bytes ([`HandlerConfig::max_list_page_bytes`]),
    /// for a binding that applies it to its own encoding too (gRPC).
    pub fn max_list_page_bytes(&self) -> u64 {
        self.inner.config.max_list_page_bytes
    }

    /// The task store.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.inner.store
    }

    /// Executor runs in progress.
    pub fn active_runs(&self) -> usize {
        self.inner.config.max_concurrent_tasks.max(1) - self.inner.permits.available_permits()
    }

    /// Runs `f` on the task's driver handle (spawning the driver if none is
    /// live) while holding the registry lock. A driver decides to exit under the
    /// same lock, after checking for queued commands and subscribers, so a command
    /// sent or a subscription made inside `f` is never lost to a driver that
    /// exits in between.
    fn with_handle<T>(&self, key: &TaskKey, known_new: bool, f: impl FnOnce(&Handle) -> T) -> T {
        let mut reg = self
            .inner
            .registry
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(h) = reg.get(key).filter(|h| !h.cmd.is_closed()) {
            return f(h);
        }
        let h = Driver::spawn(self.inner.clone(), key.clone(), known_new);
        let out = f(&h);
        reg.insert(key.clone(), h);
        out
    }

    /// The caller's task `id`'s state and last event number ([`TaskStore::head`]), or
    /// TaskNotFound (also for another caller's task): a check that the task exists,
    /// without reading its snapshot and artifacts.
    ///
    /// # Errors
    /// TaskNotFound; Internal on a store failure.
    async fn head(&self, scope: &Scope, id: &str) -> Result<crate::store::TaskHead, A2aError> {
        self.inner
            .store
            .head(scope, id)
            .await
            .map_err(A2aError::internal)?
            .ok_or_else(|| A2aError::TaskNotFound(id.to_owned()))
    }

    /// The caller's task `id`, or TaskNotFound (also for another caller's task).
    async fn load(&self, scope: &Scope, id: &str) -> Result<crate::store::TaskRecord, A2aError> {
        self.inner
            .store
            .get(scope, id)
            .await
            .map_err(A2aError::internal)?
            .ok_or_else(|| A2aError::TaskNotFound(id.to_owned()))
    }

    fn validate_message(message: &Message) -> Result<(), A2aError> {
        if message.message_id.is_empty() {
            return Err(A2aError::InvalidParams(
                "message.messageId is required".into(),
            ));
        }
        if message.role != Role::User {
            return Err(A2aError::InvalidParams(format!(
                "message.role must be ROLE_USER, got {}",
                message.role
            )));
        }
        if message.parts.is_empty() {
            return Err(A2aError::InvalidParams(
                "message.parts must contain at least one part".into(),
            ));
        }
        check_id("message.messageId", &message.message_id)?;
        check_id("message.taskId", message.task_id.as_deref().unwrap_or(""))?;
        check_id(
            "message.contextId",
            message.context_id.as_deref().unwrap_or(""),
        )?;
        for id in &message.reference_task_ids {
            check_id("message.referenceTaskIds[]", id)?;
        }
        Ok(())
    }

    /// Refuses a task operation whose caller did not activate (`A2A-Extensions`) every
    /// extension the card marks `required` (spec §1, §3.3.4). Checked by SendMessage,
    /// SendStreamingMessage, GetTask, ListTasks, CancelTask and SubscribeToTask; not by
    /// GetExtendedAgentCard (discovery: it is where a client learns what the agent
    /// needs); the push-config operations check it too. URIs compare exactly.
    ///
    /// # Errors
    /// [`A2aError::ExtensionSupportRequired`] (-32008) naming the missing URIs.
    pub fn check_extensions(&self, call: &CallContext) -> Result<(), A2aError> {
        let missing: Vec<&str> = self
            .inner
            .config
            .required_extensions
            .iter()
            .filter(|uri| !call.requested_extensions.iter().any(|r| r == *uri))
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(A2aError::ExtensionSupportRequired(format!(
            "this agent requires the extension{} {}; activate {} with the A2A-Extensions header",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            if missing.len() == 1 { "it" } else { "them" },
        )))
    }

    /// The checks of a message before it is started: required extensions, then every
    /// part's media type against the input modes.
    fn admit(&self, call: &CallContext, req: &SendMessageRequest) -> Result<(), A2aError> {
        self.check_extensions(call)?;
        self.inner.config.input_modes.check(&req.message)
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
        Self::validate_message(&message)?;
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
                    return Err(driver::command::terminal_refusal(
                        task_id,
                        rec.task.status.state,
                    ));
                }
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
        let mut known_new = known_new;
        for _ in 0..3 {
            let permit = self
                .inner
                .permits
                .clone()
                .try_acquire_owned()
                .map_err(|_| {
                    A2aError::Unavailable(format!(
                        "the configured maximum of {} running tasks is reached; retry later",
                        self.inner.config.max_concurrent_tasks
                    ))
                })?;
            let (tx, rx) = oneshot::channel();
            let run = Run {
                ctx: Box::new(ctx.clone()),
                permit,
                reply: Some(tx),
                recorded: false,
            };
            let sent = self.with_handle(&key, known_new, |h| {
                h.cmd.unbounded_send(Command::Run(Box::new(run))).is_ok()
            });
            known_new = false;
            if !sent {
                continue; // the driver just went idle and exited; start a new one
            }
            match rx.await {
                Ok(r) => return r,
                Err(_) => continue,
            }
        }
        Err(A2aError::internal(
            "task driver unavailable after three attempts",
        ))
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
        if !self.inner.config.streaming {
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

    /// GetTask (spec §3.1.3).
    ///
    /// # Errors
    /// TaskNotFound (also for another caller's task), InvalidParams (negative
    /// historyLength), ExtensionSupportRequired, Internal.
    pub async fn get_task(
        &self,
        call: &CallContext,
        req: GetTaskRequest,
    ) -> Result<Task, A2aError> {
        check_call(call)?;
        self.check_extensions(call)?;
        let hl = history_length(req.history_length)?;
        check_id("id", &req.id)?;
        let mut task = self.load(&Scope::from(call), &req.id).await?.task;
        task.apply_history_length(hl);
        Ok(task)
    }

    /// ListTasks (spec §3.1.4): the caller's tasks, newest status first, keyset-paged.
    /// A page holds at most `pageSize` tasks, and fewer when their stored JSON would
    /// pass [`HandlerConfig::max_list_page_bytes`] (artifacts count only with
    /// `includeArtifacts`): it then ends early with a `nextPageToken`, so a caller
    /// paging on gets every task once; a page always holds at least one task.
    ///
    /// # Errors
    /// InvalidParams (pageSize outside 1..=100, bad pageToken, negative
    /// historyLength), ExtensionSupportRequired, Internal.
    pub async fn list_tasks(
        &self,
        call: &CallContext,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, A2aError> {
        check_call(call)?;
        self.check_extensions(call)?;
        check_id("contextId", req.context_id.as_deref().unwrap_or(""))?;
        let page_size = req.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
        if !(1..=MAX_PAGE_SIZE).contains(&page_size) {
            return Err(A2aError::InvalidParams(format!(
                "pageSize must be between 1 and {MAX_PAGE_SIZE}, got {page_size}"
            )));
        }
        let cursor = match non_empty(&req.page_token) {
            None => None,
            Some(t) => Some(PageCursor::decode(t).ok_or_else(|| {
                A2aError::InvalidParams("pageToken is not a token this server issued".into())
            })?),
        };
        let query = TaskQuery {
            context_id: non_empty(&req.context_id).map(str::to_owned),
            status: req.status.filter(|s| *s != TaskState::Unspecified),
            status_timestamp_after: req.status_timestamp_after,
            page_size: page_size as usize,
            cursor,
            include_artifacts: req.include_artifacts.unwrap_or(false),
            history_length: history_length(req.history_length)?,
            max_bytes: Some(self.inner.config.max_list_page_bytes),
        };
        let page = self
            .inner
            .store
            .list(&Scope::from(call), &query)
            .await
            .map_err(A2aError::internal)?;
        Ok(ListTasksResponse {
            tasks: page.tasks,
            next_page_token: page.next.map(|c| c.encode()).unwrap_or_default(),
            page_size,
            total_size: i32::try_from(page.total).unwrap_or(i32::MAX),
        })
    }

    /// CancelTask (spec §3.1.5): calls the executor's `cancel`, aborts the run and
    /// leaves the task CANCELED. Cancel is idempotent: repeating it on a CANCELED
    /// task returns that task again, without calling the executor.
    ///
    /// # Errors
    /// TaskNotFound, TaskNotCancelable (a task that ended COMPLETED, FAILED or
    /// REJECTED), ExtensionSupportRequired, Internal.
    pub async fn cancel_task(
        &self,
        call: &CallContext,
        req: CancelTaskRequest,
    ) -> Result<Task, A2aError> {
        check_call(call)?;
        self.check_extensions(call)?;
        check_id("id", &req.id)?;
        let scope = Scope::from(call);
        let rec = self.load(&scope, &req.id).await?;
        if rec.task.status.state.is_terminal() {
            return driver::command::already_ended(rec.task);
        }
        let key = (scope, req.id.clone());
        if let Some(c) = self.inner.cluster() {
            return self.cancel_in_cluster(c, key).await;
        }
        self.cancel_here(&key).await
    }

    /// CancelTask through this instance's driver of the task.
    async fn cancel_here(&self, key: &TaskKey) -> Result<Task, A2aError> {
        for _ in 0..3 {
            let (tx, rx) = oneshot::channel();
            if !self.with_handle(key, false, |h| {
                h.cmd.unbounded_send(Command::Cancel(tx)).is_ok()
            }) {
                continue;
            }
            if let Ok(r) = rx.await {
                return r;
            }
        }
        Err(A2aError::internal(
            "task driver unavailable after three attempts",
        ))
    }

    /// SubscribeToTask (spec §3.1.6): the current Task snapshot, then live events
    /// until the task is terminal. Unlike SendStreamingMessage, the stream stays open
    /// through INPUT_REQUIRED and AUTH_REQUIRED: it follows the task, not one message,
    /// so a follow-up sent while it is open shows on it, up to the final state.
    ///
    /// With `last_event_id` (the SSE `Last-Event-ID` of a dropped stream), the
    /// snapshot is skipped and every event after that sequence number is replayed
    /// from the store, in order and exactly once, followed by live events until the
    /// task is terminal: a resume is a subscription, whichever stream dropped. A
    /// resume of a task that ended after `last_event_id` replays up to its final event.
    ///
    /// # Errors
    /// TaskNotFound; ExtensionSupportRequired; InvalidParams for a `last_event_id`
    /// beyond the task's last event;
    /// UnsupportedOperation when streaming is off or the task is terminal (and, with
    /// `last_event_id`, nothing newer is left to replay).
    pub async fn subscribe_to_task(
        &self,
        call: &CallContext,
        req: SubscribeToTaskRequest,
        last_event_id: Option<u64>,
    ) -> Result<EventStream, A2aError> {
        check_call(call)?;
        if !self.inner.config.streaming {
            return Err(A2aError::UnsupportedOperation(
                "streaming is not supported by this agent".into(),
            ));
        }
        self.check_extensions(call)?;
        check_id("id", &req.id)?;
        let scope = Scope::from(call);
        // The checks need the task's state and last event only; the snapshot (with
        // its artifacts, however large) is read once, below, and not for a resume.
        let head = self.head(&scope, &req.id).await?;
        if let Some(n) = last_event_id
            && n > head.last_seq
        {
            return Err(A2aError::InvalidParams(format!(
                "Last-Event-ID {n} is beyond the last event of task {} ({})",
                req.id, head.last_seq
            )));
        }
        let terminal = head.state.is_terminal();
        let resumable = last_event_id.is_some_and(|n| n < head.last_seq);
        if terminal && !resumable {
            return Err(A2aError::UnsupportedOperation(format!(
                "task {} is already {}; use GetTask",
                req.id, head.state
            )));
        }
        let key = (scope.clone(), req.id.clone());
        let live = (!terminal).then(|| self.with_handle(&key, false, |h| h.bus.subscribe()));
        if let Some(after) = last_event_id {
            let follow = self.inner.follow(scope, req.id, after, live, true);
            return Ok(task_stream(None, false, None, StreamEnd::Terminal, follow));
        }
        // Read the snapshot after subscribing so that nothing falls between.
        let rec = self.load(&scope, &req.id).await?;
        let follow = self.inner.follow(scope, req.id, rec.last_seq, live, false);
        Ok(task_stream(
            Some((rec.task, rec.last_seq)),
            true,
            None,
            StreamEnd::Terminal,
            follow,
        ))
    }

    /// GetExtendedAgentCard (spec §3.1.11).
    ///
    /// # Errors
    /// UnsupportedOperation when the card does not offer it,
    /// ExtendedAgentCardNotConfigured when it does but none is configured.
    pub fn get_extended_agent_card(&self, _call: &CallContext) -> Result<AgentCard, A2aError> {
        if !self.inner.config.extended_agent_card_enabled {
            return Err(A2aError::UnsupportedOperation(
                "this agent offers no extended agent card".into(),
            ));
        }
        self.inner
            .config
            .extended_agent_card
            .clone()
            .ok_or(A2aError::ExtendedAgentCardNotConfigured)
    }

    /// Marks every SUBMITTED or WORKING task in the store FAILED with the reason
    /// "interrupted by a gateway restart". Call once at start-up, before serving,
    /// on a store no other running instance uses. Returns how many were marked.
    ///
    /// # Errors
    /// Internal on a store failure.
    pub async fn recover_interrupted(&self) -> Result<usize, A2aError> {
        let mut n = 0;
        let mut sample: Vec<String> = Vec::new();
        loop {
            let batch = self
                .inner
                .store
                .unsettled(256)
                .await
                .map_err(A2aError::internal)?;
            if batch.is_empty() {
                if n > 0 {
                    // One line, not one per task: the count and the first few ids.
                    tracing::warn!(
                        tasks = n,
                        sample = %sample.join(","),
                        "tasks interrupted by a gateway restart marked FAILED"
                    );
                }
                return Ok(n);
            }
            for (scope, id) in batch {
                let Some(rec) = self
                    .inner
                    .store
                    .get(&scope, &id)
                    .await
                    .map_err(A2aError::internal)?
                else {
                    continue;
                };
                let ctx = rec.task.context_id.clone();
                let ev = StreamResponse::StatusUpdate(crate::protocol::TaskStatusUpdateEvent {
                    task_id: id.clone(),
                    context_id: ctx.clone(),
                    status: crate::protocol::TaskStatus::with_message(
                        TaskState::Failed,
                        crate::executor::new_agent_text_message(
                            "interrupted by a gateway restart",
                            Some(&ctx),
                            Some(&id),
                        ),
                    ),
                    metadata: None,
                });
                self.inner
                    .store
                    .append(&scope, &id, rec.last_seq + 1, &ev)
                    .await
                    .map_err(A2aError::internal)?;
                tracing::debug!(task.id = %id, "task interrupted by a gateway restart marked FAILED");
                crate::telemetry::tasks::count(
                    TaskState::Failed,
                    crate::telemetry::tasks::reason::RESTART,
                );
                if sample.len() < RECOVERY_SAMPLE {
                    sample.push(id.chars().take(128).collect::<String>());
                }
                n += 1;
            }
        }
    }

    /// Whether [`shutdown`](Self::shutdown) has begun: new messages are refused
    /// (`Unavailable`) while the running tasks get their grace.
    pub fn is_closing(&self) -> bool {
        self.inner
            .closing
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Stops accepting messages, waits up to `grace` for running executors, then
    /// aborts the rest, marking their tasks FAILED ("the gateway shut down before
    /// the task finished"). Open streams end after their final event.
    pub async fn shutdown(&self, grace: Duration) {
        let max = self.inner.config.max_concurrent_tasks.max(1) as u32;
        let all = self.inner.permits.clone();
        // New runs are refused from now on; running ones get `grace`.
        self.inner
            .closing
            .store(true, std::sync::atomic::Ordering::Release);
        let _ = tokio::time::timeout(grace, all.acquire_many(max)).await;
        self.inner.shutdown.cancel();
        // Give drivers a moment to record the abort.
        let _ = tokio::time::timeout(Duration::from_secs(5), self.inner.permits.acquire_many(max))
            .await;
    }
}

/// Which state ends a task's response stream (spec §3.1.2, §3.1.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamEnd {
    /// SendStreamingMessage: a terminal state or INPUT_REQUIRED (the message's turn
    /// is over). AUTH_REQUIRED keeps it open (spec §7.6: the agent may resume on its
    /// own once the credential arrives out of band).
    Interrupted,
    /// SubscribeToTask (and every resume): only a terminal state.
    Terminal,
}

impl StreamEnd {
    fn ends(self, ev: &StreamResponse) -> bool {
        ev.state().is_some_and(|s| {
            s.is_terminal() || (self == StreamEnd::Interrupted && s == TaskState::InputRequired)
        })
    }
}

/// Builds a response stream: the optional snapshot, then followed events, ending
/// after the state `end` names, or after the update that ends the turn of
/// `own_message` (the id of the message this stream answers). `end_on_snapshot`: the
/// snapshot's own state may end the stream (it is not an older state of a task being
/// continued).
fn task_stream(
    snapshot: Option<(Task, u64)>,
    end_on_snapshot: bool,
    own_message: Option<String>,
    end: StreamEnd,
    follow: Follow,
) -> EventStream {
    struct State {
        first: VecDeque<SequencedEvent>,
        follow: Follow,
        done: bool,
        end_on_first: bool,
        own_message: Option<String>,
    }
    let ends = move |ev: &StreamResponse| end.ends(ev);
    let first: VecDeque<SequencedEvent> = snapshot
        .into_iter()
        .map(|(t, seq)| SequencedEvent::new(Some(seq), StreamResponse::Task(t)))
        .collect();
    let state = State {
        first,
        follow,
        done: false,
        end_on_first: end_on_snapshot,
        own_message,
    };
    Box::pin(futures::stream::unfold(state, move |mut st| async move {
        if st.done {
            return None;
        }
        if let Some(ev) = st.first.pop_front() {
            if st.end_on_first && ends(ev.event()) {
                st.done = true;
            }
            return Some((Ok(ev), st));
        }
        loop {
            let Some(next) = st.follow.next().await else {
                // The task's driver is gone and the log holds no final state: only a
                // store failure that could not be recorded does this (a shutdown
                // records FAILED first). Say so rather than end as if complete.
                st.done = true;
                let e = A2aError::internal(format!(
                    "the stream of task {} ended before a final state: its events could not be stored",
                    st.follow.task_id()
                ));
                return Some((Err(e), st));
            };
            match next {
                Err(e) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
                Ok(stored) => {
                    // User messages recorded in the log are history, not stream events.
                    if matches!(stored.event, StreamResponse::Message(_)) {
                        continue;
                    }
                    if ends(&stored.event)
                        || st
                            .own_message
                            .as_deref()
                            .is_some_and(|m| turns::ends_turn_of(&stored.event, m))
                    {
                        st.done = true;
                    }
                    return Some((Ok(SequencedEvent::stored(stored)), st));
                }
            }
        }
    }))
}
