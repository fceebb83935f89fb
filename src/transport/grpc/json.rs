//! Conversion between the generated prost messages and their ProtoJSON form, the
//! [`serde_json::Value`] the shared [operation table](crate::transport::operations)
//! takes and returns.
//!
//! The conversion is generic and driven by the descriptors of `proto/a2a.proto`
//! (prost-reflect's [`DynamicMessage`]): a message is transcoded through its protobuf
//! encoding into a dynamic message of the same descriptor, which serializes as
//! canonical ProtoJSON: lowerCamelCase names, fields at their default value left out
//! (fields declared `optional` keep presence, so `historyLength: 0` survives), enums
//! by name (`TASK_STATE_WORKING`), `Timestamp` as RFC 3339, `bytes` as base64,
//! `Struct`/`Value` as plain JSON, a `oneof` as its one set member (`{"text": …}`).
//! The reverse direction accepts what our [`protocol`](crate::protocol) types emit and
//! ignores JSON fields the proto does not have.

use std::sync::LazyLock;

use prost::{Message, Name};
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, MessageDescriptor, SerializeOptions,
};
use serde_json::Value;

/// The encoded `FileDescriptorSet` of `proto/a2a.proto` and the well-known types it
/// imports, written by build.rs.
static DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/a2a_descriptor.bin"));

static POOL: LazyLock<Result<DescriptorPool, String>> = LazyLock::new(|| {
    DescriptorPool::decode(DESCRIPTOR_SET).map_err(|e| format!("descriptor set: {e}"))
});

/// Why a message could not be converted. The text names the message type and the
/// field at fault; it never carries more of the message than that.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConversionError(String);

impl ConversionError {
    /// An error with this text.
    pub(crate) fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }
}

/// The descriptor pool of `lf.a2a.v1` (and the well-known types).
///
/// # Errors
/// Only when the build produced an unreadable descriptor set (a unit test checks it).
pub fn pool() -> Result<&'static DescriptorPool, ConversionError> {
    POOL.as_ref().map_err(|e| ConversionError(e.clone()))
}

/// The descriptor of `M`.
///
/// # Errors
/// When `M` is not a message of `proto/a2a.proto` or its imports.
pub fn descriptor<M: Name>() -> Result<MessageDescriptor, ConversionError> {
    let name = M::full_name();
    pool()?
        .get_message_by_name(&name)
        .ok_or_else(|| ConversionError(format!("no descriptor for {name}")))
}

/// `msg` in ProtoJSON.
///
/// # Errors
/// When the message cannot be represented in JSON (e.g. a `Timestamp` out of the RFC
/// 3339 range).
pub fn to_json<M: Message + Name>(msg: &M) -> Result<Value, ConversionError> {
    let mut dynamic = DynamicMessage::new(descriptor::<M>()?);
    dynamic
        .transcode_from(msg)
        .map_err(|e| ConversionError(format!("{}: {e}", M::full_name())))?;
    let mut value = dynamic
        .serialize_with_options(serde_json::value::Serializer, &SerializeOptions::new())
        .map_err(|e| ConversionError(format!("{}: {e}", M::full_name())))?;
    whole_numbers_as_integers(&mut value);
    Ok(value)
}

/// Largest integer a double holds exactly (2^53).
const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;

/// `google.protobuf.Value` carries every number as a double, and prost-reflect writes
/// `7` back as `7.0`. The A2A proto has no float or double field of its own, so every
/// fractional-looking number in its JSON comes from a `Struct` or `Value`: whole
/// numbers that a double holds exactly are written as integers, as protobuf's own
/// JSON printers do, so `{"n": 7}` from a client reaches the agent as `{"n": 7}`.
fn whole_numbers_as_integers(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64())
                && f.fract() == 0.0
                && f.abs() <= EXACT_INTEGER_LIMIT
            {
                // In range, whole: the cast is exact.
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(fields) => fields.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

/// The message `M` whose ProtoJSON is `value`. `null` is the empty message; JSON fields
/// the proto does not define, and enum names it does not know, are ignored.
///
/// # Errors
/// When a field has the wrong JSON type or an impossible value (an unknown enum name,
/// bad base64, a timestamp that is not RFC 3339), or `value` is not an object.
pub fn from_json<M: Message + Name + Default>(value: Value) -> Result<M, ConversionError> {
    if value.is_null() {
        return Ok(M::default());
    }
    let options = DeserializeOptions::new().deny_unknown_fields(false);
    let dynamic = DynamicMessage::deserialize_with_options(descriptor::<M>()?, value, &options)
        .map_err(|e| ConversionError(format!("{}: {e}", M::full_name())))?;
    dynamic
        .transcode_to::<M>()
        .map_err(|e| ConversionError(format!("{}: {e}", M::full_name())))
}

#[cfg(test)]
mod tests {
    //! Round trips between the prost messages and our serde protocol types, one test per
    //! request or response message kind: our type → ProtoJSON → prost → ProtoJSON → our
    //! type must give back what we started with, and the prost fields must hold the
    //! values the JSON named.

    use serde::Serialize;
    use serde::de::DeserializeOwned;
    use serde_json::json;

    use super::super::proto;
    use super::*;
    use crate::protocol;

    /// `ours` (JSON of one of our protocol types) through prost `M` and back; returns the
    /// prost message for field checks.
    fn round_trip<M, T>(ours: Value) -> M
    where
        M: Message + Name + Default,
        T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let typed: T = serde_json::from_value(ours.clone()).expect("test JSON fits our type");
        let canonical = serde_json::to_value(&typed).unwrap();
        let msg: M = from_json(canonical.clone()).expect("our JSON converts to prost");
        let back = to_json(&msg).expect("prost converts to JSON");
        let again: T = serde_json::from_value(back.clone())
            .unwrap_or_else(|e| panic!("{back} does not decode as our type: {e}"));
        assert_eq!(
            again, typed,
            "round trip changed the value; JSON was {back}"
        );
        msg
    }

    fn message_json() -> Value {
        json!({
            "messageId": "m-1",
            "contextId": "ctx-1",
            "taskId": "t-1",
            "role": "ROLE_USER",
            "parts": [
                {"text": "hello", "metadata": {"k": "v"}},
                {"raw": "AAEC/w==", "mediaType": "application/octet-stream", "filename": "b.bin"},
                {"url": "https://example.com/a.pdf", "mediaType": "application/pdf"},
                {"data": {"n": 1.5, "list": [true, null, "x"], "nested": {"a": {}}}},
                {"data": [1, 2, 3]},
                {"data": "just a string"},
            ],
            "metadata": {"trace": {"id": 7}, "flag": false},
            "extensions": ["https://example.com/ext/1"],
            "referenceTaskIds": ["t-0"],
        })
    }

    fn task_json() -> Value {
        json!({
            "id": "t-1",
            "contextId": "ctx-1",
            "status": {
                "state": "TASK_STATE_INPUT_REQUIRED",
                "timestamp": "2026-01-02T03:04:05.678Z",
                "message": {
                    "messageId": "m-2", "contextId": "ctx-1", "taskId": "t-1",
                    "role": "ROLE_AGENT", "parts": [{"text": "which one?"}],
                },
            },
            "artifacts": [{
                "artifactId": "a-1", "name": "out", "description": "the output",
                "parts": [{"text": "part 1"}, {"data": {"ok": true}}],
                "metadata": {"size": 2}, "extensions": ["https://example.com/ext/2"],
            }],
            "history": [message_json()],
            "metadata": {"owner": "x"},
        })
    }

    #[test]
    fn the_descriptor_pool_loads_and_names_the_service() {
        let pool = pool().unwrap();
        let service = pool.get_service_by_name("lf.a2a.v1.A2AService").unwrap();
        let methods: Vec<_> = service.methods().map(|m| m.name().to_owned()).collect();
        for op in crate::transport::operations::Operation::ALL {
            assert!(methods.iter().any(|m| m == op.name()), "{}", op.name());
        }
        assert_eq!(methods.len(), 11);
    }

    #[test]
    fn send_message_request() {
        let msg: proto::SendMessageRequest = round_trip::<_, protocol::SendMessageRequest>(json!({
            "tenant": "acme",
            "message": message_json(),
            "configuration": {
                "acceptedOutputModes": ["text/plain"],
                "historyLength": 0,
                "returnImmediately": true,
            },
            "metadata": {"a": [1]},
        }));
        assert_eq!(msg.tenant, "acme");
        let m = msg.message.as_ref().unwrap();
        assert_eq!(m.role, proto::Role::User as i32);
        assert_eq!(m.parts.len(), 6);
        assert_eq!(
            m.parts[1].content,
            Some(proto::part::Content::Raw(vec![0, 1, 2, 255]))
        );
        assert_eq!(m.parts[1].filename, "b.bin");
        assert!(matches!(
            m.parts[3].content,
            Some(proto::part::Content::Data(_))
        ));
        let config = msg.configuration.as_ref().unwrap();
        assert_eq!(config.history_length, Some(0), "presence of 0 is kept");
        assert!(config.return_immediately);
        assert!(msg.metadata.unwrap().fields.contains_key("a"));
    }

    #[test]
    fn send_message_request_from_a_prost_client() {
        // What a gRPC client sends, read by the operation table.
        let req = proto::SendMessageRequest {
            message: Some(proto::Message {
                message_id: "m".into(),
                role: proto::Role::User as i32,
                parts: vec![proto::Part {
                    content: Some(proto::part::Content::Text("hi".into())),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let v = to_json(&req).unwrap();
        assert_eq!(
            v,
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}})
        );
        let ours: protocol::SendMessageRequest = serde_json::from_value(v).unwrap();
        assert_eq!(ours.message.context_id, None, "empty strings are absent");
        assert_eq!(ours.configuration, None);
    }

    #[test]
    fn get_task_request_keeps_history_length_presence() {
        let msg: proto::GetTaskRequest = round_trip::<_, protocol::GetTaskRequest>(
            json!({"id": "t-1", "historyLength": 0, "tenant": "acme"}),
        );
        assert_eq!(msg.history_length, Some(0));
        let msg: proto::GetTaskRequest =
            round_trip::<_, protocol::GetTaskRequest>(json!({"id": "t-1"}));
        assert_eq!(msg.history_length, None);
        assert_eq!(to_json(&msg).unwrap(), json!({"id": "t-1"}));
    }

    #[test]
    fn list_tasks_request() {
        let msg: proto::ListTasksRequest = round_trip::<_, protocol::ListTasksRequest>(json!({
            "contextId": "ctx-1",
            "status": "TASK_STATE_WORKING",
            "pageSize": 10,
            "pageToken": "cursor",
            "historyLength": 2,
            "statusTimestampAfter": "2026-01-02T03:04:05.120Z",
            "includeArtifacts": false,
        }));
        assert_eq!(msg.status, proto::TaskState::Working as i32);
        assert_eq!(msg.include_artifacts, Some(false));
        let t = msg.status_timestamp_after.unwrap();
        assert_eq!(t.nanos, 120_000_000);
        // An empty request (every filter unset) is `{}` both ways.
        let empty = proto::ListTasksRequest::default();
        assert_eq!(to_json(&empty).unwrap(), json!({}));
        let ours: protocol::ListTasksRequest =
            serde_json::from_value(to_json(&empty).unwrap()).unwrap();
        assert_eq!(ours, protocol::ListTasksRequest::default());
    }

    #[test]
    fn cancel_subscribe_and_card_requests() {
        let msg: proto::CancelTaskRequest = round_trip::<_, protocol::CancelTaskRequest>(
            json!({"id": "t-1", "metadata": {"why": "done"}}),
        );
        assert_eq!(msg.id, "t-1");
        let msg: proto::SubscribeToTaskRequest = round_trip::<_, protocol::SubscribeToTaskRequest>(
            json!({"id": "t-1", "tenant": "acme"}),
        );
        assert_eq!(msg.tenant, "acme");
        let msg: proto::GetExtendedAgentCardRequest =
            round_trip::<_, protocol::GetExtendedAgentCardRequest>(json!({}));
        assert_eq!(msg.tenant, "");
    }

    #[test]
    fn push_config_requests_convert() {
        let cfg = proto::TaskPushNotificationConfig {
            task_id: "t-1".into(),
            url: "https://hooks.example.com/a2a".into(),
            token: "tok".into(),
            authentication: Some(proto::AuthenticationInfo {
                scheme: "Bearer".into(),
                credentials: "c".into(),
            }),
            ..Default::default()
        };
        let v = to_json(&cfg).unwrap();
        assert_eq!(v["taskId"], "t-1");
        assert_eq!(v["authentication"]["scheme"], "Bearer");
        assert_eq!(
            from_json::<proto::TaskPushNotificationConfig>(v).unwrap(),
            cfg
        );
        let list = proto::ListTaskPushNotificationConfigsRequest {
            tenant: "acme".into(),
            task_id: "t-1".into(),
            page_size: 5,
            page_token: String::new(),
        };
        let v = to_json(&list).unwrap();
        assert_eq!(v, json!({"tenant": "acme", "taskId": "t-1", "pageSize": 5}));
        let v = json!({"taskId": "t", "id": "c"});
        let get: proto::GetTaskPushNotificationConfigRequest = from_json(v.clone()).unwrap();
        assert_eq!(get.id, "c");
        let del: proto::DeleteTaskPushNotificationConfigRequest = from_json(v).unwrap();
        assert_eq!(del.task_id, "t");
        // The list response carries configs and the cursor.
        let resp: proto::ListTaskPushNotificationConfigsResponse =
            from_json(json!({"configs": [to_json(&cfg).unwrap()], "nextPageToken": "n"})).unwrap();
        assert_eq!(resp.configs, vec![cfg]);
    }

    #[test]
    fn task_with_everything() {
        let msg: proto::Task = round_trip::<_, protocol::Task>(task_json());
        let status = msg.status.as_ref().unwrap();
        assert_eq!(status.state, proto::TaskState::InputRequired as i32);
        let ts = status.timestamp.unwrap();
        assert_eq!(ts.nanos, 678_000_000);
        assert_eq!(msg.artifacts[0].parts.len(), 2);
        assert_eq!(msg.history[0].parts.len(), 6);
    }

    #[test]
    fn every_task_state_and_role_round_trips() {
        for n in 1..=8 {
            let state = protocol::TaskState::from_number(n).unwrap();
            let mut task = task_json();
            task["status"]["state"] = json!(state.as_str());
            let msg: proto::Task = round_trip::<_, protocol::Task>(task);
            assert_eq!(msg.status.unwrap().state, n as i32, "{state}");
        }
        for role in ["ROLE_USER", "ROLE_AGENT"] {
            let mut m = message_json();
            m["role"] = json!(role);
            round_trip::<proto::Message, protocol::Message>(m);
        }
    }

    #[test]
    fn send_message_response_oneof() {
        let msg: proto::SendMessageResponse =
            round_trip::<_, protocol::SendMessageResponse>(json!({"task": task_json()}));
        assert!(matches!(
            msg.payload,
            Some(proto::send_message_response::Payload::Task(_))
        ));
        let msg: proto::SendMessageResponse =
            round_trip::<_, protocol::SendMessageResponse>(json!({"message": message_json()}));
        assert!(matches!(
            msg.payload,
            Some(proto::send_message_response::Payload::Message(_))
        ));
    }

    #[test]
    fn stream_response_every_kind() {
        use proto::stream_response::Payload;
        let cases = [
            json!({"task": task_json()}),
            json!({"message": message_json()}),
            json!({"statusUpdate": {
                "taskId": "t-1", "contextId": "ctx-1",
                "status": {"state": "TASK_STATE_WORKING", "timestamp": "2026-01-02T03:04:05.000Z"},
                "metadata": {"x": 1},
            }}),
            json!({"artifactUpdate": {
                "taskId": "t-1", "contextId": "ctx-1",
                "artifact": {"artifactId": "a", "parts": [{"text": "chunk"}]},
                "append": true, "lastChunk": true,
            }}),
        ];
        let mut kinds = Vec::new();
        for case in cases {
            let msg: proto::StreamResponse = round_trip::<_, protocol::StreamResponse>(case);
            kinds.push(match msg.payload.unwrap() {
                Payload::Task(_) => "task",
                Payload::Message(_) => "message",
                Payload::StatusUpdate(_) => "status",
                Payload::ArtifactUpdate(a) => {
                    assert!(a.append && a.last_chunk);
                    "artifact"
                }
            });
        }
        assert_eq!(kinds, ["task", "message", "status", "artifact"]);
    }

    #[test]
    fn list_tasks_response_keeps_zero_counts() {
        let ours = json!({
            "tasks": [task_json()], "nextPageToken": "n", "pageSize": 50, "totalSize": 1,
        });
        let msg: proto::ListTasksResponse = round_trip::<_, protocol::ListTasksResponse>(ours);
        assert_eq!(msg.page_size, 50);
        assert_eq!(msg.tasks.len(), 1);
        // Fields at their default are left out of ProtoJSON (an empty last page).
        let empty = proto::ListTasksResponse {
            page_size: 50,
            ..Default::default()
        };
        let v = to_json(&empty).unwrap();
        assert_eq!(v, json!({"pageSize": 50}));
    }

    #[test]
    fn agent_card() {
        let card = json!({
            "name": "agent", "description": "does things", "version": "1.2.3",
            "supportedInterfaces": [
                {"url": "https://gw.example.com/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "gw.example.com:443", "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": "t"},
            ],
            "provider": {"url": "https://example.com", "organization": "Example"},
            "documentationUrl": "https://example.com/docs",
            "capabilities": {"streaming": true, "pushNotifications": false, "extendedAgentCard": false,
                "extensions": [{"uri": "https://example.com/ext", "description": "d", "required": true, "params": {"a": 1}}]},
            "securitySchemes": {
                "apiKey": {"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "key"}},
                "k": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}},
                "o": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {"tokenUrl": "https://t", "scopes": {"a": "b"}}}}},
                "m": {"mtlsSecurityScheme": {"description": "mtls"}},
                "oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://o"}},
            },
            "securityRequirements": [{"schemes": {"apiKey": {"list": []}, "o": {"list": ["a"]}}}],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain", "application/json"],
            "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"], "examples": ["e"],
                "inputModes": ["text/plain"], "outputModes": ["application/json"]}],
            "iconUrl": "https://example.com/i.png",
        });
        let msg: proto::AgentCard = round_trip::<_, protocol::AgentCard>(card);
        assert_eq!(msg.supported_interfaces[1].protocol_binding, "GRPC");
        assert_eq!(msg.security_schemes.len(), 5);
        assert_eq!(msg.capabilities.unwrap().push_notifications, Some(false));
    }

    #[test]
    fn struct_numbers_keep_their_json_form() {
        let v = json!({"id": "t", "metadata": {"i": 7, "neg": -3, "f": 1.5, "big": 1e300, "l": [0, 2.25]}});
        let msg: proto::CancelTaskRequest = from_json(v.clone()).unwrap();
        assert_eq!(to_json(&msg).unwrap(), v);
    }

    #[test]
    fn bad_json_is_a_clear_error() {
        for (bad, needle) in [
            (json!({"id": 5}), "GetTaskRequest"),
            (
                json!({"id": "t", "historyLength": "many"}),
                "GetTaskRequest",
            ),
            (json!([1]), "GetTaskRequest"),
        ] {
            let err = from_json::<proto::GetTaskRequest>(bad).unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        }
        // Like unknown fields, an unknown enum name is dropped (ProtoJSON's "ignore
        // unknown" mode), leaving the field at its default.
        let l: proto::ListTasksRequest = from_json(json!({"status": "NOPE"})).unwrap();
        assert_eq!(l.status, 0);
        assert!(from_json::<proto::ListTasksRequest>(json!({"status": true})).is_err());
        assert!(from_json::<proto::Part>(json!({"raw": "%%%"})).is_err());
        // Fields the proto lacks are ignored (for instance 0.3 extras of our card).
        let t: proto::SubscribeToTaskRequest = from_json(json!({"id": "t", "kind": "x"})).unwrap();
        assert_eq!(t.id, "t");
    }
}
