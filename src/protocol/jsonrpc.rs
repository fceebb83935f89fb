//! JSON-RPC 2.0 envelope (spec §9): request parsing that keeps the exact `id`, and
//! response rendering.

use serde::Serialize;
use serde_json::{Map, Value};

/// A request id exactly as the client sent it: a string, a number or `null`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct RequestId(pub Value);

/// A parsed JSON-RPC request object.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonRpcRequest {
    /// `None` for a notification (no `id` member): no response body is sent.
    pub id: Option<RequestId>,
    /// The method name.
    pub method: String,
    /// The `params` member (`Value::Null` when absent).
    pub params: Value,
}

/// Why a body is not a usable JSON-RPC request.
#[derive(Debug, Clone, PartialEq)]
pub enum EnvelopeError {
    /// Not JSON at all (-32700). The text says where parsing failed.
    Parse(String),
    /// JSON but not a valid request object (-32600). Carries the id when it could be read.
    Invalid {
        /// The request id, if it was present and valid.
        id: Option<RequestId>,
        /// What is wrong.
        reason: String,
    },
}

/// Largest integer a float holds exactly (2^53); larger integer ids that do not fit
/// 64 bits are refused instead of being echoed altered.
const MAX_EXACT_ID: f64 = 9_007_199_254_740_992.0;

/// Parses a request body: one JSON-RPC 2.0 request object.
///
/// # Errors
/// [`EnvelopeError::Parse`] for invalid JSON; [`EnvelopeError::Invalid`] for batches,
/// non-objects, a missing or wrong `jsonrpc`, a non-string `method`, an `id` that is
/// not a string, number or null, or `params` that is not an object or array.
pub fn parse_request(body: &[u8]) -> Result<JsonRpcRequest, EnvelopeError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| EnvelopeError::Parse(e.to_string()))?;
    let obj: Map<String, Value> = match v {
        Value::Object(o) => o,
        Value::Array(_) => {
            return Err(EnvelopeError::Invalid {
                id: None,
                reason: "batch requests are not supported".into(),
            });
        }
        _ => {
            return Err(EnvelopeError::Invalid {
                id: None,
                reason: "the request must be a JSON object".into(),
            });
        }
    };
    let id = match obj.get("id") {
        None => None,
        Some(Value::Number(n))
            if n.is_f64()
                && n.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.abs() > MAX_EXACT_ID) =>
        {
            // Parsed as a float, the integer has already lost digits: echoing it
            // would give the client back a different id.
            return Err(EnvelopeError::Invalid {
                id: Some(RequestId(Value::Null)),
                reason: "`id` is an integer too large to echo exactly; send it as a string".into(),
            });
        }
        Some(v @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(RequestId(v.clone())),
        Some(_) => {
            return Err(EnvelopeError::Invalid {
                id: Some(RequestId(Value::Null)),
                reason: "`id` must be a string, a number or null".into(),
            });
        }
    };
    let invalid = |reason: &str| EnvelopeError::Invalid {
        id: id.clone(),
        reason: reason.into(),
    };
    if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Err(invalid("`jsonrpc` must be \"2.0\""));
    }
    let method = match obj.get("method") {
        Some(Value::String(m)) => m.clone(),
        Some(_) => return Err(invalid("`method` must be a string")),
        None => return Err(invalid("`method` is missing")),
    };
    let params = match obj.get("params") {
        None => Value::Null,
        Some(p @ (Value::Object(_) | Value::Array(_))) => p.clone(),
        Some(_) => return Err(invalid("`params` must be an object or an array")),
    };
    Ok(JsonRpcRequest { id, method, params })
}

/// A JSON-RPC error object (`{"code","message","data"}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorObject {
    /// The JSON-RPC error code.
    pub code: i32,
    /// A short human-readable message.
    pub message: String,
    /// Typed details (`[{"@type": …ErrorInfo, …}]`, spec §9.5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

#[derive(Serialize)]
struct Success<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a T,
}

/// Serializes `{"jsonrpc":"2.0","id":…,"result":…}` straight to text, without
/// building an intermediate `Value` (the hot path of every SSE event).
///
/// # Errors
/// The serializer's error (a map with non-string keys; never for A2A types).
pub fn success_text<T: Serialize>(id: &RequestId, result: &T) -> Result<String, serde_json::Error> {
    serde_json::to_string(&Success {
        jsonrpc: "2.0",
        id,
        result,
    })
}

/// Renders `{"jsonrpc":"2.0","id":…,"result":…}`.
pub fn success(id: &RequestId, result: impl Serialize) -> Value {
    let result = serde_json::to_value(result).unwrap_or(Value::Null);
    serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// Renders `{"jsonrpc":"2.0","id":…,"error":…}`; `id` is `null` when unknown.
pub fn failure(id: Option<&RequestId>, error: &ErrorObject) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id.map(|i| &i.0).unwrap_or(&Value::Null), "error": error})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_id_type() {
        for id in [json!(1), json!("a"), json!(null), json!(1.5)] {
            let body = serde_json::to_vec(&json!({"jsonrpc":"2.0","id":id,"method":"m"})).unwrap();
            assert_eq!(parse_request(&body).unwrap().id, Some(RequestId(id)));
        }
        let r = parse_request(br#"{"jsonrpc":"2.0","method":"m"}"#).unwrap();
        assert_eq!(r.id, None);
    }

    #[test]
    fn classifies_bad_envelopes() {
        assert!(matches!(parse_request(b"{"), Err(EnvelopeError::Parse(_))));
        // Beyond 64 bits serde_json reads an integer as a float: refused, not altered.
        let huge = br#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"m"}"#;
        assert!(matches!(
            parse_request(huge),
            Err(EnvelopeError::Invalid { .. })
        ));
        let big_u64 = br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"m"}"#;
        assert_eq!(
            parse_request(big_u64).unwrap().id,
            Some(RequestId(serde_json::json!(18446744073709551615u64)))
        );
        for b in [
            &br#"[]"#[..],
            br#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#,
            br#"3"#,
            br#"{"id":1,"method":"m"}"#,
            br#"{"jsonrpc":"1.0","id":1,"method":"m"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":3}"#,
            br#"{"jsonrpc":"2.0","id":{},"method":"m"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":3}"#,
        ] {
            assert!(
                matches!(parse_request(b), Err(EnvelopeError::Invalid { .. })),
                "{b:?}"
            );
        }
    }
}
