//! Event delivery latency across gateway instances on one PostgreSQL (issue 12):
//! two request handlers in one process, each over its own `PostgresTaskStore`
//! (own pool, own `LISTEN` connection), joined to the cluster as two instances.
//! A task runs on instance A; its executor emits `EVENTS` status updates spaced
//! `GAP_MS` apart, each carrying its emission instant; one subscriber on A and one
//! on B record when each event arrives. Latency = arrival - emission, so it includes
//! the store write (group commit) for both; the difference is what crossing
//! instances costs (NOTIFY after commit, the listener wake-up, one log read).
//!
//! Run: `A2A_GATEWAY_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test
//! cargo bench --bench cluster_latency` (`BENCH_TASKS`, default 20 tasks of 50
//! events). Prints p50/p99 of both, in milliseconds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_gateway::cluster::{Cluster, ClusterOptions};
use a2a_gateway::executor::{ExecutorError, new_user_text_message};
use a2a_gateway::protocol::{
    SendMessageConfiguration, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, TaskState,
};
use a2a_gateway::store::PostgresTaskStore;
use a2a_gateway::test_util::PgSchema;
use a2a_gateway::{
    AgentExecutor, CallContext, EventQueue, HandlerConfig, RequestContext, RequestHandler,
    TaskUpdater,
};
use async_trait::async_trait;
use futures::StreamExt;
use sqlx::postgres::PgConnectOptions;

const EVENTS: usize = 50;
const GAP_MS: u64 = 5;

/// Emission instants by (task id, event number).
type Emitted = Arc<Mutex<HashMap<(String, usize), Instant>>>;

#[derive(Clone)]
struct Emitter(Emitted);

#[async_trait]
impl AgentExecutor for Emitter {
    async fn execute(&self, ctx: RequestContext, q: EventQueue) -> Result<(), ExecutorError> {
        let up = TaskUpdater::from_context(&ctx, q);
        up.submit().await?;
        tokio::time::sleep(Duration::from_millis(200)).await; // subscribers attach
        for i in 0..EVENTS {
            self.0
                .lock()
                .unwrap()
                .insert((ctx.task_id.clone(), i), Instant::now());
            up.start_work(Some(up.new_agent_text(i.to_string())))
                .await?;
            tokio::time::sleep(Duration::from_millis(GAP_MS)).await;
        }
        up.complete(None).await?;
        Ok(())
    }

    async fn cancel(&self, _: RequestContext, _: EventQueue) -> Result<(), ExecutorError> {
        Ok(())
    }
}

async fn instance(options: PgConnectOptions, exec: Emitter) -> RequestHandler {
    let store = Arc::new(PostgresTaskStore::connect_with(options, 8).await.unwrap());
    let handler = RequestHandler::new(Arc::new(exec), store.clone(), HandlerConfig::default());
    let id = a2a_gateway::cluster::instance_id("bench");
    let (cluster, cancels) = Cluster::join(store, id, ClusterOptions::default())
        .await
        .unwrap();
    handler.join_cluster(cluster, cancels).unwrap();
    handler
}

/// Arrival latencies of one subscriber, in ms.
async fn follow(h: RequestHandler, id: String, emitted: Emitted) -> Vec<f64> {
    let mut s = h
        .subscribe_to_task(
            &CallContext::anonymous(),
            SubscribeToTaskRequest {
                tenant: None,
                id: id.clone(),
            },
            None,
        )
        .await
        .unwrap();
    let mut out = Vec::new();
    while let Some(ev) = s.next().await {
        let ev = ev.unwrap();
        let now = Instant::now();
        if let StreamResponse::StatusUpdate(u) = ev.event()
            && u.status.state == TaskState::Working
            && let Some(i) = u.status.message.as_ref().and_then(|m| {
                m.parts
                    .iter()
                    .find_map(|p| p.as_text())
                    .and_then(|t| t.parse::<usize>().ok())
            })
            && let Some(at) = emitted.lock().unwrap().get(&(id.clone(), i))
        {
            out.push(now.duration_since(*at).as_secs_f64() * 1000.0);
        }
    }
    out
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let tasks: usize = std::env::var("BENCH_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let Some(schema) = PgSchema::create("bench_cluster_latency").await else {
        return;
    };
    let options = schema.connect_options();
    let emitted: Emitted = Arc::default();
    let a = instance(options.clone(), Emitter(emitted.clone())).await;
    let b = instance(options, Emitter(emitted.clone())).await;
    let (mut same, mut cross) = (Vec::new(), Vec::new());
    for _ in 0..tasks {
        let req = SendMessageRequest {
            tenant: None,
            message: new_user_text_message("go"),
            configuration: Some(SendMessageConfiguration {
                return_immediately: Some(true),
                ..Default::default()
            }),
            metadata: None,
        };
        let SendMessageResponse::Task(t) = a
            .send_message(&CallContext::anonymous(), req)
            .await
            .unwrap()
        else {
            panic!("a task")
        };
        let (x, y) = tokio::join!(
            follow(a.clone(), t.id.clone(), emitted.clone()),
            follow(b.clone(), t.id.clone(), emitted.clone())
        );
        assert_eq!(x.len(), EVENTS);
        assert_eq!(y.len(), EVENTS);
        same.extend(x);
        cross.extend(y);
    }
    println!(
        "same-instance  n={} p50={:.2} ms p99={:.2} ms",
        same.len(),
        pct(&mut same, 0.5),
        pct(&mut same, 0.99)
    );
    println!(
        "cross-instance n={} p50={:.2} ms p99={:.2} ms",
        cross.len(),
        pct(&mut cross, 0.5),
        pct(&mut cross, 0.99)
    );
    schema.close().await;
}
