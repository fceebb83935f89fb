//! The sender's shutdown and its one-sender reservation (issue 43): a shutdown that
//! stops waiting for its attempts keeps the reservation until they are settled, so a
//! second sender of the process cannot read their rows as due and send them again.
//! The store is the memory store behind a controllable fake whose `settle_many` waits
//! for the test; the webhook is a real receiver on `127.0.0.1:0`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use super::super::PushService;
use crate::config::PushConfig;
use crate::protocol::time::{self, Timestamp};
use crate::protocol::{StreamResponse, Task};
use crate::scope::{Scope, TaskKey};
use crate::store::push::{
    Claimed, DeliveryKey, PushStatus, PushStore, Settle, Settled, StoredPushConfig,
};
use crate::store::{
    MemoryTaskStore, StoreError, StoredEvent, TaskPage, TaskQuery, TaskRecord, TaskStore,
};

/// The memory store; `settle_many` signals `settling` and waits for a `gate` permit.
struct HeldSettle {
    inner: MemoryTaskStore,
    settling: Notify,
    gate: Semaphore,
}

#[async_trait]
impl TaskStore for HeldSettle {
    async fn append_all(
        &self,
        scope: &Scope,
        task_id: &str,
        events: &[Arc<StoredEvent>],
    ) -> Result<(), StoreError> {
        self.inner.append_all(scope, task_id, events).await
    }
    async fn get(&self, scope: &Scope, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.inner.get(scope, task_id).await
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
    async fn unsettled(&self, limit: usize) -> Result<Vec<TaskKey>, StoreError> {
        self.inner.unsettled(limit).await
    }
    async fn purge_expired(&self, older_than: Timestamp, batch: usize) -> Result<u64, StoreError> {
        self.inner.purge_expired(older_than, batch).await
    }
    async fn expired_input_required(
        &self,
        older_than: Timestamp,
        limit: usize,
    ) -> Result<Vec<TaskKey>, StoreError> {
        self.inner.expired_input_required(older_than, limit).await
    }
    fn push_store(&self) -> Option<&dyn PushStore> {
        Some(self)
    }
}

#[async_trait]
impl PushStore for HeldSettle {
    async fn put_config(&self, scope: &Scope, config: &StoredPushConfig) -> Result<(), StoreError> {
        self.push().put_config(scope, config).await
    }
    async fn get_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<Option<StoredPushConfig>, StoreError> {
        self.push().get_config(scope, task_id, id).await
    }
    async fn list_configs(
        &self,
        scope: &Scope,
        task_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StoredPushConfig>, StoreError> {
        self.push().list_configs(scope, task_id, after, limit).await
    }
    async fn delete_config(
        &self,
        scope: &Scope,
        task_id: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        self.push().delete_config(scope, task_id, id).await
    }
    async fn claim(
        &self,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
    ) -> Result<Vec<Claimed>, StoreError> {
        self.push().claim(now_ms, lease_ms, limit).await
    }
    async fn pending_after(
        &self,
        head: &DeliveryKey,
        limit: usize,
    ) -> Result<Vec<(u64, Option<String>)>, StoreError> {
        self.push().pending_after(head, limit).await
    }
    async fn fix_range(&self, head: &DeliveryKey, last: u64) -> Result<u64, StoreError> {
        self.push().fix_range(head, last).await
    }
    fn single_process(&self) -> bool {
        self.push().single_process()
    }
    fn reserve_sender(&self) -> bool {
        self.push().reserve_sender()
    }
    fn release_sender(&self) {
        self.push().release_sender()
    }
    async fn due_heads(
        &self,
        now_ms: i64,
        limit: usize,
        skip: &std::collections::HashSet<DeliveryKey>,
    ) -> Result<Vec<Claimed>, StoreError> {
        self.push().due_heads(now_ms, limit, skip).await
    }
    async fn has_configs(&self) -> Result<bool, StoreError> {
        self.push().has_configs().await
    }
    async fn any_due(&self, now_ms: i64) -> Result<bool, StoreError> {
        self.push().any_due(now_ms).await
    }
    async fn settle(&self, key: &DeliveryKey, outcome: &Settle) -> Result<Settled, StoreError> {
        self.push().settle(key, outcome).await
    }
    async fn settle_many(
        &self,
        items: &[(&DeliveryKey, &Settle)],
    ) -> Result<Vec<Settled>, StoreError> {
        self.settling.notify_one();
        self.gate.acquire().await.expect("open").forget();
        self.push().settle_many(items).await
    }
    async fn status(&self, task_id: Option<&str>, limit: usize) -> Result<PushStatus, StoreError> {
        self.push().status(task_id, limit).await
    }
    async fn signing_key(&self, candidate: &[u8]) -> Result<Vec<u8>, StoreError> {
        self.push().signing_key(candidate).await
    }
}

impl HeldSettle {
    fn push(&self) -> &dyn PushStore {
        self.inner
            .push_store()
            .expect("the memory store keeps push state")
    }
}

/// A webhook receiver on `127.0.0.1:0` answering 200, counting the POSTs.
async fn receiver() -> (String, Arc<AtomicUsize>) {
    let posts = Arc::new(AtomicUsize::new(0));
    let counted = posts.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, posts)
}

#[tokio::test]
async fn a_stopped_sender_keeps_its_reservation_until_its_attempts_are_settled() {
    let store = Arc::new(HeldSettle {
        inner: MemoryTaskStore::new(),
        settling: Notify::new(),
        gate: Semaphore::new(0),
    });
    let (url, posts) = receiver().await;
    let scope = Scope::new("", "alice");
    store
        .put_config(
            &scope,
            &StoredPushConfig {
                task_id: "t".into(),
                id: "c".into(),
                url,
                token: None,
                auth_scheme: None,
                auth_credentials: None,
                enabled: true,
                failures: 0,
                last_error: None,
                created_ms: time::now().timestamp_millis(),
            },
        )
        .await
        .unwrap();
    let config = PushConfig {
        allow_http: true,
        allow_cidrs: vec!["127.0.0.1/32".into()],
        timeout_secs: 1,
        poll_interval_ms: 50,
        ..PushConfig::default()
    };
    let dyn_store: Arc<dyn TaskStore> = store.clone();
    let svc = PushService::open(&config, dyn_store).await.unwrap();
    let stop = CancellationToken::new();
    let sender = svc.spawn(stop.clone());
    let task = Task {
        id: "t".into(),
        context_id: "ctx".into(),
        ..crate::store::conformance::task_at("t", "ctx", time::now())
    };
    store
        .append_all(
            &scope,
            "t",
            &[Arc::new(StoredEvent::new(1, StreamResponse::Task(task)))],
        )
        .await
        .unwrap();
    svc.wake();
    // The attempt was sent; its settlement is held.
    tokio::time::timeout(Duration::from_secs(10), store.settling.notified())
        .await
        .expect("the delivery was attempted");
    assert_eq!(posts.load(Ordering::SeqCst), 1);
    // The sender stops and its wait for the settlement times out (timeout_secs + 5).
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(15), sender)
        .await
        .expect("the sender ended after its shutdown wait")
        .unwrap();
    assert!(
        !store.reserve_sender(),
        "the reservation was freed while an attempt was still being settled"
    );
    // Once settled, the reservation is free for another sender.
    store.gate.add_permits(1);
    tokio::time::timeout(Duration::from_secs(5), async {
        while !store.reserve_sender() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the reservation is released once the attempt is settled");
    store.release_sender();
    let status = store.status(Some("t"), 10).await.unwrap();
    assert_eq!(status.pending_total, 0, "settled as delivered");
    assert_eq!(posts.load(Ordering::SeqCst), 1, "sent once");
}
