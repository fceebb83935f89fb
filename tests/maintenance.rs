//! The retention job: purging terminal tasks after `retention`, closing INPUT_REQUIRED
//! tasks after `input_required_ttl` through the task's driver (and what a follow-up
//! racing that close gets), and the periodic job under paused tokio time.

use std::sync::Arc;
use std::time::Duration;

use a2a_gateway::A2aError;
use a2a_gateway::executor::{
    AgentExecutor, CallContext, EventQueue, ExecutorError, RequestContext, TaskUpdater,
    new_user_text_message,
};
use a2a_gateway::handler::{MaintenanceConfig, stale_reason, ttl_reason};
use a2a_gateway::protocol::{
    GetTaskRequest, Message, Part, SendMessageRequest, SendMessageResponse, Task, TaskState, time,
};
use a2a_gateway::store::{MemoryTaskStore, TaskStore};
use a2a_gateway::{HandlerConfig, RequestHandler};
use async_trait::async_trait;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

/// Asks for input on the first message; on a follow-up, reports `started`, waits for
/// a permit of `gate`, then completes with an artifact.
struct AskThenAnswer {
    gate: Arc<Semaphore>,
    started: mpsc::UnboundedSender<String>,
}

#[async_trait]
impl AgentExecutor for AskThenAnswer {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let u = TaskUpdater::from_context(&ctx, queue);
        if ctx.current_task.is_none() {
            u.submit().await?;
            u.requires_input(Some(u.new_agent_text("which region?")))
                .await?;
            return Ok(());
        }
        let _ = self.started.send(ctx.task_id.clone());
        let _permit = self.gate.acquire().await.expect("gate open");
        u.start_work(None).await?;
        u.add_artifact(
            vec![Part::text(format!("answer for {}", ctx.user_input()))],
            None,
            Some("answer".into()),
            false,
            true,
        )
        .await?;
        u.complete(None).await?;
        Ok(())
    }
}

struct Fixture {
    handler: RequestHandler,
    store: Arc<dyn TaskStore>,
    gate: Arc<Semaphore>,
    started: mpsc::UnboundedReceiver<String>,
}

fn fixture() -> Fixture {
    let store: Arc<dyn TaskStore> = Arc::new(MemoryTaskStore::new());
    let gate = Arc::new(Semaphore::new(0));
    let (tx, started) = mpsc::unbounded_channel();
    let exec = AskThenAnswer {
        gate: gate.clone(),
        started: tx,
    };
    let handler = RequestHandler::new(Arc::new(exec), store.clone(), HandlerConfig::default());
    Fixture {
        handler,
        store,
        gate,
        started,
    }
}

fn call() -> CallContext {
    CallContext::anonymous()
}

fn send_req(message: Message) -> SendMessageRequest {
    serde_json::from_value(serde_json::json!({ "message": message })).unwrap()
}

async fn send(h: &RequestHandler, message: Message) -> Result<Task, A2aError> {
    match h.send_message(&call(), send_req(message)).await? {
        SendMessageResponse::Task(t) => Ok(t),
        other => panic!("expected a task, got {other:?}"),
    }
}

fn follow_up(task: &Task, text: &str) -> Message {
    let mut m = new_user_text_message(text);
    m.task_id = Some(task.id.clone());
    m.context_id = Some(task.context_id.clone());
    m
}

async fn get(h: &RequestHandler, id: &str) -> Result<Task, A2aError> {
    let req: GetTaskRequest = serde_json::from_value(serde_json::json!({ "id": id })).unwrap();
    h.get_task(&call(), req).await
}

fn status_text(task: &Task) -> String {
    task.status
        .message
        .as_ref()
        .map(|m| a2a_gateway::executor::get_message_text(m, ""))
        .unwrap_or_default()
}

fn config(ttl: Duration) -> MaintenanceConfig {
    MaintenanceConfig {
        retention: Duration::from_secs(30 * 86_400),
        input_required_ttl: ttl,
        interval: Duration::from_secs(10),
        batch: 2,
        stale_after: None,
    }
}

async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("bounded wait")
}

/// An INPUT_REQUIRED task (blocking send returns at INPUT_REQUIRED).
async fn waiting_task(h: &RequestHandler) -> Task {
    let t = send(h, new_user_text_message("deploy")).await.unwrap();
    assert_eq!(t.status.state, TaskState::InputRequired);
    t
}

#[tokio::test]
async fn purge_deletes_expired_terminal_tasks_in_batches_and_keeps_the_rest() {
    let mut f = fixture();
    // Five completed tasks (a follow-up each), one still waiting for input.
    let mut done = Vec::new();
    for i in 0..5 {
        let t = waiting_task(&f.handler).await;
        f.gate.add_permits(1);
        let t = send(&f.handler, follow_up(&t, &format!("eu-{i}")))
            .await
            .unwrap();
        assert_eq!(t.status.state, TaskState::Completed);
        within(f.started.recv()).await.unwrap();
        done.push(t);
    }
    let waiting = waiting_task(&f.handler).await;

    // Within the retention period nothing goes.
    let cfg = config(Duration::from_secs(86_400 * 365));
    let r = f.handler.run_maintenance(time::now(), &cfg).await.unwrap();
    assert_eq!((r.purged, r.closed), (0, 0));

    // 31 days later: the five terminal tasks go (batch 2: three transactions), the
    // INPUT_REQUIRED one stays (its TTL here is a year).
    let later = time::now() + chrono::Duration::days(31);
    let r = f.handler.run_maintenance(later, &cfg).await.unwrap();
    assert_eq!((r.purged, r.closed), (5, 0));
    for t in &done {
        assert!(matches!(
            get(&f.handler, &t.id).await,
            Err(A2aError::TaskNotFound(_))
        ));
        let events = f
            .store
            .events_after(&(&call()).into(), &t.id, 0, 10, u64::MAX)
            .await
            .unwrap();
        assert!(events.is_empty(), "events of a purged task are gone");
    }
    let kept = get(&f.handler, &waiting.id).await.unwrap();
    assert_eq!(kept.status.state, TaskState::InputRequired);
}

#[tokio::test]
async fn an_abandoned_input_required_task_is_closed_failed_and_refuses_a_late_answer() {
    let f = fixture();
    let t = waiting_task(&f.handler).await;
    let ttl = Duration::from_secs(3600);
    let cfg = config(ttl);

    // Younger than the TTL: kept.
    let r = f.handler.run_maintenance(time::now(), &cfg).await.unwrap();
    assert_eq!(r.closed, 0);

    let later = time::now() + chrono::Duration::hours(2);
    let r = f.handler.run_maintenance(later, &cfg).await.unwrap();
    assert_eq!(r.closed, 1);
    let closed = get(&f.handler, &t.id).await.unwrap();
    assert_eq!(closed.status.state, TaskState::Failed);
    assert_eq!(
        status_text(&closed),
        "no input received within 3600 s; the task was closed"
    );
    assert_eq!(status_text(&closed), ttl_reason(ttl));
    // The question and the closing message are both in the history.
    let history = closed.history.as_deref().unwrap_or_default();
    assert!(history.len() >= 3, "{history:?}");

    // A second pass finds nothing more; the answer that comes too late is refused
    // like any message to a terminal task.
    let r = f.handler.run_maintenance(later, &cfg).await.unwrap();
    assert_eq!(r.closed, 0);
    let late = send(&f.handler, follow_up(&t, "eu-west-1")).await;
    assert!(
        matches!(late, Err(A2aError::UnsupportedOperation(_))),
        "{late:?}"
    );
}

#[tokio::test]
async fn a_follow_up_being_processed_wins_over_the_close() {
    let mut f = fixture();
    let t = waiting_task(&f.handler).await;
    // The answer arrives; its run waits at the gate, so the stored task is still
    // INPUT_REQUIRED with its old status timestamp (the user message is in the log).
    let h = f.handler.clone();
    let answer = follow_up(&t, "eu-west-1");
    let pending = tokio::spawn(async move { send(&h, answer).await });
    assert_eq!(within(f.started.recv()).await.unwrap(), t.id);
    let stored = get(&f.handler, &t.id).await.unwrap();
    assert_eq!(stored.status.state, TaskState::InputRequired);

    // The TTL has long passed by this pass's clock, but the driver is running the
    // follow-up: the task is not abandoned.
    let later = time::now() + chrono::Duration::days(2);
    let r = f
        .handler
        .run_maintenance(later, &config(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(r.closed, 0);

    f.gate.add_permits(1);
    let done = within(pending).await.unwrap().unwrap();
    assert_eq!(done.status.state, TaskState::Completed);
    assert_eq!(
        get(&f.handler, &t.id).await.unwrap().status.state,
        TaskState::Completed
    );
}

/// The periodic job under paused time: nothing is closed before the TTL, the task is
/// closed at the first pass after it, and cancelling the token stops the job.
#[tokio::test(start_paused = true)]
async fn the_periodic_job_closes_at_the_first_pass_after_the_ttl_and_stops_on_cancel() {
    let f = fixture();
    let stop = CancellationToken::new();
    let t = waiting_task(&f.handler).await;
    let job = f
        .handler
        .spawn_maintenance(config(Duration::from_secs(60)), stop.clone());

    // Passes at 0, 10, ..., 50 s: all before the TTL.
    tokio::time::sleep(Duration::from_secs(55)).await;
    assert_eq!(
        get(&f.handler, &t.id).await.unwrap().status.state,
        TaskState::InputRequired
    );
    // The passes at 60 and 70 s are past it (the task was created just before the
    // job started).
    tokio::time::sleep(Duration::from_secs(20)).await;
    let closed = get(&f.handler, &t.id).await.unwrap();
    assert_eq!(closed.status.state, TaskState::Failed);
    assert_eq!(status_text(&closed), ttl_reason(Duration::from_secs(60)));

    stop.cancel();
    within(job).await.expect("job ends when stopped");
}

#[tokio::test]
async fn stalled_tasks_of_a_stopped_instance_are_closed_but_local_runs_are_not() {
    let mut f = fixture();
    // A task another (now stopped) instance left WORKING an hour ago, written
    // straight into the shared store.
    let scope = a2a_gateway::scope::Scope::from(&call());
    let old = time::now() - chrono::Duration::hours(3);
    let mut orphan = a2a_gateway::executor::new_task(&new_user_text_message("long job"));
    orphan.id = "orphan".into();
    orphan.status = a2a_gateway::protocol::TaskStatus {
        state: TaskState::Working,
        message: None,
        timestamp: Some(old),
    };
    f.store
        .append(
            &scope,
            "orphan",
            1,
            &a2a_gateway::protocol::StreamResponse::Task(orphan),
        )
        .await
        .unwrap();
    // A task this instance is running right now (a follow-up held at the gate).
    let waiting = waiting_task(&f.handler).await;
    let h = f.handler.clone();
    let msg = follow_up(&waiting, "eu-west-1");
    let running = tokio::spawn(async move { send(&h, msg).await });
    assert_eq!(within(f.started.recv()).await.unwrap(), waiting.id);

    let after = Duration::from_secs(7200);
    let reason = stale_reason(after);
    // Stale = no status change for two hours: only the orphan qualifies.
    let closed = within(
        f.handler
            .close_stalled(time::now() - chrono::Duration::hours(2), &reason),
    )
    .await
    .unwrap();
    assert_eq!(closed, 1);
    let orphan = get(&f.handler, "orphan").await.unwrap();
    assert_eq!(orphan.status.state, TaskState::Failed);
    assert_eq!(status_text(&orphan), reason);
    // With a bound in the future the local run qualifies by age, but this instance is
    // driving it, so it is left alone.
    let in_future = time::now() + chrono::Duration::hours(1);
    assert_eq!(
        within(f.handler.close_stalled(in_future, &reason))
            .await
            .unwrap(),
        0
    );

    f.gate.add_permits(1);
    let done = within(running).await.unwrap().unwrap();
    assert_eq!(done.status.state, TaskState::Completed);
}
