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
use crate::transport::operations::Operation;

fn invalid(msg: impl Into<String>) -> A2aError {
    A2aError::InvalidParams(msg.into())
}

/// `params` as an object; `null` (no params) is an empty one.
fn object(params: Value, what: &str) -> Result<Map<String, Value>, A2aError> {
    match params {
        Value::Null => Ok(Map::new()),
        Value::Object(m) => Ok(m),
        other => Err(invalid(format!(
            "{what} must be an object, got {}",
            type_name(&other)
        ))),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Moves `from` of `src` to `to` of `dst` when present.
fn carry(src: &mut Map<String, Value>, from: &str, dst: &mut Map<String, Value>, to: &str) {
    if let Some(v) = src.remove(from) {
        dst.insert(to.to_owned(), v);
    }
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
            out.insert("message".into(), message_to_v1(message)?);
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

/// A 0.3 `Message` → a 1.0 `Message`.
///
/// # Errors
/// InvalidParams for a non-object, a `kind` other than `"message"`, a role other than
/// `user`/`agent`, or a bad part (see [`part_to_v1`]).
pub fn message_to_v1(message: Value) -> Result<Value, A2aError> {
    let mut m = object(message, "message")?;
    match m.remove("kind") {
        None => {}
        Some(Value::String(k)) if k == "message" => {}
        Some(other) => {
            return Err(invalid(format!(
                "message.kind must be \"message\", got {}",
                short(&other)
            )));
        }
    }
    if let Some(role) = m.remove("role") {
        let role = match role.as_str() {
            Some("user") => "ROLE_USER",
            Some("agent") => "ROLE_AGENT",
            _ => {
                return Err(invalid(format!(
                    "message.role must be \"user\" or \"agent\", got {}",
                    short(&role)
                )));
            }
        };
        m.insert("role".into(), role.into());
    }
    if let Some(parts) = m.remove("parts") {
        let Value::Array(parts) = parts else {
            return Err(invalid(format!(
                "message.parts must be an array, got {}",
                type_name(&parts)
            )));
        };
        let parts = parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| part_to_v1(p).map_err(|e| invalid(format!("message.parts[{i}]: {e}"))))
            .collect::<Result<Vec<_>, _>>()?;
        m.insert("parts".into(), Value::Array(parts));
    }
    Ok(Value::Object(m))
}

/// A 0.3 part (`TextPart`, `FilePart`, `DataPart`) → a 1.0 `Part`. A part without
/// `kind` is read by the field it has (`text`, `file` or `data`).
///
/// # Errors
/// InvalidParams for a non-object, an unknown `kind`, a kind whose field is missing,
/// or a `file` that is not an object with exactly one of `bytes` and `uri`.
pub fn part_to_v1(part: Value) -> Result<Value, A2aError> {
    let mut p = object(part, "a part")?;
    let kind = match p.remove("kind") {
        Some(Value::String(k)) => k,
        None if p.contains_key("text") => "text".into(),
        None if p.contains_key("file") => "file".into(),
        None if p.contains_key("data") => "data".into(),
        None => {
            return Err(invalid(
                "a part needs `kind` (\"text\", \"file\" or \"data\")",
            ));
        }
        Some(other) => {
            return Err(invalid(format!(
                "part kind must be a string, got {}",
                short(&other)
            )));
        }
    };
    let mut out = Map::new();
    carry(&mut p, "metadata", &mut out, "metadata");
    match kind.as_str() {
        "text" => {
            let text = p
                .remove("text")
                .ok_or_else(|| invalid("a text part needs `text`"))?;
            out.insert("text".into(), text);
        }
        "data" => {
            let data = p
                .remove("data")
                .ok_or_else(|| invalid("a data part needs `data`"))?;
            out.insert("data".into(), data);
        }
        "file" => {
            let file = p
                .remove("file")
                .ok_or_else(|| invalid("a file part needs `file`"))?;
            let mut f = match file {
                Value::Object(f) => f,
                other => {
                    return Err(invalid(format!(
                        "part file must be an object, got {}",
                        type_name(&other)
                    )));
                }
            };
            match (f.remove("bytes"), f.remove("uri")) {
                (Some(b), None) => out.insert("raw".into(), b),
                (None, Some(u)) => out.insert("url".into(), u),
                _ => {
                    return Err(invalid(
                        "part file must have exactly one of `bytes` and `uri`",
                    ));
                }
            };
            carry(&mut f, "mimeType", &mut out, "mediaType");
            carry(&mut f, "name", &mut out, "filename");
        }
        other => {
            return Err(invalid(format!(
                "part kind must be \"text\", \"file\" or \"data\", got {:?}",
                other.chars().take(32).collect::<String>()
            )));
        }
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

/// A value for an error message: at most 64 characters of its JSON.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 64 {
        format!("{}…", s.chars().take(64).collect::<String>())
    } else {
        s
    }
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
