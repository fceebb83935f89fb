//! One scenario table run against every binding the gateway serves (spec §5: the
//! bindings must behave equivalently), over real sockets: each scenario is written once
//! against the [`Binding`] client trait, runs on JSON-RPC, HTTP+JSON and gRPC, and the
//! normalized transcripts must be equal. Then cross-binding checks: a task created on
//! one binding is read, streamed, resumed and canceled on another.
//!
//! gRPC has no SSE event ids, so no `Last-Event-ID` resume: the resume scenarios run on
//! the HTTP bindings only, and event ids are left out when a transcript is compared
//! with gRPC's. Its content type is the gRPC framing, and its requests are typed
//! protobuf: error cases that send another content type or JSON the proto cannot hold
//! are HTTP-only (see [`scenarios::every_error`]).

mod bindings_common;

use std::time::Duration;

use a2a_gateway::test_util::user_message as message;
use bindings_common::client::{Binding, Codes, Event, Events, Failure, Operation, Opts};
use bindings_common::server::{Server, start};
use futures::StreamExt;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

/// Ids, timestamps and page tokens differ between runs: masked so transcripts compare.
fn normalize(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let masked = match (k.as_str(), v) {
                        (
                            "id" | "taskId" | "contextId" | "messageId" | "artifactId",
                            Value::String(_),
                        ) => json!("<id>"),
                        ("timestamp", Value::String(_)) => json!("<time>"),
                        ("nextPageToken", Value::String(s)) if !s.is_empty() => json!("<token>"),
                        _ => normalize(v),
                    };
                    (k.clone(), masked)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalize).collect()),
        v => v.clone(),
    }
}

fn state_of(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or("<none>")
}

async fn unary(b: &dyn Binding, op: Operation, req: Value) -> Value {
    match b.unary(op, req.clone(), &Opts::default()).await {
        Ok(v) => v,
        Err(f) => panic!("{} {} {req}: {f:?}", b.name(), op.name()),
    }
}

async fn send(b: &dyn Binding, req: Value) -> Value {
    unary(b, Operation::SendMessage, req).await["task"].clone()
}

async fn send_text(b: &dyn Binding, text: &str) -> Value {
    send(b, json!({"message": message(text)})).await
}

async fn send_now(b: &dyn Binding, text: &str) -> Value {
    send(
        b,
        json!({"message": message(text), "configuration": {"returnImmediately": true}}),
    )
    .await
}

async fn get(b: &dyn Binding, id: &str) -> Value {
    unary(b, Operation::GetTask, json!({"id": id})).await
}

async fn open(b: &dyn Binding, op: Operation, req: Value, opts: &Opts) -> Events {
    match tokio::time::timeout(WAIT, b.stream(op, req, opts)).await {
        Ok(Ok(events)) => events,
        Ok(Err(f)) => panic!("{} {}: {f:?}", b.name(), op.name()),
        Err(_) => panic!("{} {}: no answer", b.name(), op.name()),
    }
}

async fn next(events: &mut Events) -> Option<Event> {
    match tokio::time::timeout(WAIT, events.next()).await {
        Ok(item) => item.map(|r| r.expect("no error event")),
        Err(_) => panic!("no event within {WAIT:?}"),
    }
}

async fn rest_of(mut events: Events) -> Vec<Event> {
    let mut out = vec![];
    while let Some(ev) = next(&mut events).await {
        out.push(ev);
    }
    out
}

/// The events up to the artifact `part 1` of a `gated` task (the stream stays open).
async fn until_part_one(events: &mut Events) -> Vec<Event> {
    let mut seen = vec![];
    loop {
        let ev = next(events).await.expect("the stream reaches part 1");
        let done = ev.body["artifactUpdate"]["artifact"]["parts"][0]["text"] == "part 1";
        seen.push(ev);
        if done {
            return seen;
        }
    }
}

/// Polls until `id` has the artifact `part 1`, so a snapshot taken afterwards is the
/// same on every run.
async fn wait_for_part_one(b: &dyn Binding, id: &str) {
    for _ in 0..200 {
        let t = get(b, id).await;
        if t["artifacts"][0]["parts"][0]["text"] == "part 1" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("task {id} never reached part 1");
}

/// Whether `b` has event ids and `Last-Event-ID` resume: the SSE bindings do; gRPC
/// streams carry no id, and a gRPC subscription always starts from the task snapshot.
fn resumable(b: &dyn Binding) -> bool {
    b.name() != "GRPC"
}

/// `transcript` without event ids (the entries [`transcript`] makes), to compare a
/// binding with ids against one without.
fn without_event_ids(transcript: &[Value]) -> Vec<Value> {
    transcript
        .iter()
        .map(|entry| match entry {
            Value::Object(m) if m.len() == 2 && m.contains_key("event") => {
                json!({"event": m["event"]})
            }
            other => other.clone(),
        })
        .collect()
}

fn transcript(events: &[Event]) -> Vec<Value> {
    events
        .iter()
        .map(|e| json!({"id": e.id, "event": normalize(&e.body)}))
        .collect()
}

fn assert_ids_increase(b: &dyn Binding, events: &[Event]) {
    if !resumable(b) {
        assert!(events.iter().all(|e| e.id.is_none()), "{}", b.name());
        return;
    }
    let ids: Vec<u64> = events
        .iter()
        .map(|e| e.id.expect("every event has an id"))
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
}

/// Each scenario: the transcript (normalized results) it saw on one binding. Each also
/// asserts the behaviour it names.
mod scenarios {
    use super::*;

    pub async fn send_blocking(_: &Server, b: &dyn Binding) -> Vec<Value> {
        let task = send_text(b, "echo hi").await;
        assert_eq!(state_of(&task), "TASK_STATE_COMPLETED");
        assert_eq!(task["artifacts"][0]["parts"][0]["text"], "echo: hi");
        vec![normalize(&task)]
    }

    pub async fn send_streaming(_: &Server, b: &dyn Binding) -> Vec<Value> {
        let events = rest_of(
            open(
                b,
                Operation::SendStreamingMessage,
                json!({"message": message("echo streamed")}),
                &Opts::default(),
            )
            .await,
        )
        .await;
        assert!(events[0].body.get("task").is_some(), "the task comes first");
        let last = &events.last().unwrap().body;
        assert_eq!(
            last["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        assert_ids_increase(b, &events);
        transcript(&events)
    }

    pub async fn get_task(_: &Server, b: &dyn Binding) -> Vec<Value> {
        let task = send_text(b, "echo get me").await;
        let id = task["id"].as_str().unwrap();
        let full = get(b, id).await;
        assert_eq!(full["id"], id);
        let short = unary(b, Operation::GetTask, json!({"id": id, "historyLength": 1})).await;
        assert!(short["history"].as_array().map_or(0, Vec::len) <= 1);
        let none = unary(b, Operation::GetTask, json!({"id": id, "historyLength": 0})).await;
        assert!(none.get("history").is_none(), "{none}");
        vec![normalize(&full), normalize(&short), normalize(&none)]
    }

    pub async fn list_with_paging(_: &Server, b: &dyn Binding) -> Vec<Value> {
        let context = uuid::Uuid::new_v4().to_string();
        for i in 0..3 {
            let mut m = message(&format!("echo {i}"));
            m["contextId"] = json!(context);
            send(b, json!({"message": m})).await;
            // Pages are ordered by status time (milliseconds), then id: tasks finished
            // in one millisecond would come in id (random) order and the bindings'
            // pages would differ by chance. A wall-clock gap keeps the order fixed.
            tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        }
        let first = unary(
            b,
            Operation::ListTasks,
            json!({"contextId": context, "pageSize": 2}),
        )
        .await;
        assert_eq!(first["tasks"].as_array().unwrap().len(), 2);
        assert_eq!(first["totalSize"], 3);
        assert!(
            first["tasks"][0].get("artifacts").is_none(),
            "artifacts omitted by default"
        );
        let token = first["nextPageToken"].as_str().unwrap().to_owned();
        assert!(!token.is_empty());
        let second = unary(
            b,
            Operation::ListTasks,
            json!({"contextId": context, "pageSize": 2, "pageToken": token, "includeArtifacts": true,
                   "status": "TASK_STATE_COMPLETED", "historyLength": 0}),
        )
        .await;
        assert_eq!(second["tasks"].as_array().unwrap().len(), 1);
        assert_eq!(second["nextPageToken"], "");
        assert!(second["tasks"][0]["artifacts"].is_array());
        let none = unary(
            b,
            Operation::ListTasks,
            json!({"contextId": context, "status": "TASK_STATE_WORKING"}),
        )
        .await;
        assert_eq!(none["tasks"], json!([]));
        vec![normalize(&first), normalize(&second), normalize(&none)]
    }

    /// ListTasks pages under the default byte bound (4 MiB of stored JSON), through
    /// each binding's default client (gRPC's takes messages of 4 MiB at most): tasks of
    /// about 3 MB with their artifacts come one per page, about 1.5 MB without.
    pub async fn list_pages_by_bytes(_: &Server, b: &dyn Binding) -> Vec<Value> {
        let context = uuid::Uuid::new_v4().to_string();
        let big = "x".repeat(1_500_000);
        for i in 0..3 {
            let mut m = message(&format!("echo {i}{big}"));
            m["contextId"] = json!(context);
            let task = send(
                b,
                json!({"message": m, "configuration": {"historyLength": 0}}),
            )
            .await;
            assert_eq!(state_of(&task), "TASK_STATE_COMPLETED");
            // A fixed order (see list_with_paging).
            tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        }
        let mut transcript = Vec::new();
        for include in [true, false] {
            let mut token = String::new();
            let mut sizes = Vec::new();
            loop {
                let page = unary(
                    b,
                    Operation::ListTasks,
                    json!({"contextId": context, "includeArtifacts": include,
                           "historyLength": 0, "pageToken": token}),
                )
                .await;
                assert_eq!(page["totalSize"], 3);
                let tasks = page["tasks"].as_array().unwrap();
                for t in tasks {
                    let text = t["artifacts"][0]["parts"][0]["text"].as_str();
                    if include {
                        assert_eq!(
                            text.map(str::len),
                            Some(1_500_007),
                            "whole artifact: `echo: ` and the text"
                        );
                    } else {
                        assert!(t.get("artifacts").is_none());
                    }
                }
                sizes.push(tasks.len());
                token = page["nextPageToken"].as_str().unwrap().to_owned();
                if token.is_empty() {
                    break;
                }
                assert!(sizes.len() < 5, "paging does not terminate");
            }
            transcript.push(json!({"includeArtifacts": include, "pages": sizes}));
        }
        assert_eq!(transcript[0]["pages"], json!([1, 1, 1]));
        assert_eq!(transcript[1]["pages"], json!([2, 1]));
        transcript
    }

    /// ListTasks pages of tasks with data parts: within the default bound as JSON
    /// (five tasks of about 200 KB), several times larger as protobuf (a `Value` of
    /// about 11 bytes for each `0,`): gRPC cuts its pages to fit the same bound in
    /// its own encoding, so a default client (4 MiB messages) still gets every task.
    pub async fn list_pages_of_data_parts(_: &Server, b: &dyn Binding) -> Vec<Value> {
        let context = uuid::Uuid::new_v4().to_string();
        for _ in 0..5 {
            let mut m = message("data 100000");
            m["contextId"] = json!(context);
            let task = send(b, json!({"message": m})).await;
            assert_eq!(state_of(&task), "TASK_STATE_COMPLETED");
        }
        let (mut token, mut pages, mut seen) = (String::new(), Vec::new(), Vec::new());
        loop {
            let page = unary(
                b,
                Operation::ListTasks,
                json!({"contextId": context, "includeArtifacts": true, "pageToken": token}),
            )
            .await;
            let tasks = page["tasks"].as_array().unwrap();
            for t in tasks {
                let zeros = t["artifacts"][0]["parts"][0]["data"]["v"]
                    .as_array()
                    .map(Vec::len);
                assert_eq!(zeros, Some(100_000), "whole data part");
                seen.push(t["id"].as_str().unwrap().to_owned());
            }
            pages.push(tasks.len());
            token = page["nextPageToken"].as_str().unwrap().to_owned();
            if token.is_empty() {
                break;
            }
            assert!(pages.len() < 20, "paging does not terminate");
        }
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 5, "every task once: {seen:?}");
        if b.name() == "GRPC" {
            assert!(
                pages.len() > 1 && pages.iter().all(|&n| n >= 1),
                "{pages:?}"
            );
        } else {
            assert_eq!(pages, vec![5], "one JSON page of about 1 MB");
        }
        vec![json!({"tasks": sorted.len()})]
    }

    pub async fn cancel(_: &Server, b: &dyn Binding) -> Vec<Value> {
        let task = send_now(b, "hold").await;
        let id = task["id"].as_str().unwrap();
        assert!(matches!(
            state_of(&task),
            "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING"
        ));
        // A message to the working task (taskId, no contextId) is accepted at once
        // and queued behind the running turn (issue 15).
        let mut more = message("and one more thing");
        more["taskId"] = json!(id);
        let queued = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            send(
                b,
                json!({"message": more, "configuration": {"returnImmediately": true}}),
            ),
        )
        .await
        .expect("answered without waiting for the running turn");
        assert_eq!(state_of(&queued), "TASK_STATE_WORKING", "{queued}");
        let last = queued["history"].as_array().unwrap().last().unwrap();
        assert_eq!(last["messageId"], more["messageId"]);
        assert_eq!(last["contextId"], task["contextId"]);
        let canceled = unary(b, Operation::CancelTask, json!({"id": id})).await;
        assert_eq!(state_of(&canceled), "TASK_STATE_CANCELED");
        assert_eq!(state_of(&get(b, id).await), "TASK_STATE_CANCELED");
        // Cancel is idempotent: the CANCELED task again.
        let again = unary(b, Operation::CancelTask, json!({"id": id})).await;
        assert_eq!(state_of(&again), "TASK_STATE_CANCELED");
        vec![json!(state_of(&canceled)), json!(state_of(&again))]
    }

    pub async fn subscribe(s: &Server, b: &dyn Binding) -> Vec<Value> {
        let task = send_now(b, "gated").await;
        let id = task["id"].as_str().unwrap();
        wait_for_part_one(b, id).await;
        let mut events = open(
            b,
            Operation::SubscribeToTask,
            json!({"id": id}),
            &Opts::default(),
        )
        .await;
        let first = next(&mut events).await.unwrap();
        assert_eq!(
            first.body["task"]["id"], id,
            "the first event is the task snapshot"
        );
        s.gate.notify_one();
        let mut all = vec![first];
        all.extend(rest_of(events).await);
        let last = &all.last().unwrap().body;
        assert_eq!(
            last["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        transcript(&all)
    }

    pub async fn resume_with_last_event_id(s: &Server, b: &dyn Binding) -> Vec<Value> {
        let mut events = open(
            b,
            Operation::SendStreamingMessage,
            json!({"message": message("gated")}),
            &Opts::default(),
        )
        .await;
        let seen = until_part_one(&mut events).await;
        drop(events);
        let id = seen[0].body["task"]["id"].as_str().unwrap().to_owned();
        let cursor = seen.last().unwrap().id.expect("events carry ids");
        let resumed = open(
            b,
            Operation::SubscribeToTask,
            json!({"id": id}),
            &Opts::resume_after(cursor),
        )
        .await;
        s.gate.notify_one();
        let rest = rest_of(resumed).await;
        assert!(
            rest.iter().all(|e| e.id.unwrap() > cursor),
            "nothing replayed twice"
        );
        assert_eq!(
            rest[0].body["artifactUpdate"]["artifact"]["parts"][0]["text"],
            "part 2"
        );
        let mut all = seen;
        all.extend(rest);
        assert_ids_increase(b, &all);
        transcript(&all)
    }

    /// A resume from the start of a task that waits for input (its live events quiet,
    /// its stream open) whose replay is larger than one read from the store (1 MiB):
    /// every event comes once, in order, without waiting for a live one.
    pub async fn resume_a_large_replay_waiting_for_input(
        _: &Server,
        b: &dyn Binding,
    ) -> Vec<Value> {
        let task = send_text(b, "big 4 600000").await;
        assert_eq!(state_of(&task), "TASK_STATE_INPUT_REQUIRED");
        let id = task["id"].as_str().unwrap();
        let mut events = open(
            b,
            Operation::SubscribeToTask,
            json!({"id": id}),
            &Opts::resume_after(0),
        )
        .await;
        let mut all = vec![];
        loop {
            let ev = next(&mut events)
                .await
                .expect("the replay reaches INPUT_REQUIRED");
            let waiting = ev.body["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED";
            all.push(ev);
            if waiting {
                break;
            }
        }
        assert_ids_increase(b, &all);
        let ids: Vec<u64> = all.iter().map(|e| e.id.unwrap()).collect();
        assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
        // The chunks' texts by length (600,000 each) rather than whole in the transcript.
        all.iter()
            .map(|e| {
                let text = &e.body["artifactUpdate"]["artifact"]["parts"][0]["text"];
                match text.as_str() {
                    Some(t) => json!({"id": e.id, "chunk": t.len()}),
                    None => json!({"id": e.id, "event": normalize(&e.body)}),
                }
            })
            .collect()
    }

    pub async fn input_required_follow_up(_: &Server, b: &dyn Binding) -> Vec<Value> {
        let task = send_text(b, "ask").await;
        assert_eq!(state_of(&task), "TASK_STATE_INPUT_REQUIRED");
        let mut follow = message("the blue one");
        follow["taskId"] = task["id"].clone();
        follow["contextId"] = task["contextId"].clone();
        let done = send(b, json!({"message": follow})).await;
        assert_eq!(done["id"], task["id"]);
        assert_eq!(state_of(&done), "TASK_STATE_COMPLETED");
        assert_eq!(done["artifacts"][0]["parts"][0]["text"], "got the blue one");
        vec![normalize(&task), normalize(&done)]
    }

    pub async fn extended_card(_: &Server, b: &dyn Binding) -> Vec<Value> {
        let card = unary(b, Operation::GetExtendedAgentCard, json!({})).await;
        assert_eq!(card["name"], "scripted+");
        vec![card["name"].clone()]
    }

    /// Push configs: created (inline and by the operation), read with secrets
    /// redacted, listed, deleted; and the task's events POSTed, in order and signed,
    /// to the inline config's URL.
    pub async fn push_configs(s: &Server, b: &dyn Binding) -> Vec<Value> {
        let path = format!("/hook/{}", b.name());
        let hook = format!("{}{path}", s.hooks.url);
        let task = send(
            b,
            json!({"message": message("echo pushed"), "configuration": {
                "taskPushNotificationConfig": {"id": "inline", "url": hook, "token": "tok-1"}}}),
        )
        .await;
        assert_eq!(state_of(&task), "TASK_STATE_COMPLETED");
        let id = task["id"].as_str().unwrap().to_owned();
        let calls = s
            .hooks
            .wait_for(&path, |c| {
                c.iter()
                    .any(|h| String::from_utf8_lossy(&h.body).contains("TASK_STATE_COMPLETED"))
            })
            .await;
        let kinds: Vec<Value> = calls
            .iter()
            .map(|h| {
                assert_eq!(h.headers["content-type"], "application/json");
                assert_eq!(h.headers["x-a2a-notification-token"], "tok-1");
                assert!(
                    h.headers["webhook-signature"]
                        .to_str()
                        .unwrap()
                        .starts_with("v1a,")
                );
                let ev: Value = serde_json::from_slice(&h.body).unwrap();
                let (kind, body) = ev.as_object().unwrap().iter().next().unwrap();
                assert_eq!(
                    body["taskId"].as_str().or(body["id"].as_str()),
                    Some(id.as_str())
                );
                json!([kind, body["status"]["state"]])
            })
            .collect();
        let created = unary(
            b,
            Operation::CreateTaskPushNotificationConfig,
            json!({"taskId": id, "id": "second", "url": format!("{hook}/2"), "token": "tok-2",
                   "authentication": {"scheme": "Bearer", "credentials": "cred-2"}}),
        )
        .await;
        assert_eq!(created["id"], "second");
        let got = unary(
            b,
            Operation::GetTaskPushNotificationConfig,
            json!({"taskId": id, "id": "second"}),
        )
        .await;
        assert_eq!(got["token"], "***", "redacted");
        assert_eq!(got["authentication"]["credentials"], "***", "redacted");
        assert_eq!(got["authentication"]["scheme"], "Bearer");
        let page = unary(
            b,
            Operation::ListTaskPushNotificationConfigs,
            json!({"taskId": id, "pageSize": 1}),
        )
        .await;
        assert_eq!(page["configs"].as_array().unwrap().len(), 1);
        let rest = unary(
            b,
            Operation::ListTaskPushNotificationConfigs,
            json!({"taskId": id, "pageToken": page["nextPageToken"]}),
        )
        .await;
        let deleted = unary(
            b,
            Operation::DeleteTaskPushNotificationConfig,
            json!({"taskId": id, "id": "second"}),
        )
        .await;
        let again = unary(
            b,
            Operation::DeleteTaskPushNotificationConfig,
            json!({"taskId": id, "id": "second"}),
        )
        .await;
        let after = unary(
            b,
            Operation::ListTaskPushNotificationConfigs,
            json!({"taskId": id}),
        )
        .await;
        // Delete answers google.protobuf.Empty: `{}` on HTTP+JSON and gRPC, `null` on
        // JSON-RPC.
        for d in [&deleted, &again] {
            assert!(d.is_null() || d == &json!({}), "{}: {d}", b.name());
        }
        let out = json!([
            kinds,
            normalize(&got),
            normalize(&page),
            normalize(&rest),
            normalize(&after),
        ]);
        // The URLs name the binding; an empty nextPageToken is left out by gRPC's
        // ProtoJSON; the rest must be equal.
        let text = out
            .to_string()
            .replace(&format!("/hook/{}", b.name()), "/hook/<binding>")
            .replace(",\"nextPageToken\":\"\"", "");
        serde_json::from_str::<Vec<Value>>(&text).unwrap()
    }

    /// Every error a client can provoke, with the reason and this binding's code.
    pub async fn every_error(s: &Server, b: &dyn Binding) -> Vec<Value> {
        let done = send_text(b, "echo done").await;
        let done_id = done["id"].as_str().unwrap().to_owned();
        let waiting = send_text(b, "ask").await;
        let waiting_id = waiting["id"].as_str().unwrap().to_owned();
        let mut to_done = message("more");
        to_done["taskId"] = json!(done_id);
        let not_found = Codes {
            jsonrpc: -32001,
            http: 404,
            grpc: "NOT_FOUND",
        };
        let invalid = Codes {
            jsonrpc: -32602,
            http: 400,
            grpc: "INVALID_ARGUMENT",
        };
        let precondition = |jsonrpc| Codes {
            jsonrpc,
            http: 400,
            grpc: "FAILED_PRECONDITION",
        };
        let v2 = Opts {
            version: Some("2.0"),
            ..Opts::default()
        };
        let text_plain = Opts {
            content_type: Some("text/plain"),
            ..Opts::default()
        };
        let bad_cursor = Opts {
            last_event_id: Some("abc".into()),
            ..Opts::default()
        };
        let hook = "http://127.0.0.1:9/hook";
        #[rustfmt::skip]
        let unary_cases: Vec<(&str, Operation, Value, Opts, &str, Codes)> = vec![
            ("get unknown task", Operation::GetTask, json!({"id": "no-such-task"}), Opts::default(), "TASK_NOT_FOUND", not_found),
            ("cancel unknown task", Operation::CancelTask, json!({"id": "no-such-task"}), Opts::default(), "TASK_NOT_FOUND", not_found),
            ("follow-up to unknown task", Operation::SendMessage, json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "x"}], "taskId": "no-such-task"}}), Opts::default(), "TASK_NOT_FOUND", not_found),
            ("cancel completed task", Operation::CancelTask, json!({"id": done_id}), Opts::default(), "TASK_NOT_CANCELABLE", precondition(-32002)),
            ("message to completed task", Operation::SendMessage, json!({"message": to_done}), Opts::default(), "UNSUPPORTED_OPERATION", precondition(-32004)),
            ("page size 0", Operation::ListTasks, json!({"pageSize": 0}), Opts::default(), "INVALID_PARAMS", invalid),
            ("page size 101", Operation::ListTasks, json!({"pageSize": 101}), Opts::default(), "INVALID_PARAMS", invalid),
            ("page size not a number", Operation::ListTasks, json!({"pageSize": "ten"}), Opts::default(), "INVALID_PARAMS", invalid),
            ("unknown state filter", Operation::ListTasks, json!({"status": "TASK_STATE_BOGUS"}), Opts::default(), "INVALID_PARAMS", invalid),
            ("undefined state number", Operation::ListTasks, json!({"status": 99}), Opts::default(), "INVALID_PARAMS", invalid),
            ("bad timestamp filter", Operation::ListTasks, json!({"statusTimestampAfter": "yesterday"}), Opts::default(), "INVALID_PARAMS", invalid),
            ("NUL in a task id", Operation::GetTask, json!({"id": "a\0b"}), Opts::default(), "INVALID_PARAMS", invalid),
            ("NUL in the tenant", Operation::ListTasks, json!({"tenant": "a\0"}), Opts::default(), "INVALID_PARAMS", invalid),
            ("NUL in a context filter", Operation::ListTasks, json!({"contextId": "\0"}), Opts::default(), "INVALID_PARAMS", invalid),
            // base64url of "v1:1:a\0b": a token this server cannot have issued.
            ("NUL in a page token's id", Operation::ListTasks, json!({"pageToken": "djE6MTphAGI"}), Opts::default(), "INVALID_PARAMS", invalid),
            ("negative history", Operation::GetTask, json!({"id": done_id, "historyLength": -1}), Opts::default(), "INVALID_PARAMS", invalid),
            ("message missing", Operation::SendMessage, json!({}), Opts::default(), "INVALID_PARAMS", invalid),
            ("message of the wrong type", Operation::SendMessage, json!({"message": "hi"}), Opts::default(), "INVALID_PARAMS", invalid),
            ("version 2.0", Operation::GetTask, json!({"id": done_id}), v2.clone(), "VERSION_NOT_SUPPORTED", precondition(-32009)),
            ("content type text/plain", Operation::SendMessage, json!({"message": message("echo x")}), text_plain, "CONTENT_TYPE_NOT_SUPPORTED", Codes { jsonrpc: -32005, http: 415, grpc: "INVALID_ARGUMENT" }),
            ("push config of unknown task", Operation::CreateTaskPushNotificationConfig, json!({"taskId": "no-such-task", "url": hook}), Opts::default(), "TASK_NOT_FOUND", not_found),
            ("get unknown push config", Operation::GetTaskPushNotificationConfig, json!({"taskId": done_id, "id": "c1"}), Opts::default(), "TASK_NOT_FOUND", not_found),
            ("list push configs of unknown task", Operation::ListTaskPushNotificationConfigs, json!({"taskId": "no-such-task"}), Opts::default(), "TASK_NOT_FOUND", not_found),
            ("delete push config of unknown task", Operation::DeleteTaskPushNotificationConfig, json!({"taskId": "no-such-task", "id": "c1"}), Opts::default(), "TASK_NOT_FOUND", not_found),
            ("push url not https", Operation::CreateTaskPushNotificationConfig, json!({"taskId": done_id, "url": "ftp://example.com/hook"}), Opts::default(), "INVALID_PARAMS", invalid),
            ("push url at a private address", Operation::CreateTaskPushNotificationConfig, json!({"taskId": done_id, "url": "https://10.0.0.1/hook"}), Opts::default(), "INVALID_PARAMS", invalid),
            ("push url at the metadata address", Operation::CreateTaskPushNotificationConfig, json!({"taskId": done_id, "url": "https://169.254.169.254/latest"}), Opts::default(), "INVALID_PARAMS", invalid),
            ("push url at IPv6 loopback", Operation::CreateTaskPushNotificationConfig, json!({"taskId": done_id, "url": "https://[::1]/hook"}), Opts::default(), "INVALID_PARAMS", invalid),
            ("push url at mapped loopback", Operation::CreateTaskPushNotificationConfig, json!({"taskId": done_id, "url": "https://[::ffff:127.0.0.2]/hook"}), Opts::default(), "INVALID_PARAMS", invalid),
            ("push token with a line break", Operation::CreateTaskPushNotificationConfig, json!({"taskId": done_id, "url": hook, "token": "a\r\nX-Evil: 1"}), Opts::default(), "INVALID_PARAMS", invalid),
            ("push credentials with a line break", Operation::CreateTaskPushNotificationConfig, json!({"taskId": done_id, "url": hook, "authentication": {"scheme": "Bearer", "credentials": "a\nb"}}), Opts::default(), "INVALID_PARAMS", invalid),
            ("inline push config at a private address", Operation::SendMessage, json!({"message": message("echo x"), "configuration": {"taskPushNotificationConfig": {"url": "https://192.168.1.1/"}}}), Opts::default(), "INVALID_PARAMS", invalid),
        ];
        #[rustfmt::skip]
        let stream_cases: Vec<(&str, Operation, Value, Opts, &str, Codes)> = vec![
            ("subscribe to unknown task", Operation::SubscribeToTask, json!({"id": "no-such-task"}), Opts::default(), "TASK_NOT_FOUND", not_found),
            ("subscribe to completed task", Operation::SubscribeToTask, json!({"id": done_id}), Opts::default(), "UNSUPPORTED_OPERATION", precondition(-32004)),
            ("resume with a foreign cursor", Operation::SubscribeToTask, json!({"id": waiting_id}), bad_cursor, "INVALID_PARAMS", invalid),
            ("stream with version 2.0", Operation::SendStreamingMessage, json!({"message": message("echo x")}), v2, "VERSION_NOT_SUPPORTED", precondition(-32009)),
            ("stream without message", Operation::SendStreamingMessage, json!({}), Opts::default(), "INVALID_PARAMS", invalid),
        ];
        let _ = s;
        // The transcript holds the cases every binding can express; the others are
        // still checked, on the bindings they apply to.
        let mut out = vec![];
        for (name, op, req, opts, reason, codes) in unary_cases {
            if !expressible(b, name) {
                continue;
            }
            let got = b.unary(op, req, &opts).await.expect_err(name);
            check_failure(b, name, &got, reason, codes);
            if !HTTP_ONLY.contains(&name) {
                out.push(json!([name, got.reason]));
            }
        }
        for (name, op, req, opts, reason, codes) in stream_cases {
            if !expressible(b, name) {
                continue;
            }
            let got = match b.stream(op, req, &opts).await {
                Ok(_) => panic!("{}: {name} opened a stream", b.name()),
                Err(f) => f,
            };
            check_failure(b, name, &got, reason, codes);
            if !HTTP_ONLY.contains(&name) {
                out.push(json!([name, got.reason]));
            }
        }
        out
    }

    /// Error cases a gRPC client cannot send:
    /// - a `Content-Type` other than JSON: gRPC's content type is its framing
    ///   (`application/grpc`), and a gRPC client has no other to choose;
    /// - a foreign `Last-Event-ID`: gRPC has no resume cursor;
    /// - JSON the proto cannot hold (a string for an `int32`, an enum name the proto
    ///   does not define, a `Timestamp` that is not RFC 3339, a string for a message):
    ///   a gRPC request is typed protobuf, so the client cannot encode it at all.
    const HTTP_ONLY: &[&str] = &[
        "content type text/plain",
        "resume with a foreign cursor",
        "page size not a number",
        "unknown state filter",
        "bad timestamp filter",
        "message of the wrong type",
    ];

    /// Whether `b` can send the error case `name`.
    fn expressible(b: &dyn Binding, name: &str) -> bool {
        b.name() != "GRPC" || !HTTP_ONLY.contains(&name)
    }

    fn check_failure(b: &dyn Binding, name: &str, got: &Failure, reason: &str, codes: Codes) {
        assert_eq!(got.reason, reason, "{}: {name}", b.name());
        assert_eq!(got.code, b.code(codes), "{}: {name}", b.name());
    }
}

/// Runs each named scenario on every binding of a fresh gateway and requires equal
/// transcripts. `name if keep` runs on the bindings `keep` accepts only. Event ids are
/// compared between bindings that both have them.
macro_rules! across_bindings {
    ($($name:ident $(if $keep:path)?),* $(,)?) => {$(
        #[tokio::test]
        async fn $name() {
            let s = start().await;
            let bindings: Vec<_> = s.bindings()
                .into_iter()
                $(.filter(|b| $keep(b.as_ref())))?
                .collect();
            assert!(bindings.len() >= 2, "the card declares every served binding");
            let mut seen: Vec<(&dyn Binding, Vec<Value>)> = vec![];
            for b in &bindings {
                seen.push((b.as_ref(), scenarios::$name(&s, b.as_ref()).await));
            }
            let (first, want) = &seen[0];
            for (b, got) in &seen[1..] {
                if resumable(*first) && resumable(*b) {
                    assert_eq!(got, want, "{} differs from {}", b.name(), first.name());
                } else {
                    assert_eq!(
                        without_event_ids(got),
                        without_event_ids(want),
                        "{} differs from {}",
                        b.name(),
                        first.name()
                    );
                }
            }
        }
    )*};
}

across_bindings! {
    send_blocking,
    send_streaming,
    get_task,
    list_with_paging,
    list_pages_by_bytes,
    list_pages_of_data_parts,
    cancel,
    subscribe,
    // gRPC has no Last-Event-ID resume (and no event ids to resume from).
    resume_with_last_event_id if resumable,
    resume_a_large_replay_waiting_for_input if resumable,
    input_required_follow_up,
    extended_card,
    push_configs,
    every_error,
}

/// Every ordered pair of distinct bindings that `keep` accepts.
fn pairs(s: &Server, keep: fn(&dyn Binding) -> bool) -> Vec<(Box<dyn Binding>, Box<dyn Binding>)> {
    let bindings = || -> Vec<Box<dyn Binding>> {
        s.bindings()
            .into_iter()
            .filter(|b| keep(b.as_ref()))
            .collect()
    };
    let n = bindings().len();
    let mut out = vec![];
    for i in 0..n {
        for j in 0..n {
            if i != j {
                let mut a = bindings();
                let b = a.remove(j);
                let a = a.remove(if i > j { i - 1 } else { i });
                out.push((a, b));
            }
        }
    }
    out
}

fn any(_: &dyn Binding) -> bool {
    true
}

#[tokio::test]
async fn a_task_created_on_one_binding_is_read_streamed_and_canceled_on_another() {
    let s = start().await;
    for (a, b) in pairs(&s, any) {
        let (a, b) = (a.as_ref(), b.as_ref());
        let task = send_now(a, "hold").await;
        let id = task["id"].as_str().unwrap();
        let read = get(b, id).await;
        assert_eq!(
            read["contextId"],
            task["contextId"],
            "{} -> {}",
            a.name(),
            b.name()
        );
        let mut events = open(
            b,
            Operation::SubscribeToTask,
            json!({"id": id}),
            &Opts::default(),
        )
        .await;
        let first = next(&mut events).await.unwrap();
        assert_eq!(first.body["task"]["id"], id);
        let canceled = unary(a, Operation::CancelTask, json!({"id": id})).await;
        assert_eq!(state_of(&canceled), "TASK_STATE_CANCELED");
        let rest = rest_of(events).await;
        let last = &rest.last().expect("the cancel reaches the stream").body;
        assert_eq!(
            last["statusUpdate"]["status"]["state"],
            "TASK_STATE_CANCELED",
            "{} -> {}",
            a.name(),
            b.name()
        );
        assert_eq!(state_of(&get(b, id).await), "TASK_STATE_CANCELED");
        let listed = unary(
            b,
            Operation::ListTasks,
            json!({"contextId": task["contextId"]}),
        )
        .await;
        assert_eq!(listed["tasks"][0]["id"], id);
    }
}

#[tokio::test]
async fn a_stream_started_on_one_binding_resumes_on_another() {
    let s = start().await;
    // The cursor comes from an SSE event id and resumes with Last-Event-ID: gRPC has
    // neither.
    for (a, b) in pairs(&s, resumable) {
        let (a, b) = (a.as_ref(), b.as_ref());
        let mut events = open(
            a,
            Operation::SendStreamingMessage,
            json!({"message": message("gated")}),
            &Opts::default(),
        )
        .await;
        let seen = until_part_one(&mut events).await;
        drop(events);
        let id = seen[0].body["task"]["id"].as_str().unwrap().to_owned();
        let cursor = seen.last().unwrap().id.unwrap();
        let resumed = open(
            b,
            Operation::SubscribeToTask,
            json!({"id": id}),
            &Opts::resume_after(cursor),
        )
        .await;
        s.gate.notify_one();
        let rest = rest_of(resumed).await;
        assert_eq!(rest[0].id, Some(cursor + 1), "{} -> {}", a.name(), b.name());
        assert_eq!(
            rest[0].body["artifactUpdate"]["artifact"]["parts"][0]["text"],
            "part 2"
        );
        assert_eq!(
            rest.last().unwrap().body["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
    }
}

/// Two tenants with two callers each, bound to their API keys (`[[server.auth.keys]]
/// tenant`): on every binding, no operation of one caller reaches another caller's task
/// (same tenant or not), and the answer is exactly TaskNotFound; a request naming a
/// tenant its credential does not allow is refused with 403 / PERMISSION_DENIED.
#[tokio::test]
async fn tenants_and_callers_never_reach_each_others_tasks() {
    use a2a_gateway::config::{ApiKeyConfig, ServerAuthConfig, ServerAuthKind, sha256_hex};
    use a2a_gateway::transport::TransportConfig;
    use a2a_gateway::transport::auth::Authenticator;
    let callers = [("a1", "t1"), ("b1", "t1"), ("a2", "t2"), ("b2", "t2")];
    let key = |caller: &str| format!("key-of-{caller}-0123456789abcdef");
    let auth = ServerAuthConfig {
        kind: ServerAuthKind::ApiKey,
        keys: callers
            .iter()
            .map(|(c, t)| ApiKeyConfig::from_sha256(*c, sha256_hex(&key(c))).with_tenant(*t))
            .collect(),
        ..ServerAuthConfig::default()
    };
    let s = bindings_common::server::start_with(TransportConfig {
        auth: Authenticator::from_config(&auth),
        ..TransportConfig::default()
    })
    .await;
    let not_found = Codes {
        jsonrpc: -32001,
        http: 404,
        grpc: "NOT_FOUND",
    };
    let forbidden = Codes {
        jsonrpc: -32600,
        http: 403,
        grpc: "PERMISSION_DENIED",
    };
    for b in s.bindings() {
        let b = b.as_ref();
        let owner = Opts::bearer(&key("a1"));
        // a1's tasks: one waiting for input, one streaming (gated, with an event id).
        let ask = b
            .unary(
                Operation::SendMessage,
                json!({"message": message("ask")}),
                &owner,
            )
            .await
            .unwrap()["task"]
            .clone();
        let id = ask["id"].as_str().unwrap().to_owned();
        assert_eq!(state_of(&ask), "TASK_STATE_INPUT_REQUIRED");
        // Naming its own tenant explicitly is the same scope.
        let own = b
            .unary(
                Operation::GetTask,
                json!({"id": id, "tenant": "t1"}),
                &owner,
            )
            .await
            .unwrap();
        assert_eq!(own["id"], id.as_str(), "{}", b.name());
        let mut follow = message("more");
        follow["taskId"] = json!(id);
        let hook = "http://127.0.0.1:9/hook";
        for (other, tenant) in &callers[1..] {
            let o = Opts::bearer(&key(other));
            let who = format!("{} as {other} ({tenant})", b.name());
            #[rustfmt::skip]
            let unary_cases: Vec<(&str, Operation, Value)> = vec![
                ("get", Operation::GetTask, json!({"id": id})),
                ("cancel", Operation::CancelTask, json!({"id": id})),
                ("follow-up", Operation::SendMessage, json!({"message": follow})),
            ];
            for (what, op, req) in unary_cases {
                let err = b.unary(op, req, &o).await.expect_err(&who);
                assert_eq!(
                    err,
                    Failure {
                        reason: "TASK_NOT_FOUND".into(),
                        code: b.code(not_found)
                    },
                    "{what}: {who}"
                );
            }
            // Push configs (issue 10): never a success on another's task.
            for (op, req) in [
                (
                    Operation::CreateTaskPushNotificationConfig,
                    json!({"taskId": id, "url": hook}),
                ),
                (
                    Operation::GetTaskPushNotificationConfig,
                    json!({"taskId": id, "id": "c1"}),
                ),
                (
                    Operation::ListTaskPushNotificationConfigs,
                    json!({"taskId": id}),
                ),
                (
                    Operation::DeleteTaskPushNotificationConfig,
                    json!({"taskId": id, "id": "c1"}),
                ),
            ] {
                let err = b.unary(op, req, &o).await.expect_err(&who);
                assert!(
                    ["TASK_NOT_FOUND", "PUSH_NOTIFICATION_NOT_SUPPORTED"]
                        .contains(&err.reason.as_str()),
                    "{}: {who}: {err:?}",
                    op.name()
                );
            }
            let listed = b.unary(Operation::ListTasks, json!({}), &o).await.unwrap();
            assert!(
                listed["tasks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|t| t["id"] != id.as_str()),
                "list: {who}: {listed}"
            );
            let err = b
                .stream(Operation::SubscribeToTask, json!({"id": id}), &o)
                .await
                .err()
                .expect(&who);
            assert_eq!(err.reason, "TASK_NOT_FOUND", "subscribe: {who}");
            assert_eq!(err.code, b.code(not_found), "subscribe: {who}");
            if resumable(b) {
                let resume = Opts {
                    last_event_id: Some("1".into()),
                    ..o.clone()
                };
                let err = b
                    .stream(Operation::SubscribeToTask, json!({"id": id}), &resume)
                    .await
                    .err()
                    .expect(&who);
                assert_eq!(err.reason, "TASK_NOT_FOUND", "resume: {who}");
            }
            // Naming a1's tenant: allowed for b1 (same tenant, still not a1's task),
            // refused for the t2 callers.
            let named = b
                .unary(Operation::GetTask, json!({"id": id, "tenant": "t1"}), &o)
                .await
                .expect_err(&who);
            if *tenant == "t1" {
                assert_eq!(named.reason, "TASK_NOT_FOUND", "{who}");
            } else {
                assert_eq!(named.code, b.code(forbidden), "{who}: {named:?}");
                assert_eq!(named.reason, "PERMISSION_DENIED", "{who}");
            }
        }
        // Nothing the others did changed a1's task; its own follow-up completes it.
        let still = b
            .unary(Operation::GetTask, json!({"id": id}), &owner)
            .await
            .unwrap();
        assert_eq!(
            state_of(&still),
            "TASK_STATE_INPUT_REQUIRED",
            "{}",
            b.name()
        );
        let done = b
            .unary(Operation::SendMessage, json!({"message": follow}), &owner)
            .await
            .unwrap();
        assert_eq!(state_of(&done["task"]), "TASK_STATE_COMPLETED");
        // Without a credential: 401 / UNAUTHENTICATED.
        let err = b
            .unary(Operation::GetTask, json!({"id": id}), &Opts::default())
            .await
            .expect_err("no credential");
        assert_eq!(err.reason, "UNAUTHENTICATED", "{}", b.name());
        assert_eq!(
            err.code,
            b.code(Codes {
                jsonrpc: -32600,
                http: 401,
                grpc: "UNAUTHENTICATED"
            })
        );
    }
}
