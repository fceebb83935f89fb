//! Coalesced push deliveries end to end over real sockets: a gateway on 127.0.0.1:0
//! (memory and SQLite stores) whose agent streams one artifact in many chunks, and a
//! receiver that is slow at first, so that the chunks are pending together. The
//! receiver, appending parts as the spec's append rule says, must end with the
//! artifact exactly as streamed, in fewer POSTs than chunks; a retried coalesced POST
//! carries the same `webhook-id` and body.

mod bindings_common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use a2a_gateway::config::PushConfig;
use a2a_gateway::store::{MemoryTaskStore, TaskStore};
use a2a_gateway::test_util::user_message as message;
use a2a_gateway::transport::TransportConfig;
use bindings_common::server::{Hook, Reply, Server, start_push, test_push_config};
use serde_json::{Value, json};

const CHUNKS: usize = 200;

/// The artifact text as the agent streams it (`chunks N`).
fn streamed(n: usize) -> String {
    (0..n).map(|i| format!("{i};")).collect()
}

/// Streams `chunks N` to a webhook at `/c` whose first call (the Task) takes 500 ms,
/// after `replies`, and waits until the receiver has the terminal status.
async fn stream_to_slow_receiver(s: &Server, n: usize, replies: Vec<Reply>) -> Vec<Hook> {
    {
        let mut r = s.hooks.replies.lock().unwrap();
        r.push_back(Reply {
            delay: Duration::from_millis(500),
            ..Reply::default()
        });
        r.extend(replies);
    }
    let resp = s
        .http
        .post(format!("{}/message:send", s.rest_url()))
        .header("a2a-version", "1.0")
        .json(
            &json!({"message": message(&format!("chunks {n}")), "configuration": {
            "taskPushNotificationConfig": {"id": "hook", "url": format!("{}/c", s.hooks.url)}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    s.hooks
        .wait_for("/c", |calls| {
            calls.iter().any(|h| {
                h.answered == 200 && {
                    let v: Value = serde_json::from_slice(&h.body).unwrap();
                    v["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
                }
            })
        })
        .await
}

/// What a receiver that drops duplicates by `webhook-id` and appends parts holds:
/// the artifact's text, and the number of artifact POSTs it took (answered 2xx).
fn reassembled(calls: &[Hook]) -> (String, usize) {
    let mut seen = HashSet::new();
    let (mut text, mut posts) = (String::new(), 0);
    for h in calls.iter().filter(|h| (200..300).contains(&h.answered)) {
        if !seen.insert(h.headers["webhook-id"].clone()) {
            continue;
        }
        let v: Value = serde_json::from_slice(&h.body).unwrap();
        let Some(u) = v.get("artifactUpdate") else {
            continue;
        };
        posts += 1;
        if u["append"] != true {
            text.clear();
        }
        for p in u["artifact"]["parts"].as_array().unwrap() {
            text.push_str(p["text"].as_str().unwrap());
        }
        assert_eq!(
            u["lastChunk"] == true,
            text == streamed(CHUNKS),
            "lastChunk is set on the POST that ends the artifact"
        );
    }
    (text, posts)
}

async fn start(store: Arc<dyn TaskStore>, push: PushConfig) -> Server {
    start_push(store, TransportConfig::default(), push).await
}

async fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn TaskStore> {
    Arc::new(
        a2a_gateway::store::SqliteTaskStore::open_path(&dir.path().join("push.db"), 4)
            .await
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_chunks_reach_a_slow_receiver_in_few_posts_exactly() {
    let dir = tempfile::tempdir().unwrap();
    for store in [
        Arc::new(MemoryTaskStore::new()) as Arc<dyn TaskStore>,
        sqlite(&dir).await,
    ] {
        let s = start(store, test_push_config()).await;
        let calls = stream_to_slow_receiver(&s, CHUNKS, vec![]).await;
        let (text, posts) = reassembled(&calls);
        assert_eq!(text, streamed(CHUNKS), "every chunk once, in order");
        assert!(
            posts * 10 <= CHUNKS,
            "{posts} artifact POSTs for {CHUNKS} chunks"
        );
    }
}

#[tokio::test]
async fn coalesce_false_sends_one_post_per_chunk() {
    let push = PushConfig {
        coalesce: false,
        ..test_push_config()
    };
    let s = start(Arc::new(MemoryTaskStore::new()), push).await;
    let calls = stream_to_slow_receiver(&s, CHUNKS, vec![]).await;
    let (text, posts) = reassembled(&calls);
    assert_eq!(text, streamed(CHUNKS));
    assert_eq!(posts, CHUNKS);
}

#[tokio::test]
async fn a_coalesced_post_is_bounded_by_max_coalesce_events() {
    let push = PushConfig {
        max_coalesce_events: 16,
        ..test_push_config()
    };
    let s = start(Arc::new(MemoryTaskStore::new()), push).await;
    let calls = stream_to_slow_receiver(&s, CHUNKS, vec![]).await;
    for h in &calls {
        let v: Value = serde_json::from_slice(&h.body).unwrap();
        if let Some(parts) = v["artifactUpdate"]["artifact"]["parts"].as_array() {
            assert!(parts.len() <= 16, "{} parts in one POST", parts.len());
        }
    }
    let (text, posts) = reassembled(&calls);
    assert_eq!(text, streamed(CHUNKS));
    assert!(posts >= CHUNKS / 16, "{posts}");
}

/// The coalesced POST is answered 503 (after the receiver kept it) and sent again: the
/// same range under the same `webhook-id` with the same body, so deduplication leaves
/// every chunk once. (That the range is fixed in the store before the first attempt,
/// and kept by retries and later claims, is the store conformance case
/// `coalesced_ranges_are_fixed_once_and_settled_whole`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_coalesced_post_keeps_its_webhook_id_and_body() {
    let dir = tempfile::tempdir().unwrap();
    for store in [
        Arc::new(MemoryTaskStore::new()) as Arc<dyn TaskStore>,
        sqlite(&dir).await,
    ] {
        let s = start(store, test_push_config()).await;
        // After the Task: the working status, then the first artifact POST fails.
        let replies = vec![
            Reply::default(),
            Reply {
                status: 503,
                ..Reply::default()
            },
        ];
        let calls = stream_to_slow_receiver(&s, CHUNKS, replies).await;
        let artifacts: Vec<&Hook> = calls
            .iter()
            .filter(|h| {
                let v: Value = serde_json::from_slice(&h.body).unwrap();
                v.get("artifactUpdate").is_some()
            })
            .collect();
        assert_eq!(artifacts[0].answered, 503);
        assert_eq!(
            artifacts[0].headers["webhook-id"],
            artifacts[1].headers["webhook-id"]
        );
        assert_eq!(artifacts[0].body, artifacts[1].body, "the same range");
        let first: Value = serde_json::from_slice(&artifacts[0].body).unwrap();
        assert!(
            first["artifactUpdate"]["artifact"]["parts"]
                .as_array()
                .unwrap()
                .len()
                > 1,
            "a coalesced range"
        );
        // The receiver kept the 503'd call too: deduplicated, every chunk once.
        let kept: Vec<Hook> = calls
            .iter()
            .cloned()
            .map(|mut h| {
                h.answered = 200;
                h
            })
            .collect();
        assert_eq!(reassembled(&kept).0, streamed(CHUNKS));
    }
}
