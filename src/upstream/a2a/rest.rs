//! The HTTP+JSON binding of A2A 1.0 towards an agent (spec §11): which request each
//! operation is, and how an error answer reads. The bodies are the 1.0 request and
//! result messages without the JSON-RPC envelope; a stream's `data` is a
//! `StreamResponse`.
//!
//! | operation | request |
//! |---|---|
//! | SendMessage | `POST {base}/message:send` |
//! | SendStreamingMessage | `POST {base}/message:stream` |
//! | GetTask | `GET {base}/tasks/{id}` |
//! | CancelTask | `POST {base}/tasks/{id}:cancel` |
//! | SubscribeToTask | `GET {base}/tasks/{id}:subscribe` |

use serde_json::Value;

use super::wire::{Method, TASK_NOT_CANCELABLE, TASK_NOT_FOUND, VERSION_NOT_SUPPORTED};

/// Characters percent-encoded in a task id put in a path segment.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The HTTP method, URL and body of `method` with `params` at the agent's `base`.
pub fn request(
    base: &str,
    method: Method,
    params: &Value,
) -> (http::Method, String, Option<Value>) {
    let base = base.trim_end_matches('/');
    let id = || {
        percent_encoding::utf8_percent_encode(params["id"].as_str().unwrap_or_default(), SEGMENT)
            .to_string()
    };
    match method {
        Method::Send => (
            http::Method::POST,
            format!("{base}/message:send"),
            Some(params.clone()),
        ),
        Method::Stream => (
            http::Method::POST,
            format!("{base}/message:stream"),
            Some(params.clone()),
        ),
        Method::GetTask => (http::Method::GET, format!("{base}/tasks/{}", id()), None),
        Method::Cancel => (
            http::Method::POST,
            format!("{base}/tasks/{}:cancel", id()),
            Some(serde_json::json!({})),
        ),
        Method::Subscribe => (
            http::Method::GET,
            format!("{base}/tasks/{}:subscribe", id()),
            None,
        ),
    }
}

/// The A2A error an HTTP+JSON error body names (`google.rpc.Status` with an
/// `ErrorInfo` reason, as the SDKs send it), as its JSON-RPC code and message; `None`
/// when the body names none the gateway acts on.
pub fn error(status: u16, body: &[u8]) -> Option<(i64, String)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let e = v.get("error").unwrap_or(&v);
    let message: String = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .take(200)
        .collect();
    let reasons: Vec<&str> = e
        .get("details")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| d.get("reason").and_then(Value::as_str))
        .collect();
    let code = reasons.iter().find_map(|r| match *r {
        "TASK_NOT_FOUND" => Some(TASK_NOT_FOUND),
        "TASK_NOT_CANCELABLE" => Some(TASK_NOT_CANCELABLE),
        "VERSION_NOT_SUPPORTED" => Some(VERSION_NOT_SUPPORTED),
        _ => None,
    });
    let code = code.or(match status {
        404 if !message.is_empty() => Some(TASK_NOT_FOUND),
        _ => None,
    })?;
    Some((code, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_operations_and_errors() {
        let (m, url, body) = request("http://h/a/", Method::Cancel, &json!({"id": "t 1/x"}));
        assert_eq!(
            (m, url.as_str()),
            (http::Method::POST, "http://h/a/tasks/t%201%2Fx:cancel")
        );
        assert_eq!(body, Some(json!({})));
        let (m, url, body) = request("http://h", Method::Send, &json!({"message": {}}));
        assert_eq!(
            (m, url.as_str()),
            (http::Method::POST, "http://h/message:send")
        );
        assert_eq!(body, Some(json!({"message": {}})));
        let body = br#"{"error": {"code": 409, "status": "FAILED_PRECONDITION", "message": "no",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_CANCELABLE"}]}}"#;
        assert_eq!(error(409, body), Some((TASK_NOT_CANCELABLE, "no".into())));
        assert_eq!(error(500, b"oops"), None);
    }
}
