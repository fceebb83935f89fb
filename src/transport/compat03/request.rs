//! 0.3 request params → the 1.0 request message (ProtoJSON) of the same operation.
//!
//! | 0.3 | 1.0 |
//! |---|---|
//! | `MessageSendParams{message, configuration, metadata}` | `SendMessageRequest` (same keys) |
//! | `Message{kind:"message", role:"user"\|"agent", …}` | `Message{role:"ROLE_USER"\|"ROLE_AGENT", …}` |
//! | `TextPart{kind:"text", text, metadata}` | `{text, metadata}` |
//! | `FilePart{kind:"file", file:{bytes, mimeType, name}}` | `{raw, mediaType, filename}` |
//! | `FilePart{kind:"file", file:{uri, mimeType, name}}` | `{url, mediaType, filename}` |
//! | `DataPart{kind:"data", data, metadata}` | `{data, metadata}` |
//! | `configuration.blocking` (absent = blocking) | `configuration.returnImmediately = !blocking` |
//! | `configuration.pushNotificationConfig{id,url,token,authentication{schemes,credentials}}` | `configuration.taskPushNotificationConfig{id,url,token,authentication{scheme,credentials}}` |
//! | `TaskQueryParams{id, historyLength, metadata}` | `GetTaskRequest{id, historyLength}` |
//! | `TaskIdParams{id, metadata}` (cancel) | `CancelTaskRequest{id, metadata}` |
//! | `TaskIdParams{id, metadata}` (resubscribe) | `SubscribeToTaskRequest{id}` |
//! | `TaskPushNotificationConfig{taskId, pushNotificationConfig{…}}` (set) | `TaskPushNotificationConfig{taskId, id, url, token, authentication}` |
//! | `{id, pushNotificationConfigId}` (get, delete) | `{taskId, id}` |
//! | `{id}` (list) | `{taskId}` |
//!
//! Other keys of a message (`messageId`, `contextId`, `taskId`, `metadata`,
//! `extensions`, `referenceTaskIds`) keep their names. Values are moved, not checked:
//! the operation table decodes the result and names a field of the wrong type. What
//! this module reads itself (`kind`, `role`, `file`, `blocking`) is checked here.

use serde_json::{Map, Value};

use crate::error::A2aError;
use crate::protocol::v03::{self, carry, short};
use crate::transport::operations::Operation;

fn invalid(msg: impl Into<String>) -> A2aError {
    A2aError::InvalidParams(msg.into())
}

/// `params` as an object; `null` (no params) is an empty one.
fn object(params: Value, what: &str) -> Result<Map<String, Value>, A2aError> {
    v03::object(params, what).map_err(invalid)
}

/// Translates the params of the 0.3 request for `op` into the 1.0 request message.
///
/// # Errors
/// [`A2aError::InvalidParams`] (-32602) when the params, a message, a part or a
/// configuration is not an object, a `kind` or `role` is not a 0.3 value, a file part
/// has neither or both of `bytes` and `uri`, or `blocking` is not a boolean.
pub fn to_v1(op: Operation, params: Value) -> Result<Value, A2aError> {
    let mut p = object(params, "params")?;
    let mut out = Map::new();
    carry(&mut p, "tenant", &mut out, "tenant");
    match op {
        Operation::SendMessage | Operation::SendStreamingMessage => {
            let message = p
                .remove("message")
                .ok_or_else(|| invalid("params.message is required"))?;
            out.insert(
                "message".into(),
                v03::message_to_v1(message).map_err(invalid)?,
            );
            if let Some(c) = p.remove("configuration").filter(|c| !c.is_null()) {
                out.insert("configuration".into(), configuration_to_v1(c)?);
            }
            carry(&mut p, "metadata", &mut out, "metadata");
        }
        Operation::GetTask => {
            carry(&mut p, "id", &mut out, "id");
            carry(&mut p, "historyLength", &mut out, "historyLength");
        }
        Operation::CancelTask => {
            carry(&mut p, "id", &mut out, "id");
            carry(&mut p, "metadata", &mut out, "metadata");
        }
        Operation::SubscribeToTask => carry(&mut p, "id", &mut out, "id"),
        Operation::CreateTaskPushNotificationConfig => {
            carry(&mut p, "taskId", &mut out, "taskId");
            if let Some(c) = p.remove("pushNotificationConfig") {
                for (k, v) in push_config_to_v1(c)? {
                    out.insert(k, v);
                }
            }
        }
        Operation::GetTaskPushNotificationConfig | Operation::DeleteTaskPushNotificationConfig => {
            carry(&mut p, "id", &mut out, "taskId");
            carry(&mut p, "pushNotificationConfigId", &mut out, "id");
        }
        Operation::ListTaskPushNotificationConfigs => carry(&mut p, "id", &mut out, "taskId"),
        Operation::GetExtendedAgentCard | Operation::ListTasks => {}
    }
    Ok(Value::Object(out))
}

/// A 0.3 `MessageSendConfiguration` → a 1.0 `SendMessageConfiguration`.
fn configuration_to_v1(c: Value) -> Result<Value, A2aError> {
    let mut c = object(c, "configuration")?;
    let mut out = Map::new();
    carry(
        &mut c,
        "acceptedOutputModes",
        &mut out,
        "acceptedOutputModes",
    );
    carry(&mut c, "historyLength", &mut out, "historyLength");
    match c.remove("blocking") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => {
            out.insert("returnImmediately".into(), Value::Bool(!b));
        }
        Some(other) => {
            return Err(invalid(format!(
                "configuration.blocking must be a boolean, got {}",
                short(&other)
            )));
        }
    }
    if let Some(push) = c.remove("pushNotificationConfig").filter(|v| !v.is_null()) {
        out.insert(
            "taskPushNotificationConfig".into(),
            Value::Object(push_config_to_v1(push)?),
        );
    }
    Ok(Value::Object(out))
}

/// A 0.3 `PushNotificationConfig{id,url,token,authentication{schemes,credentials}}` →
/// the fields of a 1.0 `TaskPushNotificationConfig` (`authentication.scheme` is the
/// first of 0.3's `schemes`).
fn push_config_to_v1(c: Value) -> Result<Map<String, Value>, A2aError> {
    let mut c = object(c, "pushNotificationConfig")?;
    let mut out = Map::new();
    for k in ["id", "url", "token"] {
        carry(&mut c, k, &mut out, k);
    }
    if let Some(auth) = c.remove("authentication").filter(|v| !v.is_null()) {
        let mut a = object(auth, "pushNotificationConfig.authentication")?;
        let mut auth = Map::new();
        if let Some(schemes) = a.remove("schemes") {
            let first = schemes
                .as_array()
                .and_then(|s| s.first().cloned())
                .unwrap_or(schemes);
            auth.insert("scheme".into(), first);
        }
        carry(&mut a, "credentials", &mut auth, "credentials");
        out.insert("authentication".into(), Value::Object(auth));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        CancelTaskRequest, GetTaskRequest, PartContent, Role, SendMessageRequest,
        SubscribeToTaskRequest,
    };
    use crate::transport::operations::decode;
    use serde_json::json;

    fn send(params: Value) -> SendMessageRequest {
        decode(to_v1(Operation::SendMessage, params).unwrap()).unwrap()
    }

    #[test]
    fn message_send_with_every_part_kind() {
        let params = json!({
            "message": {
                "kind": "message", "messageId": "m1", "role": "user",
                "contextId": "c1", "taskId": "t1",
                "referenceTaskIds": ["t0"], "extensions": ["urn:x"],
                "metadata": {"k": "v"},
                "parts": [
                    {"kind": "text", "text": "hi", "metadata": {"p": 1}},
                    {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "a.txt"}},
                    {"kind": "file", "file": {"uri": "https://example.com/a.pdf", "mimeType": "application/pdf"}},
                    {"kind": "data", "data": {"a": [1, 2]}},
                ],
            },
            "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 3, "blocking": true},
            "metadata": {"req": true},
        });
        let v1 = to_v1(Operation::SendMessage, params).unwrap();
        assert_eq!(
            v1,
            json!({
                "message": {
                    "messageId": "m1", "role": "ROLE_USER", "contextId": "c1", "taskId": "t1",
                    "referenceTaskIds": ["t0"], "extensions": ["urn:x"], "metadata": {"k": "v"},
                    "parts": [
                        {"text": "hi", "metadata": {"p": 1}},
                        {"raw": "aGk=", "mediaType": "text/plain", "filename": "a.txt"},
                        {"url": "https://example.com/a.pdf", "mediaType": "application/pdf"},
                        {"data": {"a": [1, 2]}},
                    ],
                },
                "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 3, "returnImmediately": false},
                "metadata": {"req": true},
            })
        );
        let req: SendMessageRequest = decode(v1).unwrap();
        assert_eq!(req.message.role, Role::User);
        assert_eq!(req.message.reference_task_ids, ["t0"]);
        assert_eq!(
            req.message.parts[1].content,
            PartContent::Raw(b"hi".to_vec())
        );
        assert_eq!(req.message.parts[1].filename.as_deref(), Some("a.txt"));
        assert!(!req.configuration.unwrap().returns_immediately());
    }

    #[test]
    fn blocking_false_returns_immediately_and_absent_blocks() {
        let msg = json!({"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "x"}]});
        let r = send(json!({"message": msg, "configuration": {"blocking": false}}));
        assert!(r.configuration.unwrap().returns_immediately());
        let r = send(json!({"message": msg, "configuration": {}}));
        assert!(!r.configuration.unwrap().returns_immediately());
        let r = send(json!({"message": msg}));
        assert!(r.configuration.is_none());
    }

    #[test]
    fn push_config_in_configuration_is_flattened() {
        let msg = json!({"messageId": "m", "role": "agent", "parts": [{"text": "x"}]});
        let v1 = to_v1(
            Operation::SendStreamingMessage,
            json!({"message": msg, "configuration": {"pushNotificationConfig": {
                "id": "p", "url": "https://hook", "token": "t",
                "authentication": {"schemes": ["Bearer"], "credentials": "c"}}}}),
        )
        .unwrap();
        assert_eq!(v1["message"]["role"], "ROLE_AGENT");
        assert_eq!(
            v1["configuration"]["taskPushNotificationConfig"],
            json!({"id": "p", "url": "https://hook", "token": "t",
                   "authentication": {"scheme": "Bearer", "credentials": "c"}})
        );
    }

    #[test]
    fn task_operations() {
        let get: GetTaskRequest = decode(
            to_v1(
                Operation::GetTask,
                json!({"id": "t", "historyLength": 2, "metadata": {}}),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!((get.id.as_str(), get.history_length), ("t", Some(2)));
        let cancel: CancelTaskRequest = decode(
            to_v1(
                Operation::CancelTask,
                json!({"id": "t", "metadata": {"why": "x"}}),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(cancel.metadata.unwrap()["why"], "x");
        let sub: SubscribeToTaskRequest = decode(
            to_v1(
                Operation::SubscribeToTask,
                json!({"id": "t", "metadata": {}}),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(sub.id, "t");
        assert_eq!(
            to_v1(Operation::GetExtendedAgentCard, Value::Null).unwrap(),
            json!({})
        );
    }

    #[test]
    fn push_config_operations() {
        use Operation::*;
        assert_eq!(
            to_v1(
                CreateTaskPushNotificationConfig,
                json!({"taskId": "t", "pushNotificationConfig": {"url": "https://h", "id": "p"}})
            )
            .unwrap(),
            json!({"taskId": "t", "url": "https://h", "id": "p"})
        );
        for op in [
            GetTaskPushNotificationConfig,
            DeleteTaskPushNotificationConfig,
        ] {
            assert_eq!(
                to_v1(op, json!({"id": "t", "pushNotificationConfigId": "p"})).unwrap(),
                json!({"taskId": "t", "id": "p"})
            );
        }
        assert_eq!(
            to_v1(ListTaskPushNotificationConfigs, json!({"id": "t"})).unwrap(),
            json!({"taskId": "t"})
        );
    }

    #[test]
    fn garbage_is_invalid_params() {
        let ok_msg = |parts: Value| json!({"message": {"kind": "message", "messageId": "m", "role": "user", "parts": parts}});
        let cases = [
            json!([1, 2]),
            json!("text"),
            json!({}),
            json!({"message": 5}),
            json!({"message": {"kind": "task", "messageId": "m", "role": "user", "parts": []}}),
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}),
            json!({"message": {"messageId": "m", "role": 1, "parts": []}}),
            json!({"message": {"messageId": "m", "role": "user", "parts": {}}}),
            ok_msg(json!([7])),
            ok_msg(json!([{}])),
            ok_msg(json!([{"kind": "image"}])),
            ok_msg(json!([{"kind": 3, "text": "x"}])),
            ok_msg(json!([{"kind": "text"}])),
            ok_msg(json!([{"kind": "file", "file": "x"}])),
            ok_msg(json!([{"kind": "file", "file": {}}])),
            ok_msg(json!([{"kind": "file", "file": {"bytes": "aGk=", "uri": "u"}}])),
            json!({"message": {"messageId": "m", "role": "user", "parts": []}, "configuration": {"blocking": "yes"}}),
            json!({"message": {"messageId": "m", "role": "user", "parts": []}, "configuration": []}),
        ];
        for params in cases {
            let err = to_v1(Operation::SendMessage, params.clone()).unwrap_err();
            assert_eq!(err.jsonrpc_code(), -32602, "{params}");
        }
        assert_eq!(
            to_v1(Operation::GetTask, json!(3))
                .unwrap_err()
                .jsonrpc_code(),
            -32602
        );
        let long = "k".repeat(1000);
        let err = to_v1(Operation::SendMessage, ok_msg(json!([{"kind": long}]))).unwrap_err();
        assert!(err.to_string().len() < 300, "{err}");
    }

    #[test]
    fn wrong_types_are_left_for_decode_to_name() {
        let v1 = to_v1(Operation::GetTask, json!({"id": 5})).unwrap();
        let err = decode::<GetTaskRequest>(v1).unwrap_err();
        assert_eq!(err.jsonrpc_code(), -32602);
    }
}
