//! Query parameters of the HTTP+JSON binding (spec §11.3): the request message's scalar
//! fields for `GET` and `DELETE` routes, turned into their ProtoJSON types.
//!
//! Names are the camelCase JSON names (the proto names, `page_size`, are accepted too,
//! as ProtoJSON parsers do). Integers become JSON numbers, booleans (`true`/`false`,
//! `1`/`0`, any case) JSON booleans, the rest strings (an enum is its name,
//! `TASK_STATE_WORKING`; a timestamp its RFC 3339 text). `A2A-Version` is a service
//! parameter, not a field, and is skipped. A name the operation does not take, a
//! repeated scalar or a value of the wrong type is `InvalidParams`: a typo such as
//! `pagesize` is reported rather than silently ignored.

use serde_json::{Map, Value};

use crate::error::A2aError;
use crate::transport::operations::Operation;

/// The type of one query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Text, passed on as a JSON string (ids, tokens, enum names, timestamps).
    Text,
    /// A decimal integer, passed on as a JSON number.
    Integer,
    /// `true`/`false` (or `1`/`0`), passed on as a JSON boolean.
    Boolean,
}

/// The query parameters `op` takes: `(JSON name, proto name, kind)`.
pub fn fields(op: Operation) -> &'static [(&'static str, &'static str, Kind)] {
    match op {
        Operation::GetTask => &[("historyLength", "history_length", Kind::Integer)],
        Operation::ListTasks => &[
            ("contextId", "context_id", Kind::Text),
            ("status", "status", Kind::Text),
            ("pageSize", "page_size", Kind::Integer),
            ("pageToken", "page_token", Kind::Text),
            ("historyLength", "history_length", Kind::Integer),
            ("statusTimestampAfter", "status_timestamp_after", Kind::Text),
            ("includeArtifacts", "include_artifacts", Kind::Boolean),
        ],
        Operation::ListTaskPushNotificationConfigs => &[
            ("pageSize", "page_size", Kind::Integer),
            ("pageToken", "page_token", Kind::Text),
        ],
        _ => &[],
    }
}

fn shown(s: &str) -> String {
    s.chars().take(64).collect()
}

fn typed(name: &str, kind: Kind, raw: &str) -> Result<Value, A2aError> {
    match kind {
        Kind::Text => Ok(Value::String(raw.to_owned())),
        Kind::Integer => raw.trim().parse::<i64>().map(Value::from).map_err(|_| {
            A2aError::InvalidParams(format!(
                "query parameter {name} must be an integer, got {:?}",
                shown(raw)
            ))
        }),
        Kind::Boolean => match raw.trim().to_ascii_lowercase().as_str() {
            "true" | "1" => Ok(Value::Bool(true)),
            "false" | "0" => Ok(Value::Bool(false)),
            _ => Err(A2aError::InvalidParams(format!(
                "query parameter {name} must be true or false, got {:?}",
                shown(raw)
            ))),
        },
    }
}

/// The fields of `op`'s request message that the query string `query` (without the `?`)
/// carries, as a JSON object.
///
/// # Errors
/// [`A2aError::InvalidParams`] for a parameter `op` does not take, one given twice, or a
/// value that is not of its type.
pub fn parse(op: Operation, query: Option<&str>) -> Result<Map<String, Value>, A2aError> {
    let mut out = Map::new();
    let Some(query) = query else {
        return Ok(out);
    };
    let known = fields(op);
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if key.eq_ignore_ascii_case("a2a-version") {
            continue;
        }
        let Some(&(name, _, kind)) = known
            .iter()
            .find(|(json, proto, _)| *json == key || *proto == key)
        else {
            let takes = if known.is_empty() {
                "none".to_owned()
            } else {
                known.iter().map(|f| f.0).collect::<Vec<_>>().join(", ")
            };
            return Err(A2aError::InvalidParams(format!(
                "{} takes no query parameter {:?} (it takes: {takes})",
                op.name(),
                shown(&key)
            )));
        };
        if out.contains_key(name) {
            return Err(A2aError::InvalidParams(format!(
                "query parameter {name} is given more than once"
            )));
        }
        out.insert(name.to_owned(), typed(name, kind, &value)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn list_tasks_parameters_are_typed() {
        let q = "contextId=c%201&status=TASK_STATE_WORKING&pageSize=5&pageToken=abc\
                 &historyLength=0&statusTimestampAfter=2025-11-09T10%3A30%3A00Z\
                 &includeArtifacts=true&A2A-Version=1.0";
        let got = parse(Operation::ListTasks, Some(q)).unwrap();
        assert_eq!(
            Value::Object(got),
            json!({
                "contextId": "c 1",
                "status": "TASK_STATE_WORKING",
                "pageSize": 5,
                "pageToken": "abc",
                "historyLength": 0,
                "statusTimestampAfter": "2025-11-09T10:30:00Z",
                "includeArtifacts": true,
            })
        );
        let snake = parse(
            Operation::ListTasks,
            Some("page_size=7&include_artifacts=0"),
        )
        .unwrap();
        assert_eq!(
            Value::Object(snake),
            json!({"pageSize": 7, "includeArtifacts": false})
        );
    }

    #[test]
    fn bad_parameters_are_invalid_params() {
        for (op, q) in [
            (Operation::ListTasks, "pageSize=ten"),
            (Operation::ListTasks, "includeArtifacts=yes"),
            (Operation::ListTasks, "pagesize=5"),
            (Operation::ListTasks, "pageSize=1&pageSize=2"),
            (Operation::GetTask, "historyLength=1.5"),
            (Operation::GetTask, "contextId=x"),
            (Operation::SendMessage, "x=1"),
        ] {
            let err = parse(op, Some(q)).unwrap_err();
            assert_eq!(err.jsonrpc_code(), -32602, "{q}");
        }
        assert!(
            parse(Operation::CancelTask, Some("A2A-Version=1.0"))
                .unwrap()
                .is_empty()
        );
    }
}
