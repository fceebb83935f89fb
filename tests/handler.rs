//! Request handler semantics (issue 2, "Request handler"), against the library with
//! the in-memory store and scripted executors. Every test synchronizes through
//! channels and semaphores, never through sleeps; a generous timeout turns a stall
//! into a failure instead of a hang.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_gateway::agents::{HelloWorldAgentExecutor, ReleaseReviewAgentExecutor, release_review};
use a2a_gateway::executor::{
    ExecutorError, get_artifact_text, get_message_text, new_agent_text_message,
    new_user_text_message,
};
use a2a_gateway::handler::{EventStream, SequencedEvent};
use a2a_gateway::protocol::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, Message, Part, Role,
    SendMessageConfiguration, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskState, TaskStatus,
};
use a2a_gateway::scope::Scope;
use a2a_gateway::store::{
    MemoryTaskStore, StoreError, StoredEvent, TaskPage, TaskQuery, TaskRecord,
};
use a2a_gateway::{
    A2aError, AgentExecutor, CallContext, EventQueue, HandlerConfig, RequestContext,
    RequestHandler, TaskStore, TaskUpdater,
};
use async_trait::async_trait;
use futures::StreamExt;
use futures::future::BoxFuture;
use tokio::sync::{Semaphore, mpsc, oneshot};

// ---------------------------------------------------------------------------
// Scripted executors and helpers
// ---------------------------------------------------------------------------

type Script = Arc<
    dyn Fn(RequestContext, EventQueue) -> BoxFuture<'static, Result<(), ExecutorError>>
        + Send
        + Sync,
>;

/// An executor whose `execute` (and optionally `cancel`) is a closure; counts cancels.
#[derive(Clone)]
struct Scripted {
    exec: Script,
    cancel: Option<Script>,
    cancels: Arc<AtomicUsize>,
}

fn scripted<F, Fut>(f: F) -> Scripted
where
    F: Fn(RequestContext, EventQueue) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), ExecutorError>> + Send + 'static,
{
    Scripted {
        exec: Arc::new(move |c, q| Box::pin(f(c, q))),
        cancel: None,
        cancels: Arc::default(),
    }
}

impl Scripted {
    fn on_cancel<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(RequestContext, EventQueue) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), ExecutorError>> + Send + 'static,
    {
        self.cancel = Some(Arc::new(move |c, q| Box::pin(f(c, q))));
        self
    }
}

#[async_trait]
impl AgentExecutor for Scripted {
    async fn execute(&self, c: RequestContext, q: EventQueue) -> Result<(), ExecutorError> {
        (self.exec)(c, q).await
    }

    async fn cancel(&self, c: RequestContext, q: EventQueue) -> Result<(), ExecutorError> {
        self.cancels.fetch_add(1, Ordering::SeqCst);
        match &self.cancel {
            Some(f) => f(c, q).await,
            None => Ok(()),
        }
    }
}

/// Signals from a gated executor: `started` carries the task id once the run is
/// WORKING and waiting at `gate`.
struct Probe {
    started: mpsc::UnboundedReceiver<String>,
    gate: Arc<Semaphore>,
}

impl Probe {
    async fn started(&mut self) -> String {
        within(self.started.recv()).await.expect("executor started")
    }

    fn release(&self, runs: usize) {
        self.gate.add_permits(runs);
    }
}

/// Waits until the stored task is WORKING (an executor's `started` signal only
/// means the event is queued).
async fn stored_working(h: &RequestHandler, id: &str) {
    within(async {
        while get(h, &anon(), id).await.status.state != TaskState::Working {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

async fn pass(gate: &Semaphore) {
    gate.acquire().await.expect("gate open").forget();
}

/// Submit (new task), WORKING, report started, wait at the gate, `chunks` artifact
/// chunks of one artifact, COMPLETED.
fn gated(chunks: usize) -> (Scripted, Probe) {
    let (tx, started) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let exec = scripted(move |ctx, q| {
        let (tx, gate) = (tx.clone(), g.clone());
        async move {
            let up = TaskUpdater::from_context(&ctx, q);
            if ctx.current_task.is_none() {
                up.submit().await?;
            }
            up.start_work(None).await?;
            let _ = tx.send(ctx.task_id.clone());
            pass(&gate).await;
            let id = Some("out".to_owned());
            for i in 0..chunks {
                up.add_artifact(
                    vec![Part::text(format!("{i},"))],
                    id.clone(),
                    Some("out".into()),
                    i > 0,
                    i + 1 == chunks,
                )
                .await?;
            }
            up.complete(None).await?;
            Ok(())
        }
    });
    (exec, Probe { started, gate })
}

fn handler(exec: impl AgentExecutor) -> RequestHandler {
    handler_with(exec, HandlerConfig::default())
}

fn handler_with(exec: impl AgentExecutor, config: HandlerConfig) -> RequestHandler {
    RequestHandler::new(Arc::new(exec), Arc::new(MemoryTaskStore::new()), config)
}

fn anon() -> CallContext {
    CallContext::anonymous()
}

fn text(t: &str) -> Message {
    new_user_text_message(t)
}

fn follow_up(task: &Task, t: &str) -> Message {
    let mut m = text(t);
    m.task_id = Some(task.id.clone());
    m
}

fn req(message: Message) -> SendMessageRequest {
    SendMessageRequest {
        tenant: None,
        message,
        configuration: None,
        metadata: None,
    }
}

fn req_with(message: Message, config: SendMessageConfiguration) -> SendMessageRequest {
    SendMessageRequest {
        configuration: Some(config),
        ..req(message)
    }
}

fn immediate(message: Message) -> SendMessageRequest {
    req_with(
        message,
        SendMessageConfiguration {
            return_immediately: Some(true),
            ..Default::default()
        },
    )
}

fn get_req(id: &str, history_length: Option<i32>) -> GetTaskRequest {
    GetTaskRequest {
        tenant: None,
        id: id.to_owned(),
        history_length,
    }
}

fn sub_req(id: &str) -> SubscribeToTaskRequest {
    SubscribeToTaskRequest {
        tenant: None,
        id: id.to_owned(),
    }
}

fn cancel_req(id: &str) -> CancelTaskRequest {
    CancelTaskRequest {
        tenant: None,
        id: id.to_owned(),
        metadata: None,
    }
}

async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("timed out: the handler stalled")
}

async fn send_task(h: &RequestHandler, call: &CallContext, r: SendMessageRequest) -> Task {
    match within(h.send_message(call, r)).await.expect("send") {
        SendMessageResponse::Task(t) => t,
        SendMessageResponse::Message(m) => panic!("expected a task, got message {m:?}"),
    }
}

async fn get(h: &RequestHandler, call: &CallContext, id: &str) -> Task {
    h.get_task(call, get_req(id, None)).await.expect("get")
}

async fn subscribe(h: &RequestHandler, id: &str) -> EventStream {
    h.subscribe_to_task(&anon(), sub_req(id), None)
        .await
        .expect("subscribe")
}

async fn drain(stream: EventStream) -> Vec<SequencedEvent> {
    within(stream.map(|r| r.expect("stream error")).collect()).await
}

async fn next(stream: &mut EventStream) -> SequencedEvent {
    within(stream.next())
        .await
        .expect("stream ended early")
        .expect("stream error")
}

fn err<T>(r: Result<T, A2aError>) -> A2aError {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

fn state(ev: &SequencedEvent) -> Option<TaskState> {
    ev.event().state()
}

fn status_text(task: &Task) -> String {
    task.status
        .message
        .as_ref()
        .map(|m| get_message_text(m, "\n"))
        .unwrap_or_default()
}

fn kinds(evs: &[SequencedEvent]) -> Vec<String> {
    evs.iter()
        .map(|e| match e.event() {
            StreamResponse::Task(t) => format!("task:{}", t.status.state),
            StreamResponse::Message(_) => "message".to_owned(),
            StreamResponse::StatusUpdate(s) => format!("status:{}", s.status.state),
            StreamResponse::ArtifactUpdate(_) => "artifact".to_owned(),
        })
        .collect()
}

fn seqs(evs: &[SequencedEvent]) -> Vec<u64> {
    evs.iter().map(|e| e.seq.expect("sequenced")).collect()
}

fn assert_contiguous(evs: &[SequencedEvent]) {
    let s = seqs(evs);
    for w in s.windows(2) {
        assert_eq!(w[1], w[0] + 1, "sequence numbers must be contiguous: {w:?}");
    }
}

// ---------------------------------------------------------------------------
// SendMessage
// ---------------------------------------------------------------------------

#[tokio::test]
async fn blocking_send_returns_the_settled_task_with_artifacts_and_history() {
    let h = handler(HelloWorldAgentExecutor::new());
    let m = text("ping");
    let task = send_task(&h, &anon(), req(m.clone())).await;

    assert_eq!(task.status.state, TaskState::Completed);
    assert_eq!(task.artifacts().len(), 1);
    let art = &task.artifacts()[0];
    assert_eq!(art.name.as_deref(), Some("result"));
    assert_eq!(
        get_artifact_text(art, ""),
        "Hello, World! I have received your request (ping)"
    );
    let hist = task.history();
    assert_eq!(hist[0].message_id, m.message_id);
    assert_eq!(hist[0].role, Role::User);
    assert!(
        hist.iter()
            .any(|x| x.role == Role::Agent && get_message_text(x, "") == "Processing request..."),
        "history records the agent's messages: {hist:?}"
    );
    assert_eq!(get(&h, &anon(), &task.id).await, task);
}

#[tokio::test]
async fn return_immediately_returns_at_once_and_get_task_sees_completion() {
    let (exec, mut probe) = gated(1);
    let h = handler(exec);
    let t = send_task(&h, &anon(), immediate(text("x"))).await;
    assert!(
        matches!(t.status.state, TaskState::Submitted | TaskState::Working),
        "got {}",
        t.status.state
    );
    assert_eq!(probe.started().await, t.id);
    let sub = subscribe(&h, &t.id).await;
    probe.release(1);
    let evs = drain(sub).await;
    assert_eq!(state(evs.last().unwrap()), Some(TaskState::Completed));
    let done = get(&h, &anon(), &t.id).await;
    assert_eq!(done.status.state, TaskState::Completed);
    assert_eq!(done.artifacts().len(), 1);
}

#[tokio::test]
async fn a_missing_context_id_is_generated_and_kept() {
    let h = handler(HelloWorldAgentExecutor::new());
    let t1 = send_task(&h, &anon(), req(text("a"))).await;
    assert!(!t1.context_id.is_empty());
    assert_eq!(t1.history()[0].context_id.as_deref(), Some(&*t1.context_id));
    assert_eq!(t1.history()[0].task_id.as_deref(), Some(&*t1.id));
    assert_eq!(get(&h, &anon(), &t1.id).await.context_id, t1.context_id);

    let t2 = send_task(&h, &anon(), req(text("b"))).await;
    assert_ne!(t2.context_id, t1.context_id, "each new context is fresh");
    assert_ne!(t2.id, t1.id);

    let mut m = text("c");
    m.context_id = Some("my-context".into());
    let t3 = send_task(&h, &anon(), req(m)).await;
    assert_eq!(t3.context_id, "my-context");
}

#[tokio::test]
async fn follow_up_with_task_id_continues_the_task() {
    let h = handler(ReleaseReviewAgentExecutor::new());
    let t = send_task(&h, &anon(), req(text("please review the release"))).await;
    assert_eq!(t.status.state, TaskState::InputRequired);
    assert_eq!(status_text(&t), release_review::ASK_TEXT);

    let t2 = send_task(&h, &anon(), req(follow_up(&t, "it is billing@1.2.3"))).await;
    assert_eq!(t2.id, t.id);
    assert_eq!(t2.context_id, t.context_id, "a follow-up keeps the context");
    assert_eq!(t2.status.state, TaskState::Completed);
    let users: Vec<String> = t2
        .history()
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| get_message_text(m, ""))
        .collect();
    assert_eq!(users, ["please review the release", "it is billing@1.2.3"]);
    assert!(
        t2.history()
            .iter()
            .any(|m| get_message_text(m, "") == "Reviewing billing@1.2.3.")
    );
    assert_eq!(t2.artifacts().len(), 1);
    assert!(get_artifact_text(&t2.artifacts()[0], "").contains("billing@1.2.3"));

    // Unknown task.
    let mut m = text("x");
    m.task_id = Some("no-such-task".into());
    assert!(matches!(
        err(h.send_message(&anon(), req(m)).await),
        A2aError::TaskNotFound(_)
    ));
    // Terminal task.
    assert!(matches!(
        err(h.send_message(&anon(), req(follow_up(&t2, "again"))).await),
        A2aError::UnsupportedOperation(_)
    ));
    // Mismatched context on a live task: refused, the task is untouched.
    let t3 = send_task(&h, &anon(), req(text("hi"))).await;
    let mut m = follow_up(&t3, "x@1.2.3");
    m.context_id = Some("another-context".into());
    assert!(matches!(
        err(h.send_message(&anon(), req(m)).await),
        A2aError::InvalidParams(_)
    ));
    assert_eq!(get(&h, &anon(), &t3.id).await, t3);
    // The matching context is accepted.
    let mut m = follow_up(&t3, "x@1.2.3");
    m.context_id = Some(t3.context_id.clone());
    let t3 = send_task(&h, &anon(), req(m)).await;
    assert_eq!(t3.status.state, TaskState::Completed);
}

#[tokio::test]
async fn message_only_response() {
    let exec = scripted(|_ctx, q| async move {
        q.enqueue_event(new_agent_text_message("pong", None, None))
            .await?;
        Ok(())
    });
    let h = handler(exec);
    let mut m = text("ping");
    m.context_id = Some("ctx-1".into());
    match within(h.send_message(&anon(), req(m))).await.unwrap() {
        SendMessageResponse::Message(reply) => {
            assert_eq!(get_message_text(&reply, ""), "pong");
            assert_eq!(reply.role, Role::Agent);
            assert_eq!(reply.context_id.as_deref(), Some("ctx-1"));
            assert_eq!(reply.task_id, None);
        }
        other => panic!("expected a message, got {other:?}"),
    }
    let evs = drain(
        h.send_streaming_message(&anon(), req(text("ping")))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].seq, None);
    assert!(
        matches!(evs[0].event(), StreamResponse::Message(m) if !m.context_id.as_deref().unwrap_or("").is_empty())
    );
    let list = h
        .list_tasks(&anon(), ListTasksRequest::default())
        .await
        .unwrap();
    assert_eq!(list.total_size, 0, "a Message-only reply stores no task");
}

// ---------------------------------------------------------------------------
// Streaming
// ---------------------------------------------------------------------------

#[tokio::test]
async fn streaming_event_order_task_first_then_updates_then_end() {
    let exec = scripted(|ctx, q| async move {
        let up = TaskUpdater::from_context(&ctx, q);
        up.submit().await?;
        up.start_work(None).await?;
        up.add_artifact(vec![Part::text("a")], None, None, false, true)
            .await?;
        up.add_artifact(vec![Part::text("b")], None, None, false, true)
            .await?;
        up.complete(None).await?;
        Ok(())
    });
    let h = handler(exec);
    let evs = drain(
        h.send_streaming_message(&anon(), req(text("go")))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        kinds(&evs),
        [
            "task:TASK_STATE_SUBMITTED",
            "status:TASK_STATE_WORKING",
            "artifact",
            "artifact",
            "status:TASK_STATE_COMPLETED"
        ]
    );
    assert_eq!(seqs(&evs), [1, 2, 3, 4, 5]);
}

#[tokio::test]
async fn stream_ends_after_input_required_even_while_the_executor_runs() {
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let exec = scripted(move |ctx, q| {
        let gate = g.clone();
        async move {
            let up = TaskUpdater::from_context(&ctx, q);
            up.submit().await?;
            up.requires_input(Some(up.new_agent_text("which one?")))
                .await?;
            pass(&gate).await; // keeps running after INPUT_REQUIRED
            Ok(())
        }
    });
    let h = handler(exec);
    let evs = drain(
        h.send_streaming_message(&anon(), req(text("go")))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        kinds(&evs),
        [
            "task:TASK_STATE_SUBMITTED",
            "status:TASK_STATE_INPUT_REQUIRED"
        ]
    );
    gate.add_permits(1);
}

#[tokio::test]
async fn stream_stays_open_through_auth_required() {
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let exec = scripted(move |ctx, q| {
        let gate = g.clone();
        async move {
            let up = TaskUpdater::from_context(&ctx, q);
            up.submit().await?;
            up.requires_auth(Some(up.new_agent_text("authorize at https://example.test")))
                .await?;
            pass(&gate).await; // authorization arrives out of band
            up.start_work(None).await?;
            up.complete(None).await?;
            Ok(())
        }
    });
    let h = handler(exec);
    let mut s = h
        .send_streaming_message(&anon(), req(text("go")))
        .await
        .unwrap();
    assert_eq!(state(&next(&mut s).await), Some(TaskState::Submitted));
    assert_eq!(state(&next(&mut s).await), Some(TaskState::AuthRequired));
    gate.add_permits(1);
    let rest = drain(s).await;
    assert_eq!(
        kinds(&rest),
        ["status:TASK_STATE_WORKING", "status:TASK_STATE_COMPLETED"]
    );
}

/// A memory store with test hooks: with `yield_before_append` it yields before every
/// append (subscribers get every chance to run before an event is durable); with a
/// `hold` set, its next `get` reads the snapshot, then waits at the gate before
/// answering (a caller acting on a snapshot that has since gone stale).
#[derive(Default)]
struct HookedStore {
    inner: MemoryTaskStore,
    yield_before_append: bool,
    hold: Mutex<Option<(Arc<Semaphore>, oneshot::Sender<()>)>>,
    /// Refuses (as a database failure) appends that hold an event numbered this or
    /// higher, `fail_times` times.
    fail_from_seq: Option<u64>,
    fail_times: AtomicUsize,
    /// The next append holding the event with this number waits at the gate (and
    /// notifies `holding` when it begins to wait).
    hold_append: Mutex<Option<(u64, Arc<Semaphore>)>>,
    holding: tokio::sync::Notify,
    /// How many events each append carried, in order.
    appended: Mutex<Vec<usize>>,
}

#[async_trait]
impl TaskStore for HookedStore {
    async fn append_all(
        &self,
        scope: &Scope,
        task_id: &str,
        events: &[Arc<StoredEvent>],
    ) -> Result<(), StoreError> {
        if self.yield_before_append {
            tokio::task::yield_now().await;
        }
        let hold = {
            let mut hold = self.hold_append.lock().unwrap();
            match &*hold {
                Some((n, _)) if events.iter().any(|e| e.seq == *n) => hold.take(),
                _ => None,
            }
        };
        if let Some((_, gate)) = hold {
            self.holding.notify_one();
            pass(&gate).await;
        }
        self.appended.lock().unwrap().push(events.len());
        if let Some(n) = self.fail_from_seq
            && events.iter().any(|e| e.seq >= n)
            && self
                .fail_times
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| t.checked_sub(1))
                .is_ok()
        {
            return Err(StoreError::Backend("disk full".into()));
        }
        self.inner.append_all(scope, task_id, events).await
    }
    async fn get(&self, scope: &Scope, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let snapshot = self.inner.get(scope, task_id).await;
        let hold = self.hold.lock().unwrap().take();
        if let Some((gate, reached)) = hold {
            let _ = reached.send(());
            pass(&gate).await;
        }
        snapshot
    }
    async fn events_after(
        &self,
        scope: &Scope,
        task_id: &str,
        after: u64,
        limit: usize,
        max_bytes: u64,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.inner
            .events_after(scope, task_id, after, limit, max_bytes)
            .await
    }
    async fn list(&self, scope: &Scope, query: &TaskQuery) -> Result<TaskPage, StoreError> {
        self.inner.list(scope, query).await
    }
    async fn unsettled(&self, limit: usize) -> Result<Vec<(Scope, String)>, StoreError> {
        self.inner.unsettled(limit).await
    }
    async fn purge_expired(
        &self,
        older_than: a2a_gateway::protocol::time::Timestamp,
        batch: usize,
    ) -> Result<u64, StoreError> {
        self.inner.purge_expired(older_than, batch).await
    }
    async fn expired_input_required(
        &self,
        older_than: a2a_gateway::protocol::time::Timestamp,
        limit: usize,
    ) -> Result<Vec<(Scope, String)>, StoreError> {
        self.inner.expired_input_required(older_than, limit).await
    }
}

async fn check_each_event_is_stored(
    store: Arc<HookedStore>,
    task_id: String,
    mut stream: EventStream,
) -> usize {
    let scope = Scope::from(&anon());
    let mut n = 0;
    while let Some(ev) = within(stream.next()).await {
        let ev = ev.expect("stream error");
        let seq = ev.seq.expect("sequenced");
        let stored = store
            .events_after(&scope, &task_id, seq - 1, 1, u64::MAX)
            .await
            .unwrap();
        assert_eq!(
            stored.first().map(|s| s.seq),
            Some(seq),
            "event {seq} reached a subscriber before the store"
        );
        if !matches!(ev.event(), StreamResponse::Task(_)) {
            assert_eq!(&stored[0].event, ev.event());
        }
        n += 1;
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_is_in_the_store_before_a_subscriber_sees_it() {
    let (exec, mut probe) = gated(200);
    let store = Arc::new(HookedStore {
        yield_before_append: true,
        ..Default::default()
    });
    let config = HandlerConfig {
        subscriber_buffer: 8,
        ..Default::default()
    };
    let h = RequestHandler::new(Arc::new(exec), store.clone(), config);
    let stream = h
        .send_streaming_message(&anon(), req(text("go")))
        .await
        .unwrap();
    let id = probe.started().await;
    stored_working(&h, &id).await;
    let sub = subscribe(&h, &id).await;
    let a = tokio::spawn(check_each_event_is_stored(
        store.clone(),
        id.clone(),
        stream,
    ));
    let b = tokio::spawn(check_each_event_is_stored(store.clone(), id.clone(), sub));
    probe.release(1);
    // Task, WORKING, 200 chunks, COMPLETED; the subscription starts at WORKING.
    assert_eq!(within(a).await.unwrap(), 203);
    assert_eq!(within(b).await.unwrap(), 202);
}

/// A [`HookedStore`] whose append holding event `seq` waits at the returned gate.
fn holding_append(seq: u64) -> (Arc<HookedStore>, Arc<Semaphore>) {
    let gate = Arc::new(Semaphore::new(0));
    let store = HookedStore {
        hold_append: Mutex::new(Some((seq, gate.clone()))),
        ..Default::default()
    };
    (Arc::new(store), gate)
}

/// The executor goes on while the driver writes: what it queues during a slow store
/// write (here one chunk per poll, as an HTTP/1.1 body hands them over) is read then,
/// not after the write, and goes into the next write as one group, not a write per
/// chunk. Each event is still written before the stream shows it, in order.
#[tokio::test(start_paused = true)]
async fn events_queued_during_a_store_write_go_into_the_next_write_together() {
    // The first group: the Task, WORKING and the first chunk (event 3).
    let (store, gate) = holding_append(3);
    let (queued_tx, queued) = oneshot::channel::<()>();
    let queued_tx = Arc::new(Mutex::new(Some(queued_tx)));
    let exec = scripted(move |ctx, q| {
        let queued_tx = queued_tx.clone();
        async move {
            let up = TaskUpdater::from_context(&ctx, q);
            up.submit().await?;
            up.start_work(None).await?;
            for i in 0..10 {
                let part = vec![Part::text(format!("{i},"))];
                up.add_artifact(part, Some("out".into()), None, i > 0, i == 9)
                    .await?;
                tokio::task::yield_now().await;
            }
            if let Some(tx) = queued_tx.lock().unwrap().take() {
                let _ = tx.send(());
            }
            up.complete(None).await?;
            Ok(())
        }
    });
    let h = RequestHandler::new(Arc::new(exec), store.clone(), HandlerConfig::default());
    let caller = anon();
    let send = h.send_streaming_message(&caller, req(text("go")));
    // Every chunk is queued while the first write waits (paused time: a stalled
    // executor fails this at once), and only then may the write end.
    let release = async {
        within(queued)
            .await
            .expect("the executor ran during the write");
        gate.add_permits(1);
    };
    let (stream, ()) = tokio::join!(send, release);
    let evs = drain(stream.unwrap()).await;
    assert_contiguous(&evs);
    assert_eq!(evs.len(), 13, "Task, WORKING, 10 chunks, COMPLETED");
    assert_eq!(state(evs.last().unwrap()), Some(TaskState::Completed));
    assert_eq!(*store.appended.lock().unwrap(), [3, 10]);
}

/// An executor that honours its cancellation and returns without a final state when
/// the gateway shuts down, while its driver is writing (it is polled during the
/// write), leaves its task FAILED for the shutdown, not "finished without reporting a
/// final state".
#[tokio::test(start_paused = true)]
async fn a_run_the_shutdown_ends_during_a_store_write_is_failed_for_the_shutdown() {
    let (store, gate) = holding_append(3);
    let (returned_tx, mut returned) = mpsc::unbounded_channel::<()>();
    let exec = scripted(move |ctx, q| {
        let returned_tx = returned_tx.clone();
        async move {
            let up = TaskUpdater::from_context(&ctx, q);
            up.submit().await?;
            up.start_work(None).await?;
            up.add_artifact(
                vec![Part::text("0,")],
                Some("out".into()),
                None,
                false,
                false,
            )
            .await?;
            ctx.cancellation().cancelled().await;
            let _ = returned_tx.send(());
            Ok(())
        }
    });
    let h = RequestHandler::new(Arc::new(exec), store.clone(), HandlerConfig::default());
    let caller = anon();
    let send = h.send_streaming_message(&caller, req(text("go")));
    let h2 = h.clone();
    let control = async {
        // The first write (Task, WORKING, the chunk) waits; the shutdown's grace
        // passes and the executor returns while it does.
        within(store.holding.notified()).await;
        let down = tokio::spawn(async move { h2.shutdown(Duration::from_millis(100)).await });
        within(returned.recv())
            .await
            .expect("the executor saw the shutdown");
        gate.add_permits(1);
        within(down).await.unwrap();
    };
    let (stream, ()) = tokio::join!(send, control);
    let evs = drain(stream.unwrap()).await;
    assert_contiguous(&evs);
    assert_eq!(state(evs.last().unwrap()), Some(TaskState::Failed));
    let id = evs[0].event().task_id().expect("a task event").to_owned();
    let task = get(&h, &anon(), &id).await;
    assert_eq!(task.status.state, TaskState::Failed);
    let text = status_text(&task);
    assert!(text.contains("gateway shut down"), "{text}");
}

/// A gated 3-chunk run on a store that refuses the appends from event 3 on
/// `fail_times` times; returns the handler, the store, the task id and the stream's
/// items (sequence numbers, `None` for an error item) once the stream ended.
async fn run_with_failing_store(
    fail_times: usize,
) -> (RequestHandler, Arc<HookedStore>, String, Vec<Option<u64>>) {
    let (exec, mut probe) = gated(3);
    let store = Arc::new(HookedStore {
        fail_from_seq: Some(3),
        fail_times: AtomicUsize::new(fail_times),
        ..Default::default()
    });
    let h = RequestHandler::new(Arc::new(exec), store.clone(), HandlerConfig::default());
    let mut stream = h
        .send_streaming_message(&anon(), req(text("go")))
        .await
        .unwrap();
    let id = probe.started().await;
    stored_working(&h, &id).await;
    probe.release(1);
    let mut items = Vec::new();
    while let Some(ev) = stream.next().await {
        items.push(ev.ok().map(|ev| ev.seq.expect("sequenced")));
    }
    (h, store, id, items)
}

/// A store that stays down: the run is stopped, no client sees an event that is not
/// stored (not on the stream, not in GetTask, not in CancelTask's answer), and the
/// stream ends with an error instead of as if complete.
#[tokio::test(start_paused = true)]
async fn a_store_that_stays_down_stops_the_run_and_shows_nothing_unstored() {
    let (h, store, id, items) = run_with_failing_store(usize::MAX).await;
    let (last, seen) = items.split_last().expect("items");
    assert_eq!(*last, None, "the stream ends with an error item: {items:?}");
    assert!(
        seen.iter().all(|s| s.is_some_and(|s| s < 3)),
        "unstored events seen: {items:?}"
    );
    let stored = store
        .get(&Scope::from(&anon()), &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.last_seq, 2);
    let task = get(&h, &anon(), &id).await;
    assert_eq!(task.status.state, TaskState::Working);
    assert!(task.artifacts().is_empty());
    // Canceling needs a write too: it fails, and never reports a state the store
    // does not hold.
    let e = err(h.cancel_task(&anon(), cancel_req(&id)).await);
    assert!(matches!(e, A2aError::Internal(_)), "{e:?}");
    assert_eq!(get(&h, &anon(), &id).await.status.state, TaskState::Working);
}

/// A store that fails for a moment (a lock held for a few seconds): the write is
/// retried and the run completes as if nothing happened.
#[tokio::test(start_paused = true)]
async fn a_store_write_that_fails_briefly_is_retried() {
    let (h, _, id, items) = run_with_failing_store(3).await;
    assert!(items.iter().all(Option::is_some), "{items:?}");
    let task = get(&h, &anon(), &id).await;
    assert_eq!(task.status.state, TaskState::Completed);
    assert_eq!(task.artifacts()[0].parts[0].as_text(), Some("0,1,2,"));
}

/// A store that fails longer than the retries but comes back: the run was stopped,
/// and the task is then recorded FAILED with the reason, which the stream delivers as
/// its final event.
#[tokio::test(start_paused = true)]
async fn a_run_stopped_by_the_store_is_recorded_failed_when_it_returns() {
    let (h, _, id, items) = run_with_failing_store(7).await;
    assert!(items.iter().all(Option::is_some), "{items:?}");
    assert_eq!(
        items.last(),
        Some(&Some(3)),
        "FAILED follows the stored events"
    );
    let task = get(&h, &anon(), &id).await;
    assert_eq!(task.status.state, TaskState::Failed);
    let reason = status_text(&task);
    assert!(
        reason.starts_with("the task store failed to record events 3..="),
        "{reason}"
    );
    // The store's own error stays in the log, under the correlation id.
    assert!(
        !reason.contains("disk full") && reason.contains("[correlation id "),
        "{reason}"
    );
    assert!(task.artifacts().is_empty(), "nothing unstored appears");
}

#[tokio::test]
async fn two_subscribers_see_identical_sequences() {
    let (exec, mut probe) = gated(100);
    let h = handler(exec);
    let t = send_task(&h, &anon(), immediate(text("go"))).await;
    probe.started().await;
    stored_working(&h, &t.id).await;
    let a = subscribe(&h, &t.id).await;
    let b = subscribe(&h, &t.id).await;
    probe.release(1);
    let (a, b) = tokio::join!(drain(a), drain(b));
    assert_eq!(a, b);
    assert_eq!(a.len(), 1 + 100 + 1);
    assert_contiguous(&a);
    assert_eq!(state(a.last().unwrap()), Some(TaskState::Completed));
}

#[tokio::test]
async fn a_slow_subscriber_gets_everything_in_order_and_stalls_nothing() {
    let (exec, mut probe) = gated(2000);
    let config = HandlerConfig {
        subscriber_buffer: 4,
        event_queue_capacity: 4,
        ..Default::default()
    };
    let h = handler_with(exec, config);
    let t = send_task(&h, &anon(), immediate(text("go"))).await;
    probe.started().await;
    stored_working(&h, &t.id).await;
    let slow = subscribe(&h, &t.id).await; // not polled until the task is done
    let fast = subscribe(&h, &t.id).await;
    probe.release(1);
    // The task completes while the slow subscriber sits unpolled.
    let fast = drain(fast).await;
    assert_eq!(state(fast.last().unwrap()), Some(TaskState::Completed));
    let done = get(&h, &anon(), &t.id).await;
    assert_eq!(done.status.state, TaskState::Completed);
    let expected: String = (0..2000).map(|i| format!("{i},")).collect();
    assert_eq!(get_artifact_text(&done.artifacts()[0], ""), expected);

    let slow = drain(slow).await;
    assert_eq!(slow.len(), 1 + 2000 + 1);
    assert_contiguous(&slow);
    assert_eq!(slow, fast);
}

#[tokio::test]
async fn a_client_dropping_its_stream_or_future_loses_nothing() {
    // The stream, dropped after its first event.
    let (exec, mut probe) = gated(1);
    let h = handler(exec);
    let mut s = h
        .send_streaming_message(&anon(), req(text("go")))
        .await
        .unwrap();
    let first = next(&mut s).await;
    drop(s);
    let StreamResponse::Task(t) = first.into_event() else {
        panic!("the Task comes first")
    };
    probe.started().await;
    let watch = subscribe(&h, &t.id).await;
    probe.release(1);
    drain(watch).await;
    let done = get(&h, &anon(), &t.id).await;
    assert_eq!(done.status.state, TaskState::Completed);
    assert_eq!(done.artifacts().len(), 1);

    // A blocking SendMessage future, dropped mid-run.
    let h2 = h.clone();
    let call = tokio::spawn(async move { h2.send_message(&anon(), req(text("again"))).await });
    let id = probe.started().await;
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    let watch = subscribe(&h, &id).await;
    probe.release(1);
    drain(watch).await;
    let done = get(&h, &anon(), &id).await;
    assert_eq!(done.status.state, TaskState::Completed);
    assert_eq!(done.artifacts().len(), 1);
}

// ---------------------------------------------------------------------------
// Capabilities: streaming, required extensions, input modes
// ---------------------------------------------------------------------------

/// Completes every message; counts runs.
fn counting() -> (Scripted, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let exec = scripted(move |ctx, q| {
        r.fetch_add(1, Ordering::SeqCst);
        async move {
            let up = TaskUpdater::from_context(&ctx, q);
            up.complete(None).await?;
            Ok(())
        }
    });
    (exec, runs)
}

#[tokio::test]
async fn required_extensions_are_checked_by_every_task_operation() {
    const EXT: &str = "https://example.com/ext/v1";
    let (exec, runs) = counting();
    let config = HandlerConfig {
        required_extensions: vec![EXT.into()],
        ..Default::default()
    };
    let h = handler_with(exec, config);
    let mut with = anon();
    with.requested_extensions = vec!["urn:other".into(), EXT.into()];
    let t = send_task(&h, &with, req(text("go"))).await;

    let mut without = anon();
    without.requested_extensions = vec!["urn:other".into(), format!("{EXT}/")];
    let refused = |e: A2aError| {
        assert!(
            matches!(&e, A2aError::ExtensionSupportRequired(m) if m.contains(EXT)),
            "{e:?}"
        );
        assert_eq!(e.jsonrpc_code(), -32008);
    };
    refused(err(h.send_message(&without, req(text("go"))).await));
    refused(err(h
        .send_streaming_message(&without, req(text("go")))
        .await));
    refused(err(h.get_task(&without, get_req(&t.id, None)).await));
    refused(err(h
        .list_tasks(&without, ListTasksRequest::default())
        .await));
    refused(err(h.cancel_task(&without, cancel_req(&t.id)).await));
    refused(err(h
        .subscribe_to_task(&without, sub_req(&t.id), None)
        .await));
    // The push-config operations are task operations too.
    refused(err(h
        .list_push_configs(
            &without,
            a2a_gateway::protocol::ListTaskPushNotificationConfigsRequest {
                tenant: None,
                task_id: t.id.clone(),
                page_size: None,
                page_token: None,
            },
        )
        .await));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // Discovery answers as usual.
    assert!(matches!(
        err(h.get_extended_agent_card(&without)),
        A2aError::UnsupportedOperation(_)
    ));
    assert_eq!(
        get(&h, &with, &t.id).await.status.state,
        TaskState::Completed
    );
}

#[tokio::test]
async fn parts_outside_the_input_modes_are_refused_before_the_executor_runs() {
    let (exec, runs) = counting();
    let config = HandlerConfig {
        input_modes: a2a_gateway::handler::InputModes::new(["text/plain", "image/*"]),
        ..Default::default()
    };
    let h = handler_with(exec, config);
    let part = |v: serde_json::Value| -> Part { serde_json::from_value(v).unwrap() };
    let with_parts = |parts: Vec<Part>| {
        let mut m = text("look");
        m.parts.extend(parts);
        m
    };
    let ok = with_parts(vec![part(
        serde_json::json!({"raw": "AAE=", "mediaType": "IMAGE/PNG"}),
    )]);
    send_task(&h, &anon(), req(ok)).await;
    for bad in [
        part(serde_json::json!({"data": {"k": 1}})),
        part(serde_json::json!({"url": "https://x/a.pdf", "mediaType": "application/pdf"})),
        part(serde_json::json!({"url": "https://x/blob"})),
    ] {
        for r in [
            err(h
                .send_message(&anon(), req(with_parts(vec![bad.clone()])))
                .await),
            err(h
                .send_streaming_message(&anon(), req(with_parts(vec![bad.clone()])))
                .await),
        ] {
            assert!(
                matches!(&r, A2aError::ContentTypeNotSupported(m) if m.contains("parts[1]")),
                "{r:?}"
            );
            assert_eq!(r.jsonrpc_code(), -32005);
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "refused messages never ran");
}

#[tokio::test]
async fn streaming_off_refuses_both_streaming_operations() {
    let (exec, _) = counting();
    let config = HandlerConfig {
        streaming: false,
        ..Default::default()
    };
    let h = handler_with(exec, config);
    let t = send_task(&h, &anon(), req(text("go"))).await;
    assert!(matches!(
        err(h.send_streaming_message(&anon(), req(text("go"))).await),
        A2aError::UnsupportedOperation(_)
    ));
    assert!(matches!(
        err(h.subscribe_to_task(&anon(), sub_req(&t.id), Some(0)).await),
        A2aError::UnsupportedOperation(_)
    ));
}

// ---------------------------------------------------------------------------
// SubscribeToTask
// ---------------------------------------------------------------------------

#[tokio::test]
async fn subscribe_sends_the_snapshot_first_then_live_events() {
    let (exec, mut probe) = gated(1);
    let h = handler(exec);
    let t = send_task(&h, &anon(), immediate(text("go"))).await;
    probe.started().await;
    stored_working(&h, &t.id).await;
    let mut s = subscribe(&h, &t.id).await;
    let first = next(&mut s).await;
    match first.event() {
        StreamResponse::Task(snap) => {
            assert_eq!(snap.id, t.id);
            assert_eq!(snap.status.state, TaskState::Working);
        }
        other => panic!("snapshot first, got {other:?}"),
    }
    assert_eq!(first.seq, Some(2));
    probe.release(1);
    let rest = drain(s).await;
    assert_eq!(kinds(&rest), ["artifact", "status:TASK_STATE_COMPLETED"]);
    assert_eq!(seqs(&rest), [3, 4]);

    assert!(matches!(
        err(h.subscribe_to_task(&anon(), sub_req("nope"), None).await),
        A2aError::TaskNotFound(_)
    ));
    assert!(matches!(
        err(h.subscribe_to_task(&anon(), sub_req(&t.id), None).await),
        A2aError::UnsupportedOperation(_)
    ));
}

#[tokio::test]
async fn subscribe_to_an_idle_auth_required_task_sees_the_follow_up() {
    let exec = scripted(|ctx, q| async move {
        let up = TaskUpdater::from_context(&ctx, q);
        if ctx.current_task.is_none() {
            up.submit().await?;
            up.requires_auth(None).await?;
        } else {
            up.start_work(None).await?;
            up.complete(None).await?;
        }
        Ok(())
    });
    let h = handler(exec);
    let t = send_task(&h, &anon(), req(text("go"))).await;
    assert_eq!(t.status.state, TaskState::AuthRequired);
    let mut s = subscribe(&h, &t.id).await;
    assert_eq!(state(&next(&mut s).await), Some(TaskState::AuthRequired));
    let done = send_task(&h, &anon(), req(follow_up(&t, "token granted"))).await;
    assert_eq!(done.status.state, TaskState::Completed);
    let rest = drain(s).await;
    assert_eq!(
        kinds(&rest),
        ["status:TASK_STATE_WORKING", "status:TASK_STATE_COMPLETED"]
    );
}

/// Asks for input on a new task; completes a follow-up with one artifact.
fn ask_then_complete() -> Scripted {
    scripted(|ctx, q| async move {
        let up = TaskUpdater::from_context(&ctx, q);
        if ctx.current_task.is_none() {
            up.submit().await?;
            up.requires_input(Some(up.new_agent_text("which one?")))
                .await?;
        } else {
            up.start_work(None).await?;
            up.add_artifact(vec![Part::text("done")], None, None, false, true)
                .await?;
            up.complete(None).await?;
        }
        Ok(())
    })
}

#[tokio::test]
async fn subscribe_to_an_input_required_task_stays_open_until_the_follow_up_completes() {
    let h = handler(ask_then_complete());
    let t = send_task(&h, &anon(), req(text("go"))).await;
    assert_eq!(t.status.state, TaskState::InputRequired);
    let mut s = subscribe(&h, &t.id).await;
    assert_eq!(state(&next(&mut s).await), Some(TaskState::InputRequired));
    // The stream did not end at the INPUT_REQUIRED snapshot: the follow-up's events
    // arrive on it, up to the terminal state.
    let done = send_task(&h, &anon(), req(follow_up(&t, "the blue one"))).await;
    assert_eq!(done.status.state, TaskState::Completed);
    let rest = drain(s).await;
    assert_eq!(
        kinds(&rest),
        [
            "status:TASK_STATE_WORKING",
            "artifact",
            "status:TASK_STATE_COMPLETED"
        ]
    );
    assert_contiguous(&rest);
    // SendStreamingMessage still ends at the interruption.
    let evs = drain(
        h.send_streaming_message(&anon(), req(text("again")))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        kinds(&evs),
        [
            "task:TASK_STATE_SUBMITTED",
            "status:TASK_STATE_INPUT_REQUIRED"
        ]
    );
}

#[tokio::test]
async fn resume_from_the_input_required_event_continues_into_the_follow_up() {
    let h = handler(ask_then_complete());
    let evs = drain(
        h.send_streaming_message(&anon(), req(text("go")))
            .await
            .unwrap(),
    )
    .await;
    let last = evs.last().unwrap().seq.unwrap();
    assert_eq!(state(evs.last().unwrap()), Some(TaskState::InputRequired));
    let StreamResponse::Task(t) = evs[0].event() else {
        unreachable!()
    };
    // The client's stream ended at INPUT_REQUIRED (event `last`); a resume from there
    // is a subscription: it waits, then carries the follow-up to its end.
    let mut resumed = h
        .subscribe_to_task(&anon(), sub_req(&t.id), Some(last))
        .await
        .unwrap();
    let mut from_before = h
        .subscribe_to_task(&anon(), sub_req(&t.id), Some(last - 1))
        .await
        .unwrap();
    assert_eq!(
        state(&next(&mut from_before).await),
        Some(TaskState::InputRequired)
    );
    send_task(&h, &anon(), req(follow_up(t, "the blue one"))).await;
    let first = next(&mut resumed).await;
    // The user's follow-up message (event last + 1) is history, not a stream event.
    assert_eq!(first.seq, Some(last + 2));
    let mut rest = vec![first];
    rest.extend(drain(resumed).await);
    assert_eq!(
        kinds(&rest),
        [
            "status:TASK_STATE_WORKING",
            "artifact",
            "status:TASK_STATE_COMPLETED"
        ]
    );
    assert_eq!(drain(from_before).await, rest);
}

#[tokio::test]
async fn resume_from_last_event_id_replays_exactly_the_later_events_once() {
    const CHUNKS: usize = 5000;
    let (tx, mut started) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let exec = scripted(move |ctx, q| {
        let (tx, gate) = (tx.clone(), g.clone());
        async move {
            let up = TaskUpdater::from_context(&ctx, q);
            up.submit().await?;
            up.start_work(None).await?;
            let id = Some("long".to_owned());
            for i in 0..CHUNKS {
                if i == CHUNKS / 2 {
                    let _ = tx.send(());
                    pass(&gate).await;
                }
                up.add_artifact(
                    vec![Part::text(format!("{i},"))],
                    id.clone(),
                    None,
                    i > 0,
                    i + 1 == CHUNKS,
                )
                .await?;
            }
            up.complete(None).await?;
            Ok(())
        }
    });
    let config = HandlerConfig {
        subscriber_buffer: 16,
        ..Default::default()
    };
    let h = handler_with(exec, config);
    let t = send_task(&h, &anon(), immediate(text("go"))).await;
    within(started.recv()).await.unwrap();

    let live = h
        .subscribe_to_task(&anon(), sub_req(&t.id), Some(10))
        .await
        .unwrap();
    gate.add_permits(1);
    let got = drain(live).await;
    let last_seq = (2 + CHUNKS + 1) as u64;
    assert_eq!(seqs(&got), (11..=last_seq).collect::<Vec<_>>());
    let stored = h
        .store()
        .events_after(&Scope::from(&anon()), &t.id, 10, 100_000, u64::MAX)
        .await
        .unwrap();
    let stored: Vec<SequencedEvent> = stored
        .into_iter()
        .map(|e| SequencedEvent::new(Some(e.seq), e.event))
        .collect();
    assert_eq!(got, stored);

    // After the end: a resume replays what is left; nothing left is an error.
    let tail = drain(
        h.subscribe_to_task(&anon(), sub_req(&t.id), Some(4000))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(seqs(&tail), (4001..=last_seq).collect::<Vec<_>>());
    assert!(matches!(
        err(h
            .subscribe_to_task(&anon(), sub_req(&t.id), Some(last_seq))
            .await),
        A2aError::UnsupportedOperation(_)
    ));
}

// ---------------------------------------------------------------------------
// CancelTask
// ---------------------------------------------------------------------------

struct DropGuard(Option<oneshot::Sender<()>>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

#[tokio::test]
async fn cancel_calls_the_executor_drops_the_run_and_rejects_late_events() {
    let (dropped_tx, dropped_rx) = oneshot::channel();
    let dropped_tx = Arc::new(Mutex::new(Some(dropped_tx)));
    let (late_tx, mut late_rx) = mpsc::unbounded_channel();
    let late_gate = Arc::new(Semaphore::new(0));
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let lg = late_gate.clone();
    let exec = scripted(move |ctx, q| {
        let guard = DropGuard(dropped_tx.lock().unwrap().take());
        let (late_tx, lg, started_tx) = (late_tx.clone(), lg.clone(), started_tx.clone());
        async move {
            let _guard = guard;
            let up = TaskUpdater::from_context(&ctx, q.clone());
            up.submit().await?;
            up.start_work(None).await?;
            // A detached helper that publishes long after the cancel.
            let (task_id, context_id) = (ctx.task_id.clone(), ctx.context_id.clone());
            tokio::spawn(async move {
                pass(&lg).await;
                let late = TaskUpdater::new(q, task_id, context_id);
                let _ = late_tx.send(late.complete(None).await);
            });
            let _ = started_tx.send(());
            futures::future::pending::<()>().await;
            Ok(())
        }
    })
    .on_cancel(|ctx, q| async move {
        let up = TaskUpdater::new(q, &ctx.task_id, &ctx.context_id);
        assert!(ctx.cancellation().is_cancelled());
        up.cancel(Some(up.new_agent_text("stopped by cancel")))
            .await?;
        // Events after the terminal state are rejected.
        up.start_work(None).await?;
        up.add_artifact(vec![Part::text("late")], None, None, false, true)
            .await?;
        Ok(())
    });
    let cancels = exec.cancels.clone();
    let h = handler(exec);
    let t = send_task(&h, &anon(), immediate(text("go"))).await;
    within(started.recv()).await.unwrap();

    let c = within(h.cancel_task(&anon(), cancel_req(&t.id)))
        .await
        .unwrap();
    assert_eq!(c.status.state, TaskState::Canceled);
    assert_eq!(status_text(&c), "stopped by cancel");
    assert_eq!(cancels.load(Ordering::SeqCst), 1);
    within(dropped_rx)
        .await
        .expect("the execute future is dropped");

    late_gate.add_permits(1);
    let late = within(late_rx.recv()).await.unwrap();
    assert!(late.is_err(), "a late event is refused: {late:?}");

    let now = get(&h, &anon(), &t.id).await;
    assert_eq!(now.status.state, TaskState::Canceled);
    assert!(now.artifacts().is_empty(), "{:?}", now.artifacts());
    let log = h
        .store()
        .events_after(&Scope::from(&anon()), &t.id, 0, 100, u64::MAX)
        .await
        .unwrap();
    assert_eq!(
        log.last().unwrap().event.state(),
        Some(TaskState::Canceled),
        "nothing is recorded after CANCELED"
    );

    // Cancel is idempotent: the CANCELED task again, without calling the executor.
    for _ in 0..2 {
        let again = within(h.cancel_task(&anon(), cancel_req(&t.id)))
            .await
            .expect("a repeated cancel returns the canceled task");
        assert_eq!(again, now);
    }
    assert_eq!(cancels.load(Ordering::SeqCst), 1);
    assert!(matches!(
        err(h.send_message(&anon(), req(follow_up(&t, "more"))).await),
        A2aError::UnsupportedOperation(_)
    ));
    assert!(matches!(
        err(h.cancel_task(&anon(), cancel_req("nope")).await),
        A2aError::TaskNotFound(_)
    ));
}

#[tokio::test]
async fn cancel_of_an_idle_input_required_task() {
    let exec = scripted(|ctx, q| async move {
        let up = TaskUpdater::from_context(&ctx, q);
        up.submit().await?;
        up.requires_input(Some(up.new_agent_text("more please")))
            .await?;
        Ok(())
    });
    let cancels = exec.cancels.clone();
    let h = handler(exec);
    let t = send_task(&h, &anon(), req(text("go"))).await;
    assert_eq!(t.status.state, TaskState::InputRequired);
    let c = within(h.cancel_task(&anon(), cancel_req(&t.id)))
        .await
        .unwrap();
    assert_eq!(c.status.state, TaskState::Canceled);
    assert_eq!(cancels.load(Ordering::SeqCst), 1);
    assert_eq!(
        get(&h, &anon(), &t.id).await.status.state,
        TaskState::Canceled
    );
    let again = within(h.cancel_task(&anon(), cancel_req(&t.id)))
        .await
        .expect("idempotent");
    assert_eq!(again.status.state, TaskState::Canceled);
    assert_eq!(cancels.load(Ordering::SeqCst), 1);
}

/// Only a CANCELED task is canceled again; one that ended otherwise is not
/// cancelable (-32002), however often it is asked.
#[tokio::test]
async fn cancel_of_a_task_that_ended_otherwise_is_not_cancelable() {
    for end in [TaskState::Completed, TaskState::Failed, TaskState::Rejected] {
        let exec = scripted(move |ctx, q| async move {
            let up = TaskUpdater::from_context(&ctx, q);
            up.submit().await?;
            match end {
                TaskState::Completed => up.complete(None).await?,
                TaskState::Failed => up.failed(None).await?,
                _ => up.reject(None).await?,
            }
            Ok(())
        });
        let cancels = exec.cancels.clone();
        let h = handler(exec);
        let t = send_task(&h, &anon(), req(text("go"))).await;
        assert_eq!(t.status.state, end);
        for _ in 0..2 {
            match err(h.cancel_task(&anon(), cancel_req(&t.id)).await) {
                A2aError::TaskNotCancelable { state, .. } => assert_eq!(state, end),
                other => panic!("{end}: {other:?}"),
            }
        }
        assert_eq!(cancels.load(Ordering::SeqCst), 0);
    }
}

// ---------------------------------------------------------------------------
// Lifecycle rules
// ---------------------------------------------------------------------------

#[tokio::test]
async fn two_messages_to_one_live_task_run_one_after_the_other() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let (tx, mut started) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(0));
    let (f, m, g) = (in_flight.clone(), max_seen.clone(), gate.clone());
    let exec = scripted(move |ctx, q| {
        let (f, m, g, tx) = (f.clone(), m.clone(), g.clone(), tx.clone());
        async move {
            let now = f.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(now, Ordering::SeqCst);
            let up = TaskUpdater::from_context(&ctx, q);
            let first = ctx.current_task.is_none();
            if first {
                up.submit().await?;
            }
            up.start_work(None).await?;
            let _ = tx.send(());
            pass(&g).await;
            if first {
                up.requires_input(None).await?;
            } else {
                up.complete(None).await?;
            }
            f.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
    });
    let h = handler(exec);
    let t = send_task(&h, &anon(), immediate(text("one"))).await;
    within(started.recv()).await.unwrap();

    let h2 = h.clone();
    let m2 = follow_up(&t, "two");
    let second = tokio::spawn(async move { h2.send_message(&anon(), req(m2)).await });
    // The second message has taken its run permit and is queued behind the first.
    within(async {
        while h.active_runs() < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    gate.add_permits(1);
    within(started.recv()).await.unwrap();
    gate.add_permits(1);
    let SendMessageResponse::Task(done) = within(second).await.unwrap().unwrap() else {
        panic!("a task")
    };
    assert_eq!(done.status.state, TaskState::Completed);
    assert_eq!(max_seen.load(Ordering::SeqCst), 1, "runs overlapped");
    let users: Vec<String> = done
        .history()
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| get_message_text(m, ""))
        .collect();
    assert_eq!(users, ["one", "two"]);
}

/// An executor whose every turn goes WORKING, reports the user's text on `started`,
/// waits at the gate, then ends by the text: `fail` FAILED, `ask` INPUT_REQUIRED,
/// anything else an `echo: <text>` artifact and COMPLETED. Records how many turns
/// overlapped.
fn turn_taker() -> (
    Scripted,
    mpsc::UnboundedReceiver<String>,
    Arc<Semaphore>,
    Arc<AtomicUsize>,
) {
    let (tx, started) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(0));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let (g, f, m) = (gate.clone(), in_flight.clone(), max_seen.clone());
    let exec = scripted(move |ctx, q| {
        let (tx, g, f, m) = (tx.clone(), g.clone(), f.clone(), m.clone());
        async move {
            m.fetch_max(f.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            let up = TaskUpdater::from_context(&ctx, q);
            if ctx.current_task.is_none() {
                up.submit().await?;
            }
            up.start_work(None).await?;
            let input = ctx.user_input();
            let _ = tx.send(input.clone());
            pass(&g).await;
            f.fetch_sub(1, Ordering::SeqCst);
            match input.as_str() {
                "fail" => up.failed(Some(up.new_agent_text("turn failed"))).await?,
                "ask" => {
                    up.requires_input(Some(up.new_agent_text("which one?")))
                        .await?
                }
                _ => {
                    up.add_artifact(
                        vec![Part::text(format!("echo: {input}"))],
                        Some("out".into()),
                        None,
                        false,
                        true,
                    )
                    .await?;
                    up.complete(Some(up.new_agent_text(format!("done: {input}"))))
                        .await?
                }
            }
            Ok(())
        }
    });
    (exec, started, gate, max_seen)
}

fn turn_ended(ev: &StreamResponse) -> Option<(String, String)> {
    let StreamResponse::StatusUpdate(e) = ev else {
        return None;
    };
    let mark = e
        .metadata
        .as_ref()?
        .get(a2a_gateway::handler::TURN_ENDED_METADATA)?;
    Some((
        mark["messageId"].as_str()?.to_owned(),
        mark["state"].as_str()?.to_owned(),
    ))
}

fn user_texts(task: &Task) -> Vec<String> {
    task.history()
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| get_message_text(m, ""))
        .collect()
}

/// Issue 15: a message with the taskId of a WORKING task is accepted at once
/// (returnImmediately honoured, the message in history with the task's contextId),
/// becomes the executor's next turn on that task, and the task does not go terminal
/// while a message waits. Each blocking caller returns when its own turn ends.
#[tokio::test]
async fn a_message_to_a_working_task_is_accepted_at_once_and_runs_as_its_next_turn() {
    let (exec, mut started, gate, max_seen) = turn_taker();
    let h = handler(exec);
    let first = text("one");
    let first_id = first.message_id.clone();
    let h1 = h.clone();
    let turn1 = tokio::spawn(async move { h1.send_message(&anon(), req(first)).await });
    assert_eq!(within(started.recv()).await.unwrap(), "one");
    let id = h
        .list_tasks(&anon(), ListTasksRequest::default())
        .await
        .unwrap()
        .tasks[0]
        .id
        .clone();
    stored_working(&h, &id).await;
    let t = get(&h, &anon(), &id).await;

    // Accepted while turn 1 is held at the gate: no waiting behind it.
    let accepted = send_task(&h, &anon(), immediate(follow_up(&t, "two"))).await;
    assert_eq!(accepted.status.state, TaskState::Working);
    let last = accepted
        .history()
        .last()
        .expect("the message is in history");
    assert_eq!(get_message_text(last, ""), "two");
    assert_eq!(last.context_id.as_deref(), Some(t.context_id.as_str()));
    assert_eq!(last.task_id.as_deref(), Some(t.id.as_str()));
    // A third, blocking, waits for its own turn.
    let third = follow_up(&t, "three");
    let h3 = h.clone();
    let turn3 = tokio::spawn(async move { h3.send_message(&anon(), req(third)).await });
    within(async {
        while user_texts(&get(&h, &anon(), &id).await).len() < 3 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert_eq!(
        user_texts(&get(&h, &anon(), &id).await),
        ["one", "two", "three"]
    );

    // Turn 1 reports COMPLETED: recorded as WORKING, marked as the end of its turn;
    // its blocking caller returns with it.
    gate.add_permits(1);
    let SendMessageResponse::Task(after1) = within(turn1).await.unwrap().unwrap() else {
        panic!("a task")
    };
    assert_eq!(after1.status.state, TaskState::Working);
    assert_eq!(status_text(&after1), "done: one");
    assert_eq!(get_artifact_text(&after1.artifacts()[0], ""), "echo: one");
    assert_eq!(within(started.recv()).await.unwrap(), "two");
    assert!(!get(&h, &anon(), &id).await.status.state.is_terminal());
    gate.add_permits(1);
    assert_eq!(within(started.recv()).await.unwrap(), "three");
    gate.add_permits(1);
    let SendMessageResponse::Task(done) = within(turn3).await.unwrap().unwrap() else {
        panic!("a task")
    };
    assert_eq!(done.status.state, TaskState::Completed);
    assert_eq!(status_text(&done), "done: three");
    assert_eq!(max_seen.load(Ordering::SeqCst), 1, "turns overlapped");

    // The log: each held-open end names its message and the state it reported.
    let log = h
        .store()
        .events_after(&Scope::from(&anon()), &id, 0, 100, u64::MAX)
        .await
        .unwrap();
    let marks: Vec<(String, String)> = log.iter().filter_map(|e| turn_ended(&e.event)).collect();
    assert_eq!(marks.len(), 2, "{marks:?}");
    assert_eq!(marks[0], (first_id, "TASK_STATE_COMPLETED".to_owned()));
    let terminal: Vec<u64> = log
        .iter()
        .filter(|e| e.event.state().is_some_and(TaskState::is_terminal))
        .map(|e| e.seq)
        .collect();
    assert_eq!(
        terminal,
        [log.last().unwrap().seq],
        "terminal once, at the end"
    );
}

/// The stream of the first message ends with its turn; the stream of a message sent
/// while that turn runs opens at once with the current Task, carries the rest of the
/// running turn, then its own turn to the end. An INPUT_REQUIRED turn end with a
/// message waiting is held open like COMPLETED: the waiting message is the input.
#[tokio::test]
async fn streams_of_queued_messages_follow_their_own_turn() {
    let (exec, mut started, gate, _) = turn_taker();
    let h = handler(exec);
    let first = text("ask");
    let first_id = first.message_id.clone();
    let mut s1 = within(h.send_streaming_message(&anon(), req(first)))
        .await
        .unwrap();
    assert_eq!(within(started.recv()).await.unwrap(), "ask");
    let StreamResponse::Task(t) = next(&mut s1).await.into_event() else {
        panic!("task first")
    };
    let second = follow_up(&t, "two");
    let s2 = within(h.send_streaming_message(&anon(), req(second)))
        .await
        .expect("accepted at once while turn 1 waits at the gate");
    gate.add_permits(1);
    let rest1 = drain(s1).await;
    let end1 = rest1.last().unwrap();
    assert_eq!(
        turn_ended(end1.event()),
        Some((first_id, "TASK_STATE_INPUT_REQUIRED".to_owned())),
        "{:?}",
        kinds(&rest1)
    );
    assert_eq!(state(end1), Some(TaskState::Working));
    assert_eq!(within(started.recv()).await.unwrap(), "two");
    gate.add_permits(1);
    let evs2 = drain(s2).await;
    assert_contiguous(&evs2[1..]);
    let StreamResponse::Task(snap) = evs2[0].event() else {
        panic!("task first: {:?}", kinds(&evs2))
    };
    assert_eq!(snap.status.state, TaskState::Working);
    assert_eq!(user_texts(snap), ["ask", "two"]);
    assert!(
        evs2.iter().any(|e| turn_ended(e.event()).is_some()),
        "the running turn's end is in the stream: {:?}",
        kinds(&evs2)
    );
    assert_eq!(state(evs2.last().unwrap()), Some(TaskState::Completed));
}

/// A turn that ends the task (FAILED) while a message waits: the task ends FAILED,
/// the waiting message is not run, and its blocking caller gets the FAILED task (not
/// a refusal). A message after that is refused at once.
#[tokio::test]
async fn a_turn_that_fails_ends_the_task_and_its_queued_message_is_not_run() {
    let (exec, mut started, gate, _) = turn_taker();
    let h = handler(exec);
    let t = send_task(&h, &anon(), immediate(text("fail"))).await;
    assert_eq!(within(started.recv()).await.unwrap(), "fail");
    let h2 = h.clone();
    let m2 = follow_up(&t, "two");
    let queued = tokio::spawn(async move { h2.send_message(&anon(), req(m2)).await });
    within(async {
        while user_texts(&get(&h, &anon(), &t.id).await).len() < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    gate.add_permits(2);
    let SendMessageResponse::Task(end) = within(queued).await.unwrap().unwrap() else {
        panic!("a task")
    };
    assert_eq!(end.status.state, TaskState::Failed);
    assert_eq!(status_text(&end), "turn failed");
    assert!(
        started.try_recv().is_err(),
        "the queued message was not run"
    );
    within(async {
        while h.active_runs() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(matches!(
        err(h
            .send_message(&anon(), immediate(follow_up(&t, "three")))
            .await),
        A2aError::UnsupportedOperation(_)
    ));
}

async fn failed_reason(exec: Scripted) -> String {
    let h = handler(exec);
    let t = send_task(&h, &anon(), req(text("go"))).await;
    assert_eq!(t.status.state, TaskState::Failed);
    assert_eq!(
        get(&h, &anon(), &t.id).await.status.state,
        TaskState::Failed
    );
    status_text(&t)
}

#[tokio::test]
async fn an_executor_without_a_final_state_error_or_panic_fails_the_task() {
    let no_final = scripted(|ctx, q| async move {
        let up = TaskUpdater::from_context(&ctx, q);
        up.submit().await?;
        up.start_work(None).await?;
        Ok(())
    });
    let reason = failed_reason(no_final).await;
    assert!(
        reason.contains("without reporting a final state"),
        "{reason}"
    );

    // The executor's error and panic texts may hold internals (addresses, OS
    // errors): the caller gets the category and a correlation id, the log the text.
    let errs = scripted(|ctx, q| async move {
        TaskUpdater::from_context(&ctx, q).submit().await?;
        Err("the model endpoint 10.0.0.7:443 refused the call (os error 111)".into())
    });
    let reason = failed_reason(errs).await;
    assert!(
        reason.starts_with("the agent failed [correlation id ") && reason.ends_with(']'),
        "{reason}"
    );
    assert!(
        !reason.contains("10.0.0.7") && !reason.contains("os error"),
        "{reason}"
    );

    let panics = scripted(|ctx, q| async move {
        TaskUpdater::from_context(&ctx, q).submit().await?;
        panic!("kaboom at /srv/secret/path");
    });
    let reason = failed_reason(panics).await;
    assert!(
        reason.starts_with("the agent crashed [correlation id "),
        "{reason}"
    );
    assert!(!reason.contains("kaboom"), "{reason}");

    let silent = scripted(|_ctx, _q| async move { Ok(()) });
    let reason = failed_reason(silent).await;
    assert!(!reason.is_empty());
}

#[tokio::test]
async fn too_many_running_tasks_are_refused_while_running_ones_finish() {
    let (exec, mut probe) = gated(1);
    let config = HandlerConfig {
        max_concurrent_tasks: 2,
        ..Default::default()
    };
    let h = handler_with(exec, config);
    let a = send_task(&h, &anon(), immediate(text("a"))).await;
    let b = send_task(&h, &anon(), immediate(text("b"))).await;
    probe.started().await;
    probe.started().await;
    assert!(matches!(
        err(h.send_message(&anon(), req(text("c"))).await),
        A2aError::Unavailable(_)
    ));
    assert!(matches!(
        err(h.send_streaming_message(&anon(), req(text("c"))).await),
        A2aError::Unavailable(_)
    ));
    let (sa, sb) = (subscribe(&h, &a.id).await, subscribe(&h, &b.id).await);
    probe.release(2);
    drain(sa).await;
    drain(sb).await;
    for id in [&a.id, &b.id] {
        let t = get(&h, &anon(), id).await;
        assert_eq!(t.status.state, TaskState::Completed);
        assert_eq!(t.artifacts().len(), 1);
    }
    // Capacity is back.
    within(async {
        while h.active_runs() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    probe.release(1);
    let d = send_task(&h, &anon(), req(text("d"))).await;
    assert_eq!(d.status.state, TaskState::Completed);
}

#[tokio::test]
async fn history_length_is_applied_and_validated() {
    let h = handler(ReleaseReviewAgentExecutor::new());
    let t = send_task(&h, &anon(), req(text("review please"))).await;
    let done = send_task(&h, &anon(), req(follow_up(&t, "svc@1.0.0"))).await;
    let full = done.history().to_vec();
    assert_eq!(full.len(), 5, "user, ask, user, reviewing, complete");

    let none = h.get_task(&anon(), get_req(&t.id, Some(0))).await.unwrap();
    assert_eq!(none.history, None);
    assert!(
        serde_json::to_value(&none)
            .unwrap()
            .get("history")
            .is_none()
    );
    let two = h.get_task(&anon(), get_req(&t.id, Some(2))).await.unwrap();
    assert_eq!(two.history(), &full[3..]);
    let all = h
        .get_task(&anon(), get_req(&t.id, Some(100)))
        .await
        .unwrap();
    assert_eq!(all.history(), &full[..]);

    let cfg = |n| SendMessageConfiguration {
        history_length: Some(n),
        ..Default::default()
    };
    let one = send_task(&h, &anon(), req_with(text("again"), cfg(1))).await;
    assert_eq!(one.history().len(), 1);
    let mut s = h
        .send_streaming_message(&anon(), req_with(text("stream"), cfg(0)))
        .await
        .unwrap();
    let StreamResponse::Task(first) = next(&mut s).await.into_event() else {
        panic!("task first")
    };
    assert_eq!(first.history, None);

    assert!(matches!(
        err(h.get_task(&anon(), get_req(&t.id, Some(-1))).await),
        A2aError::InvalidParams(_)
    ));
    assert!(matches!(
        err(h.send_message(&anon(), req_with(text("x"), cfg(-1))).await),
        A2aError::InvalidParams(_)
    ));
    assert!(matches!(
        err(h
            .send_streaming_message(&anon(), req_with(text("x"), cfg(-1)))
            .await),
        A2aError::InvalidParams(_)
    ));
    let list = ListTasksRequest {
        history_length: Some(-1),
        ..Default::default()
    };
    assert!(matches!(
        err(h.list_tasks(&anon(), list).await),
        A2aError::InvalidParams(_)
    ));
    let list = ListTasksRequest {
        history_length: Some(0),
        ..Default::default()
    };
    let page = h.list_tasks(&anon(), list).await.unwrap();
    assert!(page.tasks.iter().all(|t| t.history.is_none()));
}

#[tokio::test]
async fn list_tasks_page_size_token_and_paging() {
    let h = handler(HelloWorldAgentExecutor::new());
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(send_task(&h, &anon(), req(text(&format!("t{i}")))).await.id);
    }
    let page = |size: Option<i32>, token: Option<String>| ListTasksRequest {
        page_size: size,
        page_token: token,
        ..Default::default()
    };
    for bad in [0, -1, 101] {
        assert!(matches!(
            err(h.list_tasks(&anon(), page(Some(bad), None)).await),
            A2aError::InvalidParams(_)
        ));
    }
    for bad in ["%%%", "djE6eA", "not-a-token"] {
        assert!(matches!(
            err(h.list_tasks(&anon(), page(Some(2), Some(bad.into()))).await),
            A2aError::InvalidParams(_)
        ));
    }
    let default = h.list_tasks(&anon(), page(None, None)).await.unwrap();
    assert_eq!(default.page_size, 50);
    assert_eq!(default.tasks.len(), 5);
    assert_eq!(default.next_page_token, "");
    assert!(default.tasks.iter().all(|t| t.artifacts.is_none()));
    let with_art = ListTasksRequest {
        include_artifacts: Some(true),
        ..Default::default()
    };
    let with_art = h.list_tasks(&anon(), with_art).await.unwrap();
    assert!(with_art.tasks.iter().all(|t| t.artifacts().len() == 1));
    assert_eq!(
        h.list_tasks(&anon(), page(Some(100), None))
            .await
            .unwrap()
            .tasks
            .len(),
        5
    );

    let mut seen = Vec::new();
    let mut token = None;
    let mut pages = 0;
    loop {
        let p = h.list_tasks(&anon(), page(Some(2), token)).await.unwrap();
        assert_eq!(p.total_size, 5);
        assert_eq!(p.page_size, 2);
        pages += 1;
        seen.extend(p.tasks.into_iter().map(|t| t.id));
        if p.next_page_token.is_empty() {
            break;
        }
        token = Some(p.next_page_token);
    }
    assert_eq!(pages, 3);
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 5, "no task twice: {seen:?}");
    ids.sort();
    assert_eq!(sorted, ids);
}

#[tokio::test]
async fn callers_are_isolated_by_owner_and_tenant() {
    let h = handler(ReleaseReviewAgentExecutor::new());
    let alice = CallContext::new("t1", "alice");
    let t = send_task(&h, &alice, req(text("review"))).await;
    assert_eq!(t.status.state, TaskState::InputRequired);

    for other in [
        CallContext::new("t1", "bob"),
        CallContext::new("t2", "alice"),
    ] {
        assert!(matches!(
            err(h.get_task(&other, get_req(&t.id, None)).await),
            A2aError::TaskNotFound(_)
        ));
        assert!(matches!(
            err(h.cancel_task(&other, cancel_req(&t.id)).await),
            A2aError::TaskNotFound(_)
        ));
        assert!(matches!(
            err(h.subscribe_to_task(&other, sub_req(&t.id), None).await),
            A2aError::TaskNotFound(_)
        ));
        assert!(matches!(
            err(h.subscribe_to_task(&other, sub_req(&t.id), Some(0)).await),
            A2aError::TaskNotFound(_)
        ));
        assert!(matches!(
            err(h
                .send_message(&other, req(follow_up(&t, "svc@1.2.3")))
                .await),
            A2aError::TaskNotFound(_)
        ));
        let list = h
            .list_tasks(&other, ListTasksRequest::default())
            .await
            .unwrap();
        assert_eq!(list.total_size, 0);
        assert!(list.tasks.is_empty());
    }
    let mine = get(&h, &alice, &t.id).await;
    assert_eq!(mine, t, "the others' attempts changed nothing");
    assert_eq!(
        h.list_tasks(&alice, ListTasksRequest::default())
            .await
            .unwrap()
            .total_size,
        1
    );
}

// ---------------------------------------------------------------------------
// Recovery and shutdown
// ---------------------------------------------------------------------------

#[tokio::test]
async fn recover_interrupted_fails_working_tasks() {
    let store = Arc::new(MemoryTaskStore::new());
    let scope = Scope::new("t1", "alice");
    for (id, st) in [
        ("t-working", TaskState::Working),
        ("t-submitted", TaskState::Submitted),
        ("t-input", TaskState::InputRequired),
        ("t-done", TaskState::Completed),
    ] {
        let task = Task {
            id: id.into(),
            context_id: "ctx".into(),
            status: TaskStatus::new(st),
            artifacts: None,
            history: None,
            metadata: None,
        };
        store
            .append(&scope, id, 1, &StreamResponse::Task(task))
            .await
            .unwrap();
    }
    let h = RequestHandler::new(
        Arc::new(HelloWorldAgentExecutor::new()),
        store,
        HandlerConfig::default(),
    );
    assert_eq!(h.recover_interrupted().await.unwrap(), 2);
    let alice = CallContext::new("t1", "alice");
    for id in ["t-working", "t-submitted"] {
        let t = get(&h, &alice, id).await;
        assert_eq!(t.status.state, TaskState::Failed);
        assert_eq!(status_text(&t), "interrupted by a gateway restart");
    }
    assert_eq!(
        get(&h, &alice, "t-input").await.status.state,
        TaskState::InputRequired
    );
    assert_eq!(
        get(&h, &alice, "t-done").await.status.state,
        TaskState::Completed
    );
    assert_eq!(h.recover_interrupted().await.unwrap(), 0);
}

#[tokio::test]
async fn shutdown_lets_a_short_run_finish_and_fails_a_long_one() {
    let short_gate = Arc::new(Semaphore::new(0));
    let (tx, mut started) = mpsc::unbounded_channel();
    let g = short_gate.clone();
    let exec = scripted(move |ctx, q| {
        let (g, tx) = (g.clone(), tx.clone());
        async move {
            let up = TaskUpdater::from_context(&ctx, q);
            up.submit().await?;
            up.start_work(None).await?;
            let _ = tx.send(());
            if ctx.user_input() == "short" {
                pass(&g).await;
            } else {
                futures::future::pending::<()>().await;
            }
            up.complete(None).await?;
            Ok(())
        }
    });
    let h = handler(exec);
    let short = send_task(&h, &anon(), immediate(text("short"))).await;
    let long = send_task(&h, &anon(), immediate(text("long"))).await;
    within(started.recv()).await.unwrap();
    within(started.recv()).await.unwrap();

    let h2 = h.clone();
    let down = tokio::spawn(async move { h2.shutdown(Duration::from_millis(500)).await });
    tokio::task::yield_now().await; // shutdown has begun
    assert!(matches!(
        err(h.send_message(&anon(), req(text("late"))).await),
        A2aError::Unavailable(_)
    ));
    short_gate.add_permits(1);
    within(down).await.unwrap();

    assert_eq!(
        get(&h, &anon(), &short.id).await.status.state,
        TaskState::Completed
    );
    let long = get(&h, &anon(), &long.id).await;
    assert_eq!(long.status.state, TaskState::Failed);
    assert!(status_text(&long).contains("shut down"), "{long:?}");
    assert_eq!(h.active_runs(), 0);
}

// ---------------------------------------------------------------------------
// The example agents through the handler
// ---------------------------------------------------------------------------

#[tokio::test]
async fn hello_world_agent_streams_the_seed_sequence() {
    let h = handler(HelloWorldAgentExecutor::new());
    let evs = drain(
        h.send_streaming_message(&anon(), req(text("how are you?")))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        kinds(&evs),
        [
            "task:TASK_STATE_SUBMITTED",
            "status:TASK_STATE_WORKING",
            "artifact",
            "status:TASK_STATE_COMPLETED"
        ]
    );
    let StreamResponse::StatusUpdate(w) = evs[1].event() else {
        unreachable!()
    };
    assert_eq!(
        get_message_text(w.status.message.as_ref().unwrap(), ""),
        "Processing request..."
    );
    let StreamResponse::ArtifactUpdate(a) = evs[2].event() else {
        unreachable!()
    };
    assert_eq!(a.artifact.name.as_deref(), Some("result"));
    assert_eq!(
        get_artifact_text(&a.artifact, ""),
        "Hello, World! I have received your request (how are you?)"
    );
}

#[tokio::test]
async fn release_review_agent_asks_continues_and_completes() {
    let h = handler(ReleaseReviewAgentExecutor::new());
    let evs = drain(
        h.send_streaming_message(&anon(), req(text("review the release")))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        kinds(&evs),
        [
            "task:TASK_STATE_SUBMITTED",
            "status:TASK_STATE_INPUT_REQUIRED"
        ]
    );
    let StreamResponse::Task(t) = evs[0].event() else {
        unreachable!()
    };
    let task = get(&h, &anon(), &t.id).await;
    assert_eq!(status_text(&task), "State the release as service@1.2.3.");

    let evs = drain(
        h.send_streaming_message(&anon(), req(follow_up(&task, "payments@4.5.6")))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        kinds(&evs),
        [
            "task:TASK_STATE_INPUT_REQUIRED",
            "status:TASK_STATE_WORKING",
            "artifact",
            "status:TASK_STATE_COMPLETED"
        ]
    );
    let StreamResponse::StatusUpdate(w) = evs[1].event() else {
        unreachable!()
    };
    assert_eq!(
        get_message_text(w.status.message.as_ref().unwrap(), ""),
        "Reviewing payments@4.5.6."
    );
    let done = get(&h, &anon(), &task.id).await;
    assert_eq!(done.status.state, TaskState::Completed);
    assert_eq!(done.artifacts()[0].name.as_deref(), Some("review"));
}

#[tokio::test]
async fn release_review_agent_can_be_canceled_while_reviewing() {
    let h = handler(ReleaseReviewAgentExecutor::with_review_delay(
        Duration::from_secs(3600),
    ));
    let mut s = h
        .send_streaming_message(&anon(), req(text("review api@1.2.3")))
        .await
        .unwrap();
    let StreamResponse::Task(t) = next(&mut s).await.into_event() else {
        panic!("task first")
    };
    assert_eq!(state(&next(&mut s).await), Some(TaskState::Working));
    let c = within(h.cancel_task(&anon(), cancel_req(&t.id)))
        .await
        .unwrap();
    assert_eq!(c.status.state, TaskState::Canceled);
    let rest = drain(s).await;
    assert_eq!(kinds(&rest), ["status:TASK_STATE_CANCELED"]);
    let done = get(&h, &anon(), &t.id).await;
    assert_eq!(done.status.state, TaskState::Canceled);
    assert!(done.artifacts().is_empty());
}

// ---------------------------------------------------------------------------
// Regressions
// ---------------------------------------------------------------------------

#[tokio::test]
async fn return_immediately_on_a_follow_up_shows_the_new_run_not_the_old_interruption() {
    let h = handler(ReleaseReviewAgentExecutor::with_review_delay(
        Duration::from_secs(3600),
    ));
    let t = send_task(&h, &anon(), req(text("review"))).await;
    assert_eq!(t.status.state, TaskState::InputRequired);
    let t2 = send_task(&h, &anon(), immediate(follow_up(&t, "api@1.2.3"))).await;
    assert!(
        matches!(t2.status.state, TaskState::Submitted | TaskState::Working),
        "returnImmediately answers with the task in SUBMITTED/WORKING, got {}",
        t2.status.state
    );
    assert_eq!(t2.history().len(), 4, "user, ask, user, reviewing");
    h.cancel_task(&anon(), cancel_req(&t.id)).await.unwrap();
}

#[tokio::test]
async fn cancel_racing_completion_answers_task_not_cancelable() {
    let (tx, mut started) = mpsc::unbounded_channel();
    let work = Arc::new(Semaphore::new(0));
    let linger = Arc::new(Semaphore::new(0));
    let (w, l) = (work.clone(), linger.clone());
    let exec = scripted(move |ctx, q| {
        let (tx, w, l) = (tx.clone(), w.clone(), l.clone());
        async move {
            let up = TaskUpdater::from_context(&ctx, q);
            up.submit().await?;
            up.start_work(None).await?;
            let _ = tx.send(());
            pass(&w).await;
            up.complete(None).await?;
            pass(&l).await; // cleanup after COMPLETED
            Ok(())
        }
    });
    let cancels = exec.cancels.clone();
    let store = Arc::new(HookedStore::default());
    let h = RequestHandler::new(Arc::new(exec), store.clone(), HandlerConfig::default());
    let t = send_task(&h, &anon(), immediate(text("go"))).await;
    within(started.recv()).await.unwrap();
    let watch = subscribe(&h, &t.id).await;

    let get_gate = Arc::new(Semaphore::new(0));
    let (reached_tx, reached) = oneshot::channel();
    *store.hold.lock().unwrap() = Some((get_gate.clone(), reached_tx));
    let h2 = h.clone();
    let id = t.id.clone();
    let cancel = tokio::spawn(async move { h2.cancel_task(&anon(), cancel_req(&id)).await });
    within(reached).await.unwrap(); // CancelTask read WORKING
    work.add_permits(1);
    drain(watch).await; // COMPLETED is stored
    get_gate.add_permits(1);
    let r = within(cancel).await.unwrap();
    assert!(
        matches!(r, Err(A2aError::TaskNotCancelable { .. })),
        "a completed task is not cancelable: {r:?}"
    );
    assert_eq!(
        cancels.load(Ordering::SeqCst),
        0,
        "executor cancel not called"
    );
    linger.add_permits(1);
    assert_eq!(
        get(&h, &anon(), &t.id).await.status.state,
        TaskState::Completed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_and_subscriptions_to_an_idle_task_never_race_its_driver_exiting() {
    let exec = scripted(|ctx, q| async move {
        let up = TaskUpdater::from_context(&ctx, q);
        if ctx.current_task.is_none() {
            up.submit().await?;
            up.requires_auth(None).await?;
        } else {
            up.complete(None).await?;
        }
        Ok(())
    });
    let h = handler(exec);
    // A multi-thread runtime lets a freshly spawned driver of an idle task run
    // (and decide to exit) before the command or subscription reaches it. A command
    // that reaches it as it checks whether it may exit is run at once, not after the
    // driver's 5 s idle re-check.
    let mut slowest = Duration::ZERO;
    for i in 0..300 {
        let started = std::time::Instant::now();
        let t = send_task(&h, &anon(), req(text("go"))).await;
        if i % 3 == 2 {
            let c = within(h.cancel_task(&anon(), cancel_req(&t.id))).await;
            slowest = slowest.max(started.elapsed());
            assert_eq!(c.expect("cancel").status.state, TaskState::Canceled);
            continue;
        }
        let s = subscribe(&h, &t.id).await;
        send_task(&h, &anon(), req(follow_up(&t, "granted"))).await;
        let evs = drain(s).await;
        slowest = slowest.max(started.elapsed());
        assert_eq!(
            state(evs.last().unwrap()),
            Some(TaskState::Completed),
            "the subscription ended early: {:?}",
            kinds(&evs)
        );
    }
    assert!(
        slowest < Duration::from_millis(2500),
        "a round took {slowest:?}: a command waited for a driver that was checking whether to exit"
    );
}
