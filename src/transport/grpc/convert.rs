//! Our [`protocol`] types → the generated prost messages, field by field, for the
//! answers that every call and every stream event carries (Task, Message, the stream
//! events, `SendMessageResponse`, `ListTasksResponse`).
//!
//! The result is exactly the message that [`json::from_json`] builds from the same value's
//! ProtoJSON (the unit tests compare both on every kind of content), without that
//! route's detour through a dynamic message and two protobuf encodings: an absent
//! optional string is `""`, an absent list empty, `Struct`/`Value` hold JSON numbers as
//! doubles, enums their proto numbers, timestamps seconds and nanoseconds since the Unix
//! epoch.
//!
//! [`Reply`] picks the path per response message: these types here, the rest (agent
//! card, push configurations, `Empty`) through [`json::from_json`].

use prost::{Message, Name};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::json::{self, ConversionError};
use super::proto;
use crate::protocol;

/// `google.protobuf.Struct` from a JSON object.
fn to_struct(map: protocol::Metadata) -> prost_types::Struct {
    prost_types::Struct {
        fields: map.into_iter().map(|(k, v)| (k, to_value(v))).collect(),
    }
}

/// `google.protobuf.Value` from JSON (numbers as doubles, as ProtoJSON reads them).
fn to_value(v: Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match v {
        Value::Null => Kind::NullValue(prost_types::NullValue::NullValue as i32),
        Value::Bool(b) => Kind::BoolValue(b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Kind::StringValue(s),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.into_iter().map(to_value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(to_struct(map)),
    };
    prost_types::Value { kind: Some(kind) }
}

fn to_timestamp(t: protocol::time::Timestamp) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        // A leap second's nanoseconds (>= 1e9) are not a valid Timestamp.
        nanos: t.timestamp_subsec_nanos().min(999_999_999) as i32,
    }
}

impl From<protocol::Part> for proto::Part {
    fn from(p: protocol::Part) -> Self {
        use proto::part::Content;
        let content = match p.content {
            protocol::PartContent::Text(t) => Content::Text(t),
            protocol::PartContent::Raw(b) => Content::Raw(b),
            protocol::PartContent::Url(u) => Content::Url(u),
            protocol::PartContent::Data(d) => Content::Data(to_value(d)),
        };
        Self {
            metadata: p.metadata.map(to_struct),
            filename: p.filename.unwrap_or_default(),
            media_type: p.media_type.unwrap_or_default(),
            content: Some(content),
        }
    }
}

fn parts(parts: Vec<protocol::Part>) -> Vec<proto::Part> {
    parts.into_iter().map(Into::into).collect()
}

impl From<protocol::Message> for proto::Message {
    fn from(m: protocol::Message) -> Self {
        Self {
            message_id: m.message_id,
            context_id: m.context_id.unwrap_or_default(),
            task_id: m.task_id.unwrap_or_default(),
            role: m.role.number(),
            parts: parts(m.parts),
            metadata: m.metadata.map(to_struct),
            extensions: m.extensions,
            reference_task_ids: m.reference_task_ids,
        }
    }
}

impl From<protocol::Artifact> for proto::Artifact {
    fn from(a: protocol::Artifact) -> Self {
        Self {
            artifact_id: a.artifact_id,
            name: a.name.unwrap_or_default(),
            description: a.description.unwrap_or_default(),
            parts: parts(a.parts),
            metadata: a.metadata.map(to_struct),
            extensions: a.extensions,
        }
    }
}

impl From<protocol::TaskStatus> for proto::TaskStatus {
    fn from(s: protocol::TaskStatus) -> Self {
        Self {
            state: s.state.number(),
            message: s.message.map(Into::into),
            timestamp: s.timestamp.map(to_timestamp),
        }
    }
}

impl From<protocol::Task> for proto::Task {
    fn from(t: protocol::Task) -> Self {
        Self {
            id: t.id,
            context_id: t.context_id,
            status: Some(t.status.into()),
            artifacts: t
                .artifacts
                .unwrap_or_default()
                .into_iter()
                .map(Into::into)
                .collect(),
            history: t
                .history
                .unwrap_or_default()
                .into_iter()
                .map(Into::into)
                .collect(),
            metadata: t.metadata.map(to_struct),
        }
    }
}

impl From<protocol::TaskStatusUpdateEvent> for proto::TaskStatusUpdateEvent {
    fn from(e: protocol::TaskStatusUpdateEvent) -> Self {
        Self {
            task_id: e.task_id,
            context_id: e.context_id,
            status: Some(e.status.into()),
            metadata: e.metadata.map(to_struct),
        }
    }
}

impl From<protocol::TaskArtifactUpdateEvent> for proto::TaskArtifactUpdateEvent {
    fn from(e: protocol::TaskArtifactUpdateEvent) -> Self {
        Self {
            task_id: e.task_id,
            context_id: e.context_id,
            artifact: Some(e.artifact.into()),
            append: e.append,
            last_chunk: e.last_chunk,
            metadata: e.metadata.map(to_struct),
        }
    }
}

impl From<protocol::StreamResponse> for proto::StreamResponse {
    fn from(r: protocol::StreamResponse) -> Self {
        use proto::stream_response::Payload;
        let payload = match r {
            protocol::StreamResponse::Task(t) => Payload::Task(t.into()),
            protocol::StreamResponse::Message(m) => Payload::Message(m.into()),
            protocol::StreamResponse::StatusUpdate(e) => Payload::StatusUpdate(e.into()),
            protocol::StreamResponse::ArtifactUpdate(e) => Payload::ArtifactUpdate(e.into()),
        };
        Self {
            payload: Some(payload),
        }
    }
}

impl From<protocol::SendMessageResponse> for proto::SendMessageResponse {
    fn from(r: protocol::SendMessageResponse) -> Self {
        use proto::send_message_response::Payload;
        let payload = match r {
            protocol::SendMessageResponse::Task(t) => Payload::Task(t.into()),
            protocol::SendMessageResponse::Message(m) => Payload::Message(m.into()),
        };
        Self {
            payload: Some(payload),
        }
    }
}

impl From<protocol::ListTasksResponse> for proto::ListTasksResponse {
    fn from(r: protocol::ListTasksResponse) -> Self {
        Self {
            tasks: r.tasks.into_iter().map(Into::into).collect(),
            next_page_token: r.next_page_token,
            page_size: r.page_size,
            total_size: r.total_size,
        }
    }
}

/// A response message made from an operation's answer (its ProtoJSON, as the
/// [operation table](crate::transport::operations) returns it).
pub trait Reply: Sized {
    /// The message for `value`.
    ///
    /// # Errors
    /// When `value` is not this message's ProtoJSON (a server fault: the answer came
    /// from our own types).
    fn from_reply(value: Value) -> Result<Self, ConversionError>;
}

/// Through our protocol type `T` and the conversions above.
fn via<T, M>(value: Value) -> Result<M, ConversionError>
where
    T: DeserializeOwned + Into<M>,
    M: Name,
{
    serde_json::from_value::<T>(value)
        .map(Into::into)
        .map_err(|e| ConversionError::new(format!("{}: {e}", M::full_name())))
}

macro_rules! reply_via {
    ($($msg:ty => $ours:ty),* $(,)?) => {$(
        impl Reply for $msg {
            fn from_reply(value: Value) -> Result<Self, ConversionError> {
                via::<$ours, $msg>(value)
            }
        }
    )*};
}

reply_via! {
    proto::SendMessageResponse => protocol::SendMessageResponse,
    proto::Task => protocol::Task,
    proto::ListTasksResponse => protocol::ListTasksResponse,
}

macro_rules! reply_via_descriptor {
    ($($msg:ty),* $(,)?) => {$(
        impl Reply for $msg {
            fn from_reply(value: Value) -> Result<Self, ConversionError> {
                json::from_json(value)
            }
        }
    )*};
}

reply_via_descriptor! {
    proto::AgentCard,
    proto::TaskPushNotificationConfig,
    proto::ListTaskPushNotificationConfigsResponse,
}

/// Any other message (`google.protobuf.Empty` of the delete method): through its
/// descriptor.
pub fn from_reply_generic<M: Message + Name + Default>(value: Value) -> Result<M, ConversionError> {
    json::from_json(value)
}

#[cfg(test)]
mod tests {
    //! Every conversion gives the message that the descriptor route builds from the same
    //! value's ProtoJSON.

    use serde::Serialize;
    use serde_json::json;

    use super::*;

    /// `v` read as our `T`, converted directly and through ProtoJSON: the same message.
    fn same<T, M>(v: Value) -> M
    where
        T: DeserializeOwned + Serialize + Into<M>,
        M: Message + Name + Default + PartialEq + std::fmt::Debug,
    {
        let ours: T = serde_json::from_value(v).expect("our type reads the fixture");
        let reflected: M = json::from_json(serde_json::to_value(&ours).unwrap()).unwrap();
        let direct: M = ours.into();
        assert_eq!(direct, reflected);
        direct
    }

    fn message() -> Value {
        json!({
            "messageId": "m-1", "contextId": "ctx-1", "taskId": "t-1", "role": "ROLE_USER",
            "parts": [
                {"text": "hello", "metadata": {"k": "v", "n": 7, "f": -1.25, "z": null}},
                {"raw": "AAEC/w==", "mediaType": "application/octet-stream", "filename": "b.bin"},
                {"url": "https://example.com/a.pdf", "mediaType": "application/pdf"},
                {"data": {"n": 1.5, "big": 1e300, "u": 18446744073709551615u64,
                          "list": [true, null, "x", [], {}], "nested": {"a": {}}}},
                {"data": [1, 2, 3]},
                {"data": "just a string"},
                {"data": null},
                {"data": false, "metadata": {}},
            ],
            "metadata": {"trace": {"id": 7}, "flag": false},
            "extensions": ["https://example.com/ext/1"],
            "referenceTaskIds": ["t-0"],
        })
    }

    fn task(state: &str) -> Value {
        json!({
            "id": "t-1", "contextId": "ctx-1",
            "status": {
                "state": state, "timestamp": "2026-01-02T03:04:05.678Z",
                "message": {"messageId": "m-2", "role": "ROLE_AGENT", "parts": [{"text": "?"}]},
            },
            "artifacts": [
                {"artifactId": "a-1", "name": "out", "description": "the output",
                 "parts": [{"text": "part 1"}, {"data": {"ok": true}}],
                 "metadata": {"size": 2}, "extensions": ["https://example.com/ext/2"]},
                {"artifactId": "a-2", "parts": []},
            ],
            "history": [message(), {"messageId": "m-3", "role": "ROLE_AGENT", "parts": []}],
            "metadata": {"owner": "x"},
        })
    }

    #[test]
    fn tasks_in_every_state() {
        for n in 0..=8 {
            let state = protocol::TaskState::from_number(n).unwrap();
            let t: proto::Task = same::<protocol::Task, _>(task(state.as_str()));
            assert_eq!(t.status.unwrap().state, n as i32);
        }
        // The bare minimum: no timestamp, artifacts, history or metadata.
        same::<protocol::Task, proto::Task>(
            json!({"id": "t", "status": {"state": "TASK_STATE_SUBMITTED"}}),
        );
        // Present but empty lists and maps.
        same::<protocol::Task, proto::Task>(json!({
            "id": "t", "contextId": "", "status": {"state": "TASK_STATE_WORKING"},
            "artifacts": [], "history": [], "metadata": {},
        }));
    }

    #[test]
    fn messages_and_roles() {
        for role in ["ROLE_USER", "ROLE_AGENT", "ROLE_UNSPECIFIED"] {
            let mut m = message();
            m["role"] = json!(role);
            same::<protocol::Message, proto::Message>(m);
        }
        same::<protocol::Message, proto::Message>(
            json!({"messageId": "m", "role": "ROLE_USER", "parts": []}),
        );
    }

    #[test]
    fn every_stream_event() {
        for v in [
            json!({"task": task("TASK_STATE_WORKING")}),
            json!({"message": message()}),
            json!({"statusUpdate": {
                "taskId": "t-1", "contextId": "ctx-1",
                "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-02T03:04:05.001Z"},
                "metadata": {"x": 1},
            }}),
            json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": message()}}}),
            json!({"artifactUpdate": {
                "taskId": "t-1", "contextId": "ctx-1",
                "artifact": {"artifactId": "a", "parts": [{"text": "chunk"}]},
                "append": true, "lastChunk": true, "metadata": {"m": [1]},
            }}),
            json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
                "artifact": {"artifactId": "a", "parts": [{"raw": ""}]}}}),
        ] {
            same::<protocol::StreamResponse, proto::StreamResponse>(v);
        }
    }

    #[test]
    fn replies() {
        for v in [
            json!({"task": task("TASK_STATE_COMPLETED")}),
            json!({"message": message()}),
        ] {
            let direct = proto::SendMessageResponse::from_reply(v.clone()).unwrap();
            assert_eq!(direct, json::from_json(v).unwrap());
        }
        let v = json!({"tasks": [task("TASK_STATE_FAILED"), task("TASK_STATE_CANCELED")],
            "nextPageToken": "n", "pageSize": 2, "totalSize": 9});
        let direct = proto::ListTasksResponse::from_reply(v.clone()).unwrap();
        assert_eq!(direct, json::from_json(v).unwrap());
        let v = json!({"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0});
        let direct = proto::ListTasksResponse::from_reply(v.clone()).unwrap();
        assert_eq!(direct, json::from_json(v).unwrap());
        assert_eq!(
            proto::Task::from_reply(task("TASK_STATE_REJECTED")).unwrap(),
            json::from_json(task("TASK_STATE_REJECTED")).unwrap()
        );
        // Not a Task: a clear error naming the message.
        let err = proto::Task::from_reply(json!({"id": 5})).unwrap_err();
        assert!(err.to_string().contains("lf.a2a.v1.Task"), "{err}");
    }
}
