//! 1.0 results, stream events and agent cards → their A2A 0.3 shapes.
//!
//! | 1.0 | 0.3 |
//! |---|---|
//! | SendMessage `{"task": T}` / `{"message": M}` | `T` / `M`, unwrapped |
//! | `Task` | `{kind:"task", …}`, states and parts below |
//! | `Message{role:"ROLE_USER"\|"ROLE_AGENT"}` | `{kind:"message", role:"user"\|"agent"}` |
//! | `TASK_STATE_SUBMITTED` … `TASK_STATE_AUTH_REQUIRED` | `submitted`, `working`, `completed`, `failed`, `canceled`, `input-required`, `rejected`, `auth-required`; anything else `unknown` |
//! | Part `{text}` | `{kind:"text", text}` |
//! | Part `{raw, mediaType, filename}` | `{kind:"file", file:{bytes, mimeType, name}}` |
//! | Part `{url, mediaType, filename}` | `{kind:"file", file:{uri, mimeType, name}}` |
//! | Part `{data}` (an object) | `{kind:"data", data}`; data that is not an object becomes `{"value": data}` (0.3 data is always an object) |
//! | stream `{"statusUpdate": E}` | `{kind:"status-update", …E, final}` |
//! | stream `{"artifactUpdate": E}` | `{kind:"artifact-update", …E}` |
//! | `TaskPushNotificationConfig{taskId, id, url, token, authentication{scheme}}` | `{taskId, pushNotificationConfig:{id, url, token, authentication{schemes:[scheme]}}}` |
//! | ListTaskPushNotificationConfigs `{configs}` | a bare array |
//! | AgentCard | the same card plus `url`, `preferredTransport`, `protocolVersion`, `additionalInterfaces`, `supportsAuthenticatedExtendedCard`, `security` ([`card_fields`]) and the 0.3 shape of each security scheme ([`render_card`]) |
//!
//! Keys 0.3 shares with 1.0 (`messageId`, `contextId`, `taskId`, `metadata`,
//! `extensions`, `referenceTaskIds`, `artifactId`, `append`, `lastChunk`, `timestamp`)
//! are kept. A text part's `mediaType`/`filename` and a data part's `mediaType` have no
//! 0.3 field and are dropped. Errors keep their code, message and `data` (0.3 leaves
//! `data` free-form).

use serde_json::{Map, Value, json};

use crate::protocol::v03::{artifact_to_v03, status_to_v03, with_kind};
pub use crate::protocol::v03::{message_to_v03, part_to_v03, state_to_v03, task_to_v03};
use crate::protocol::{AgentCard, StreamResponse};
use crate::transport::operations::Operation;

/// One stream event in its 0.3 shape, for a stream of `op`. A status update carries
/// `final: true` when it is the stream's last event: a terminal state, or an
/// interrupted one (input-required, auth-required) on `message/stream`, which ends
/// there; `tasks/resubscribe` goes on through interrupted states.
///
/// # Errors
/// The serializer's error (never for A2A types).
pub fn stream_event_to_v03(
    event: &StreamResponse,
    op: Operation,
) -> Result<Value, serde_json::Error> {
    Ok(match event {
        StreamResponse::Task(t) => task_to_v03(serde_json::to_value(t)?),
        StreamResponse::Message(m) => message_to_v03(serde_json::to_value(m)?),
        StreamResponse::StatusUpdate(e) => {
            let state = e.status.state;
            let last = state.is_terminal()
                || (state.is_interrupted() && op == Operation::SendStreamingMessage);
            let mut v = serde_json::to_value(e)?;
            if let Value::Object(m) = &mut v {
                if let Some(s) = m.remove("status") {
                    m.insert("status".into(), status_to_v03(s));
                }
                m.insert("final".into(), Value::Bool(last));
            }
            with_kind("status-update", v)
        }
        StreamResponse::ArtifactUpdate(e) => {
            let mut v = serde_json::to_value(e)?;
            if let Value::Object(m) = &mut v
                && let Some(a) = m.remove("artifact")
            {
                m.insert("artifact".into(), artifact_to_v03(a));
            }
            with_kind("artifact-update", v)
        }
    })
}

fn push_config_to_v03(c: Value) -> Value {
    let Value::Object(mut c) = c else {
        return c;
    };
    let mut inner = Map::new();
    for k in ["id", "url", "token"] {
        if let Some(v) = c.remove(k) {
            inner.insert(k.into(), v);
        }
    }
    if let Some(Value::Object(mut a)) = c.remove("authentication") {
        let mut auth = Map::new();
        if let Some(s) = a.remove("scheme") {
            auth.insert("schemes".into(), Value::Array(vec![s]));
        }
        if let Some(cr) = a.remove("credentials") {
            auth.insert("credentials".into(), cr);
        }
        inner.insert("authentication".into(), Value::Object(auth));
    }
    json!({
        "taskId": c.remove("taskId").unwrap_or_else(|| "".into()),
        "pushNotificationConfig": inner,
    })
}

/// The 0.3 result of `op` for its 1.0 `result`.
pub fn result_to_v03(op: Operation, result: Value) -> Value {
    match op {
        Operation::SendMessage => match result {
            Value::Object(mut m) => {
                if let Some(t) = m.remove("task") {
                    task_to_v03(t)
                } else if let Some(msg) = m.remove("message") {
                    message_to_v03(msg)
                } else {
                    Value::Object(m)
                }
            }
            other => other,
        },
        Operation::GetTask | Operation::CancelTask => task_to_v03(result),
        Operation::CreateTaskPushNotificationConfig | Operation::GetTaskPushNotificationConfig => {
            push_config_to_v03(result)
        }
        Operation::ListTaskPushNotificationConfigs => match result {
            Value::Object(mut m) => match m.remove("configs") {
                Some(Value::Array(cs)) => {
                    Value::Array(cs.into_iter().map(push_config_to_v03).collect())
                }
                _ => Value::Array(vec![]),
            },
            other => other,
        },
        Operation::DeleteTaskPushNotificationConfig => Value::Null,
        Operation::GetExtendedAgentCard => serde_json::from_value::<AgentCard>(result.clone())
            .and_then(|card| render_card(&card))
            .unwrap_or(result),
        Operation::SendStreamingMessage | Operation::SubscribeToTask | Operation::ListTasks => {
            result
        }
    }
}

/// `card` as one JSON document for both versions: its 1.0 form plus [`card_fields`],
/// and every `securitySchemes` entry also in its 0.3 shape, merged beside the 1.0
/// wrapper (`{"httpAuthSecurityScheme":{…}, "type":"http", "scheme":"Bearer", …}`), as
/// the official Python SDK renders its cards: 0.3 readers find the `type`
/// discriminator and ignore the wrapper key, 1.0 readers read the wrapper and ignore
/// the rest (spec: unknown fields are ignored). Keys already in the 1.0 form win.
///
/// # Errors
/// The serializer's error (never for an [`AgentCard`]).
pub fn render_card(card: &AgentCard) -> Result<Value, serde_json::Error> {
    let mut value = serde_json::to_value(card)?;
    let Value::Object(m) = &mut value else {
        return Ok(value);
    };
    for (k, v) in card_fields(card) {
        m.entry(k).or_insert(v);
    }
    if let Some(Value::Object(schemes)) = m.get_mut("securitySchemes") {
        for scheme in schemes.values_mut() {
            if let Value::Object(s) = scheme {
                merge_scheme_v03(s);
            }
        }
    }
    Ok(value)
}

/// Whether an interface's `protocolVersion` is 0.3 (`0.3`, `0.3.0`, …).
fn is_v03(version: &str) -> bool {
    version == "0.3" || version.starts_with("0.3.")
}

/// Adds the 0.3 fields of one 1.0 security scheme (`{"<kind>SecurityScheme": {…}}`)
/// beside its wrapper: `type` and the inner fields (`location` as 0.3 `in`).
fn merge_scheme_v03(scheme: &mut Map<String, Value>) {
    const KINDS: [(&str, &str); 5] = [
        ("apiKeySecurityScheme", "apiKey"),
        ("httpAuthSecurityScheme", "http"),
        ("oauth2SecurityScheme", "oauth2"),
        ("openIdConnectSecurityScheme", "openIdConnect"),
        ("mtlsSecurityScheme", "mutualTLS"),
    ];
    let Some((inner, kind)) = KINDS.iter().find_map(|(wrapper, kind)| {
        scheme
            .get(*wrapper)
            .and_then(Value::as_object)
            .map(|inner| (inner.clone(), *kind))
    }) else {
        return;
    };
    scheme.entry("type").or_insert_with(|| kind.into());
    for (k, v) in inner {
        let k = if k == "location" { "in".to_owned() } else { k };
        scheme.entry(k).or_insert(v);
    }
}

/// The 0.3 discovery fields of `card`, derived from its `supportedInterfaces` so the
/// two can never disagree: `url` is the first JSON-RPC interface of protocol version
/// 0.3 (JSON-RPC is the only binding that serves 0.3), `preferredTransport` is
/// `"JSONRPC"`, `protocolVersion` is `"0.3.0"`, `additionalInterfaces` lists every such
/// interface as `{url, transport}` (REST and gRPC interfaces speak 1.0 only, so a 0.3
/// client must not pick them), `supportsAuthenticatedExtendedCard` mirrors
/// `capabilities.extendedAgentCard`, and `security` is `securityRequirements` in the
/// 0.3 shape (`[{scheme: [scopes]}]`). Empty when the card declares no 0.3 JSON-RPC
/// interface: the 0.3 fields appear only beside one.
///
/// `securitySchemes` shares its key between the versions; [`render_card`] merges the
/// 0.3 shape into each entry.
pub fn card_fields(card: &AgentCard) -> Map<String, Value> {
    let jsonrpc: Vec<_> = card
        .supported_interfaces
        .iter()
        .filter(|i| i.protocol_binding == "JSONRPC" && is_v03(&i.protocol_version))
        .collect();
    let mut out = Map::new();
    let Some(main) = jsonrpc.first() else {
        return out;
    };
    out.insert("url".into(), main.url.clone().into());
    out.insert("preferredTransport".into(), "JSONRPC".into());
    out.insert("protocolVersion".into(), "0.3.0".into());
    out.insert(
        "additionalInterfaces".into(),
        jsonrpc
            .iter()
            .map(|i| json!({"url": i.url, "transport": "JSONRPC"}))
            .collect(),
    );
    out.insert(
        "supportsAuthenticatedExtendedCard".into(),
        card.capabilities
            .extended_agent_card
            .unwrap_or(false)
            .into(),
    );
    if !card.security_requirements.is_empty() {
        let security: Vec<Value> = card
            .security_requirements
            .iter()
            .map(|r| {
                Value::Object(
                    r.schemes
                        .iter()
                        .map(|(name, scopes)| (name.clone(), json!(scopes.list)))
                        .collect(),
                )
            })
            .collect();
        out.insert("security".into(), Value::Array(security));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        Artifact, Message, Part, Role, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
        TaskStatusUpdateEvent,
    };

    fn task_json() -> Value {
        json!({
            "id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "2026-01-01T00:00:00.000Z",
                       "message": {"messageId": "s", "role": "ROLE_AGENT", "parts": [{"text": "more?"}]}},
            "history": [{"messageId": "m", "role": "ROLE_USER", "taskId": "t", "contextId": "c",
                         "referenceTaskIds": ["t0"], "metadata": {"a": 1},
                         "parts": [{"raw": "aGk=", "mediaType": "image/png", "filename": "a.png"}]}],
            "artifacts": [{"artifactId": "a", "name": "out", "metadata": {"m": true},
                           "parts": [{"url": "https://x/y", "mediaType": "application/pdf"},
                                     {"data": {"k": 1}, "mediaType": "application/json"},
                                     {"data": [1, 2]},
                                     {"text": "t", "metadata": {"p": 2}}]}],
            "metadata": {"tm": "v"},
        })
    }

    #[test]
    fn task_in_03_shape() {
        assert_eq!(
            task_to_v03(task_json()),
            json!({
                "kind": "task", "id": "t", "contextId": "c",
                "status": {"state": "input-required", "timestamp": "2026-01-01T00:00:00.000Z",
                           "message": {"kind": "message", "messageId": "s", "role": "agent",
                                       "parts": [{"kind": "text", "text": "more?"}]}},
                "history": [{"kind": "message", "messageId": "m", "role": "user", "taskId": "t",
                             "contextId": "c", "referenceTaskIds": ["t0"], "metadata": {"a": 1},
                             "parts": [{"kind": "file", "file": {"bytes": "aGk=", "mimeType": "image/png", "name": "a.png"}}]}],
                "artifacts": [{"artifactId": "a", "name": "out", "metadata": {"m": true},
                               "parts": [{"kind": "file", "file": {"uri": "https://x/y", "mimeType": "application/pdf"}},
                                         {"kind": "data", "data": {"k": 1}},
                                         {"kind": "data", "data": {"value": [1, 2]}},
                                         {"kind": "text", "text": "t", "metadata": {"p": 2}}]}],
                "metadata": {"tm": "v"},
            })
        );
    }

    #[test]
    fn round_trip_03_to_1_and_back() {
        // A 0.3 message read by the request translation and written back by this one.
        let m03 = json!({"kind": "message", "messageId": "m", "role": "user", "contextId": "c",
            "referenceTaskIds": ["a", "b"], "extensions": ["urn:e"], "metadata": {"x": [1]},
            "parts": [{"kind": "text", "text": "hi", "metadata": {"p": 1}},
                      {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "n"}},
                      {"kind": "file", "file": {"uri": "https://u", "mimeType": "a/b"}},
                      {"kind": "data", "data": {"d": null}}]});
        let v1 = crate::protocol::v03::message_to_v1(m03.clone()).unwrap();
        let typed: Message = serde_json::from_value(v1).unwrap();
        let back = message_to_v03(serde_json::to_value(&typed).unwrap());
        assert_eq!(back, m03);
    }

    #[test]
    fn every_state_has_its_03_spelling() {
        for (v1, v03) in [
            ("TASK_STATE_SUBMITTED", "submitted"),
            ("TASK_STATE_WORKING", "working"),
            ("TASK_STATE_COMPLETED", "completed"),
            ("TASK_STATE_FAILED", "failed"),
            ("TASK_STATE_CANCELED", "canceled"),
            ("TASK_STATE_INPUT_REQUIRED", "input-required"),
            ("TASK_STATE_REJECTED", "rejected"),
            ("TASK_STATE_AUTH_REQUIRED", "auth-required"),
            ("TASK_STATE_UNSPECIFIED", "unknown"),
            ("garbage", "unknown"),
        ] {
            assert_eq!(state_to_v03(v1), v03);
        }
    }

    #[test]
    fn send_results_are_unwrapped() {
        let task = result_to_v03(Operation::SendMessage, json!({"task": task_json()}));
        assert_eq!(task["kind"], "task");
        assert_eq!(task["id"], "t");
        let msg = result_to_v03(
            Operation::SendMessage,
            json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}}),
        );
        assert_eq!(
            msg,
            json!({"kind": "message", "messageId": "m", "role": "agent", "parts": [{"kind": "text", "text": "x"}]})
        );
        assert_eq!(
            result_to_v03(Operation::GetTask, task_json())["status"]["state"],
            "input-required"
        );
        // Garbage passes through unchanged rather than panicking.
        for g in [
            json!(null),
            json!(3),
            json!("s"),
            json!([1]),
            json!({"x": 1}),
        ] {
            let _ = result_to_v03(Operation::SendMessage, g.clone());
            let _ = result_to_v03(Operation::GetTask, g.clone());
            let _ = result_to_v03(Operation::ListTaskPushNotificationConfigs, g.clone());
            let _ = result_to_v03(Operation::GetExtendedAgentCard, g.clone());
            let _ = part_to_v03(g.clone());
        }
    }

    #[test]
    fn push_configs_nest_again() {
        let c = json!({"taskId": "t", "id": "p", "url": "https://h", "token": "k",
                       "authentication": {"scheme": "Bearer", "credentials": "c"}});
        let want = json!({"taskId": "t", "pushNotificationConfig": {"id": "p", "url": "https://h", "token": "k",
                          "authentication": {"schemes": ["Bearer"], "credentials": "c"}}});
        assert_eq!(
            result_to_v03(Operation::GetTaskPushNotificationConfig, c.clone()),
            want
        );
        assert_eq!(
            result_to_v03(
                Operation::ListTaskPushNotificationConfigs,
                json!({"configs": [c], "nextPageToken": ""})
            ),
            json!([want])
        );
        assert_eq!(
            result_to_v03(Operation::DeleteTaskPushNotificationConfig, json!({})),
            Value::Null
        );
    }

    fn status(state: TaskState) -> StreamResponse {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus::new(state),
            metadata: None,
        })
    }

    #[test]
    fn stream_events_carry_kind_and_final() {
        use Operation::{SendStreamingMessage as Stream, SubscribeToTask as Sub};
        for (state, op, last) in [
            (TaskState::Working, Stream, false),
            (TaskState::Completed, Stream, true),
            (TaskState::Canceled, Sub, true),
            (TaskState::InputRequired, Stream, true),
            (TaskState::AuthRequired, Stream, true),
            (TaskState::InputRequired, Sub, false),
        ] {
            let v = stream_event_to_v03(&status(state), op).unwrap();
            assert_eq!(v["kind"], "status-update");
            assert_eq!(v["final"], last, "{state:?} {op:?}");
            assert_eq!(v["taskId"], "t");
            assert_eq!(v["status"]["state"], state_to_v03(state.as_str()));
        }
        let art = StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            artifact: Artifact {
                artifact_id: "a".into(),
                name: None,
                description: None,
                parts: vec![Part::text("x")],
                metadata: None,
                extensions: vec![],
            },
            append: true,
            last_chunk: true,
            metadata: None,
        });
        assert_eq!(
            stream_event_to_v03(&art, Stream).unwrap(),
            json!({"kind": "artifact-update", "taskId": "t", "contextId": "c", "append": true, "lastChunk": true,
                   "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]}})
        );
        let task: Task = serde_json::from_value(task_json()).unwrap();
        let v = stream_event_to_v03(&StreamResponse::Task(task), Stream).unwrap();
        assert_eq!(v["kind"], "task");
        let msg = Message {
            message_id: "m".into(),
            context_id: None,
            task_id: None,
            role: Role::Agent,
            parts: vec![Part::text("x")],
            metadata: None,
            extensions: vec![],
            reference_task_ids: vec![],
        };
        let v = stream_event_to_v03(&StreamResponse::Message(msg), Stream).unwrap();
        assert_eq!(
            (v["kind"].as_str(), v["role"].as_str()),
            (Some("message"), Some("agent"))
        );
    }

    #[test]
    fn card_fields_follow_supported_interfaces() {
        let mut card = crate::server::simple_card("n", "d", "http://gw/", vec![]);
        let f = card_fields(&card);
        assert_eq!(f["url"], "http://gw/");
        assert_eq!(f["preferredTransport"], "JSONRPC");
        assert_eq!(f["protocolVersion"], "0.3.0");
        assert_eq!(
            f["additionalInterfaces"],
            json!([{"url": "http://gw/", "transport": "JSONRPC"}])
        );
        assert_eq!(f["supportsAuthenticatedExtendedCard"], false);
        assert!(!f.contains_key("security"));

        card.supported_interfaces.insert(
            0,
            crate::protocol::AgentInterface {
                url: "http://gw/a2a/rest".into(),
                protocol_binding: "HTTP+JSON".into(),
                protocol_version: "1.0".into(),
                tenant: None,
            },
        );
        card.security_requirements = vec![crate::protocol::SecurityRequirement {
            schemes: [(
                "apiKey".to_owned(),
                crate::protocol::StringList { list: vec![] },
            )]
            .into(),
        }];
        let f = card_fields(&card);
        assert_eq!(f["url"], "http://gw/", "the first JSON-RPC interface");
        assert_eq!(f["additionalInterfaces"].as_array().unwrap().len(), 1);
        assert_eq!(f["security"], json!([{"apiKey": []}]));

        // A 1.0 JSON-RPC interface alone does not carry the 0.3 fields.
        card.supported_interfaces
            .retain(|i| i.protocol_binding != "JSONRPC" || i.protocol_version == "1.0");
        assert!(card_fields(&card).is_empty());
    }

    #[test]
    fn rendered_card_has_both_security_scheme_shapes() {
        use crate::protocol::SecurityScheme;
        let mut card = crate::server::simple_card("n", "d", "http://gw/", vec![]);
        card.security_schemes = [
            (
                "bearer".to_owned(),
                SecurityScheme::HttpAuthSecurityScheme(
                    json!({"scheme": "Bearer", "description": "d"}),
                ),
            ),
            (
                "key".to_owned(),
                SecurityScheme::ApiKeySecurityScheme(
                    json!({"location": "header", "name": "X-Key"}),
                ),
            ),
            (
                "tls".to_owned(),
                SecurityScheme::MtlsSecurityScheme(json!({})),
            ),
        ]
        .into();
        let v = render_card(&card).unwrap();
        assert_eq!(
            v["securitySchemes"]["bearer"],
            json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "d"},
                   "type": "http", "scheme": "Bearer", "description": "d"})
        );
        assert_eq!(
            v["securitySchemes"]["key"],
            json!({"apiKeySecurityScheme": {"location": "header", "name": "X-Key"},
                   "type": "apiKey", "in": "header", "name": "X-Key"})
        );
        assert_eq!(v["securitySchemes"]["tls"]["type"], "mutualTLS");
        assert_eq!(v["url"], "http://gw/");
        assert_eq!(v["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    }
}
