//! The gRPC client (spec §10): the library's generated tonic client for
//! `lf.a2a.v1.A2AService`, over h2c to the card's GRPC interface (`host:port`). The
//! ProtoJSON request becomes the operation's prost message and the answer goes back to
//! ProtoJSON with the library's own converters
//! ([`a2a_gateway::transport::grpc::json`]); a `google.rpc.Status` becomes a
//! [`Failure`] with its `ErrorInfo` reason and the gRPC code name.
//!
//! gRPC has no SSE `id:`: events carry `id: None`, and there is no `Last-Event-ID`
//! resume and no `Content-Type` choice, so [`Opts::last_event_id`] and
//! [`Opts::content_type`] must be unset here.

use async_trait::async_trait;
use futures::StreamExt;
use prost::{Message, Name};
use serde_json::{Value, json};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;

use a2a_gateway::transport::grpc::json::{from_json, to_json};
use a2a_gateway::transport::grpc::proto::{self, a2a_service_client::A2aServiceClient};

use super::client::{Binding, Codes, Event, Events, Failure, Operation, Opts};

/// gRPC at `authority` (`host:port`, plaintext HTTP/2).
pub struct Grpc {
    channel: Channel,
}

impl Grpc {
    /// A client of the gateway at `authority`; connects on the first call.
    pub fn new(authority: &str) -> Self {
        let channel = Endpoint::from_shared(format!("http://{authority}"))
            .expect("the card's gRPC authority is host:port")
            .timeout(std::time::Duration::from_secs(20))
            .connect_lazy();
        Grpc { channel }
    }

    fn client(&self) -> A2aServiceClient<Channel> {
        A2aServiceClient::new(self.channel.clone())
    }
}

/// The canonical name of `code` (`NOT_FOUND`), as in `google.rpc.Code`.
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// The failure `status` carries, checking its `ErrorInfo` on the way.
fn failure(status: &Status) -> Failure {
    let reason = match status.get_details_error_info() {
        Some(info) => {
            assert_eq!(info.domain, "a2a-protocol.org", "{status:?}");
            info.reason
        }
        None => format!("<no ErrorInfo: {}>", status.message()),
    };
    Failure {
        reason,
        code: code_name(status.code()).to_owned(),
    }
}

/// `request` as the prost message `M`, with the call's metadata.
fn request<M: Message + Name + Default>(request: Value, opts: &Opts) -> Request<M> {
    assert!(
        opts.last_event_id.is_none() && opts.content_type.is_none(),
        "gRPC has no Last-Event-ID and no Content-Type choice: {opts:?}"
    );
    let msg = from_json::<M>(request.clone())
        .unwrap_or_else(|e| panic!("{request} is no {}: {e}", M::full_name()));
    let mut req = Request::new(msg);
    req.metadata_mut().insert(
        "a2a-version",
        opts.version.unwrap_or("1.0").parse().expect("ASCII"),
    );
    if let Some(bearer) = &opts.bearer {
        req.metadata_mut().insert(
            "authorization",
            format!("Bearer {bearer}").parse().expect("ASCII"),
        );
    }
    req
}

/// The ProtoJSON of a unary answer.
fn answer<M: Message + Name>(result: Result<tonic::Response<M>, Status>) -> Result<Value, Failure> {
    let msg = result.map_err(|s| failure(&s))?.into_inner();
    Ok(to_json(&msg).expect("the answer converts to ProtoJSON"))
}

/// A `ListTasksResponse` with all four fields. Its fields are proto3 scalars and a
/// repeated field, without presence: an empty page, `""` (the last page's token) and
/// `0` are the same on the wire as absent, and canonical ProtoJSON leaves them out.
/// The JSON bindings always write them (the spec's `ListTasksResponse` requires
/// them), so the client fills them in as a JSON client would read them.
fn with_list_fields(mut v: Value) -> Value {
    let m = v.as_object_mut().expect("a ListTasksResponse is an object");
    for (field, default) in [
        ("tasks", json!([])),
        ("nextPageToken", json!("")),
        ("pageSize", json!(0)),
        ("totalSize", json!(0)),
    ] {
        m.entry(field).or_insert(default);
    }
    v
}

#[async_trait]
impl Binding for Grpc {
    fn name(&self) -> &'static str {
        "GRPC"
    }

    fn code(&self, codes: Codes) -> String {
        codes.grpc.to_owned()
    }

    async fn unary(&self, op: Operation, req: Value, opts: &Opts) -> Result<Value, Failure> {
        let mut c = self.client();
        match op {
            Operation::SendMessage => answer(c.send_message(request(req, opts)).await),
            Operation::GetTask => answer(c.get_task(request(req, opts)).await),
            Operation::ListTasks => {
                answer(c.list_tasks(request(req, opts)).await).map(with_list_fields)
            }
            Operation::CancelTask => answer(c.cancel_task(request(req, opts)).await),
            Operation::CreateTaskPushNotificationConfig => answer(
                c.create_task_push_notification_config(request(req, opts))
                    .await,
            ),
            Operation::GetTaskPushNotificationConfig => answer(
                c.get_task_push_notification_config(request(req, opts))
                    .await,
            ),
            Operation::ListTaskPushNotificationConfigs => answer(
                c.list_task_push_notification_configs(request(req, opts))
                    .await,
            ),
            Operation::DeleteTaskPushNotificationConfig => answer(
                c.delete_task_push_notification_config(request(req, opts))
                    .await,
            ),
            Operation::GetExtendedAgentCard => {
                answer(c.get_extended_agent_card(request(req, opts)).await)
            }
            Operation::SendStreamingMessage | Operation::SubscribeToTask => {
                panic!("{} is a streaming method", op.name())
            }
        }
    }

    async fn stream(&self, op: Operation, req: Value, opts: &Opts) -> Result<Events, Failure> {
        let mut c = self.client();
        let result = match op {
            Operation::SendStreamingMessage => {
                c.send_streaming_message(request::<proto::SendMessageRequest>(req, opts))
                    .await
            }
            Operation::SubscribeToTask => {
                c.subscribe_to_task(request::<proto::SubscribeToTaskRequest>(req, opts))
                    .await
            }
            other => panic!("{} is a unary method", other.name()),
        };
        let mut stream = result.map_err(|s| failure(&s))?.into_inner();
        // A server may also send its headers and then the error as the first item
        // (rather than a trailers-only answer): either way it is an error before the
        // first event.
        let first = match stream.next().await {
            Some(Ok(first)) => first,
            Some(Err(s)) => return Err(failure(&s)),
            None => return Ok(futures::stream::empty().boxed()),
        };
        let event = |item: Result<proto::StreamResponse, Status>| {
            let msg = item.map_err(|s| failure(&s))?;
            Ok(Event {
                id: None,
                body: to_json(&msg).expect("a StreamResponse converts to ProtoJSON"),
            })
        };
        Ok(futures::stream::once(async move { Ok(first) })
            .chain(stream)
            .map(event)
            .boxed())
    }
}
