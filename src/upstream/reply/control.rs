//! The control vocabulary: JSON objects an upstream agent yields (as an SSE frame) or
//! returns (as the JSON reply) to do more than stream text. Specified in
//! `docs/upstream-contract.md`.
//!
//! A control object is a JSON **object** whose key `"a2a_control"` holds one of the
//! kinds below. Nothing else is ever taken for a control object: ordinary agent
//! output (strings, framework events, arbitrary dicts) never has that key, and a
//! control object nested inside other output is just data.
//!
//! | `a2a_control` | other fields | effect |
//! |---|---|---|
//! | `"status"` | `text` | WORKING status update with the text as agent message |
//! | `"artifact"` | `name`?, `artifact_id`?, `text`? / `data`? / `parts`?, `append`? (false), `last_chunk`? (true) | an artifact (or chunk of one) besides the main reply |
//! | `"data"` | `data`, `name`? | an artifact with one `data` part |
//! | `"input_required"` | `text` | task INPUT_REQUIRED with the question; the follow-up message re-invokes the same runtime session |
//! | `"auth_required"` | `text` | task AUTH_REQUIRED |
//! | `"reject"` | `text`? | task REJECTED |
//! | `"fail"` | `text`? | task FAILED with the text as reason |
//! | `"message"` | `text`? / `data`? / `parts`? | as the reply's first output to a new message: a direct Message reply, no task (see [`super::sink::TaskStart`]); otherwise the parts end the reply and the task COMPLETES |

use serde_json::{Map, Value};

use crate::protocol::Part;

/// The key that marks a control object.
pub const CONTROL_KEY: &str = "a2a_control";

/// One control instruction from the upstream agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// Publish a WORKING status with this text.
    Status {
        /// The status text.
        text: String,
    },
    /// Publish an artifact (or a chunk of one).
    Artifact {
        /// Artifact name.
        name: Option<String>,
        /// Stable id, so later chunks can `append`; a new id when `None`.
        artifact_id: Option<String>,
        /// The parts.
        parts: Vec<Part>,
        /// Append to the artifact with `artifact_id` sent earlier.
        append: bool,
        /// The last chunk of this artifact.
        last_chunk: bool,
    },
    /// INPUT_REQUIRED with this question.
    InputRequired {
        /// The question for the user.
        text: String,
    },
    /// AUTH_REQUIRED with this explanation.
    AuthRequired {
        /// What authorization is needed.
        text: String,
    },
    /// REJECTED.
    Reject {
        /// Why, if given.
        text: Option<String>,
    },
    /// FAILED.
    Fail {
        /// Why, if given.
        text: Option<String>,
    },
    /// Answer with a Message instead of a task (A2A `SendMessageResponse.message`).
    Message {
        /// The message's parts (at least one).
        parts: Vec<Part>,
    },
}

/// Reads `value` as a control object: `None` when it is not one (no
/// [`CONTROL_KEY`]), `Some(Err(why))` when it is one but malformed.
pub fn parse(value: &Value) -> Option<Result<Control, String>> {
    let obj = value.as_object()?;
    let kind = obj.get(CONTROL_KEY)?;
    let Some(kind) = kind.as_str() else {
        return Some(Err(format!("`{CONTROL_KEY}` must be a string")));
    };
    Some(parse_kind(kind, obj))
}

fn parse_kind(kind: &str, obj: &Map<String, Value>) -> Result<Control, String> {
    let text = |required: bool| -> Result<Option<String>, String> {
        match obj.get("text") {
            Some(Value::String(s)) => Ok(Some(s.clone())),
            None | Some(Value::Null) if !required => Ok(None),
            None | Some(Value::Null) => Err(format!("`{kind}` needs a `text` string")),
            Some(_) => Err(format!("`{kind}`: `text` must be a string")),
        }
    };
    let string = |key: &str| -> Result<Option<String>, String> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{kind}`: `{key}` must be a string")),
        }
    };
    let flag = |key: &str, default: bool| -> Result<bool, String> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("`{kind}`: `{key}` must be true or false")),
        }
    };
    Ok(match kind {
        "status" => Control::Status {
            text: text(true)?.unwrap_or_default(),
        },
        "input_required" => Control::InputRequired {
            text: text(true)?.unwrap_or_default(),
        },
        "auth_required" => Control::AuthRequired {
            text: text(true)?.unwrap_or_default(),
        },
        "reject" => Control::Reject { text: text(false)? },
        "fail" => Control::Fail { text: text(false)? },
        "data" => {
            let data = obj
                .get("data")
                .cloned()
                .ok_or("`data` needs a `data` value")?;
            Control::Artifact {
                name: string("name")?,
                artifact_id: string("artifact_id")?,
                parts: vec![Part::data(data)],
                append: false,
                last_chunk: true,
            }
        }
        "artifact" => {
            let parts = parts_of(kind, obj, text(false)?)?;
            Control::Artifact {
                name: string("name")?,
                artifact_id: string("artifact_id")?,
                parts,
                append: flag("append", false)?,
                last_chunk: flag("last_chunk", true)?,
            }
        }
        "message" => Control::Message {
            parts: parts_of(kind, obj, text(false)?)?,
        },
        other => return Err(format!("unknown `{CONTROL_KEY}` kind `{other}`")),
    })
}

/// The parts of an `artifact` or `message`: `text`, then `data`, then `parts`.
fn parts_of(
    kind: &str,
    obj: &Map<String, Value>,
    text: Option<String>,
) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    if let Some(t) = text {
        parts.push(Part::text(t));
    }
    if let Some(d) = obj.get("data") {
        parts.push(Part::data(d.clone()));
    }
    if let Some(p) = obj.get("parts") {
        let more: Vec<Part> = serde_json::from_value(p.clone())
            .map_err(|e| format!("`{kind}`: `parts` is not a list of A2A parts: {e}"))?;
        parts.extend(more);
    }
    if parts.is_empty() {
        return Err(format!("`{kind}` needs `text`, `data` or `parts`"));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ordinary_output_is_never_control() {
        for v in [
            json!("input_required"),
            json!({"type": "input_required", "text": "x"}),
            json!({"status": "input_required"}),
            json!({"wrapper": {"a2a_control": "fail"}}),
            json!([{"a2a_control": "fail"}]),
            json!({"event": {"contentBlockDelta": {"delta": {"text": "a2a_control"}}}}),
        ] {
            assert!(parse(&v).is_none(), "{v}");
        }
    }

    #[test]
    fn parses_each_kind() {
        assert_eq!(
            parse(&json!({"a2a_control": "input_required", "text": "Which city?"})),
            Some(Ok(Control::InputRequired {
                text: "Which city?".into()
            }))
        );
        assert_eq!(
            parse(&json!({"a2a_control": "reject"})),
            Some(Ok(Control::Reject { text: None }))
        );
        let Some(Ok(Control::Artifact {
            name,
            parts,
            append,
            last_chunk,
            ..
        })) = parse(
            &json!({"a2a_control": "artifact", "name": "r.md", "text": "# R", "data": {"k": 1}}),
        )
        else {
            panic!()
        };
        assert_eq!(name.as_deref(), Some("r.md"));
        assert_eq!(parts.len(), 2);
        assert!(!append && last_chunk);
        let Some(Ok(Control::Artifact { parts, .. })) =
            parse(&json!({"a2a_control": "artifact", "parts": [{"url": "https://x/y.pdf"}]}))
        else {
            panic!()
        };
        assert_eq!(parts.len(), 1);
        let Some(Ok(Control::Message { parts })) =
            parse(&json!({"a2a_control": "message", "text": "Hi", "data": {"k": 1}}))
        else {
            panic!()
        };
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].as_text(), Some("Hi"));
    }

    #[test]
    fn malformed_control_is_an_error() {
        for v in [
            json!({"a2a_control": 1}),
            json!({"a2a_control": "explode"}),
            json!({"a2a_control": "input_required"}),
            json!({"a2a_control": "artifact"}),
            json!({"a2a_control": "artifact", "text": "x", "append": "yes"}),
            json!({"a2a_control": "data"}),
            json!({"a2a_control": "message"}),
            json!({"a2a_control": "message", "text": 5}),
            json!({"a2a_control": "message", "parts": "x"}),
        ] {
            assert!(matches!(parse(&v), Some(Err(_))), "{v}");
        }
    }
}
