//! Several gateway instances on one PostgreSQL (issue 12), in one process: two
//! request handlers, each over its own `PostgresTaskStore` (own pool, own listener
//! connection) on one schema of the real server, each joined to the cluster as its
//! own instance. The executor is shared so the test can see where runs happen.
//!
//! - a subscriber on B follows a run on A: every event once, in order, to COMPLETED,
//!   and a resume on B (`Last-Event-ID`) replays the rest;
//! - CancelTask on B cancels the run on A: A's executor `cancel` is called, the run's
//!   cancellation fires, the answer is CANCELED and B's subscriber ends with it;
//! - a follow-up to an INPUT_REQUIRED task runs on the other instance;
//! - two messages to one task at two instances never run at once;
//! - an instance that stops heart-beating: its running task ends FAILED on both
//!   instances within the lease time, naming it;
//! - a dropped listener connection (its backend terminated) is replaced and the
//!   subscriber still gets every event.
//!
//! PostgreSQL reads `A2A_GATEWAY_TEST_POSTGRES_URL` (skipped with a note without it,
//! failing when `CI=true`). The waits are on real time because the lease clock is
//! the database's; each is bounded.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use a2a_gateway::cluster::{Cluster, ClusterOptions};
use a2a_gateway::executor::{ExecutorError, new_user_text_message};
use a2a_gateway::handler::{EventStream, SequencedEvent};
use a2a_gateway::protocol::{
    CancelTaskRequest, GetTaskRequest, Message, Part, SendMessageConfiguration, SendMessageRequest,
    SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task, TaskState,
};
use a2a_gateway::store::PostgresTaskStore;
use a2a_gateway::test_util::{PgSchema, free_port, skip};
use a2a_gateway::upstream::SESSION_HEADER;
use a2a_gateway::upstream::mock::{MockReply, MockRuntime};
use a2a_gateway::{
    A2aError, AgentExecutor, CallContext, EventQueue, HandlerConfig, RequestContext,
    RequestHandler, TaskUpdater,
};
use async_trait::async_trait;
use futures::StreamExt;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::sync::{Semaphore, mpsc};

const WAIT: Duration = Duration::from_secs(30);
const LEASE: Duration = Duration::from_secs(2);
const CHUNKS: usize = 5;

async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .expect("within the wait")
}

/// Runs: "ask" ends INPUT_REQUIRED at once; anything else goes WORKING, reports
/// `(instance tag, task id)` on `started`, waits at the gate (or its cancellation),
/// then sends [`CHUNKS`] artifact chunks and COMPLETED (INPUT_REQUIRED for a text
/// ending in `?`). Counts runs in flight per
/// process and the most seen at once, and cancels.
#[derive(Clone)]
struct Gated {
    started: mpsc::UnboundedSender<String>,
    gate: Arc<Semaphore>,
    in_flight: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    cancels: Arc<AtomicUsize>,
    aborted: Arc<AtomicUsize>,
}

#[async_trait]
impl AgentExecutor for Gated {
    async fn execute(&self, ctx: RequestContext, q: EventQueue) -> Result<(), ExecutorError> {
        let up = TaskUpdater::from_context(&ctx, q);
        if ctx.current_task.is_none() {
            up.submit().await?;
        }
        let text = ctx
            .message
            .parts
            .iter()
            .filter_map(|p| p.as_text())
            .collect::<String>();
        if text == "ask" {
            up.requires_input(Some(up.new_agent_text("which region?")))
                .await?;
            return Ok(());
        }
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let _guard = Leave(self.in_flight.clone());
        up.start_work(None).await?;
        let _ = self.started.send(ctx.task_id.clone());
        tokio::select! {
            p = self.gate.acquire() => p.expect("gate").forget(),
            _ = ctx.cancellation().cancelled() => {
                self.aborted.fetch_add(1, Ordering::SeqCst);
                return Ok(());
            }
        }
        for i in 0..CHUNKS {
            up.add_artifact(
                vec![Part::text(format!("{i},"))],
                Some("out".into()),
                Some("out".into()),
                i > 0,
                i + 1 == CHUNKS,
            )
            .await?;
        }
        if text.ends_with('?') {
            up.requires_input(None).await?;
        } else {
            up.complete(None).await?;
        }
        Ok(())
    }

    async fn cancel(&self, ctx: RequestContext, q: EventQueue) -> Result<(), ExecutorError> {
        self.cancels.fetch_add(1, Ordering::SeqCst);
        let _ = TaskUpdater::from_context(&ctx, q).cancel(None).await;
        Ok(())
    }
}

struct Leave(Arc<AtomicUsize>);
impl Drop for Leave {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Probe {
    started: mpsc::UnboundedReceiver<String>,
    exec: Gated,
}

impl Probe {
    async fn started(&mut self) -> String {
        within(self.started.recv()).await.expect("a run started")
    }
    fn release(&self, n: usize) {
        self.exec.gate.add_permits(n);
    }
}

fn gated() -> Probe {
    let (started, rx) = mpsc::unbounded_channel();
    Probe {
        started: rx,
        exec: Gated {
            started,
            gate: Arc::new(Semaphore::new(0)),
            in_flight: Arc::default(),
            most: Arc::default(),
            cancels: Arc::default(),
            aborted: Arc::default(),
        },
    }
}

/// One gateway instance: a handler over its own store, joined to the cluster.
struct Instance {
    handler: RequestHandler,
    cluster: Cluster,
    store: Arc<PostgresTaskStore>,
}

async fn instance(options: PgConnectOptions, exec: &Gated) -> Instance {
    let mut opts = ClusterOptions::with_lease(LEASE);
    opts.fallback_poll = Duration::from_secs(20); // wake-ups must do the work
    instance_with(options, Arc::new(exec.clone()), opts).await
}

/// An instance running `exec`, with the cluster timings `opts`.
async fn instance_with(
    options: PgConnectOptions,
    exec: Arc<dyn AgentExecutor>,
    opts: ClusterOptions,
) -> Instance {
    let store = Arc::new(PostgresTaskStore::connect_with(options, 6).await.unwrap());
    let handler = RequestHandler::new(exec, store.clone(), HandlerConfig::default());
    let id = a2a_gateway::cluster::instance_id("test");
    let (cluster, cancels) = Cluster::join(store.clone(), id, opts).await.unwrap();
    handler.join_cluster(cluster.clone(), cancels).unwrap();
    Instance {
        handler,
        cluster,
        store,
    }
}

/// Two instances on a fresh schema; the schema is dropped afterwards.
async fn two_instances<F, Fut>(test: &str, body: F)
where
    F: FnOnce(Instance, Instance, Probe, PgConnectOptions) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    on_fresh_schema(test, |options| async move {
        let probe = gated();
        let a = instance(options.clone(), &probe.exec).await;
        let b = instance(options.clone(), &probe.exec).await;
        body(a, b, probe, options).await
    })
    .await;
}

/// Runs `body` with connect options for a fresh schema of the test server, dropped
/// afterwards (skipped with a note without `A2A_GATEWAY_TEST_POSTGRES_URL`).
async fn on_fresh_schema<F, Fut>(test: &str, body: F)
where
    F: FnOnce(PgConnectOptions) -> Fut,
    Fut: Future<Output = ()>,
{
    PgSchema::run(test, async |schema| body(schema.connect_options()).await).await;
}

fn anon() -> CallContext {
    CallContext::anonymous()
}

fn req(message: Message, immediate: bool) -> SendMessageRequest {
    SendMessageRequest {
        tenant: None,
        message,
        configuration: immediate.then(|| SendMessageConfiguration {
            return_immediately: Some(true),
            ..Default::default()
        }),
        metadata: None,
    }
}

fn follow_up(task: &Task, text: &str) -> Message {
    let mut m = new_user_text_message(text);
    m.task_id = Some(task.id.clone());
    m
}

async fn send(h: &RequestHandler, m: Message, immediate: bool) -> Task {
    match h.send_message(&anon(), req(m, immediate)).await.unwrap() {
        SendMessageResponse::Task(t) => t,
        other => panic!("expected a task, got {other:?}"),
    }
}

async fn get(h: &RequestHandler, id: &str) -> Task {
    h.get_task(
        &anon(),
        GetTaskRequest {
            tenant: None,
            id: id.into(),
            history_length: None,
        },
    )
    .await
    .unwrap()
}

async fn subscribe(h: &RequestHandler, id: &str, last: Option<u64>) -> EventStream {
    h.subscribe_to_task(
        &anon(),
        SubscribeToTaskRequest {
            tenant: None,
            id: id.into(),
        },
        last,
    )
    .await
    .unwrap()
}

async fn drain(s: EventStream) -> Vec<SequencedEvent> {
    within(s.map(|e| e.expect("stream event")).collect()).await
}

fn seqs(events: &[SequencedEvent]) -> Vec<u64> {
    events.iter().filter_map(|e| e.seq).collect()
}

fn last_state(events: &[SequencedEvent]) -> Option<TaskState> {
    events.iter().rev().find_map(|e| e.event().state())
}

async fn wait_state(h: &RequestHandler, id: &str, want: TaskState) -> Task {
    within(async {
        loop {
            let t = get(h, id).await;
            if t.status.state == want {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

fn status_text(t: &Task) -> String {
    t.status
        .message
        .as_ref()
        .map(|m| m.parts.iter().filter_map(|p| p.as_text()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_on_another_instance_gets_every_event_once_in_order() {
    two_instances("cluster_subscribe", |a, b, mut probe, _| async move {
        let task = send(&a.handler, new_user_text_message("go"), true).await;
        assert_eq!(probe.started().await, task.id);
        let fresh = subscribe(&b.handler, &task.id, None).await;
        let resumed = subscribe(&b.handler, &task.id, Some(1)).await;
        let started = std::time::Instant::now();
        probe.release(1);
        let (fresh, resumed) = tokio::join!(drain(fresh), drain(resumed));
        let took = started.elapsed();
        let stored = get(&b.handler, &task.id).await;
        assert_eq!(stored.status.state, TaskState::Completed);
        // The snapshot, then every later event once, in order, ending COMPLETED.
        let s = seqs(&fresh);
        assert!(s.windows(2).all(|w| w[1] == w[0] + 1), "{s:?}");
        assert_eq!(last_state(&fresh), Some(TaskState::Completed));
        assert_eq!(
            fresh
                .iter()
                .filter(|e| matches!(e.event(), StreamResponse::ArtifactUpdate(_)))
                .count(),
            CHUNKS
        );
        let r = seqs(&resumed);
        assert_eq!(r.first(), Some(&2), "{r:?}");
        assert_eq!(r.last(), s.last(), "{r:?} vs {s:?}");
        assert!(r.windows(2).all(|w| w[1] == w[0] + 1), "{r:?}");
        // Woken by notifications, not by the (20 s) fallback poll.
        assert!(took < Duration::from_secs(10), "took {took:?}");
        drop((a.cluster, b.cluster, a.store, b.store));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_on_another_instance_stops_the_run_where_it_runs() {
    two_instances("cluster_cancel", |a, b, mut probe, _| async move {
        let task = send(&a.handler, new_user_text_message("go"), true).await;
        probe.started().await;
        let sub = subscribe(&b.handler, &task.id, None).await;
        let asked = std::time::Instant::now();
        let canceled = within(b.handler.cancel_task(
            &anon(),
            CancelTaskRequest {
                tenant: None,
                id: task.id.clone(),
                metadata: None,
            },
        ))
        .await
        .unwrap();
        assert_eq!(canceled.status.state, TaskState::Canceled);
        assert!(
            asked.elapsed() < Duration::from_secs(5),
            "{:?}",
            asked.elapsed()
        );
        assert_eq!(probe.exec.cancels.load(Ordering::SeqCst), 1);
        // The run on A is gone (aborted or returned on its cancellation) within 1 s.
        tokio::time::timeout(Duration::from_secs(1), async {
            while probe.exec.in_flight.load(Ordering::SeqCst) > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the run on A stopped within 1 s of the answer");
        assert_eq!(last_state(&drain(sub).await), Some(TaskState::Canceled));
        assert_eq!(
            get(&a.handler, &task.id).await.status.state,
            TaskState::Canceled
        );
        drop((a.cluster, b.cluster));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_runs_on_another_instance_and_turns_never_overlap() {
    two_instances("cluster_turns", |a, b, mut probe, _| async move {
        let asked = send(&a.handler, new_user_text_message("ask"), false).await;
        assert_eq!(asked.status.state, TaskState::InputRequired);
        // The follow-up goes to B and runs there.
        let second = send(&b.handler, follow_up(&asked, "go?"), true).await;
        assert_eq!(probe.started().await, asked.id);
        assert!(b.cluster.holds(&(
            a2a_gateway::scope::Scope::new("", "anonymous"),
            asked.id.clone()
        )));
        // A third message, at A, while B runs the turn: it waits for B's turn.
        let ha = a.handler.clone();
        let third = tokio::spawn({
            let m = follow_up(&second, "go");
            async move { send(&ha, m, false).await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            !third.is_finished(),
            "the third message waits for the running turn"
        );
        probe.release(1);
        probe.started().await;
        probe.release(1);
        let done = within(third).await.unwrap();
        assert_eq!(done.status.state, TaskState::Completed);
        assert_eq!(
            probe.exec.most.load(Ordering::SeqCst),
            1,
            "turns overlapped"
        );
        let user_messages = done
            .history()
            .iter()
            .filter(|m| m.role == a2a_gateway::protocol::Role::User)
            .count();
        assert_eq!(user_messages, 3);
        drop((a.cluster, b.cluster));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_instance_tasks_end_failed_everywhere_naming_it() {
    two_instances("cluster_dead", |a, b, mut probe, _| async move {
        let task = send(&a.handler, new_user_text_message("go"), true).await;
        probe.started().await;
        let sub = subscribe(&b.handler, &task.id, None).await;
        let halted = std::time::Instant::now();
        a.cluster.halt(); // no more heartbeats: A looks dead to B
        let failed = wait_state(&b.handler, &task.id, TaskState::Failed).await;
        let took = halted.elapsed();
        assert!(took < LEASE * 3, "took {took:?}");
        let reason = status_text(&failed);
        assert!(reason.contains(a.cluster.instance()), "{reason}");
        assert_eq!(last_state(&drain(sub).await), Some(TaskState::Failed));
        drop((a, b));
    })
    .await;
}

/// Issue 43: a cancel through a surviving instance while the instance running the task
/// is dead (no heartbeat, no listener: as after kill -9) but its lease has not lapsed
/// answers at once with a retryable Unavailable naming the instance, instead of waiting
/// for the lease to lapse and answering TaskNotCancelable; once the task is closed, the
/// retried cancel answers with its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_the_runner_is_dead_is_unavailable_at_once() {
    const LONG_LEASE: Duration = Duration::from_secs(10);
    on_fresh_schema("cluster_cancel_dead", |options| async move {
        let mut probe = gated();
        let opts = ClusterOptions::with_lease(LONG_LEASE);
        let a = instance_with(options.clone(), Arc::new(probe.exec.clone()), opts.clone()).await;
        let b = instance_with(options.clone(), Arc::new(probe.exec.clone()), opts).await;
        let task = send(&a.handler, new_user_text_message("go"), true).await;
        probe.started().await;
        a.cluster.halt(); // as after kill -9: no heartbeat, no cancel notifications
        let caller = anon();
        let cancel = || {
            b.handler.cancel_task(
                &caller,
                CancelTaskRequest {
                    tenant: None,
                    id: task.id.clone(),
                    metadata: None,
                },
            )
        };
        let asked = std::time::Instant::now();
        let refused = within(cancel()).await.unwrap_err();
        let took = asked.elapsed();
        let A2aError::Unavailable(why) = &refused else {
            panic!("expected a retryable Unavailable, got {refused:?}");
        };
        assert!(why.contains(a.cluster.instance()), "{why}");
        assert!(
            took < LONG_LEASE / 2,
            "answered after {took:?}, not before the lease lapsed"
        );
        assert_eq!(
            get(&b.handler, &task.id).await.status.state,
            TaskState::Working,
            "the task stays as it is until its lease lapses"
        );
        // Once the lease lapsed and B closed the task, the retried cancel says how it ended.
        wait_state(&b.handler, &task.id, TaskState::Failed).await;
        let ended = within(cancel()).await.unwrap_err();
        assert!(
            matches!(ended, A2aError::TaskNotCancelable { .. }),
            "{ended:?}"
        );
        drop((a, b));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_listener_is_replaced_and_nothing_is_lost() {
    two_instances("cluster_listener", |a, b, mut probe, options| async move {
        let task = send(&a.handler, new_user_text_message("go"), true).await;
        probe.started().await;
        let sub = subscribe(&b.handler, &task.id, None).await;
        // Terminate every LISTEN session of this database (both instances').
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .unwrap();
        let killed: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE query LIKE 'LISTEN %' AND datname = current_database() \
             AND pid <> pg_backend_pid()) t",
        )
        .fetch_one(&admin)
        .await
        .unwrap();
        assert!(killed >= 1, "no listener to drop");
        probe.release(1);
        let events = drain(sub).await;
        assert_eq!(last_state(&events), Some(TaskState::Completed));
        let s = seqs(&events);
        assert!(s.windows(2).all(|w| w[1] == w[0] + 1), "{s:?}");
        drop((a, b));
    })
    .await;
}

/// An instance like [`instance`] whose handler has a push service (its sender running)
/// over the same store, as `serve` builds it.
async fn push_instance(
    options: PgConnectOptions,
    exec: &Gated,
    stop: &tokio_util::sync::CancellationToken,
) -> Instance {
    let store = Arc::new(PostgresTaskStore::connect_with(options, 6).await.unwrap());
    let config = a2a_gateway::config::PushConfig {
        allow_http: true,
        allow_cidrs: vec!["127.0.0.1/32".into()],
        initial_backoff_ms: 50,
        poll_interval_ms: 50,
        ..Default::default()
    };
    let push = a2a_gateway::push::PushService::open(&config, store.clone())
        .await
        .unwrap();
    push.spawn(stop.clone());
    let handler = RequestHandler::new(
        Arc::new(exec.clone()),
        store.clone(),
        HandlerConfig {
            push: Some(push),
            ..HandlerConfig::default()
        },
    );
    let opts = ClusterOptions::with_lease(LEASE);
    let id = a2a_gateway::cluster::instance_id("push");
    let (cluster, cancels) = Cluster::join(store.clone(), id, opts).await.unwrap();
    handler.join_cluster(cluster.clone(), cancels).unwrap();
    Instance {
        handler,
        cluster,
        store,
    }
}

/// Issue 10 with issue 12: two instances on one PostgreSQL both run the push sender;
/// tasks run on both; every stored event reaches the webhook exactly once (the receiver
/// always answers 200, so a second call of one `webhook-id` would be a row sent by two
/// instances), in order per task; the artifact's chunks, coalesced or not, arrive
/// each once and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_send_every_push_delivery_once() {
    two_instances("two_instances_push", |_a, _b, probe, options| async move {
        let stop = tokio_util::sync::CancellationToken::new();
        let a = push_instance(options.clone(), &probe.exec, &stop).await;
        let b = push_instance(options, &probe.exec, &stop).await;
        let calls: Arc<std::sync::Mutex<Vec<(String, serde_json::Value)>>> = Arc::default();
        let seen = calls.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(
                move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                    let seen = seen.clone();
                    async move {
                        let id = headers["webhook-id"].to_str().unwrap().to_owned();
                        seen.lock()
                            .unwrap()
                            .push((id, serde_json::from_slice(&body).unwrap()));
                        "ok"
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let hook = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

        const TASKS: usize = 6;
        let mut ids = vec![];
        for i in 0..TASKS {
            let h = if i % 2 == 0 { &a.handler } else { &b.handler };
            let mut r = req(new_user_text_message(format!("job {i}")), true);
            r.configuration = Some(SendMessageConfiguration {
                return_immediately: Some(true),
                task_push_notification_config: Some(serde_json::json!({"id": "hook", "url": hook})),
                ..Default::default()
            });
            let task = match within(h.send_message(&anon(), r)).await.unwrap() {
                SendMessageResponse::Task(t) => t,
                other => panic!("expected a task, got {other:?}"),
            };
            ids.push(task.id);
        }
        probe.exec.gate.add_permits(TASKS);
        for (i, id) in ids.iter().enumerate() {
            let h = if i % 2 == 0 { &b.handler } else { &a.handler };
            wait_state(h, id, TaskState::Completed).await;
        }
        let completed = |calls: &[(String, serde_json::Value)], id: &str| {
            calls.iter().any(|(_, b)| {
                b["statusUpdate"]["taskId"] == id
                    && b["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
            })
        };
        within(async {
            while !ids.iter().all(|id| completed(&calls.lock().unwrap(), id)) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        // Late duplicates would come within a poll interval or two.
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.cancel();
        let calls = calls.lock().unwrap().clone();
        let mut once = std::collections::HashSet::new();
        for (id, _) in &calls {
            assert!(once.insert(id.clone()), "webhook-id {id} was sent twice");
        }
        for id in &ids {
            let events: Vec<&serde_json::Value> = calls
                .iter()
                .map(|(_, b)| b)
                .filter(|b| {
                    let (_, inner) = b.as_object().unwrap().iter().next().unwrap();
                    inner.get("taskId").or_else(|| inner.get("id")) == Some(&serde_json::json!(id))
                })
                .collect();
            let stored = get(&a.handler, id).await;
            let kinds: Vec<&str> = events
                .iter()
                .map(|b| b.as_object().unwrap().keys().next().unwrap().as_str())
                .collect();
            assert_eq!(kinds.first(), Some(&"task"), "{id}: {kinds:?}");
            // Coalescing may carry several chunks in one POST: every chunk's part
            // arrives once, in order, across the artifact updates.
            let parts: Vec<&str> = events
                .iter()
                .filter_map(|b| b["artifactUpdate"]["artifact"]["parts"].as_array())
                .flatten()
                .map(|p| p["text"].as_str().unwrap_or_default())
                .collect();
            let chunks: Vec<String> = (0..CHUNKS).map(|i| format!("{i},")).collect();
            assert_eq!(parts, chunks, "{id}: {kinds:?}");
            assert_eq!(
                events.last().unwrap()["statusUpdate"]["status"]["state"],
                "TASK_STATE_COMPLETED"
            );
            assert_eq!(stored.status.state, TaskState::Completed);
        }
        a.cluster.leave().await;
        b.cluster.leave().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// One invocation per runtime session across instances: two AgentCore executors (one
// per instance, as in two processes) in front of a MockRuntime on a real socket
// that records how many invocations of each session are in flight at once.

/// A [`MockRuntime`] that holds every invocation until [`MockRuntime::release`] and then
/// answers `"reply to {prompt}"`; it counts the most invocations of one session at once.
async fn fake_runtime() -> (Arc<MockRuntime>, Arrivals) {
    let rt = Arc::new(MockRuntime::start().await);
    rt.hold();
    rt.answer_with(|r| {
        MockReply::Json(serde_json::json!(format!(
            "reply to {}",
            r.prompt().unwrap_or_default()
        )))
    });
    let arrivals = Arrivals {
        rt: rt.clone(),
        read: 0,
    };
    (rt, arrivals)
}

/// The invocations of a [`MockRuntime`], read in arrival order.
struct Arrivals {
    rt: Arc<MockRuntime>,
    read: usize,
}

impl Arrivals {
    /// The next invocation's `(session, prompt)`, waited for (bounded).
    async fn next(&mut self) -> (String, String) {
        within(self.rt.wait_invocations(self.read + 1)).await;
        let r = self.rt.invocations()[self.read].clone();
        self.read += 1;
        (
            r.header(SESSION_HEADER).unwrap().to_owned(),
            r.prompt().unwrap(),
        )
    }

    /// No invocation arrived beyond those read.
    fn none_new(&self) -> bool {
        self.rt.invocations().len() == self.read
    }
}

fn agentcore(rt: &MockRuntime) -> Arc<dyn AgentExecutor> {
    let mut s = a2a_gateway::upstream::AgentCoreSettings::for_url(rt.url());
    s.connection.max_retries = 0;
    s.connection.read_timeout = WAIT;
    Arc::new(a2a_gateway::upstream::AgentCoreExecutor::new(s).unwrap())
}

/// A new message in context `ctx`.
fn in_context(ctx: &str, text: &str) -> Message {
    let mut m = new_user_text_message(text);
    m.context_id = Some(ctx.into());
    m
}

/// Waits until the task shows the "queued behind an earlier message" WORKING status.
async fn wait_queued(h: &RequestHandler, id: &str) {
    within(async {
        loop {
            let t = get(h, id).await;
            if t.status.state == TaskState::Working
                && status_text(&t) == a2a_gateway::upstream::QUEUED_STATUS_TEXT
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

async fn session_leases(options: &PgConnectOptions) -> Vec<(String, String)> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options.clone())
        .await
        .unwrap();
    sqlx::query_as("SELECT session_id, instance FROM a2a_session_leases ORDER BY session_id")
        .fetch_all(&pool)
        .await
        .unwrap()
}

async fn wait_no_session_leases(options: &PgConnectOptions) {
    within(async {
        while !session_leases(options).await.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// Two AgentCore instances on a fresh schema in front of one fake runtime, with the
/// cluster timings `opts`.
async fn two_agentcore_instances<F, Fut>(test: &str, opts: ClusterOptions, body: F)
where
    F: FnOnce(Instance, Instance, Arc<MockRuntime>, Arrivals, PgConnectOptions) -> Fut
        + Send
        + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    on_fresh_schema(test, |options| async move {
        let (rt, arrived) = fake_runtime().await;
        let a = instance_with(options.clone(), agentcore(&rt), opts.clone()).await;
        let b = instance_with(options.clone(), agentcore(&rt), opts).await;
        body(a, b, rt, arrived, options).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_one_context_on_two_instances_never_invoke_the_session_at_once() {
    // Slow polls: the hand-over between instances must come from the release
    // notification.
    let mut opts = ClusterOptions::with_lease(LEASE);
    opts.fallback_poll = Duration::from_secs(20);
    opts.sweep_interval = Duration::from_secs(20);
    two_agentcore_instances(
        "cluster_session_turns",
        opts,
        |a, b, rt, mut arrived, options| async move {
            let one = send(&a.handler, in_context("ctx-shared", "one"), true).await;
            let (session, prompt) = arrived.next().await;
            assert_eq!(prompt, "one");
            assert_eq!(
                session_leases(&options).await,
                vec![(session.clone(), a.cluster.instance().to_owned())]
            );
            // A second task of the context at B, and a third at A: both wait.
            let two = send(&b.handler, in_context("ctx-shared", "two"), true).await;
            let three = send(&a.handler, in_context("ctx-shared", "three"), true).await;
            assert_ne!(one.id, two.id);
            wait_queued(&b.handler, &two.id).await;
            wait_queued(&a.handler, &three.id).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(
                arrived.none_new(),
                "a second invocation of the session started"
            );
            // Each release lets exactly one more in, at once.
            let mut order = vec![prompt];
            for _ in 0..2 {
                let released = std::time::Instant::now();
                rt.release(1);
                let (s, p) = arrived.next().await;
                let took = released.elapsed();
                assert_eq!(s, session);
                assert!(took < Duration::from_secs(5), "hand-over took {took:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                assert!(arrived.none_new(), "two invocations of the session at once");
                order.push(p);
            }
            rt.release(1);
            for (h, t) in [(&b.handler, &one), (&a.handler, &two), (&b.handler, &three)] {
                let done = wait_state(h, &t.id, TaskState::Completed).await;
                assert_eq!(done.context_id, "ctx-shared");
            }
            order.sort();
            assert_eq!(order, ["one", "three", "two"]);
            assert_eq!(rt.most_at_once(), 1, "the session ran twice at once");
            wait_no_session_leases(&options).await;
            a.cluster.leave().await;
            b.cluster.leave().await;
        },
    )
    .await;
}

/// Two agents of the gateway (`[agents.<id>]`), each in front of its own runtime, get
/// the same runtime session id for the same caller and contextId; their session leases
/// are apart (keyed by agent and session id), so a turn of one agent on one instance
/// never queues behind a turn of the other agent on another instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_with_the_same_session_id_never_queue_behind_each_other() {
    let mut opts = ClusterOptions::with_lease(LEASE);
    opts.fallback_poll = Duration::from_secs(20);
    opts.sweep_interval = Duration::from_secs(20);
    on_fresh_schema("cluster_session_agents", |options| async move {
        let (root_rt, mut root_arrived) = fake_runtime().await;
        let (reviewer_rt, mut reviewer_arrived) = fake_runtime().await;
        let a = instance_with(options.clone(), agentcore(&root_rt), opts.clone()).await;
        let b = instance_with(options.clone(), agentcore(&root_rt), opts).await;
        let config = HandlerConfig {
            agent: "reviewer".into(),
            ..Default::default()
        };
        let reviewer_at_b = b.handler.sibling(agentcore(&reviewer_rt), config);

        let one = send(&a.handler, in_context("ctx-shared", "one"), true).await;
        let (session, _) = root_arrived.next().await;
        // The reviewer's turn in the same context starts at once on B, while the
        // root agent's invocation of the same session id is held on A.
        let two = send(&reviewer_at_b, in_context("ctx-shared", "two"), true).await;
        let (reviewer_session, prompt) = reviewer_arrived.next().await;
        assert_eq!(prompt, "two");
        assert_eq!(reviewer_session, session, "the same session id");
        let leases = within(async {
            loop {
                let pool = PgPoolOptions::new()
                    .max_connections(1)
                    .connect_with(options.clone())
                    .await
                    .unwrap();
                let rows: Vec<(String, String, String)> = sqlx::query_as(
                    "SELECT agent, session_id, instance FROM a2a_session_leases ORDER BY agent",
                )
                .fetch_all(&pool)
                .await
                .unwrap();
                if rows.len() == 2 {
                    return rows;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert_eq!(
            leases,
            [
                (
                    String::new(),
                    session.clone(),
                    a.cluster.instance().to_owned()
                ),
                (
                    "reviewer".to_owned(),
                    session.clone(),
                    b.cluster.instance().to_owned()
                ),
            ]
        );
        root_rt.release(1);
        reviewer_rt.release(1);
        wait_state(&a.handler, &one.id, TaskState::Completed).await;
        wait_state(&reviewer_at_b, &two.id, TaskState::Completed).await;
        wait_no_session_leases(&options).await;
        a.cluster.leave().await;
        b.cluster.leave().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_waiting_for_the_session_on_another_instance_can_be_canceled() {
    let opts = ClusterOptions::with_lease(LEASE);
    two_agentcore_instances(
        "cluster_session_cancel",
        opts,
        |a, b, rt, mut arrived, options| async move {
            let one = send(&a.handler, in_context("ctx-c", "one"), true).await;
            arrived.next().await;
            let two = send(&b.handler, in_context("ctx-c", "two"), true).await;
            wait_queued(&b.handler, &two.id).await;
            // Canceled through A while it waits on B.
            let asked = std::time::Instant::now();
            let canceled = within(a.handler.cancel_task(
                &anon(),
                CancelTaskRequest {
                    tenant: None,
                    id: two.id.clone(),
                    metadata: None,
                },
            ))
            .await
            .unwrap();
            assert_eq!(canceled.status.state, TaskState::Canceled);
            assert!(
                asked.elapsed() < Duration::from_secs(5),
                "{:?}",
                asked.elapsed()
            );
            // The first invocation still holds the session alone; when it ends, the
            // canceled task never reaches the runtime and nothing is left leased.
            rt.release(2);
            wait_state(&b.handler, &one.id, TaskState::Completed).await;
            tokio::time::sleep(Duration::from_millis(700)).await;
            assert!(arrived.none_new(), "the canceled task was invoked");
            assert_eq!(
                get(&a.handler, &two.id).await.status.state,
                TaskState::Canceled
            );
            wait_no_session_leases(&options).await;
            // The session is free for the next task, on either instance.
            let three = send(&b.handler, in_context("ctx-c", "three"), true).await;
            assert_eq!(arrived.next().await.1, "three");
            wait_state(&a.handler, &three.id, TaskState::Completed).await;
            assert_eq!(rt.most_at_once(), 1);
            a.cluster.leave().await;
            b.cluster.leave().await;
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_instance_session_lease_is_taken_over_after_the_lease() {
    let opts = ClusterOptions::with_lease(LEASE);
    two_agentcore_instances(
        "cluster_session_dead",
        opts,
        |a, b, rt, mut arrived, options| async move {
            let one = send(&a.handler, in_context("ctx-d", "one"), true).await;
            let (session, _) = arrived.next().await;
            let two = send(&b.handler, in_context("ctx-d", "two"), true).await;
            wait_queued(&b.handler, &two.id).await;
            let halted = std::time::Instant::now();
            a.cluster.halt(); // A looks dead to B: no more heartbeats
            let (s, p) = arrived.next().await;
            let took = halted.elapsed();
            assert_eq!((s.as_str(), p.as_str()), (session.as_str(), "two"));
            assert!(
                took >= LEASE - Duration::from_millis(500),
                "taken over before the lease ran out: {took:?}"
            );
            assert!(took < LEASE * 3, "took {took:?}");
            assert_eq!(
                session_leases(&options).await,
                vec![(session.clone(), b.cluster.instance().to_owned())]
            );
            // A's task is closed by B's sweep, naming A; B's runs to the end.
            let failed = wait_state(&b.handler, &one.id, TaskState::Failed).await;
            assert!(
                status_text(&failed).contains(a.cluster.instance()),
                "{}",
                status_text(&failed)
            );
            rt.release(2);
            wait_state(&b.handler, &two.id, TaskState::Completed).await;
            b.cluster.leave().await;
            drop(a);
        },
    )
    .await;
}

// ---------------------------------------------------------------------------
// A PostgreSQL restart mid-run. Never the shared test server (other tests use it):
// a private server in a temporary directory, on a free port.

/// A PostgreSQL server of this test alone: `initdb` into a temporary directory, run
/// by `pg_ctl` on a free loopback port (as the `postgres` user when the test runs as
/// root, which PostgreSQL refuses). Stopped immediately when dropped.
struct PrivatePostgres {
    dir: tempfile::TempDir,
    bin: std::path::PathBuf,
    port: u16,
    /// `runuser -u USER --` in front of every command, when running as root.
    user: Option<String>,
}

/// The newest `/usr/lib/postgresql/N/bin` with `initdb` and `pg_ctl`, or
/// `A2A_GATEWAY_TEST_PG_BIN`.
fn postgres_bin() -> Option<std::path::PathBuf> {
    if let Ok(dir) = std::env::var("A2A_GATEWAY_TEST_PG_BIN") {
        return Some(dir.into());
    }
    let mut found: Vec<(u32, std::path::PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let major = e.file_name().to_str()?.split('.').next()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").exists() && bin.join("pg_ctl").exists()).then_some((major, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn id(args: &[&str]) -> Option<u32> {
    let out = std::process::Command::new("id").args(args).output().ok()?;
    String::from_utf8(out.stdout).ok()?.trim().parse().ok()
}

impl PrivatePostgres {
    /// Initialises and starts the server; `None` (with a note, or a failure when
    /// `CI=true`) when the PostgreSQL server binaries are not installed.
    async fn start(test: &str) -> Option<Self> {
        let Some(bin) = postgres_bin() else {
            skip(
                test,
                "no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql",
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let user = if id(&["-u"]) == Some(0) {
            // PostgreSQL does not run as root: the directory goes to `postgres`.
            let (Some(uid), Some(gid)) = (id(&["-u", "postgres"]), id(&["-g", "postgres"])) else {
                skip(test, "running as root without a postgres user");
                return None;
            };
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
            Some("postgres".to_owned())
        } else {
            None
        };
        let port = free_port();
        let me = Self {
            dir,
            bin,
            port,
            user,
        };
        let data = me.data();
        me.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )
        .await;
        me.resume().await;
        Some(me)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn command(&self, tool: &str, args: &[&str]) -> std::process::Command {
        let exe = self.bin.join(tool).display().to_string();
        let mut c = match &self.user {
            Some(u) => {
                let mut c = std::process::Command::new("runuser");
                c.args(["-u", u, "--", &exe]);
                c
            }
            None => std::process::Command::new(&exe),
        };
        c.args(args);
        c
    }

    async fn run(&self, tool: &str, args: &[&str]) {
        let mut c = tokio::process::Command::from(self.command(tool, args));
        let out = within(c.output()).await.unwrap();
        assert!(
            out.status.success(),
            "{tool} {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts the server (again) on its port, and waits until it accepts connections.
    async fn resume(&self) {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log").display().to_string();
        let data = self.data();
        self.run(
            "pg_ctl",
            &[
                "-D", &data, "-l", &log, "-o", &options, "-w", "-t", "30", "start",
            ],
        )
        .await;
    }

    /// Stops the server: `fast` ends every session (the gateways' pools and listeners).
    async fn stop(&self) {
        let data = self.data();
        self.run(
            "pg_ctl",
            &["-D", &data, "-m", "fast", "-w", "-t", "30", "stop"],
        )
        .await;
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self
            .command("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"])
            .output();
    }
}

/// Two instances on a private server; streams open on both for tasks running on
/// both; the server is stopped while two of the runs write their events (the
/// driver's write retries span the outage) and started again; the other two write
/// after the restart. Every stream gets every event once, in order, to COMPLETED,
/// and each streamed event is the stored one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgresql_restart_mid_run_loses_no_event() {
    use a2a_gateway::store::TaskStore;
    let Some(pg) = PrivatePostgres::start("cluster_postgres_restart").await else {
        return;
    };
    let options = PgConnectOptions::from_str(&pg.url()).unwrap();
    let mut probe = gated();
    // A lease far longer than the restart, so nobody is taken for dead; the slow
    // fallback poll leaves the wake-ups to the reconnected listeners.
    let mut opts = ClusterOptions::with_lease(Duration::from_secs(20));
    opts.fallback_poll = Duration::from_secs(20);
    let a = instance_with(options.clone(), Arc::new(probe.exec.clone()), opts.clone()).await;
    let b = instance_with(options.clone(), Arc::new(probe.exec.clone()), opts).await;
    const TASKS: usize = 4;
    let mut ids = vec![];
    for i in 0..TASKS {
        let h = if i % 2 == 0 { &a.handler } else { &b.handler };
        ids.push(
            send(h, new_user_text_message(format!("job {i}")), true)
                .await
                .id,
        );
    }
    for _ in 0..TASKS {
        probe.started().await;
    }
    let mut streams = vec![];
    for id in &ids {
        for h in [&a.handler, &b.handler] {
            let s = subscribe(h, id, None).await;
            let id = id.clone();
            streams.push(tokio::spawn(async move { (id, drain(s).await) }));
        }
    }
    pg.stop().await;
    // Two runs write while the server is down (their writes retry), the other two
    // once it is back.
    probe.release(2);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    pg.resume().await;
    let restarted = std::time::Instant::now();
    probe.release(TASKS - 2);
    for s in streams {
        let (id, events) = within(s).await.unwrap();
        assert_eq!(last_state(&events), Some(TaskState::Completed), "{id}");
        let seqs = seqs(&events);
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{id}: {seqs:?}");
        assert_eq!(
            events
                .iter()
                .filter(|e| matches!(e.event(), StreamResponse::ArtifactUpdate(_)))
                .count(),
            CHUNKS,
            "{id}"
        );
        let stored = a
            .store
            .events_after(
                &a2a_gateway::scope::Scope::new("", "anonymous"),
                &id,
                0,
                1000,
                u64::MAX,
            )
            .await
            .unwrap();
        assert_eq!(stored.last().map(|e| e.seq), seqs.last().copied(), "{id}");
        // After the snapshot, each streamed event is the stored event of its number.
        for e in events.iter().skip(1) {
            let n = e.seq.expect("a numbered event") as usize;
            assert_eq!(&stored[n - 1].event, e.event(), "{id} event {n}");
        }
    }
    // Woken by the reconnected listeners, not the 20 s fallback poll.
    assert!(
        restarted.elapsed() < Duration::from_secs(15),
        "{:?}",
        restarted.elapsed()
    );
    for id in &ids {
        assert_eq!(get(&b.handler, id).await.status.state, TaskState::Completed);
    }
    a.cluster.leave().await;
    b.cluster.leave().await;
}
