//! The gRPC binding over real sockets, driven by a tonic client generated from the same
//! `proto/a2a.proto`: every method of `lf.a2a.v1.A2AService`, both server streams,
//! errors as `google.rpc.Status` with `ErrorInfo` (decoded with tonic-types), the
//! `a2a-version` check, API-key authentication, bad input (undecodable and oversized
//! messages, unknown methods), JSON-RPC and gRPC on one port (h2c and TLS), and
//! `server.grpc_listen`.

use std::sync::Arc;
use std::time::Duration;

use a2a_gateway::app::Gateway;
use a2a_gateway::config::{Config, ConfigSources, sha256_hex};
use a2a_gateway::executor::{
    AgentExecutor, EventQueue, ExecutorError, RequestContext, TaskUpdater,
};
use a2a_gateway::protocol::Part;
use a2a_gateway::store::MemoryTaskStore;
use a2a_gateway::test_util::get_json;
use a2a_gateway::transport::grpc::proto::{self, a2a_service_client::A2aServiceClient};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;

/// `ask`: asks for input and waits there; `wait`: works until canceled; anything else:
/// echoes the text as one artifact and completes.
struct Agent;

#[async_trait]
impl AgentExecutor for Agent {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let u = TaskUpdater::from_context(&ctx, queue);
        if ctx.current_task.is_none() {
            u.submit().await?;
        }
        match ctx.user_input().as_str() {
            "ask" => {
                u.requires_input(Some(u.new_agent_text("which one?")))
                    .await?;
            }
            "wait" => {
                u.start_work(None).await?;
                ctx.cancellation().cancelled().await;
            }
            text => {
                u.start_work(None).await?;
                u.add_artifact(
                    vec![Part::text(format!("echo: {text}"))],
                    None,
                    Some("result".into()),
                    false,
                    true,
                )
                .await?;
                u.complete(None).await?;
            }
        }
        Ok(())
    }
}

const KEY: &str = "grpc-test-key-0123456789";

/// Loads a config from `env` (`A2A_GATEWAY_…` pairs) with the memory store.
fn config(env: &[(&str, &str)]) -> Config {
    Config::load(ConfigSources {
        file: None,
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        overrides: vec![("store.url".into(), "memory:".into())],
    })
    .unwrap()
}

struct Server {
    addr: std::net::SocketAddr,
    gateway: Gateway,
}

/// Serves `config` on 127.0.0.1:0 (plain: h2c and HTTP/1.1).
async fn start(config: &Config) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gateway = Gateway::new(
        config,
        Arc::new(Agent),
        Arc::new(MemoryTaskStore::new()),
        None,
    );
    tokio::spawn(gateway.clone().serve(
        listener,
        Duration::from_secs(1),
        futures::future::pending(),
    ));
    Server { addr, gateway }
}

async fn channel(addr: std::net::SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .timeout(Duration::from_secs(20))
        .connect()
        .await
        .unwrap()
}

async fn client(addr: std::net::SocketAddr) -> A2aServiceClient<Channel> {
    A2aServiceClient::new(channel(addr).await)
}

fn text_message(text: &str) -> proto::Message {
    proto::Message {
        message_id: uuid::Uuid::new_v4().to_string(),
        role: proto::Role::User as i32,
        parts: vec![proto::Part {
            content: Some(proto::part::Content::Text(text.into())),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn send(text: &str) -> proto::SendMessageRequest {
    proto::SendMessageRequest {
        message: Some(text_message(text)),
        ..Default::default()
    }
}

/// The request with `a2a-version: 1.0`, as an A2A 1.0 client sends it.
fn v1<T>(msg: T) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut()
        .insert("a2a-version", "1.0".parse().unwrap());
    req
}

fn task_of(resp: proto::SendMessageResponse) -> proto::Task {
    match resp.payload {
        Some(proto::send_message_response::Payload::Task(t)) => t,
        other => panic!("expected a task, got {other:?}"),
    }
}

fn state(task: &proto::Task) -> proto::TaskState {
    proto::TaskState::try_from(task.status.as_ref().unwrap().state).unwrap()
}

/// The ErrorInfo reason of `status` (and that its domain is A2A's).
fn reason(status: &Status) -> String {
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    assert_eq!(info.domain, "a2a-protocol.org");
    info.reason
}

/// The state an event sets, if any.
fn event_state(ev: &proto::StreamResponse) -> Option<proto::TaskState> {
    use proto::stream_response::Payload;
    let s = match ev.payload.as_ref()? {
        Payload::Task(t) => t.status.as_ref()?.state,
        Payload::StatusUpdate(u) => u.status.as_ref()?.state,
        _ => return None,
    };
    proto::TaskState::try_from(s).ok()
}

async fn collect(
    stream: tonic::Streaming<proto::StreamResponse>,
) -> Vec<Result<proto::StreamResponse, Status>> {
    tokio::time::timeout(Duration::from_secs(20), stream.collect::<Vec<_>>())
        .await
        .expect("the stream ends")
}

#[tokio::test]
async fn every_method_over_grpc() {
    let s = start(&config(&[])).await;
    let mut c = client(s.addr).await;

    // SendMessage, blocking: the completed task with its artifact and history.
    let task = task_of(
        c.send_message(v1(send("hello")))
            .await
            .unwrap()
            .into_inner(),
    );
    assert_eq!(state(&task), proto::TaskState::Completed);
    assert_eq!(
        task.artifacts[0].parts[0].content,
        Some(proto::part::Content::Text("echo: hello".into()))
    );
    assert!(!task.history.is_empty());
    assert!(!task.context_id.is_empty());
    assert!(task.status.as_ref().unwrap().timestamp.is_some());

    // GetTask, with historyLength 0 (presence kept: no history).
    let got = c
        .get_task(v1(proto::GetTaskRequest {
            id: task.id.clone(),
            history_length: Some(0),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.id, task.id);
    assert!(got.history.is_empty());
    assert_eq!(got.artifacts.len(), 1);

    // SendMessage with returnImmediately: the task before it settles.
    let mut quick = send("wait");
    quick.configuration = Some(proto::SendMessageConfiguration {
        return_immediately: true,
        ..Default::default()
    });
    let waiting = task_of(c.send_message(v1(quick)).await.unwrap().into_inner());
    assert!(matches!(
        state(&waiting),
        proto::TaskState::Submitted | proto::TaskState::Working
    ));

    // ListTasks: both tasks, paged one at a time, filtered by state.
    let page = c
        .list_tasks(v1(proto::ListTasksRequest {
            page_size: Some(1),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page.tasks.len(), 1);
    assert_eq!(page.page_size, 1);
    assert_eq!(page.total_size, 2);
    assert!(!page.next_page_token.is_empty());
    let next = c
        .list_tasks(v1(proto::ListTasksRequest {
            page_size: Some(1),
            page_token: page.next_page_token.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(next.tasks.len(), 1);
    assert_ne!(next.tasks[0].id, page.tasks[0].id);
    let completed = c
        .list_tasks(v1(proto::ListTasksRequest {
            status: proto::TaskState::Completed as i32,
            include_artifacts: Some(true),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(completed.total_size, 1);
    assert_eq!(completed.tasks[0].id, task.id);
    assert_eq!(completed.tasks[0].artifacts.len(), 1);

    // SubscribeToTask on the working task, then CancelTask: the stream ends CANCELED.
    let sub = c
        .subscribe_to_task(v1(proto::SubscribeToTaskRequest {
            id: waiting.id.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    let canceled = c
        .cancel_task(v1(proto::CancelTaskRequest {
            id: waiting.id.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state(&canceled), proto::TaskState::Canceled);
    let events = collect(sub).await;
    let states: Vec<_> = events
        .iter()
        .map(|e| event_state(e.as_ref().unwrap()))
        .collect();
    assert!(
        matches!(states.first(), Some(Some(_))),
        "starts with the snapshot: {states:?}"
    );
    assert_eq!(
        states.last(),
        Some(&Some(proto::TaskState::Canceled)),
        "{states:?}"
    );

    // Canceling again returns the CANCELED task; canceling a COMPLETED one is
    // FAILED_PRECONDITION / TASK_NOT_CANCELABLE naming the task.
    let again = c
        .cancel_task(v1(proto::CancelTaskRequest {
            id: waiting.id.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state(&again), proto::TaskState::Canceled);
    let err = c
        .cancel_task(v1(proto::CancelTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert_eq!(reason(&err), "TASK_NOT_CANCELABLE");
    let info = err.get_details_error_info().unwrap();
    assert_eq!(info.metadata.get("taskId"), Some(&task.id));

    // SendStreamingMessage: task snapshot first, artifact, and COMPLETED last.
    let stream = c
        .send_streaming_message(v1(send("streamed")))
        .await
        .unwrap()
        .into_inner();
    let events: Vec<_> = collect(stream)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    use proto::stream_response::Payload;
    assert!(matches!(events[0].payload, Some(Payload::Task(_))));
    assert!(
        events
            .iter()
            .any(|e| matches!(e.payload, Some(Payload::ArtifactUpdate(_))))
    );
    assert_eq!(
        event_state(events.last().unwrap()),
        Some(proto::TaskState::Completed)
    );

    // An interrupted task: the follow-up continues it.
    let asked = task_of(c.send_message(v1(send("ask"))).await.unwrap().into_inner());
    assert_eq!(state(&asked), proto::TaskState::InputRequired);
    let mut follow = text_message("the blue one");
    follow.task_id = asked.id.clone();
    let done = task_of(
        c.send_message(v1(proto::SendMessageRequest {
            message: Some(follow),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner(),
    );
    assert_eq!(done.id, asked.id);
    assert_eq!(state(&done), proto::TaskState::Completed);

    // GetTask of an unknown task: NOT_FOUND / TASK_NOT_FOUND with the id.
    let err = c
        .get_task(v1(proto::GetTaskRequest {
            id: "no-such-task".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(reason(&err), "TASK_NOT_FOUND");
    assert_eq!(
        err.get_details_error_info().unwrap().metadata.get("taskId"),
        Some(&"no-such-task".to_owned())
    );

    // SubscribeToTask of a terminal task: refused before any stream.
    let err = c
        .subscribe_to_task(v1(proto::SubscribeToTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert_eq!(reason(&err), "UNSUPPORTED_OPERATION");

    // The four push-config methods: not supported.
    let push_errors = [
        c.create_task_push_notification_config(v1(proto::TaskPushNotificationConfig {
            task_id: task.id.clone(),
            url: "https://hooks.example.com/".into(),
            ..Default::default()
        }))
        .await
        .map(|_| ())
        .unwrap_err(),
        c.get_task_push_notification_config(v1(proto::GetTaskPushNotificationConfigRequest {
            task_id: task.id.clone(),
            id: "c".into(),
            ..Default::default()
        }))
        .await
        .map(|_| ())
        .unwrap_err(),
        c.list_task_push_notification_configs(v1(proto::ListTaskPushNotificationConfigsRequest {
            task_id: task.id.clone(),
            ..Default::default()
        }))
        .await
        .map(|_| ())
        .unwrap_err(),
        c.delete_task_push_notification_config(v1(
            proto::DeleteTaskPushNotificationConfigRequest {
                task_id: task.id.clone(),
                id: "c".into(),
                ..Default::default()
            },
        ))
        .await
        .map(|_| ())
        .unwrap_err(),
    ];
    for err in push_errors {
        assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
        assert_eq!(reason(&err), "PUSH_NOTIFICATION_NOT_SUPPORTED");
    }

    // GetExtendedAgentCard: the card does not declare the capability.
    let err = c
        .get_extended_agent_card(v1(proto::GetExtendedAgentCardRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert_eq!(reason(&err), "UNSUPPORTED_OPERATION");
}

#[tokio::test]
async fn invalid_requests_are_invalid_argument() {
    let s = start(&config(&[])).await;
    let mut c = client(s.addr).await;
    // No message at all, a message without parts, without a role.
    let mut no_parts = text_message("x");
    no_parts.parts.clear();
    let mut no_role = text_message("x");
    no_role.role = proto::Role::Unspecified as i32;
    for req in [
        proto::SendMessageRequest::default(),
        proto::SendMessageRequest {
            message: Some(no_parts),
            ..Default::default()
        },
        proto::SendMessageRequest {
            message: Some(no_role),
            ..Default::default()
        },
    ] {
        let err = c.send_message(v1(req)).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert_eq!(reason(&err), "INVALID_PARAMS");
    }
    let err = c
        .get_task(v1(proto::GetTaskRequest {
            id: "t".into(),
            history_length: Some(-1),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let err = c
        .list_tasks(v1(proto::ListTasksRequest {
            page_size: Some(1000),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
}

#[tokio::test]
async fn a2a_version_metadata_is_checked() {
    let s = start(&config(&[])).await;
    let mut c = client(s.addr).await;
    for ok in [None, Some("1.0"), Some("1.0.3")] {
        let mut req = Request::new(send("v"));
        if let Some(v) = ok {
            req.metadata_mut().insert("a2a-version", v.parse().unwrap());
        }
        c.send_message(req)
            .await
            .unwrap_or_else(|e| panic!("{ok:?}: {e:?}"));
    }
    for bad in ["2.0", "1.1", "0.3", "garbage", ""] {
        let mut req = Request::new(send("v"));
        req.metadata_mut()
            .insert("a2a-version", bad.parse().unwrap());
        if bad.is_empty() {
            // An empty value is "no version": served as 1.0.
            c.send_message(req).await.unwrap();
            continue;
        }
        let err = c.send_message(req).await.unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition, "{bad}: {err:?}");
        assert_eq!(reason(&err), "VERSION_NOT_SUPPORTED", "{bad}");
        assert!(err.message().contains(bad), "{bad}: {}", err.message());
    }
    // The streaming methods check it before any stream.
    let mut req = Request::new(send("v"));
    req.metadata_mut()
        .insert("a2a-version", "2.0".parse().unwrap());
    let err = c.send_streaming_message(req).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
}

#[tokio::test]
async fn api_keys_authenticate_grpc_calls() {
    let keys = format!(
        r#"[{{caller = "team-a", sha256 = "{}"}}, {{caller = "team-b", sha256 = "{}"}}]"#,
        sha256_hex(KEY),
        sha256_hex("other-key-for-team-b")
    );
    let s = start(&config(&[
        ("A2A_GATEWAY_SERVER__AUTH__KIND", "api_key"),
        ("A2A_GATEWAY_SERVER__AUTH__KEYS", &keys),
    ]))
    .await;
    let mut c = client(s.addr).await;
    let with_key = |key: Option<&str>, msg: proto::SendMessageRequest| {
        let mut req = v1(msg);
        if let Some(key) = key {
            req.metadata_mut()
                .insert("authorization", format!("Bearer {key}").parse().unwrap());
        }
        req
    };
    for key in [None, Some("wrong"), Some("")] {
        let err = c.send_message(with_key(key, send("x"))).await.unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "{key:?}: {err:?}");
        assert_eq!(reason(&err), "UNAUTHENTICATED");
        let err = c
            .send_streaming_message(with_key(key, send("x")))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "{key:?}");
    }
    let task = task_of(
        c.send_message(with_key(Some(KEY), send("mine")))
            .await
            .unwrap()
            .into_inner(),
    );
    // Another caller does not see team-a's task.
    let mut req = v1(proto::GetTaskRequest {
        id: task.id.clone(),
        ..Default::default()
    });
    req.metadata_mut().insert(
        "authorization",
        "Bearer other-key-for-team-b".parse().unwrap(),
    );
    let err = c.get_task(req).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    // team-a does.
    let mut req = v1(proto::GetTaskRequest {
        id: task.id.clone(),
        ..Default::default()
    });
    req.metadata_mut()
        .insert("authorization", format!("Bearer {KEY}").parse().unwrap());
    assert_eq!(c.get_task(req).await.unwrap().into_inner().id, task.id);
}

/// A raw h2c gRPC call: `body` framed as one message (or sent as is with `frame:
/// false`) to `path`. Returns the HTTP status and the `grpc-status`,
/// `grpc-message` headers of a trailers-only answer.
async fn raw_call(
    addr: std::net::SocketAddr,
    path: &str,
    body: Vec<u8>,
    frame: bool,
) -> (u16, Option<String>, Option<String>) {
    let http = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let payload = if frame {
        let mut framed = vec![0u8];
        framed.extend_from_slice(&(body.len() as u32).to_be_bytes());
        framed.extend_from_slice(&body);
        framed
    } else {
        body
    };
    let resp = http
        .post(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(payload)
        .send()
        .await
        .unwrap();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    (
        resp.status().as_u16(),
        header("grpc-status"),
        header("grpc-message"),
    )
}

#[tokio::test]
async fn bad_input_gets_the_right_status_never_internal() {
    let s = start(&config(&[("A2A_GATEWAY_SERVER__MAX_BODY_BYTES", "65536")])).await;
    // Bytes that are no SendMessageRequest: INVALID_ARGUMENT, not INTERNAL.
    for garbage in [vec![0xff, 0xff, 0xff], vec![0x12, 0x50, 0x01]] {
        let (http, status, message) =
            raw_call(s.addr, "/lf.a2a.v1.A2AService/SendMessage", garbage, true).await;
        assert_eq!(http, 200);
        assert_eq!(
            status.as_deref(),
            Some(&*(Code::InvalidArgument as i32).to_string()),
            "{message:?}"
        );
        let message = message.unwrap_or_default();
        assert!(message.contains("SendMessageRequest"), "{message}");
    }
    // Unknown methods and services: UNIMPLEMENTED.
    for path in [
        "/lf.a2a.v1.A2AService/SendMessageNow",
        "/a2a.v1.A2AService/SendMessage",
        "/grpc.health.v1.Health/Check",
    ] {
        let (_, status, _) = raw_call(s.addr, path, vec![], true).await;
        assert_eq!(
            status.as_deref(),
            Some(&*(Code::Unimplemented as i32).to_string()),
            "{path}"
        );
    }

    let mut c = client(s.addr).await;
    // A message over server.max_body_bytes: RESOURCE_EXHAUSTED.
    let err = c
        .send_message(v1(send(&"x".repeat(100_000))))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    // The unknown method through the generated client's channel: its ErrorInfo says so.
    let mut grpc = tonic::client::Grpc::new(channel(s.addr).await);
    grpc.ready().await.unwrap();
    let err = grpc
        .unary::<_, (), _>(
            Request::new(proto::GetTaskRequest::default()),
            http::uri::PathAndQuery::from_static("/lf.a2a.v1.A2AService/Nope"),
            tonic_prost::ProstCodec::<proto::GetTaskRequest, ()>::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    assert_eq!(reason(&err), "METHOD_NOT_FOUND");
    // The server is fine afterwards.
    c.send_message(v1(send("still here"))).await.unwrap();
}

/// The status of a raw call's trailers-only answer, with its details; `Code::Ok` for an
/// answer with a message (its status in the trailers, which this client cannot read).
async fn raw_status(addr: std::net::SocketAddr, headers: &[(&str, &str)], body: Vec<u8>) -> Status {
    let http = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let mut req = http
        .post(format!("http://{addr}/lf.a2a.v1.A2AService/SendMessage"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.body(body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    Status::from_header_map(resp.headers()).unwrap_or_else(|| Status::ok(""))
}

#[tokio::test]
async fn a_body_that_is_not_one_grpc_message_is_invalid_argument_with_error_info() {
    let s = start(&config(&[])).await;
    let one = framed_send("one");
    let mut compressed = one.clone();
    compressed[0] = 1;
    let compressed_again = compressed.clone();
    let mut two = one.clone();
    two.extend_from_slice(&framed_send("two"));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("unframed garbage", b"garbage!!".to_vec(), "not gRPC-framed"),
        (
            "compressed without grpc-encoding",
            compressed,
            "grpc-encoding",
        ),
        ("no message", vec![], "no request message"),
        ("a second message", two, "second request message"),
        (
            "truncated",
            one[..one.len() - 2].to_vec(),
            "ended inside a message",
        ),
        ("a cut prefix", vec![0, 0, 0], "ended inside a message"),
    ];
    for (what, body, says) in cases {
        let status = raw_status(s.addr, &[], body).await;
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
        assert!(status.message().contains(says), "{what}: {status:?}");
        assert_eq!(reason(&status), "PARSE_ERROR", "{what}");
    }
    // `grpc-encoding: identity` is no encoding: a compressed flag under it is the same.
    let status = raw_status(s.addr, &[("grpc-encoding", "identity")], compressed_again).await;
    assert_eq!(status.code(), Code::InvalidArgument, "identity: {status:?}");
    assert_eq!(reason(&status), "PARSE_ERROR", "identity");
    // The second message is refused, not dropped: no task was created by that call.
    let mut c = client(s.addr).await;
    let listed = c
        .list_tasks(v1(proto::ListTasksRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert!(listed.tasks.is_empty(), "{:?}", listed.tasks);
    // One well-framed message still works, whole or split across DATA frames.
    let whole = raw_status(s.addr, &[], framed_send("fine")).await;
    assert_eq!(whole.code(), Code::Ok, "{whole:?}");
    let bytes = framed_send("split");
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        bytes.chunks(3).map(|c| Ok(c.to_vec())).collect();
    let (http, status, message) = raw_send(
        s.addr,
        &[("content-type", b"application/grpc")],
        reqwest::Body::wrap_stream(futures::stream::iter(chunks)),
    )
    .await;
    assert_eq!((http, status), (200, None), "{message:?}");
}

#[tokio::test]
async fn the_clients_grpc_timeout_ends_the_call_and_the_task_goes_on() {
    let s = start(&config(&[])).await;
    // A blocking call whose task waits: DEADLINE_EXCEEDED from the server at the
    // deadline, not at the client's transport timeout (20 s).
    let started = std::time::Instant::now();
    let status = raw_status(s.addr, &[("grpc-timeout", "300m")], framed_send("wait")).await;
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(status.message().contains("grpc-timeout"), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // The task it started goes on.
    let mut c = client(s.addr).await;
    let listed = c
        .list_tasks(v1(proto::ListTasksRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.tasks.len(), 1);
    assert_eq!(state(&listed.tasks[0]), proto::TaskState::Working);
    // A streamed answer still open at the deadline ends with DEADLINE_EXCEEDED.
    let mut req = v1(send("wait"));
    req.set_timeout(Duration::from_millis(400));
    let mut stream = c.send_streaming_message(req).await.unwrap().into_inner();
    let mut events = 0;
    let end = loop {
        match stream.next().await {
            Some(Ok(_)) => events += 1,
            Some(Err(e)) => break e,
            None => panic!("the stream ended without a status after {events} events"),
        }
    };
    assert!(
        events >= 1,
        "the stream's first events arrive before the deadline"
    );
    assert_eq!(end.code(), Code::DeadlineExceeded, "{end:?}");
    // A header that is no timeout is ignored: the call is served.
    let fine = raw_status(s.addr, &[("grpc-timeout", "soon")], framed_send("x")).await;
    assert_eq!(fine.code(), Code::Ok, "{fine:?}");
}

#[tokio::test]
async fn one_port_serves_json_rpc_and_grpc_and_the_card_lists_both() {
    let s = start(&config(&[])).await;
    let http = reqwest::Client::new();
    let card: Value = get_json(
        &http,
        &format!("http://{}/.well-known/agent-card.json", s.addr),
    )
    .await;
    let interfaces = card["supportedInterfaces"].as_array().unwrap();
    let grpc = interfaces
        .iter()
        .find(|i| i["protocolBinding"] == "GRPC")
        .unwrap_or_else(|| panic!("no GRPC interface in {card}"));
    assert_eq!(grpc["protocolVersion"], "1.0");
    // The default config's public address (the test listens on another port).
    assert_eq!(grpc["url"], "127.0.0.1:8080");
    assert!(interfaces.iter().any(|i| i["protocolBinding"] == "JSONRPC"));

    // A task created over gRPC is read over JSON-RPC on the same port, and back.
    let mut c = client(s.addr).await;
    let task = task_of(
        c.send_message(v1(send("shared")))
            .await
            .unwrap()
            .into_inner(),
    );
    let v: Value = http
        .post(format!("http://{}/", s.addr))
        .header("a2a-version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task.id}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        v["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    let v: Value = http
        .post(format!("http://{}/", s.addr))
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage",
            "params": {"message": {"messageId": "j1", "role": "ROLE_USER", "parts": [{"text": "via json"}]}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = v["result"]["task"]["id"].as_str().unwrap().to_owned();
    let got = c
        .get_task(v1(proto::GetTaskRequest {
            id,
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        got.artifacts[0].parts[0].content,
        Some(proto::part::Content::Text("echo: via json".into()))
    );
    drop(s.gateway);
}

#[tokio::test]
async fn bindings_decide_what_is_served_and_declared() {
    let s = start(&config(&[(
        "A2A_GATEWAY_SERVER__BINDINGS",
        r#"["jsonrpc"]"#,
    )]))
    .await;
    let card: Value = get_json(
        &reqwest::Client::new(),
        &format!("http://{}/.well-known/agent-card.json", s.addr),
    )
    .await;
    assert!(
        !card.to_string().contains("\"GRPC\""),
        "no gRPC interface: {card}"
    );
    let mut c = client(s.addr).await;
    let err = c.send_message(v1(send("x"))).await.unwrap_err();
    assert_ne!(err.code(), Code::Ok);
    assert!(
        err.get_details_error_info().is_none(),
        "not answered by the gRPC service: {err:?}"
    );

    let s = start(&config(&[("A2A_GATEWAY_SERVER__BINDINGS", r#"["grpc"]"#)])).await;
    let mut c = client(s.addr).await;
    c.send_message(v1(send("x"))).await.unwrap();
    let resp = reqwest::Client::new()
        .post(format!("http://{}/", s.addr))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}))
        .send()
        .await
        .unwrap();
    assert!(
        resp.status().is_client_error(),
        "JSON-RPC is not served: {}",
        resp.status()
    );
}

#[tokio::test]
async fn grpc_listen_gives_grpc_its_own_port() {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let grpc_addr = probe.local_addr().unwrap();
    drop(probe);
    let grpc_listen = grpc_addr.to_string();
    let config = config(&[("A2A_GATEWAY_SERVER__GRPC_LISTEN", &grpc_listen)]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let grpc_listener = tokio::net::TcpListener::bind(grpc_addr).await.unwrap();
    let gateway = Gateway::new(
        &config,
        Arc::new(Agent),
        Arc::new(MemoryTaskStore::new()),
        None,
    );
    let card = gateway.state.card.get();
    let grpc_card = card
        .card
        .supported_interfaces
        .iter()
        .find(|i| i.protocol_binding == "GRPC")
        .unwrap();
    assert_eq!(grpc_card.url, format!("127.0.0.1:{}", grpc_addr.port()));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(gateway.serve_all(
        listener,
        Some(grpc_listener),
        None,
        Duration::from_secs(1),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let mut c = client(grpc_addr).await;
    c.send_message(v1(send("own port"))).await.unwrap();
    // The HTTP port does not take gRPC calls then.
    let mut on_http = client(addr).await;
    assert!(on_http.send_message(v1(send("x"))).await.is_err());
    stop_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .expect("both listeners stop")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn grpc_over_tls_on_the_https_port() {
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    let tls = a2a_gateway::tls::server_config(&cert, &key).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gateway = Gateway::new(
        &config(&[]),
        Arc::new(Agent),
        Arc::new(MemoryTaskStore::new()),
        None,
    );
    tokio::spawn(gateway.serve_tls(
        listener,
        tls,
        Duration::from_secs(1),
        futures::future::pending(),
    ));
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(ck.cert.pem()))
        .domain_name("localhost");
    let channel = Endpoint::from_shared(format!("https://127.0.0.1:{}", addr.port()))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c = A2aServiceClient::new(channel);
    let task = task_of(
        c.send_message(v1(send("secure")))
            .await
            .unwrap()
            .into_inner(),
    );
    assert_eq!(state(&task), proto::TaskState::Completed);
    let stream = c
        .subscribe_to_task(v1(proto::SubscribeToTaskRequest {
            id: task.id,
            ..Default::default()
        }))
        .await;
    assert_eq!(stream.unwrap_err().code(), Code::FailedPrecondition);
}

/// A raw h2c call to SendMessage with these extra headers and `body` as the request
/// body stream; the HTTP status and the `grpc-status`, `grpc-message` headers.
async fn raw_send(
    addr: std::net::SocketAddr,
    headers: &[(&str, &[u8])],
    body: reqwest::Body,
) -> (u16, Option<String>, Option<String>) {
    let http = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let mut req = http
        .post(format!("http://{addr}/lf.a2a.v1.A2AService/SendMessage"))
        .header("te", "trailers");
    for (k, v) in headers {
        req = req.header(*k, http::HeaderValue::from_bytes(v).unwrap());
    }
    let resp = req.body(body).send().await.unwrap();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    (
        resp.status().as_u16(),
        header("grpc-status"),
        header("grpc-message"),
    )
}

/// One framed, valid SendMessageRequest.
fn framed_send(text: &str) -> Vec<u8> {
    let body = prost::Message::encode_to_vec(&send(text));
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(body.len() as u32).to_be_bytes());
    framed.extend_from_slice(&body);
    framed
}

#[tokio::test]
async fn bad_metadata_and_content_types_get_the_right_status() {
    let s = start(&config(&[("A2A_GATEWAY_SERVER__HEADER_TIMEOUT_SECS", "1")])).await;
    let code = |c: Code| Some((c as i32).to_string());
    let grpc_ct: (&str, &[u8]) = ("content-type", b"application/grpc");
    // A valid call first: the raw client is right.
    let (http, status, _) = raw_send(s.addr, &[grpc_ct], framed_send("ok").into()).await;
    assert_eq!(
        (http, status),
        (200, None),
        "a valid call has its status in trailers"
    );
    // a2a-version that is no version, or not even text.
    for bad in [
        &b"garbage"[..],
        b"1.0\x80",
        b"\xff\xfe",
        b"1.0, 2.0",
        &[b'9'; 4000],
    ] {
        let (http, status, message) = raw_send(
            s.addr,
            &[grpc_ct, ("a2a-version", bad)],
            framed_send("v").into(),
        )
        .await;
        assert_eq!(http, 200);
        assert_eq!(
            status,
            code(Code::FailedPrecondition),
            "{bad:?}: {message:?}"
        );
    }
    // Other codecs than protobuf are refused, whatever the spelling of proto is.
    for ct in [
        "application/grpc+json",
        "application/grpc+JSON; x=y",
        "application/grpc+",
    ] {
        let (http, status, message) = raw_send(
            s.addr,
            &[("content-type", ct.as_bytes())],
            framed_send("v").into(),
        )
        .await;
        if ct.ends_with('+') {
            // `application/grpc+` names no codec: protobuf, served.
            assert_eq!((http, status), (200, None), "{ct}");
            continue;
        }
        assert_eq!(http, 200, "{ct}");
        assert_eq!(status, code(Code::InvalidArgument), "{ct}: {message:?}");
        assert!(message.unwrap().contains("content-type"), "{ct}");
    }
    for ct in ["application/grpc+proto", "Application/GRPC+Proto"] {
        let (_, status, message) = raw_send(
            s.addr,
            &[("content-type", ct.as_bytes())],
            framed_send("v").into(),
        )
        .await;
        assert_eq!(status, None, "{ct}: {message:?}");
    }
    // gRPC-Web is not gRPC: the HTTP side answers it (a JSON-RPC parse error, not a
    // crash); so does a request without any content-type.
    for ct in [Some(&b"application/grpc-web"[..]), None] {
        let headers: Vec<(&str, &[u8])> = ct.map(|c| ("content-type", c)).into_iter().collect();
        let (http, status, _) = raw_send(s.addr, &headers, framed_send("v").into()).await;
        assert!(http < 500, "{ct:?}: {http}");
        assert_eq!(status, None);
    }
    // Huge metadata: refused by the HTTP/2 layer or answered, never a crash; the
    // server serves the next call.
    let huge = vec![b'a'; 1 << 20];
    let http = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let sent = http
        .post(format!(
            "http://{}/lf.a2a.v1.A2AService/SendMessage",
            s.addr
        ))
        .header("content-type", "application/grpc")
        .header("x-huge", http::HeaderValue::from_bytes(&huge).unwrap())
        .body(framed_send("v"))
        .send()
        .await;
    if let Ok(resp) = sent {
        assert_ne!(resp.status().as_u16(), 500);
        assert_ne!(
            resp.headers().get("grpc-status").map(|v| v.as_bytes()),
            Some(&b"13"[..]),
            "huge metadata is not INTERNAL"
        );
    }
    // A message cut short by the end of the body: INVALID_ARGUMENT, not INTERNAL.
    let mut cut = framed_send("cut short");
    cut.truncate(cut.len() - 3);
    let (_, status, message) = raw_send(s.addr, &[grpc_ct], cut.into()).await;
    assert_eq!(status, code(Code::InvalidArgument), "{message:?}");
    // A request message that never arrives whole: DEADLINE_EXCEEDED after
    // server.header_timeout_secs (1 s here), not a call that waits forever.
    let mut first_half = framed_send("slow");
    first_half.truncate(4);
    let trickle = futures::stream::iter([Ok::<_, std::io::Error>(first_half)])
        .chain(futures::stream::pending());
    let started = std::time::Instant::now();
    let (_, status, message) = tokio::time::timeout(
        Duration::from_secs(10),
        raw_send(s.addr, &[grpc_ct], reqwest::Body::wrap_stream(trickle)),
    )
    .await
    .expect("the server ends the call");
    assert_eq!(status, code(Code::DeadlineExceeded), "{message:?}");
    assert!(started.elapsed() >= Duration::from_millis(900));
    // Still serving.
    let mut c = client(s.addr).await;
    c.send_message(v1(send("still here"))).await.unwrap();
}
