//! Resume by cursor over HTTP: a client reads a long artifact stream up to SSE id N,
//! drops the connection, reconnects with `SubscribeToTask` and `Last-Event-ID: N`,
//! and gets every later event exactly once, in order, then live events to COMPLETED.
//! A second subscriber that reads nothing until the end is caught up from the store
//! and misses nothing either.
//!
//! The executor's pace is a channel the test feeds, so what is produced while the
//! client is away, and what comes live after the reconnect, is decided by the test.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_gateway::executor::{
    AgentExecutor, EventQueue, ExecutorError, RequestContext, TaskUpdater,
};
use a2a_gateway::protocol::Part;
use a2a_gateway::store::open_store;
use a2a_gateway::test_util::{StreamEvent as Ev, StreamEvents as Events, rpc_stream as open};
use a2a_gateway::transport::{AppState, TransportConfig};
use a2a_gateway::{HandlerConfig, RequestHandler, server};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::json;
use tokio::sync::mpsc;

const CHUNKS: usize = 3_000;
/// The SSE id the first connection stops at.
const CUT: u64 = 1_000;
/// Chunks produced before the cut (and read past it), while the client is away, and live.
const BEFORE: usize = 1_500;
const AWAY: usize = 2_500;

enum Step {
    Chunk(String),
    Finish,
}

/// Streams one artifact, a chunk per [`Step::Chunk`] the test sends, and completes
/// at [`Step::Finish`].
struct Paced {
    steps: Mutex<Option<mpsc::UnboundedReceiver<Step>>>,
}

#[async_trait]
impl AgentExecutor for Paced {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let mut steps = self.steps.lock().unwrap().take().expect("one run");
        let u = TaskUpdater::from_context(&ctx, queue);
        u.submit().await?;
        u.start_work(None).await?;
        let mut first = true;
        while let Some(step) = steps.recv().await {
            match step {
                Step::Chunk(text) => {
                    u.add_artifact(
                        vec![Part::text(text)],
                        Some("long".into()),
                        Some("long".into()),
                        !first,
                        false,
                    )
                    .await?;
                    first = false;
                }
                Step::Finish => break,
            }
        }
        u.complete(None).await?;
        Ok(())
    }
}

fn chunk_text(i: usize) -> String {
    format!("c{i:04};")
}

/// The text of an `artifactUpdate` event's parts.
trait Chunk {
    fn chunk(&self) -> Option<String>;
}

impl Chunk for Ev {
    fn chunk(&self) -> Option<String> {
        let parts = self.result.get("artifactUpdate")?["artifact"]["parts"].as_array()?;
        Some(parts.iter().filter_map(|p| p["text"].as_str()).collect())
    }
}

async fn next(events: &mut Events) -> Ev {
    tokio::time::timeout(Duration::from_secs(20), events.next())
        .await
        .expect("an event within 20 s")
        .expect("stream still open")
}

#[tokio::test]
async fn reconnect_with_last_event_id_mid_artifact_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(
        &format!("sqlite://{}", dir.path().join("t.db").display()),
        4,
    )
    .await
    .unwrap();
    let (steps, rx) = mpsc::unbounded_channel();
    let exec = Paced {
        steps: Mutex::new(Some(rx)),
    };
    // A small live buffer: the subscriber that reads nothing falls behind it at once.
    let config = HandlerConfig {
        subscriber_buffer: 8,
        ..HandlerConfig::default()
    };
    let handler = RequestHandler::new(Arc::new(exec), store, config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let card = server::simple_card("paced", "streams a long artifact", &url, vec![]);
    let app = server::router(
        AppState::new(handler, card, TransportConfig::default()),
        None,
    );
    tokio::spawn(server::serve(listener, app, futures::future::pending()));
    let client = reqwest::Client::new();
    let full: String = (0..CHUNKS).map(chunk_text).collect();

    let mut first = open(
        &client,
        &url,
        "SendStreamingMessage",
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "go"}]}}),
        None,
    )
    .await;
    let task = next(&mut first).await;
    let task_id = task.result["task"]["id"].as_str().unwrap().to_owned();

    // A subscriber that reads nothing until the end: it lags far behind the task's
    // live buffer and must be caught up from the store.
    let mut slow = open(
        &client,
        &url,
        "SubscribeToTask",
        json!({"id": task_id}),
        None,
    )
    .await;

    for i in 0..BEFORE {
        steps.send(Step::Chunk(chunk_text(i))).unwrap();
    }
    // Read up to id CUT, then drop the connection.
    let mut seen = String::new();
    let mut last = task.id.unwrap();
    while last < CUT {
        let ev = next(&mut first).await;
        let id = ev.id.expect("task events carry an id");
        assert_eq!(id, last + 1, "contiguous ids before the cut");
        last = id;
        seen.push_str(&ev.chunk().unwrap_or_default());
    }
    drop(first);

    // Produced while the client is away.
    for i in BEFORE..AWAY {
        steps.send(Step::Chunk(chunk_text(i))).unwrap();
    }

    let mut resumed = open(
        &client,
        &url,
        "SubscribeToTask",
        json!({"id": task_id}),
        Some(CUT),
    )
    .await;
    // Replayed: no snapshot, ids CUT+1, CUT+2, ... up to the last chunk produced.
    let mut expected = CUT + 1;
    let last_away = chunk_text(AWAY - 1);
    loop {
        let ev = next(&mut resumed).await;
        assert!(
            ev.result.get("task").is_none(),
            "a resume skips the snapshot"
        );
        assert_eq!(ev.id, Some(expected), "exactly once, in order");
        expected += 1;
        let c = ev.chunk().unwrap_or_default();
        seen.push_str(&c);
        if c == last_away {
            break;
        }
    }
    // Live from here: the rest of the artifact, then COMPLETED.
    for i in AWAY..CHUNKS {
        steps.send(Step::Chunk(chunk_text(i))).unwrap();
    }
    steps.send(Step::Finish).unwrap();
    let final_state = loop {
        let ev = next(&mut resumed).await;
        assert_eq!(ev.id, Some(expected), "exactly once, in order");
        expected += 1;
        if let Some(c) = ev.chunk() {
            seen.push_str(&c);
        }
        if let Some(s) = ev.state() {
            break s.to_owned();
        }
    };
    assert_eq!(final_state, "TASK_STATE_COMPLETED");
    assert!(
        tokio::time::timeout(Duration::from_secs(5), resumed.next())
            .await
            .unwrap()
            .is_none(),
        "the stream ends after the final state"
    );
    assert_eq!(seen.len(), full.len());
    assert!(seen == full, "the concatenated artifact is the full text");

    // The slow subscriber: its snapshot, then every later event once, in order.
    let snap = next(&mut slow).await;
    let mut text: String = snap.result["task"]["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect();
    let mut id = snap.id.unwrap();
    let state = loop {
        let ev = next(&mut slow).await;
        assert_eq!(ev.id, Some(id + 1), "the slow subscriber skips nothing");
        id += 1;
        if let Some(c) = ev.chunk() {
            text.push_str(&c);
        }
        if let Some(s) = ev.state().filter(|s| *s != "TASK_STATE_WORKING") {
            break s.to_owned();
        }
    };
    assert_eq!(state, "TASK_STATE_COMPLETED");
    assert_eq!(id, expected - 1, "both streams end at the same final event");
    assert!(text == full, "the slow subscriber has the full text");
}
