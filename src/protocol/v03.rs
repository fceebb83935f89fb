//! The A2A 0.3 ⇄ 1.0 translation of the shapes both versions share: parts, messages,
//! task statuses, artifacts, tasks and stream events (spec §11 of `a2a-protocol.md`,
//! "Changes from 0.3.0 to 1.0"). One copy, used in both directions of the gateway: by
//! the JSON-RPC transport for 0.3 clients (`transport/compat03`: 0.3 requests in, 1.0
//! results out as 0.3) and by the `a2a` upstream kind for 0.3 agents (1.0 messages out
//! as 0.3, 0.3 tasks and events in as 1.0). Pure functions on [`serde_json::Value`].
//!
//! | 1.0 | 0.3 |
//! |---|---|
//! | `Message{role:"ROLE_USER"\|"ROLE_AGENT"}` | `{kind:"message", role:"user"\|"agent"}` |
//! | `TASK_STATE_SUBMITTED` … `TASK_STATE_AUTH_REQUIRED` | `submitted`, `working`, `completed`, `failed`, `canceled`, `input-required`, `rejected`, `auth-required`; anything else `unknown` |
//! | Part `{text}` | `{kind:"text", text}` |
//! | Part `{raw, mediaType, filename}` | `{kind:"file", file:{bytes, mimeType, name}}` |
//! | Part `{url, mediaType, filename}` | `{kind:"file", file:{uri, mimeType, name}}` |
//! | Part `{data}` (an object) | `{kind:"data", data}`; data that is not an object becomes `{"value": data}` (0.3 data is always an object) |
//! | `Task` | `{kind:"task", …}` |
//! | stream `{"task"}` / `{"message"}` / `{"statusUpdate": E}` / `{"artifactUpdate": E}` | `{kind:"task"}` / `{kind:"message"}` / `{kind:"status-update", …E, final}` / `{kind:"artifact-update", …E}` |
//!
//! Keys both versions share (`messageId`, `contextId`, `taskId`, `metadata`,
//! `extensions`, `referenceTaskIds`, `artifactId`, `append`, `lastChunk`, `timestamp`)
//! keep their names.

use serde_json::{Map, Value, json};

use super::TaskState;

/// `v` as an object; `null` is an empty one.
///
/// # Errors
/// A readable reason naming `what` for anything else.
pub fn object(v: Value, what: &str) -> Result<Map<String, Value>, String> {
    match v {
        Value::Null => Ok(Map::new()),
        Value::Object(m) => Ok(m),
        other => Err(format!(
            "{what} must be an object, got {}",
            type_name(&other)
        )),
    }
}

/// The JSON type of `v` in words (`an array`).
pub fn type_name(v: &Value) -> &'static str {
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
pub fn carry(src: &mut Map<String, Value>, from: &str, dst: &mut Map<String, Value>, to: &str) {
    if let Some(v) = src.remove(from) {
        dst.insert(to.to_owned(), v);
    }
}

/// A value for an error message: at most 64 characters of its JSON.
pub fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 64 {
        format!("{}…", s.chars().take(64).collect::<String>())
    } else {
        s
    }
}

fn invalid(msg: impl Into<String>) -> String {
    msg.into()
}

// ---- 1.0 → 0.3 ----

/// The 0.3 spelling of a 1.0 task state (`TASK_STATE_INPUT_REQUIRED` → `input-required`).
pub fn state_to_v03(state: &str) -> &'static str {
    match TaskState::parse(state) {
        Some(TaskState::Submitted) => "submitted",
        Some(TaskState::Working) => "working",
        Some(TaskState::Completed) => "completed",
        Some(TaskState::Failed) => "failed",
        Some(TaskState::Canceled) => "canceled",
        Some(TaskState::InputRequired) => "input-required",
        Some(TaskState::Rejected) => "rejected",
        Some(TaskState::AuthRequired) => "auth-required",
        Some(TaskState::Unspecified) | None => "unknown",
    }
}

/// `v` (an object) with `kind` first.
pub fn with_kind(kind: &str, v: Value) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), kind.into());
    if let Value::Object(m) = v {
        out.extend(m);
    }
    Value::Object(out)
}

/// Applies `f` to each item of the array `key` of `v`, when there is one.
pub fn map_array(v: &mut Map<String, Value>, key: &str, f: fn(Value) -> Value) {
    if let Some(Value::Array(items)) = v.get_mut(key) {
        for item in items.iter_mut() {
            *item = f(std::mem::take(item));
        }
    }
}

/// A 1.0 `Part` → a 0.3 `TextPart`, `FilePart` or `DataPart`.
pub fn part_to_v03(part: Value) -> Value {
    let Value::Object(mut p) = part else {
        return part;
    };
    let mut out = Map::new();
    if let Some(text) = p.remove("text") {
        out.insert("kind".into(), "text".into());
        out.insert("text".into(), text);
    } else if let Some(data) = p.remove("data") {
        out.insert("kind".into(), "data".into());
        let data = match data {
            d @ Value::Object(_) => d,
            other => json!({ "value": other }),
        };
        out.insert("data".into(), data);
    } else {
        let mut file = Map::new();
        if let Some(raw) = p.remove("raw") {
            file.insert("bytes".into(), raw);
        } else if let Some(url) = p.remove("url") {
            file.insert("uri".into(), url);
        }
        if let Some(m) = p.remove("mediaType") {
            file.insert("mimeType".into(), m);
        }
        if let Some(n) = p.remove("filename") {
            file.insert("name".into(), n);
        }
        out.insert("kind".into(), "file".into());
        out.insert("file".into(), Value::Object(file));
    }
    if let Some(m) = p.remove("metadata") {
        out.insert("metadata".into(), m);
    }
    Value::Object(out)
}

/// A 1.0 `Message` → a 0.3 `Message` (`kind`, lower-case role, 0.3 parts).
pub fn message_to_v03(message: Value) -> Value {
    let Value::Object(mut m) = message else {
        return message;
    };
    if let Some(role) = m.get_mut("role") {
        let r = match role.as_str() {
            Some("ROLE_AGENT" | "agent") => "agent",
            _ => "user",
        };
        *role = r.into();
    }
    map_array(&mut m, "parts", part_to_v03);
    with_kind("message", Value::Object(m))
}

/// A 1.0 `TaskStatus` → a 0.3 `TaskStatus` (0.3 state, 0.3 message).
pub fn status_to_v03(status: Value) -> Value {
    let Value::Object(mut s) = status else {
        return status;
    };
    if let Some(state) = s.get_mut("state") {
        *state = state_to_v03(state.as_str().unwrap_or("")).into();
    }
    if let Some(m) = s.remove("message") {
        s.insert("message".into(), message_to_v03(m));
    }
    Value::Object(s)
}

/// A 1.0 `Artifact` → a 0.3 `Artifact` (0.3 parts).
pub fn artifact_to_v03(artifact: Value) -> Value {
    let Value::Object(mut a) = artifact else {
        return artifact;
    };
    map_array(&mut a, "parts", part_to_v03);
    Value::Object(a)
}

/// A 1.0 `Task` → a 0.3 `Task` (`kind:"task"`, 0.3 states, messages and parts).
pub fn task_to_v03(task: Value) -> Value {
    let Value::Object(mut t) = task else {
        return task;
    };
    if let Some(s) = t.remove("status") {
        t.insert("status".into(), status_to_v03(s));
    }
    map_array(&mut t, "history", message_to_v03);
    map_array(&mut t, "artifacts", artifact_to_v03);
    with_kind("task", Value::Object(t))
}

// ---- 0.3 → 1.0 (messages and parts) ----

/// A 0.3 `Message` → a 1.0 `Message`.
///
/// # Errors
/// A readable reason for a non-object, a `kind` other than `"message"`, a role other than
/// `user`/`agent`, or a bad part (see [`part_to_v1`]).
pub fn message_to_v1(message: Value) -> Result<Value, String> {
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
/// A readable reason for a non-object, an unknown `kind`, a kind whose field is missing,
/// or a `file` that is not an object with exactly one of `bytes` and `uri`.
pub fn part_to_v1(part: Value) -> Result<Value, String> {
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

// ---- 0.3 → 1.0 ----

/// The 1.0 spelling of a 0.3 task state (`input-required` → `TASK_STATE_INPUT_REQUIRED`;
/// 1.0 spellings pass through); `TASK_STATE_UNSPECIFIED` for anything else.
pub fn state_to_v1(state: &str) -> &'static str {
    TaskState::parse(state)
        .unwrap_or(TaskState::Unspecified)
        .as_str()
}

/// A 0.3 `TaskStatus` → a 1.0 `TaskStatus`.
///
/// # Errors
/// A readable reason for a status that is not an object or a bad message.
pub fn status_to_v1(status: Value) -> Result<Value, String> {
    let mut s = object(status, "status")?;
    if let Some(state) = s.get_mut("state") {
        *state = state_to_v1(state.as_str().unwrap_or("")).into();
    }
    if let Some(m) = s.remove("message").filter(|m| !m.is_null()) {
        s.insert("message".into(), message_to_v1(m)?);
    }
    Ok(Value::Object(s))
}

/// A 0.3 `Artifact` → a 1.0 `Artifact`.
///
/// # Errors
/// A readable reason for an artifact that is not an object or a bad part.
pub fn artifact_to_v1(artifact: Value) -> Result<Value, String> {
    let mut a = object(artifact, "artifact")?;
    parts_to_v1(&mut a, "artifact")?;
    Ok(Value::Object(a))
}

fn parts_to_v1(m: &mut Map<String, Value>, what: &str) -> Result<(), String> {
    if let Some(parts) = m.remove("parts") {
        let Value::Array(parts) = parts else {
            return Err(format!(
                "{what}.parts must be an array, got {}",
                type_name(&parts)
            ));
        };
        let parts = parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| part_to_v1(p).map_err(|e| format!("{what}.parts[{i}]: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        m.insert("parts".into(), Value::Array(parts));
    }
    Ok(())
}

fn items_to_v1(
    m: &mut Map<String, Value>,
    key: &str,
    f: fn(Value) -> Result<Value, String>,
) -> Result<(), String> {
    if let Some(Value::Array(items)) = m.get_mut(key) {
        for item in items.iter_mut() {
            *item = f(std::mem::take(item))?;
        }
    }
    Ok(())
}

/// A 0.3 `Task` → a 1.0 `Task`.
///
/// # Errors
/// A readable reason for a task that is not an object, or a bad status, message or
/// artifact.
pub fn task_to_v1(task: Value) -> Result<Value, String> {
    let mut t = object(task, "task")?;
    t.remove("kind");
    if let Some(s) = t.remove("status") {
        t.insert("status".into(), status_to_v1(s)?);
    }
    items_to_v1(&mut t, "history", message_to_v1)?;
    items_to_v1(&mut t, "artifacts", artifact_to_v1)?;
    Ok(Value::Object(t))
}

/// A 0.3 `message/send` result or `message/stream` / `tasks/resubscribe` event (a
/// `Task`, `Message`, `TaskStatusUpdateEvent` or `TaskArtifactUpdateEvent`, told apart
/// by `kind`, else by its fields) → the 1.0 `StreamResponse` JSON (`{"task": …}`,
/// `{"message": …}`, `{"statusUpdate": …}`, `{"artifactUpdate": …}`). 0.3's `final`
/// is dropped (1.0 ends a stream by closing it).
///
/// # Errors
/// A readable reason for anything else.
pub fn event_to_v1(event: Value) -> Result<Value, String> {
    let mut e = object(event, "the result")?;
    let kind = match e.remove("kind") {
        Some(Value::String(k)) => k,
        _ if e.contains_key("artifact") => "artifact-update".into(),
        _ if e.contains_key("taskId") && e.contains_key("status") => "status-update".into(),
        _ if e.contains_key("status") => "task".into(),
        _ if e.contains_key("parts") => "message".into(),
        _ => return Err("the result is neither a task, a message nor a task update".into()),
    };
    Ok(match kind.as_str() {
        "task" => json!({ "task": task_to_v1(Value::Object(e))? }),
        "message" => json!({ "message": message_to_v1(Value::Object(e))? }),
        "status-update" => {
            e.remove("final");
            if let Some(s) = e.remove("status") {
                e.insert("status".into(), status_to_v1(s)?);
            }
            json!({ "statusUpdate": e })
        }
        "artifact-update" => {
            if let Some(a) = e.remove("artifact") {
                e.insert("artifact".into(), artifact_to_v1(a)?);
            }
            json!({ "artifactUpdate": e })
        }
        other => {
            return Err(format!(
                "the result's kind {:?} is none of task, message, status-update, artifact-update",
                other.chars().take(32).collect::<String>()
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::StreamResponse;

    #[test]
    fn v03_events_read_as_v1_stream_responses() {
        let task = json!({"kind": "task", "id": "t", "contextId": "c",
            "status": {"state": "input-required", "message": {"kind": "message", "role": "agent",
            "messageId": "m", "parts": [{"kind": "text", "text": "why?"}]}},
            "artifacts": [{"artifactId": "a", "parts": [{"kind": "data", "data": {"x": 1}}]}]});
        let v: StreamResponse = serde_json::from_value(event_to_v1(task).unwrap()).unwrap();
        let StreamResponse::Task(t) = v else {
            panic!("{v:?}")
        };
        assert_eq!(t.status.state, TaskState::InputRequired);
        let ev = json!({"kind": "artifact-update", "taskId": "t", "contextId": "c", "append": true,
            "lastChunk": false, "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]}});
        let v: StreamResponse = serde_json::from_value(event_to_v1(ev).unwrap()).unwrap();
        assert!(matches!(v, StreamResponse::ArtifactUpdate(ref a) if a.append && !a.last_chunk));
        let ev = json!({"kind": "status-update", "taskId": "t", "contextId": "c", "final": true,
            "status": {"state": "completed"}});
        let v: StreamResponse = serde_json::from_value(event_to_v1(ev).unwrap()).unwrap();
        assert_eq!(v.state(), Some(TaskState::Completed));
        assert!(event_to_v1(json!({"kind": "nope"})).is_err());
        assert!(event_to_v1(json!(3)).is_err());
    }

    #[test]
    fn a_v1_message_round_trips_through_v03() {
        let m = json!({"messageId": "m", "role": "ROLE_USER", "contextId": "c",
            "parts": [{"text": "hi"}, {"url": "https://e/x", "mediaType": "application/pdf"}]});
        assert_eq!(message_to_v1(message_to_v03(m.clone())).unwrap(), m);
    }
}
