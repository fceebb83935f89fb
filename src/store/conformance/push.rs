//! The push cases of the store conformance suite ([`super`]): every
//! backend keeps configs scoped like tasks, writes outbox rows with the events they
//! deliver, hands out queue heads only, honours leases and settles as [`Settle`] says.
//! Each case cleans up what it leaves in the outbox, since claims span every scope.

use std::sync::Arc;

use super::{chunk, task_at};
use crate::executor::{new_id, new_user_text_message};
use crate::protocol::time;
use crate::protocol::{StreamResponse, TaskState, TaskStatus, TaskStatusUpdateEvent};
use crate::scope::Scope;
use crate::store::push::{Claimed, DeliveryKey, PushStore, Settle, StoredPushConfig};
use crate::store::{StoredEvent, TaskStore};

/// Runs every push case against `store` (which must keep push state).
pub async fn run_all(store: &dyn TaskStore) {
    let push = store
        .push_store()
        .expect("every task store keeps push state");
    has_configs_sees_an_enabled_config(push).await;
    configs_are_scoped_paged_and_replaced(push).await;
    outbox_follows_appends_in_order(store, push).await;
    leases_retries_and_give_ups(store, push).await;
    unclaimed_heads_are_due_again_at_once(store, push).await;
    coalesced_ranges_are_fixed_once_and_settled_whole(store, push).await;
    delete_drops_pending_deliveries(store, push).await;
    settle_many_settles_each_in_order(store, push).await;
    due_heads_are_read_without_a_claim(store, push).await;
    signing_key_is_kept_once(push).await;
}

/// A store with no config says so; one enabled config of any scope makes it true.
/// Runs first: the suite's other cases leave configs behind.
async fn has_configs_sees_an_enabled_config(push: &dyn PushStore) {
    assert!(
        !push.has_configs().await.unwrap(),
        "a fresh store has no config"
    );
    let scope = Scope::new(format!("tenant-{}", new_id()), "alice");
    push.put_config(&scope, &config(&new_id(), "first"))
        .await
        .unwrap();
    assert!(push.has_configs().await.unwrap());
}

fn config(task_id: &str, id: &str) -> StoredPushConfig {
    StoredPushConfig {
        task_id: task_id.into(),
        id: id.into(),
        url: format!("https://receiver.example/{id}"),
        token: Some("tok-secret".into()),
        auth_scheme: Some("Bearer".into()),
        auth_credentials: Some("cred-secret".into()),
        enabled: true,
        failures: 0,
        last_error: None,
        created_ms: time::now().timestamp_millis(),
    }
}

fn status(id: &str, state: TaskState) -> StreamResponse {
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: id.into(),
        context_id: "ctx".into(),
        status: TaskStatus {
            state,
            message: None,
            timestamp: Some(time::now()),
        },
        metadata: None,
    })
}

fn events(from: u64, evs: Vec<StreamResponse>) -> Vec<Arc<StoredEvent>> {
    evs.into_iter()
        .enumerate()
        .map(|(i, event)| Arc::new(StoredEvent::new(from + i as u64, event)))
        .collect()
}

/// A new task of a new tenant with the configs `ids` registered, then its Task, a WORKING
/// update and a `last` update appended (seq 1 to 3): three deliveries per config.
async fn task_with_configs(
    store: &dyn TaskStore,
    push: &dyn PushStore,
    ids: &[&str],
    last: TaskState,
) -> (Scope, String) {
    let scope = Scope::new(format!("tenant-{}", new_id()), "alice");
    let task = new_id();
    for id in ids {
        push.put_config(&scope, &config(&task, id)).await.unwrap();
    }
    store
        .append_all(
            &scope,
            &task,
            &events(
                1,
                vec![
                    StreamResponse::Task(task_at(&task, "ctx", time::now())),
                    status(&task, TaskState::Working),
                    status(&task, last),
                ],
            ),
        )
        .await
        .unwrap();
    (scope, task)
}

fn far_future() -> i64 {
    time::now().timestamp_millis() + 3_600_000
}

/// Claims everything due by `now`, keeping the claims of `scope` (the others stay
/// leased: no other case leaves rows behind).
async fn claim(push: &dyn PushStore, scope: &Scope, now: i64, lease: i64) -> Vec<Claimed> {
    let mut mine: Vec<Claimed> = push
        .claim(now, lease, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| &c.key.scope == scope)
        .collect();
    mine.sort_by(|a, b| a.key.cmp(&b.key));
    mine
}

async fn configs_are_scoped_paged_and_replaced(push: &dyn PushStore) {
    let scope = Scope::new(format!("tenant-{}", new_id()), "alice");
    let other = Scope::new(scope.tenant.clone(), "mallory");
    let task = new_id();
    for id in ["c", "a", "b"] {
        push.put_config(&scope, &config(&task, id)).await.unwrap();
    }
    let got = push.get_config(&scope, &task, "a").await.unwrap().unwrap();
    assert_eq!(got.url, "https://receiver.example/a");
    assert_eq!(got.token.as_deref(), Some("tok-secret"));
    assert_eq!(got.auth_credentials.as_deref(), Some("cred-secret"));
    assert!(got.enabled);
    assert!(push.get_config(&other, &task, "a").await.unwrap().is_none());
    assert!(
        push.list_configs(&other, &task, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let ids = |v: Vec<StoredPushConfig>| v.into_iter().map(|c| c.id).collect::<Vec<_>>();
    assert_eq!(
        ids(push.list_configs(&scope, &task, None, 2).await.unwrap()),
        ["a", "b"]
    );
    assert_eq!(
        ids(push
            .list_configs(&scope, &task, Some("b"), 2)
            .await
            .unwrap()),
        ["c"]
    );
    let mut replaced = config(&task, "a");
    replaced.url = "https://elsewhere.example/".into();
    replaced.token = None;
    push.put_config(&scope, &replaced).await.unwrap();
    let got = push.get_config(&scope, &task, "a").await.unwrap().unwrap();
    assert_eq!(got.url, "https://elsewhere.example/");
    assert_eq!(got.token, None);
    assert!(
        !push.delete_config(&other, &task, "a").await.unwrap(),
        "another owner's config"
    );
    assert!(push.delete_config(&scope, &task, "a").await.unwrap());
    assert!(
        !push.delete_config(&scope, &task, "a").await.unwrap(),
        "idempotent"
    );
    assert_eq!(
        ids(push.list_configs(&scope, &task, None, 10).await.unwrap()),
        ["b", "c"]
    );
}

async fn outbox_follows_appends_in_order(store: &dyn TaskStore, push: &dyn PushStore) {
    let scope = Scope::new(format!("tenant-{}", new_id()), "alice");
    let task = new_id();
    // Registered before the task exists (an inline config of SendMessage).
    push.put_config(&scope, &config(&task, "one"))
        .await
        .unwrap();
    push.put_config(&scope, &config(&task, "two"))
        .await
        .unwrap();
    let mut msg = new_user_text_message("follow-up");
    msg.task_id = Some(task.clone());
    // Consecutive chunks (one log row on SQLite) are pushed one by one, each as itself.
    let appended = vec![
        StreamResponse::Task(task_at(&task, "ctx", time::now())),
        status(&task, TaskState::Working),
        chunk(&task, "ctx", "one, ", false, false),
        chunk(&task, "ctx", "two, ", true, false),
        chunk(&task, "ctx", "three", true, true),
        StreamResponse::Message(msg),
        status(&task, TaskState::Completed),
    ];
    store
        .append_all(&scope, &task, &events(1, appended.clone()))
        .await
        .unwrap();
    let now = time::now().timestamp_millis() + 1;
    assert!(push.any_due(now).await.unwrap());
    let mut delivered: Vec<(String, u64)> = Vec::new();
    for round in 0..10 {
        let claimed = claim(push, &scope, now + round, 60_000).await;
        if claimed.is_empty() {
            break;
        }
        assert_eq!(claimed.len(), 2, "one head per config: {claimed:?}");
        for c in claimed {
            let ev: StreamResponse = serde_json::from_str(c.event.as_deref().unwrap()).unwrap();
            assert!(
                !matches!(ev, StreamResponse::Message(_)),
                "user messages are not pushed"
            );
            assert_eq!(ev, appended[c.key.seq as usize - 1], "event {}", c.key.seq);
            assert_eq!(c.attempts, 0);
            assert_eq!(c.config.token.as_deref(), Some("tok-secret"));
            delivered.push((c.key.config_id.clone(), c.key.seq));
            push.settle(&c.key, &Settle::Delivered).await.unwrap();
        }
    }
    let of = |id: &str| -> Vec<u64> {
        delivered
            .iter()
            .filter(|(c, _)| c == id)
            .map(|(_, s)| *s)
            .collect()
    };
    assert_eq!(
        of("one"),
        [1, 2, 3, 4, 5, 7],
        "in order, without the user message"
    );
    assert_eq!(of("two"), [1, 2, 3, 4, 5, 7]);
    assert!(
        claim(push, &scope, far_future(), 1).await.is_empty(),
        "nothing left"
    );
    push.delete_config(&scope, &task, "one").await.unwrap();
    push.delete_config(&scope, &task, "two").await.unwrap();
}

async fn leases_retries_and_give_ups(store: &dyn TaskStore, push: &dyn PushStore) {
    let (scope, task) = task_with_configs(store, push, &["c"], TaskState::Working).await;
    let now = time::now().timestamp_millis() + 1;
    let first = claim(push, &scope, now, 10_000).await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].key.seq, 1);
    assert!(
        claim(push, &scope, now + 5_000, 10_000).await.is_empty(),
        "leased"
    );
    // The claiming instance died: after the lease another one takes it over.
    let again = claim(push, &scope, now + 10_001, 10_000).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].key.seq, 1, "the same head, not the next event");
    let key = again[0].key.clone();
    let retry_at = now + 20_000;
    push.settle(
        &key,
        &Settle::Retry {
            next_ms: retry_at,
            error: "HTTP 503".into(),
        },
    )
    .await
    .unwrap();
    assert!(
        claim(push, &scope, retry_at - 1, 10_000).await.is_empty(),
        "backing off"
    );
    let pending = push.status(Some(&task), 10).await.unwrap();
    assert_eq!(pending.pending_total, 3);
    assert_eq!(pending.pending[0].key, key);
    assert_eq!(pending.pending[0].attempts, 1);
    assert_eq!(pending.pending[0].last_error.as_deref(), Some("HTTP 503"));
    let retried = claim(push, &scope, retry_at, 10_000).await;
    assert_eq!(retried.len(), 1);
    assert_eq!(retried[0].attempts, 1);
    // Two give-ups in a row disable the config (disable_after = 2) and drop the rest.
    let give_up = Settle::GiveUp {
        error: "HTTP 404".into(),
        disable_after: 2,
    };
    let s = push.settle(&key, &give_up).await.unwrap();
    assert!(!s.disabled);
    let next = claim(push, &scope, retry_at + 1, 10_000).await;
    assert_eq!(
        next[0].key.seq, 2,
        "a given-up event does not block the next"
    );
    let s = push.settle(&next[0].key, &give_up).await.unwrap();
    assert!(s.disabled);
    assert_eq!(s.dropped, 1, "seq 3 dropped with the config");
    let cfg = push.get_config(&scope, &task, "c").await.unwrap().unwrap();
    assert!(!cfg.enabled, "disabled, still visible");
    assert_eq!(cfg.last_error.as_deref(), Some("HTTP 404"));
    let troubled = push.status(Some(&task), 10).await.unwrap();
    assert_eq!(troubled.pending_total, 0);
    assert_eq!(troubled.troubled.len(), 1);
    // A disabled config gets no new rows.
    store
        .append(&scope, &task, 4, &status(&task, TaskState::Completed))
        .await
        .unwrap();
    assert!(claim(push, &scope, far_future(), 1).await.is_empty());
    // Re-registering enables it again; 410 Gone disables it at once.
    push.put_config(&scope, &config(&task, "c")).await.unwrap();
    store
        .append_all(
            &scope,
            &task,
            &events(
                5,
                vec![
                    status(&task, TaskState::Completed),
                    status(&task, TaskState::Completed),
                ],
            ),
        )
        .await
        .unwrap();
    let gone = claim(push, &scope, far_future(), 10_000).await;
    assert_eq!(gone.len(), 1);
    let s = push
        .settle(
            &gone[0].key,
            &Settle::Disable {
                error: "HTTP 410 Gone".into(),
            },
        )
        .await
        .unwrap();
    assert!(s.disabled);
    assert!(
        !push
            .get_config(&scope, &task, "c")
            .await
            .unwrap()
            .unwrap()
            .enabled
    );
    assert!(claim(push, &scope, far_future() + 1, 1).await.is_empty());
    push.delete_config(&scope, &task, "c").await.unwrap();
}

/// A claim given back with `unclaim` is due again at the given time (no attempt
/// counted); one another instance has taken over since (a later lease) is left alone.
async fn unclaimed_heads_are_due_again_at_once(store: &dyn TaskStore, push: &dyn PushStore) {
    let (scope, task) = task_with_configs(store, push, &["a", "b"], TaskState::Working).await;
    let now = time::now().timestamp_millis() + 1;
    let first = claim(push, &scope, now, 10_000).await;
    assert_eq!(first.len(), 2);
    // Both leases ended and another instance claimed both again, until now + 30_001;
    // it gives back a's claim, and the first instance's late give-back of b's (its old
    // lease end) changes nothing.
    let taken = claim(push, &scope, now + 10_001, 20_000).await;
    assert_eq!(taken.len(), 2, "both leases ended");
    push.unclaim(&[first[0].key.clone()], now + 10_001 + 20_000, now + 10_002)
        .await
        .unwrap();
    push.unclaim(&[first[1].key.clone()], now + 10_000, now + 10_002)
        .await
        .unwrap();
    let again = claim(push, &scope, now + 10_002, 10_000).await;
    assert_eq!(again.len(), 1, "only the released claim is due: {again:?}");
    assert_eq!(again[0].key, first[0].key);
    assert_eq!(again[0].attempts, 0, "no attempt counted");
    for id in ["a", "b"] {
        assert!(push.delete_config(&scope, &task, id).await.unwrap());
    }
}

/// The events after a head are read with their text (folded log rows too); a range
/// fixed for a head stays fixed (a second fix answers the first), is seen by every
/// later claim, survives a retry, and goes whole with the head's delivery.
async fn coalesced_ranges_are_fixed_once_and_settled_whole(
    store: &dyn TaskStore,
    push: &dyn PushStore,
) {
    let scope = Scope::new(format!("tenant-{}", new_id()), "alice");
    let task = new_id();
    push.put_config(&scope, &config(&task, "c")).await.unwrap();
    let appended = vec![
        StreamResponse::Task(task_at(&task, "ctx", time::now())),
        chunk(&task, "ctx", "one, ", false, false),
        chunk(&task, "ctx", "two, ", true, false),
        chunk(&task, "ctx", "three, ", true, false),
        chunk(&task, "ctx", "four", true, true),
    ];
    store
        .append_all(&scope, &task, &events(1, appended.clone()))
        .await
        .unwrap();
    let now = time::now().timestamp_millis() + 1;
    let first = claim(push, &scope, now, 10_000).await.remove(0);
    push.settle(&first.key, &Settle::Delivered).await.unwrap();
    let head = claim(push, &scope, now, 10_000).await.remove(0);
    assert_eq!((head.key.seq, head.range_end), (2, None));
    let after = push.pending_after(&head.key, 2).await.unwrap();
    let seqs: Vec<u64> = after.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, [3, 4], "the next ones, at most the limit");
    for (seq, text) in &after {
        let ev: StreamResponse = serde_json::from_str(text.as_deref().unwrap()).unwrap();
        assert_eq!(ev, appended[*seq as usize - 1]);
    }
    assert_eq!(push.fix_range(&head.key, 4).await.unwrap(), 4);
    assert_eq!(push.fix_range(&head.key, 5).await.unwrap(), 4, "fixed once");
    // A retry keeps the range; the next claim (after a restart, or on another
    // instance after the lease) sees it.
    let retry = Settle::Retry {
        next_ms: now + 1,
        error: "HTTP 503".into(),
    };
    push.settle(&head.key, &retry).await.unwrap();
    let again = claim(push, &scope, now + 1, 10_000).await.remove(0);
    assert_eq!((again.key.seq, again.range_end), (2, Some(4)));
    // Delivered through the batched settlement (the sender's path).
    push.settle_many(&[(&again.key, &Settle::Delivered)])
        .await
        .unwrap();
    let next = claim(push, &scope, now + 2, 10_000).await;
    assert_eq!(next.len(), 1);
    assert_eq!(
        (next[0].key.seq, next[0].range_end),
        (5, None),
        "2..=4 went with the head"
    );
    assert!(push.delete_config(&scope, &task, "c").await.unwrap());
}

async fn delete_drops_pending_deliveries(store: &dyn TaskStore, push: &dyn PushStore) {
    let scope = Scope::new(format!("tenant-{}", new_id()), "alice");
    let task = new_id();
    push.put_config(&scope, &config(&task, "c")).await.unwrap();
    store
        .append(
            &scope,
            &task,
            1,
            &StreamResponse::Task(task_at(&task, "ctx", time::now())),
        )
        .await
        .unwrap();
    let claimed = claim(push, &scope, far_future(), 10_000).await;
    assert_eq!(claimed.len(), 1);
    assert!(push.delete_config(&scope, &task, "c").await.unwrap());
    assert_eq!(push.status(Some(&task), 10).await.unwrap().pending_total, 0);
    // Settling a delivery whose config was deleted meanwhile changes nothing.
    let s = push
        .settle(&claimed[0].key, &Settle::Delivered)
        .await
        .unwrap();
    assert!(!s.disabled);
    store
        .append(&scope, &task, 2, &status(&task, TaskState::Completed))
        .await
        .unwrap();
    assert!(claim(push, &scope, far_future(), 10_000).await.is_empty());
}

/// Many settlements in one call do what one call each would: a delivered head frees the
/// next event of its queue and ends the config's failure run, a retry backs off, a
/// give-up that completes a run disables its config, and a gone delivery is left alone.
async fn settle_many_settles_each_in_order(store: &dyn TaskStore, push: &dyn PushStore) {
    let (scope, task) = task_with_configs(
        store,
        push,
        &["ok", "retry", "fail", "gone"],
        TaskState::Working,
    )
    .await;
    let now = time::now().timestamp_millis() + 1;
    let give_up = |n: u32| Settle::GiveUp {
        error: "HTTP 404".into(),
        disable_after: n,
    };
    let heads = claim(push, &scope, now, 60_000).await;
    assert_eq!(heads.len(), 4, "{heads:?}");
    let key = |id: &str| {
        heads
            .iter()
            .find(|c| c.key.config_id == id)
            .unwrap()
            .key
            .clone()
    };
    let (ok, retry, fail, gone) = (key("ok"), key("retry"), key("fail"), key("gone"));
    // "ok" starts a failure run that its next delivery ends.
    push.settle(&ok, &give_up(5)).await.unwrap();
    let ok_cfg = push.get_config(&scope, &task, "ok").await.unwrap().unwrap();
    assert_eq!(ok_cfg.failures, 1);
    let ok2 = claim(push, &scope, now, 60_000).await;
    assert_eq!(ok2.len(), 1, "{ok2:?}");
    let ok2 = ok2[0].key.clone();
    assert_eq!((ok2.config_id.as_str(), ok2.seq), ("ok", 2));
    assert!(push.delete_config(&scope, &task, "gone").await.unwrap());
    let retry_at = now + 20_000;
    let back_off = Settle::Retry {
        next_ms: retry_at,
        error: "HTTP 503".into(),
    };
    let (delivered, fail_now) = (Settle::Delivered, give_up(1));
    let items = [
        (&ok2, &delivered),
        (&retry, &back_off),
        (&fail, &fail_now),
        (&gone, &delivered),
    ];
    let settled = push.settle_many(&items).await.unwrap();
    assert_eq!(settled.len(), 4);
    assert!(!settled[0].disabled && !settled[1].disabled && !settled[3].disabled);
    assert!(settled[2].disabled, "a run of 1 disables");
    assert_eq!(settled[2].dropped, 2, "its seq 2 and 3 are dropped");
    assert!(push.settle_many(&[]).await.unwrap().is_empty());
    let ok_cfg = push.get_config(&scope, &task, "ok").await.unwrap().unwrap();
    assert_eq!(ok_cfg.failures, 0, "a delivery ends the run");
    assert_eq!(ok_cfg.last_error.as_deref(), Some("HTTP 404"));
    let next = claim(push, &scope, now + 1, 60_000).await;
    assert_eq!(next.len(), 1, "{next:?}");
    assert_eq!((next[0].key.config_id.as_str(), next[0].key.seq), ("ok", 3));
    let pending = push.status(Some(&task), 10).await.unwrap();
    assert_eq!(pending.pending_total, 4, "ok 3 (claimed), retry 1 to 3");
    let r = pending.pending.iter().find(|p| p.key == retry).unwrap();
    assert_eq!((r.attempts, r.next_ms), (1, retry_at));
    assert_eq!(r.last_error.as_deref(), Some("HTTP 503"));
    let fail_cfg = push
        .get_config(&scope, &task, "fail")
        .await
        .unwrap()
        .unwrap();
    assert!(!fail_cfg.enabled, "disabled, still visible");
    for id in ["ok", "retry", "fail"] {
        push.delete_config(&scope, &task, id).await.unwrap();
    }
}

/// The heads of `scope` that [`PushStore::due_heads`] reads at `now`, as (config, seq).
async fn heads(push: &dyn PushStore, scope: &Scope, now: i64) -> Vec<(String, u64)> {
    let mut got: Vec<(String, u64)> = push
        .due_heads(now, 1000, &Default::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|c| &c.key.scope == scope)
        .map(|c| (c.key.config_id, c.key.seq))
        .collect();
    got.sort();
    got
}

/// The read of in-memory claims: the due head of each queue, with its event and
/// config, reserving nothing (read twice, the same heads); a head retried later
/// hides its queue until it is due again; the next event is the head once the first
/// is settled.
async fn due_heads_are_read_without_a_claim(store: &dyn TaskStore, push: &dyn PushStore) {
    let (scope, task) = task_with_configs(store, push, &["a", "b"], TaskState::Completed).await;
    let now = time::now().timestamp_millis() + 1;
    let read = push
        .due_heads(now, 1000, &Default::default())
        .await
        .unwrap();
    let a1 = read
        .iter()
        .find(|c| c.key.scope == scope && c.key.config_id == "a")
        .expect("the head of a");
    assert_eq!(a1.key.seq, 1);
    assert_eq!(a1.attempts, 0);
    assert_eq!(a1.config.token.as_deref(), Some("tok-secret"));
    let ev: StreamResponse = serde_json::from_str(a1.event.as_deref().unwrap()).unwrap();
    assert!(matches!(ev, StreamResponse::Task(_)), "{ev:?}");
    let both = vec![("a".to_owned(), 1), ("b".to_owned(), 1)];
    assert_eq!(heads(push, &scope, now).await, both);
    assert_eq!(heads(push, &scope, now).await, both, "nothing is reserved");
    let key_a = a1.key.clone();
    let skip: std::collections::HashSet<DeliveryKey> = [key_a.clone()].into();
    let past = push.due_heads(now, 1000, &skip).await.unwrap();
    assert!(
        past.iter().all(|c| c.key != key_a)
            && past
                .iter()
                .any(|c| c.key.scope == scope && c.key.config_id == "b"),
        "a skipped head is not read, the others are"
    );
    let one = push.due_heads(now, 1, &skip).await.unwrap();
    assert!(
        one.len() == 1 && one[0].key != key_a,
        "the limit counts heads not skipped"
    );
    let retry_at = now + 60_000;
    push.settle(
        &key_a,
        &Settle::Retry {
            next_ms: retry_at,
            error: "HTTP 500".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(
        heads(push, &scope, now).await,
        [("b".to_owned(), 1)],
        "a retried head hides its queue (event 2 is not its head)"
    );
    assert_eq!(
        heads(push, &scope, retry_at).await,
        both,
        "due again at its retry time"
    );
    push.settle(&key_a, &Settle::Delivered).await.unwrap();
    assert_eq!(
        heads(push, &scope, retry_at).await,
        [("a".to_owned(), 2), ("b".to_owned(), 1)]
    );
    let limited = push
        .due_heads(retry_at, 1, &Default::default())
        .await
        .unwrap();
    assert_eq!(limited.len(), 1, "at most the limit");
    assert!(push.delete_config(&scope, &task, "a").await.unwrap());
    assert!(push.delete_config(&scope, &task, "b").await.unwrap());
    assert!(heads(push, &scope, far_future()).await.is_empty());
    if push.single_process() {
        assert!(
            push.reserve_sender(),
            "the first sender keeps claims in memory"
        );
        assert!(
            !push.reserve_sender(),
            "a second one of this process does not"
        );
        push.release_sender();
        assert!(push.reserve_sender(), "free again once the first ended");
        push.release_sender();
    }
}

async fn signing_key_is_kept_once(push: &dyn PushStore) {
    let first = push.signing_key(b"candidate-one").await.unwrap();
    let second = push.signing_key(b"candidate-two").await.unwrap();
    assert_eq!(first, second, "the first key kept is the key from then on");
    assert_ne!(second, b"candidate-two");
}
