//! The task cases of the store conformance suite ([`super`]): the event log, the
//! snapshot it projects, scopes, lists and their pages, the reads of running and
//! waiting tasks, the purge.

use std::sync::Arc;

use chrono::Duration;

use super::{chunk, status, task_at};
use crate::executor::{new_id, new_user_text_message};
use crate::protocol::time::{self, Timestamp};
use crate::protocol::{Artifact, Part, StreamResponse, Task, TaskState};
use crate::scope::Scope;
use crate::store::{
    FoldedArtifacts, PageCursor, StoreError, StoredEvent, TaskQuery, TaskStore, projection,
};

/// Runs every task case against `store`. Panics on the first failure.
pub async fn run_all(store: &dyn TaskStore) {
    create_get_and_replay(store).await;
    sequence_conflicts(store).await;
    scope_isolation(store).await;
    agent_isolation(store).await;
    artifact_chunks_project(store).await;
    list_filters_and_shapes(store).await;
    list_paging_equal_timestamps_and_inserts(store).await;
    list_pages_end_at_the_byte_bound(store).await;
    event_reads_end_at_the_byte_bound(store).await;
    unsettled_lists_running_tasks(store).await;
    long_artifact_stream_projects(store).await;
    grouped_appends_fold_like_single_ones(store).await;
    grouped_append_is_all_or_nothing(store).await;
    checkpoint_of_megabytes_reads_back_whole(store).await;
    purge_removes_old_terminal_tasks(store).await;
    expired_input_required_lists_old_waiting_tasks(store).await;
    upstream_links_round_trip_and_go_with_their_task(store).await;
}

fn fresh_scope() -> Scope {
    Scope::new(format!("tenant-{}", new_id()), "alice")
}

async fn create_get_and_replay(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let id = new_id();
    let now = time::now();
    assert!(store.get(&scope, &id).await.unwrap().is_none());
    let events = vec![
        StreamResponse::Task(task_at(&id, "ctx", now)),
        status(&id, "ctx", TaskState::Working, now),
        chunk(&id, "ctx", "Hello", false, false),
        status(&id, "ctx", TaskState::Completed, now),
    ];
    for (i, e) in events.iter().enumerate() {
        store.append(&scope, &id, i as u64 + 1, e).await.unwrap();
    }
    let rec = store.get(&scope, &id).await.unwrap().expect("task exists");
    assert_eq!(rec.last_seq, 4);
    assert_eq!(rec.task.status.state, TaskState::Completed);
    assert_eq!(
        store.head(&scope, &id).await.unwrap(),
        Some(crate::store::TaskHead {
            state: TaskState::Completed,
            last_seq: 4
        })
    );
    assert_eq!(store.head(&fresh_scope(), &id).await.unwrap(), None);
    assert_eq!(store.head(&scope, "no-such-task").await.unwrap(), None);
    assert_eq!(rec.task.status.timestamp, Some(now));
    assert_eq!(rec.task.artifacts().len(), 1);
    // user message + two status messages
    assert_eq!(rec.task.history().len(), 3);
    let replay = store
        .events_after(&scope, &id, 0, 100, u64::MAX)
        .await
        .unwrap();
    assert_eq!(
        replay.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert_eq!(
        replay.iter().map(|e| e.event.clone()).collect::<Vec<_>>(),
        events
    );
    let tail = store
        .events_after(&scope, &id, 2, 1, u64::MAX)
        .await
        .unwrap();
    assert_eq!(tail.len(), 1);
    assert_eq!(tail[0].seq, 3);
    assert!(
        store
            .events_after(&scope, &id, 4, 10, u64::MAX)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn sequence_conflicts(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let id = new_id();
    let now = time::now();
    let created = StreamResponse::Task(task_at(&id, "ctx", now));
    assert!(matches!(
        store
            .append(&scope, &id, 1, &status(&id, "ctx", TaskState::Working, now))
            .await,
        Err(StoreError::InvalidEvent(_))
    ));
    assert!(matches!(
        store
            .append(&scope, &id, 2, &status(&id, "ctx", TaskState::Working, now))
            .await,
        Err(StoreError::NotFound(_))
    ));
    store.append(&scope, &id, 1, &created).await.unwrap();
    assert!(matches!(
        store.append(&scope, &id, 1, &created).await,
        Err(StoreError::Conflict { .. })
    ));
    assert!(matches!(
        store
            .append(&scope, &id, 3, &status(&id, "ctx", TaskState::Working, now))
            .await,
        Err(StoreError::Conflict { .. })
    ));
    store
        .append(&scope, &id, 2, &status(&id, "ctx", TaskState::Working, now))
        .await
        .unwrap();
    assert_eq!(store.get(&scope, &id).await.unwrap().unwrap().last_seq, 2);
}

async fn scope_isolation(store: &dyn TaskStore) {
    let tenant = format!("tenant-{}", new_id());
    let alice = Scope::new(&tenant, "alice");
    let bob = Scope::new(&tenant, "bob");
    let alice_elsewhere = Scope::new(format!("other-{}", new_id()), "alice");
    let id = new_id();
    let now = time::now();
    store
        .append(
            &alice,
            &id,
            1,
            &StreamResponse::Task(task_at(&id, "ctx", now)),
        )
        .await
        .unwrap();
    for other in [&bob, &alice_elsewhere] {
        assert!(store.get(other, &id).await.unwrap().is_none());
        assert!(
            store
                .events_after(other, &id, 0, 10, u64::MAX)
                .await
                .unwrap()
                .is_empty()
        );
        let page = store
            .list(
                other,
                &TaskQuery {
                    page_size: 100,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert!(page.tasks.iter().all(|t| t.id != id));
        assert!(matches!(
            store
                .append(other, &id, 2, &status(&id, "ctx", TaskState::Working, now))
                .await,
            Err(StoreError::NotFound(_))
        ));
    }
    // The same id may exist independently in another scope.
    store
        .append(
            &bob,
            &id,
            1,
            &StreamResponse::Task(task_at(&id, "bob-ctx", now)),
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .get(&alice, &id)
            .await
            .unwrap()
            .unwrap()
            .task
            .context_id,
        "ctx"
    );
    assert_eq!(
        store.get(&bob, &id).await.unwrap().unwrap().task.context_id,
        "bob-ctx"
    );
}

/// The agent is part of the key (`[agents.<id>]`): a task of one agent is not found,
/// not listed, not appended to and has no push configs through another agent or the
/// agent at `/`, for the same tenant and caller; the same id lives independently in
/// each; and scopes read back across agents (running tasks) keep their agent.
async fn agent_isolation(store: &dyn TaskStore) {
    let tenant = format!("tenant-{}", new_id());
    let a = Scope::new(&tenant, "alice").with_agent(format!("a-{}", new_id()));
    let b = Scope::new(&tenant, "alice").with_agent(format!("b-{}", new_id()));
    let root = Scope::new(&tenant, "alice");
    let id = new_id();
    let now = time::now();
    store
        .append(
            &a,
            &id,
            1,
            &StreamResponse::Task(task_at(&id, "ctx-a", now)),
        )
        .await
        .unwrap();
    store
        .append(&a, &id, 2, &status(&id, "ctx-a", TaskState::Working, now))
        .await
        .unwrap();
    if let Some(push) = store.push_store() {
        let config = crate::store::push::StoredPushConfig {
            task_id: id.clone(),
            id: "cfg".into(),
            url: "https://receiver.example/a".into(),
            token: None,
            auth_scheme: None,
            auth_credentials: None,
            enabled: true,
            failures: 0,
            last_error: None,
            created_ms: now.timestamp_millis(),
        };
        push.put_config(&a, &config).await.unwrap();
        assert!(push.get_config(&a, &id, "cfg").await.unwrap().is_some());
        for other in [&b, &root] {
            assert!(push.get_config(other, &id, "cfg").await.unwrap().is_none());
            assert!(
                push.list_configs(other, &id, None, 10)
                    .await
                    .unwrap()
                    .is_empty()
            );
            assert!(!push.delete_config(other, &id, "cfg").await.unwrap());
        }
    }
    for other in [&b, &root] {
        assert!(store.get(other, &id).await.unwrap().is_none(), "{other:?}");
        assert!(store.head(other, &id).await.unwrap().is_none());
        assert!(
            store
                .events_after(other, &id, 0, 10, u64::MAX)
                .await
                .unwrap()
                .is_empty()
        );
        let page = store
            .list(
                other,
                &TaskQuery {
                    page_size: 100,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert!(page.tasks.iter().all(|t| t.id != id));
        assert!(matches!(
            store
                .append(other, &id, 3, &status(&id, "ctx", TaskState::Working, now))
                .await,
            Err(StoreError::NotFound(_))
        ));
    }
    store
        .append(
            &b,
            &id,
            1,
            &StreamResponse::Task(task_at(&id, "ctx-b", now)),
        )
        .await
        .unwrap();
    assert_eq!(
        store.get(&a, &id).await.unwrap().unwrap().task.context_id,
        "ctx-a"
    );
    assert_eq!(
        store.get(&b, &id).await.unwrap().unwrap().task.context_id,
        "ctx-b"
    );
    let listed = store
        .list(
            &a,
            &TaskQuery {
                page_size: 100,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(listed.tasks.len(), 1);
    let running = store.unsettled(100_000).await.unwrap();
    assert!(running.contains(&(a.clone(), id.clone())), "{running:?}");
    assert!(running.contains(&(b.clone(), id.clone())), "{running:?}");
    // Artifacts (folded and compacted when the task settles) stay with their agent.
    store
        .append(&a, &id, 3, &chunk(&id, "ctx-a", "for a", false, true))
        .await
        .unwrap();
    store
        .append(&a, &id, 4, &status(&id, "ctx-a", TaskState::Completed, now))
        .await
        .unwrap();
    let got = store.get(&a, &id).await.unwrap().unwrap().task;
    assert_eq!(got.artifacts()[0].parts[0].as_text(), Some("for a"));
    assert_eq!(got.status.state, TaskState::Completed);
    let other = store.get(&b, &id).await.unwrap().unwrap().task;
    assert!(other.artifacts().is_empty(), "{other:?}");
    assert_eq!(other.status.state, TaskState::Submitted);
    // Upstream links too.
    let link = crate::executor::UpstreamLink {
        upstream_task_id: "up-a".into(),
        upstream_context_id: "up-ctx-a".into(),
        session_id: "a2a-a".into(),
    };
    store.put_upstream_link(&a, &id, &link).await.unwrap();
    assert_eq!(store.upstream_link(&a, &id).await.unwrap(), Some(link));
    assert_eq!(store.upstream_link(&b, &id).await.unwrap(), None);
    assert_eq!(store.upstream_link(&root, &id).await.unwrap(), None);
    if let Some(push) = store.push_store() {
        // The deliveries of a's config are queued under a's scope (what the sender
        // reads back and keys its webhook ids by), none under b's or the root's.
        let status = push.status(Some(&id), 100).await.unwrap();
        assert_eq!(status.pending.len(), 2, "{status:?}");
        assert!(
            status.pending.iter().all(|p| p.key.scope == a),
            "{status:?}"
        );
        // The push cases start from a store without configs.
        assert!(push.delete_config(&a, &id, "cfg").await.unwrap());
        assert!(
            push.status(Some(&id), 100)
                .await
                .unwrap()
                .pending
                .is_empty()
        );
    }
}

async fn artifact_chunks_project(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let id = new_id();
    let now = time::now();
    store
        .append(
            &scope,
            &id,
            1,
            &StreamResponse::Task(task_at(&id, "ctx", now)),
        )
        .await
        .unwrap();
    let pieces = ["Hel", "lo, ", "wörld", "!"];
    for (i, p) in pieces.iter().enumerate() {
        let e = chunk(&id, "ctx", p, i > 0, i == pieces.len() - 1);
        store.append(&scope, &id, i as u64 + 2, &e).await.unwrap();
    }
    let task = store.get(&scope, &id).await.unwrap().unwrap().task;
    assert_eq!(task.artifacts().len(), 1);
    let parts = &task.artifacts()[0].parts;
    assert_eq!(
        parts.len(),
        1,
        "appended plain text chunks merge into one part"
    );
    assert_eq!(parts[0].as_text(), Some("Hello, wörld!"));
    // A non-append update with the same id replaces the artifact.
    store
        .append(&scope, &id, 6, &chunk(&id, "ctx", "new", false, true))
        .await
        .unwrap();
    let task = store.get(&scope, &id).await.unwrap().unwrap().task;
    assert_eq!(task.artifacts()[0].parts[0].as_text(), Some("new"));
}

async fn list_filters_and_shapes(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let base = time::now();
    let mut ids = Vec::new();
    for i in 0..5i64 {
        let id = new_id();
        let ctx = if i % 2 == 0 { "even" } else { "odd" };
        let at = base + Duration::milliseconds(i * 10);
        store
            .append(&scope, &id, 1, &StreamResponse::Task(task_at(&id, ctx, at)))
            .await
            .unwrap();
        store
            .append(&scope, &id, 2, &chunk(&id, ctx, "x", false, true))
            .await
            .unwrap();
        if i == 4 {
            store
                .append(&scope, &id, 3, &status(&id, ctx, TaskState::Completed, at))
                .await
                .unwrap();
        }
        ids.push(id);
    }
    let q = |f: fn(&mut TaskQuery)| {
        let mut q = TaskQuery {
            page_size: 50,
            ..Default::default()
        };
        f(&mut q);
        q
    };
    let all = store.list(&scope, &q(|_| {})).await.unwrap();
    assert_eq!(all.total, 5);
    assert!(all.next.is_none());
    let order: Vec<&str> = all.tasks.iter().map(|t| t.id.as_str()).collect();
    let expected: Vec<&str> = ids.iter().rev().map(String::as_str).collect();
    assert_eq!(order, expected, "newest status first");
    assert!(
        all.tasks.iter().all(|t| t.artifacts.is_none()),
        "artifacts absent unless asked"
    );
    assert!(
        all.tasks.iter().all(|t| !t.history().is_empty()),
        "history kept by default"
    );

    let with = store
        .list(&scope, &q(|q| q.include_artifacts = true))
        .await
        .unwrap();
    assert!(with.tasks.iter().all(|t| t.artifacts().len() == 1));
    let no_hist = store
        .list(&scope, &q(|q| q.history_length = Some(0)))
        .await
        .unwrap();
    assert!(no_hist.tasks.iter().all(|t| t.history.is_none()));

    let odd = store
        .list(&scope, &q(|q| q.context_id = Some("odd".into())))
        .await
        .unwrap();
    assert_eq!(odd.total, 2);
    assert!(odd.tasks.iter().all(|t| t.context_id == "odd"));
    let done = store
        .list(&scope, &q(|q| q.status = Some(TaskState::Completed)))
        .await
        .unwrap();
    assert_eq!(
        done.tasks.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        vec![ids[4].clone()]
    );
    let any = store
        .list(&scope, &q(|q| q.status = Some(TaskState::Unspecified)))
        .await
        .unwrap();
    assert_eq!(any.total, 5);
    let mut recent = q(|_| {});
    recent.status_timestamp_after = Some(base + Duration::milliseconds(20));
    let recent = store.list(&scope, &recent).await.unwrap();
    assert_eq!(recent.total, 3, "status timestamp at or after the bound");
}

async fn list_paging_equal_timestamps_and_inserts(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let at = time::now();
    let mut ids: Vec<String> = (0..7).map(|_| new_id()).collect();
    for id in &ids {
        store
            .append(&scope, id, 1, &StreamResponse::Task(task_at(id, "ctx", at)))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut cursor: Option<PageCursor> = None;
    let mut pages = 0;
    loop {
        let q = TaskQuery {
            page_size: 3,
            cursor: cursor.clone(),
            ..Default::default()
        };
        let page = store.list(&scope, &q).await.unwrap();
        pages += 1;
        if pages == 1 {
            // A task inserted between pages, newer than everything: it belongs before
            // the cursor and must not disturb the following pages.
            let late = new_id();
            let newer = at + Duration::seconds(1);
            store
                .append(
                    &scope,
                    &late,
                    1,
                    &StreamResponse::Task(task_at(&late, "ctx", newer)),
                )
                .await
                .unwrap();
            // And one with the same timestamp whose id sorts before every other id:
            // it also belongs before the cursor when the cursor is past it.
            let early = format!("0000-{}", new_id());
            store
                .append(
                    &scope,
                    &early,
                    1,
                    &StreamResponse::Task(task_at(&early, "ctx", at)),
                )
                .await
                .unwrap();
            ids.push(early);
        }
        seen.extend(page.tasks.iter().map(|t| t.id.clone()));
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
        assert!(pages < 10, "paging does not terminate");
    }
    let mut dedup = seen.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), seen.len(), "no task twice: {seen:?}");
    for id in ids.iter().take(7) {
        assert!(seen.contains(id), "task {id} missing from pages {seen:?}");
    }
}

/// The pages of `query` from its cursor on, until a page without a next one; each
/// page must count the five tasks of [`list_pages_end_at_the_byte_bound`].
async fn pages_of(store: &dyn TaskStore, scope: &Scope, query: &TaskQuery) -> Vec<Vec<Task>> {
    let mut pages = Vec::new();
    let mut query = query.clone();
    loop {
        let page = store.list(scope, &query).await.unwrap();
        assert_eq!(page.total, 5, "totalSize counts every page's tasks");
        pages.push(page.tasks);
        match page.next {
            Some(c) => query.cursor = Some(c),
            None => return pages,
        }
        assert!(pages.len() < 10, "paging does not terminate");
    }
}

/// A ListTasks page ends before the task that would take it past `max_bytes` (with a
/// cursor to the rest), always holds one task, and counts artifacts only when they
/// are listed: pages of about 100 KB tasks under a 250,000-byte bound.
async fn list_pages_end_at_the_byte_bound(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let base = time::now();
    let mut ids = Vec::new();
    for i in 0..5i64 {
        let id = new_id();
        let at = base + Duration::milliseconds(i * 10);
        let mut seq = 1;
        let mut put = |e: StreamResponse| {
            let s = seq;
            seq += 1;
            let (scope, id) = (&scope, &id);
            async move { store.append(scope, id, s, &e).await.unwrap() }
        };
        put(StreamResponse::Task(task_at(&id, "ctx", at))).await;
        // One whole chunk, or ten of 10,000 bytes; completed (compacted on the SQL
        // stores) or still working (chunk events pending after the checkpoint).
        let letter = char::from(b'a' + i as u8);
        if i % 2 == 0 {
            put(chunk(
                &id,
                "ctx",
                &letter.to_string().repeat(100_000),
                false,
                true,
            ))
            .await;
        } else {
            for k in 0..10 {
                let text = letter.to_string().repeat(10_000);
                put(chunk(&id, "ctx", &text, k > 0, k == 9)).await;
            }
        }
        if i < 3 {
            put(status(&id, "ctx", TaskState::Completed, at)).await;
        }
        ids.push(id);
    }
    ids.reverse(); // newest status first
    let query = TaskQuery {
        page_size: 50,
        include_artifacts: true,
        max_bytes: Some(250_000),
        ..Default::default()
    };
    let pages = pages_of(store, &scope, &query).await;
    let listed: Vec<Vec<&str>> = pages
        .iter()
        .map(|p| p.iter().map(|t| t.id.as_str()).collect())
        .collect();
    assert_eq!(
        listed,
        vec![
            vec![&ids[0], &ids[1]],
            vec![&ids[2], &ids[3]],
            vec![&ids[4]]
        ],
        "two tasks of about 100 KB fit under 250,000 bytes, a third does not"
    );
    for task in pages.iter().flatten() {
        let text: usize = task.artifacts()[0]
            .parts
            .iter()
            .map(|p| match &p.content {
                crate::protocol::PartContent::Text(t) => t.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(
            text, 100_000,
            "task {} listed with its whole artifact",
            task.id
        );
    }
    let one_each = pages_of(
        store,
        &scope,
        &TaskQuery {
            max_bytes: Some(1),
            ..query.clone()
        },
    )
    .await;
    assert_eq!(
        one_each.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![1; 5],
        "a page holds one task however large"
    );
    let small = TaskQuery {
        include_artifacts: false,
        ..query.clone()
    };
    let without = pages_of(store, &scope, &small).await;
    assert_eq!(
        without.len(),
        1,
        "without artifacts the five tasks fit one page"
    );
    assert_eq!(without[0].len(), 5);
    let limited = pages_of(
        store,
        &scope,
        &TaskQuery {
            page_size: 1,
            max_bytes: None,
            ..query
        },
    )
    .await;
    assert_eq!(limited.len(), 5, "pageSize still bounds a page");
}

/// `events_after` ends a read before the event that would take it past `max_bytes`,
/// returns the first event whatever its size, and paged on from each read's last
/// event gives every event once, in order, with the bound as with `limit`: of large
/// events one at a time or a few, of small ones (which SQLite folds into rows) many.
async fn event_reads_end_at_the_byte_bound(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let id = new_id();
    let big = "y".repeat(10_000);
    let mut events = vec![StreamResponse::Task(task_at(&id, "ctx", time::now()))];
    events.extend((0..6).map(|i| chunk(&id, "ctx", &big, i > 0, false)));
    for (i, e) in events.iter().enumerate() {
        store.append(&scope, &id, i as u64 + 1, e).await.unwrap();
    }
    // 200 small chunks in one append (SQLite keeps runs of them in folded rows).
    let small: Vec<StreamResponse> = (0..200)
        .map(|i| chunk(&id, "ctx", &format!("s{i:03}"), true, i == 199))
        .collect();
    store
        .append_all(&scope, &id, &stored(events.len() as u64 + 1, &small))
        .await
        .unwrap();
    events.extend(small);
    let seqs = |got: &[StoredEvent]| got.iter().map(|e| e.seq).collect::<Vec<_>>();
    // The task (a few hundred bytes) and two chunks of about 10,100 bytes fit 25,000;
    // a third would not.
    let got = store
        .events_after(&scope, &id, 0, 100, 25_000)
        .await
        .unwrap();
    assert_eq!(seqs(&got), [1, 2, 3]);
    // A bound below the first event still returns it, alone.
    let got = store.events_after(&scope, &id, 3, 100, 1).await.unwrap();
    assert_eq!(seqs(&got), [4]);
    // `limit` still applies within the bound.
    let got = store
        .events_after(&scope, &id, 0, 2, u64::MAX)
        .await
        .unwrap();
    assert_eq!(seqs(&got), [1, 2]);
    for bound in [1, 2_000, 25_000, u64::MAX] {
        let (mut replay, mut reads) = (Vec::new(), 0);
        loop {
            let after = replay.last().map_or(0, |e: &StoredEvent| e.seq);
            let got = store
                .events_after(&scope, &id, after, 500, bound)
                .await
                .unwrap();
            if got.is_empty() {
                break;
            }
            reads += 1;
            replay.extend(got);
        }
        assert_eq!(
            seqs(&replay),
            (1..=events.len() as u64).collect::<Vec<_>>(),
            "paged with a bound of {bound} bytes"
        );
        assert_eq!(
            replay.into_iter().map(|e| e.event).collect::<Vec<_>>(),
            events
        );
        match bound {
            // The task and each large chunk a read of its own, the small ones one at
            // a time (one folded row at a time on SQLite).
            1 => assert!((8..=events.len()).contains(&reads), "{reads} reads"),
            // The same, with several small ones a read.
            2_000 => assert!((8..events.len()).contains(&reads), "{reads} reads"),
            25_000 => assert!((3..=7).contains(&reads), "{reads} reads"),
            _ => assert_eq!(reads, 1),
        }
    }
}

async fn unsettled_lists_running_tasks(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let now = time::now();
    let running = new_id();
    let done = new_id();
    let waiting = new_id();
    for id in [&running, &done, &waiting] {
        store
            .append(
                &scope,
                id,
                1,
                &StreamResponse::Task(task_at(id, "ctx", now)),
            )
            .await
            .unwrap();
    }
    store
        .append(
            &scope,
            &running,
            2,
            &status(&running, "ctx", TaskState::Working, now),
        )
        .await
        .unwrap();
    store
        .append(
            &scope,
            &done,
            2,
            &status(&done, "ctx", TaskState::Completed, now),
        )
        .await
        .unwrap();
    store
        .append(
            &scope,
            &waiting,
            2,
            &status(&waiting, "ctx", TaskState::InputRequired, now),
        )
        .await
        .unwrap();
    let found = store.unsettled(100_000).await.unwrap();
    assert!(found.contains(&(scope.clone(), running.clone())));
    assert!(!found.contains(&(scope.clone(), done.clone())));
    assert!(!found.contains(&(scope.clone(), waiting.clone())));
}

/// Many chunks of two artifacts interleaved with status updates, a full replacement
/// and a `Task` event carrying artifacts: the snapshot equals the shared fold at every
/// point checked (backends that materialize artifacts lazily must agree).
async fn long_artifact_stream_projects(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let id = new_id();
    let now = time::now();
    let mut events = vec![StreamResponse::Task(task_at(&id, "ctx", now))];
    events.push(status(&id, "ctx", TaskState::Working, now));
    let text = "0123456789abcdef".repeat(8);
    for i in 0..1500usize {
        let mut e = chunk(&id, "ctx", &format!("{i}:{text}"), i > 0, false);
        if i % 7 == 3
            && let StreamResponse::ArtifactUpdate(a) = &mut e
        {
            a.artifact.artifact_id = "side".into();
            a.append = i > 3;
        }
        events.push(e);
        if i == 700 {
            events.push(status(&id, "ctx", TaskState::Working, now));
            events.push(StreamResponse::Message(new_user_text_message(
                "more please",
            )));
        }
        if i == 900 {
            let mut t = task_at(&id, "ctx", now);
            t.status.state = TaskState::Working;
            t.artifacts = Some(vec![Artifact {
                artifact_id: "extra".into(),
                name: None,
                description: None,
                parts: vec![Part::text("from a task event")],
                metadata: None,
                extensions: vec![],
            }]);
            events.push(StreamResponse::Task(t));
        }
        if i == 1200 {
            events.push(chunk(&id, "ctx", "restart", false, false));
        }
    }
    events.push(status(&id, "ctx", TaskState::Completed, now));
    let checkpoints = [1usize, 2, 50, 703, 904, 1300, events.len()];
    let mut expected: Option<crate::protocol::Task> = None;
    for (i, e) in events.iter().enumerate() {
        store.append(&scope, &id, i as u64 + 1, e).await.unwrap();
        expected = projection::apply(expected, e);
        if checkpoints.contains(&(i + 1)) {
            let rec = store.get(&scope, &id).await.unwrap().unwrap();
            assert_eq!(rec.last_seq, i as u64 + 1);
            assert_eq!(
                Some(&rec.task),
                expected.as_ref(),
                "snapshot after event {}",
                i + 1
            );
        }
    }
    assert_eq!(
        listed_with_artifacts(store, &scope).await.as_ref(),
        expected.as_ref(),
        "ListTasks with artifacts agrees with GetTask"
    );
    let replay = store
        .events_after(&scope, &id, 0, 100_000, u64::MAX)
        .await
        .unwrap();
    assert_eq!(replay.len(), events.len());
    assert!(replay.iter().zip(&events).all(|(s, e)| &s.event == e));
}

/// The most recent task of `scope` as `ListTasks` with artifacts returns it.
async fn listed_with_artifacts(
    store: &dyn TaskStore,
    scope: &Scope,
) -> Option<crate::protocol::Task> {
    let query = TaskQuery {
        page_size: 10,
        include_artifacts: true,
        ..Default::default()
    };
    store
        .list(scope, &query)
        .await
        .unwrap()
        .tasks
        .into_iter()
        .next()
}

fn long_ago() -> Timestamp {
    // 2001-01-01T00:00:00Z: older than anything the other checks write.
    chrono::DateTime::from_timestamp_millis(978_307_200_000).expect("valid time")
}

async fn purge_removes_old_terminal_tasks(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let old = long_ago();
    let now = time::now();
    let ids: Vec<String> = (0..6).map(|_| new_id()).collect();
    let plan = [
        (TaskState::Completed, old),
        (TaskState::Failed, old),
        (TaskState::Canceled, old + Duration::hours(1)),
        (TaskState::Working, old),
        (TaskState::InputRequired, old),
        (TaskState::Completed, now),
    ];
    for (id, (state, at)) in ids.iter().zip(plan) {
        store
            .append(&scope, id, 1, &StreamResponse::Task(task_at(id, "ctx", at)))
            .await
            .unwrap();
        store
            .append(&scope, id, 2, &chunk(id, "ctx", "x", false, true))
            .await
            .unwrap();
        store
            .append(&scope, id, 3, &status(id, "ctx", state, at))
            .await
            .unwrap();
    }
    let bound = old + Duration::days(1);
    // A batch of one still purges everything eligible (in several transactions).
    let purged = store.purge_expired(bound, 1).await.unwrap();
    assert!(purged >= 3, "purged {purged}");
    for id in &ids[..3] {
        assert!(
            store.get(&scope, id).await.unwrap().is_none(),
            "old terminal task {id} purged"
        );
        assert!(
            store
                .events_after(&scope, id, 0, 10, u64::MAX)
                .await
                .unwrap()
                .is_empty(),
            "its events too"
        );
    }
    for id in &ids[3..] {
        let rec = store.get(&scope, id).await.unwrap();
        assert_eq!(rec.map(|r| r.last_seq), Some(3), "task {id} kept");
    }
    assert_eq!(
        store.purge_expired(bound, 100).await.unwrap(),
        0,
        "nothing left to purge"
    );
    // A purged id can be used again from scratch.
    store
        .append(
            &scope,
            &ids[0],
            1,
            &StreamResponse::Task(task_at(&ids[0], "ctx", now)),
        )
        .await
        .unwrap();
    assert_eq!(
        store.get(&scope, &ids[0]).await.unwrap().unwrap().last_seq,
        1
    );
    assert_eq!(
        store
            .events_after(&scope, &ids[0], 0, 10, u64::MAX)
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn expired_input_required_lists_old_waiting_tasks(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let old = long_ago();
    let now = time::now();
    let stale = new_id();
    let fresh = new_id();
    let old_working = new_id();
    for (id, state, at) in [
        (&stale, TaskState::InputRequired, old),
        (&fresh, TaskState::InputRequired, now),
        (&old_working, TaskState::Working, old),
    ] {
        store
            .append(&scope, id, 1, &StreamResponse::Task(task_at(id, "ctx", at)))
            .await
            .unwrap();
        store
            .append(&scope, id, 2, &status(id, "ctx", state, at))
            .await
            .unwrap();
    }
    let found = store
        .expired_input_required(old + Duration::days(1), 100_000)
        .await
        .unwrap();
    assert!(found.contains(&(scope.clone(), stale.clone())));
    assert!(!found.contains(&(scope.clone(), fresh.clone())));
    assert!(!found.contains(&(scope.clone(), old_working.clone())));
    // Once closed, it is no longer reported.
    store
        .append(
            &scope,
            &stale,
            3,
            &status(&stale, "ctx", TaskState::Canceled, old),
        )
        .await
        .unwrap();
    let found = store
        .expired_input_required(old + Duration::days(1), 100_000)
        .await
        .unwrap();
    assert!(!found.contains(&(scope.clone(), stale.clone())));
}

fn stored(first_seq: u64, events: &[StreamResponse]) -> Vec<Arc<StoredEvent>> {
    events
        .iter()
        .enumerate()
        .map(|(i, e)| Arc::new(StoredEvent::new(first_seq + i as u64, e.clone())))
        .collect()
}

/// Chunk `i` of a streamed reply as a runtime's reply streams (only the first chunk
/// names the artifact), every so often in another shape a store must keep as it is:
/// metadata on the event or the part, another artifact, two parts, a media type, a
/// data part, `lastChunk` set (the memory store keeps a plain chunk as its text only).
fn reply_chunk(id: &str, i: usize, text: &str) -> StreamResponse {
    let mut c = chunk(id, "ctx", text, i > 0, false);
    let StreamResponse::ArtifactUpdate(u) = &mut c else {
        unreachable!()
    };
    if i > 0 {
        u.artifact.name = None;
    }
    let meta: crate::protocol::Metadata =
        serde_json::from_value(serde_json::json!({"i": i})).unwrap();
    match i % 97 {
        11 => u.metadata = Some(meta),
        23 => u.artifact.metadata = Some(meta),
        31 | 32 => u.artifact.artifact_id = "side".into(),
        47 => u.artifact.parts.push(Part::text("+")),
        53 => u.artifact.parts[0].media_type = Some("text/markdown".into()),
        61 => u.artifact.parts[0].metadata = Some(meta),
        67 => u.artifact.parts = vec![Part::data(serde_json::json!({"i": i}))],
        71 => u.artifact.extensions = vec!["https://example.com/ext".into()],
        79 => u.artifact.description = Some("the reply".into()),
        83 => u.last_chunk = true,
        _ => {}
    }
    c
}

/// The events of a long stream written with `append_all` in groups of uneven sizes
/// (the first one creating the task, one group spanning an artifact checkpoint
/// compaction): after each group the snapshot equals the fold of every event so far,
/// and the log replays every event once, in order.
async fn grouped_appends_fold_like_single_ones(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let id = new_id();
    let now = time::now();
    let text = "0123456789abcdef".repeat(8);
    let mut events = vec![
        StreamResponse::Task(task_at(&id, "ctx", now)),
        status(&id, "ctx", TaskState::Working, now),
    ];
    for i in 0..1200usize {
        events.push(reply_chunk(&id, i, &format!("{i}:{text}")));
        if i == 400 {
            events.push(status(&id, "ctx", TaskState::InputRequired, now));
            events.push(StreamResponse::Message(new_user_text_message("go on")));
            events.push(status(&id, "ctx", TaskState::Working, now));
        }
    }
    events.push(chunk(&id, "ctx", "end", true, true));
    events.push(status(&id, "ctx", TaskState::Completed, now));
    let sizes = [3usize, 1, 2, 7, 1, 64, 500, 13, 128];
    let mut at = 0usize;
    let mut expected: Option<crate::protocol::Task> = None;
    let mut k = 0;
    while at < events.len() {
        let n = sizes[k % sizes.len()].min(events.len() - at);
        k += 1;
        let group = &events[at..at + n];
        store
            .append_all(&scope, &id, &stored(at as u64 + 1, group))
            .await
            .unwrap();
        for e in group {
            expected = projection::apply(expected, e);
        }
        at += n;
        let rec = store.get(&scope, &id).await.unwrap().unwrap();
        assert_eq!(rec.last_seq, at as u64);
        assert_eq!(
            Some(&rec.task),
            expected.as_ref(),
            "snapshot after event {at}"
        );
    }
    let mut replay = Vec::new();
    while replay.len() < events.len() {
        let more = store
            .events_after(&scope, &id, replay.len() as u64, 500, u64::MAX)
            .await
            .unwrap();
        assert!(!more.is_empty());
        replay.extend(more);
    }
    assert_eq!(
        replay.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=events.len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(
        replay.into_iter().map(|e| e.event).collect::<Vec<_>>(),
        events
    );
    // Reading on from any event, a few at a time: a store that keeps a run of events
    // in one row (SQLite folds consecutive chunks) returns the same events from a
    // cursor inside the run, numbered as they were appended.
    for (k, after) in (0..=events.len()).step_by(7).enumerate() {
        let limit = 1 + k % 3;
        let got = store
            .events_after(&scope, &id, after as u64, limit, u64::MAX)
            .await
            .unwrap();
        let want: Vec<(u64, &StreamResponse)> = (after + 1..=events.len())
            .take(limit)
            .map(|seq| (seq as u64, &events[seq - 1]))
            .collect();
        assert_eq!(
            got.iter().map(|e| (e.seq, &e.event)).collect::<Vec<_>>(),
            want,
            "events after {after}, at most {limit}"
        );
    }
}

/// A reply of about 3 MiB streamed in chunks of 48 KiB, written as the task driver
/// writes (`append_all_folded`, groups of uneven sizes): the artifact checkpoint is
/// rewritten several times at megabyte sizes (a SQL store writes those by a statement
/// of their own) and the snapshot equals the fold of every event after each group,
/// after the task settles, and in `ListTasks` with artifacts.
async fn checkpoint_of_megabytes_reads_back_whole(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let id = new_id();
    let now = time::now();
    let mut events = vec![
        StreamResponse::Task(task_at(&id, "ctx", now)),
        status(&id, "ctx", TaskState::Working, now),
    ];
    for i in 0..64usize {
        // Each chunk differs all along its length, so a slice taken from the wrong
        // place or of the wrong length cannot read back equal.
        let text: String = (0..48 * 1024)
            .map(|k| char::from(b'a' + ((i + k) % 26) as u8))
            .collect();
        events.push(reply_chunk(&id, i, &text));
    }
    events.push(status(&id, "ctx", TaskState::Completed, now));
    let sizes = [2usize, 5, 1, 9, 17, 3];
    let (mut at, mut k) = (0usize, 0usize);
    let mut expected: Option<crate::protocol::Task> = None;
    while at < events.len() {
        let n = sizes[k % sizes.len()].min(events.len() - at);
        k += 1;
        let group = &events[at..at + n];
        for e in group {
            expected = projection::apply(expected, e);
        }
        let folded: FoldedArtifacts = Arc::new(expected.as_ref().and_then(|t| t.artifacts.clone()));
        store
            .append_all_folded(&scope, &id, &stored(at as u64 + 1, group), &folded)
            .await
            .unwrap();
        at += n;
        let rec = store.get(&scope, &id).await.unwrap().unwrap();
        assert_eq!(rec.last_seq, at as u64);
        assert!(
            rec.task == *expected.as_ref().unwrap(),
            "snapshot after event {at} differs from the fold"
        );
    }
    let artifacts = expected.as_ref().and_then(|t| t.artifacts.as_ref());
    let bytes = serde_json::to_string(&artifacts).unwrap().len();
    assert!(bytes > 3 * 1024 * 1024, "{bytes} bytes of artifacts");
    assert!(
        listed_with_artifacts(store, &scope).await == expected,
        "ListTasks with artifacts agrees"
    );
}

/// A refused `append_all` writes none of its events.
async fn grouped_append_is_all_or_nothing(store: &dyn TaskStore) {
    let scope = fresh_scope();
    let id = new_id();
    let now = time::now();
    let created = StreamResponse::Task(task_at(&id, "ctx", now));
    let working = status(&id, "ctx", TaskState::Working, now);
    let done = status(&id, "ctx", TaskState::Completed, now);
    store.append_all(&scope, &id, &[]).await.unwrap();
    assert!(store.get(&scope, &id).await.unwrap().is_none());
    // A new task's first event must be a Task.
    assert!(matches!(
        store
            .append_all(&scope, &id, &stored(1, &[working.clone(), created.clone()]))
            .await,
        Err(StoreError::InvalidEvent(_))
    ));
    // Numbers with a gap.
    let mut gap = stored(1, &[created.clone(), working.clone()]);
    gap[1] = Arc::new(StoredEvent::new(3, working.clone()));
    assert!(matches!(
        store.append_all(&scope, &id, &gap).await,
        Err(StoreError::InvalidEvent(_))
    ));
    assert!(store.get(&scope, &id).await.unwrap().is_none());
    store
        .append_all(&scope, &id, &stored(1, &[created.clone(), working.clone()]))
        .await
        .unwrap();
    // Starting at a taken number: nothing of the group is written.
    assert!(matches!(
        store
            .append_all(&scope, &id, &stored(2, &[working.clone(), done.clone()]))
            .await,
        Err(StoreError::Conflict { expected: 3, .. })
    ));
    let rec = store.get(&scope, &id).await.unwrap().unwrap();
    assert_eq!(rec.last_seq, 2);
    assert_eq!(rec.task.status.state, TaskState::Working);
    assert_eq!(
        store
            .events_after(&scope, &id, 0, 10, u64::MAX)
            .await
            .unwrap()
            .len(),
        2
    );
    // Creating an existing task again is a conflict too.
    assert!(matches!(
        store
            .append_all(&scope, &id, &stored(1, &[created.clone(), done.clone()]))
            .await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(store.get(&scope, &id).await.unwrap().unwrap().last_seq, 2);
}

/// An upstream link ([`TaskStore::put_upstream_link`]) reads back in its scope only, is
/// replaced by a second put, and is purged with its task.
async fn upstream_links_round_trip_and_go_with_their_task(store: &dyn TaskStore) {
    use crate::executor::UpstreamLink;
    let scope = fresh_scope();
    let id = new_id();
    let link = |n: u32| UpstreamLink {
        upstream_task_id: format!("up-task-{n}"),
        upstream_context_id: format!("up-ctx-{n}"),
        session_id: format!("a2a-session-{n}"),
    };
    assert_eq!(store.upstream_link(&scope, &id).await.unwrap(), None);
    store
        .append(
            &scope,
            &id,
            1,
            &StreamResponse::Task(task_at(&id, "ctx", long_ago())),
        )
        .await
        .unwrap();
    store
        .put_upstream_link(&scope, &id, &link(1))
        .await
        .unwrap();
    assert_eq!(
        store.upstream_link(&scope, &id).await.unwrap(),
        Some(link(1))
    );
    assert_eq!(
        store.upstream_link(&fresh_scope(), &id).await.unwrap(),
        None
    );
    store
        .put_upstream_link(&scope, &id, &link(2))
        .await
        .unwrap();
    assert_eq!(
        store.upstream_link(&scope, &id).await.unwrap(),
        Some(link(2))
    );
    store
        .append(
            &scope,
            &id,
            2,
            &status(&id, "ctx", TaskState::Completed, long_ago()),
        )
        .await
        .unwrap();
    store
        .purge_expired(long_ago() + Duration::days(1), 10)
        .await
        .unwrap();
    assert!(store.get(&scope, &id).await.unwrap().is_none());
    assert_eq!(
        store.upstream_link(&scope, &id).await.unwrap(),
        None,
        "purged with its task"
    );
}
