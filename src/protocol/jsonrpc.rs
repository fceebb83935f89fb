//! JSON-RPC 2.0 envelope (spec §9): request parsing that keeps the exact `id`, and
//! response rendering.

use serde::Serialize;
use serde_json::Value;

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

/// Longest string `id` accepted, in bytes: the same cap as task and context ids
/// (`crate::handler::MAX_ID_BYTES`), so a client cannot make every reply echo megabytes.
pub const MAX_ID_BYTES: usize = 1024;

/// The top-level value of a body, read in one pass: the four envelope members of an
/// object (other members skipped), or which other kind of value it was.
enum TopLevel {
    Object(Members),
    Array,
    Scalar,
}

#[derive(Default)]
struct Members {
    jsonrpc: Option<Value>,
    id: Option<Value>,
    method: Option<Value>,
    params: Option<Value>,
    /// `id` appeared more than once.
    id_repeated: bool,
    /// The first other envelope member that appeared more than once.
    repeated: Option<&'static str>,
}

/// A member name of the request object: one of the four, or any other.
enum Key {
    Jsonrpc,
    Id,
    Method,
    Params,
    Other,
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(match v {
                    "jsonrpc" => Key::Jsonrpc,
                    "id" => Key::Id,
                    "method" => Key::Method,
                    "params" => Key::Params,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

impl<'de> serde::Deserialize<'de> for TopLevel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::IgnoredAny;
        struct TopVisitor;
        impl<'de> serde::de::Visitor<'de> for TopVisitor {
            type Value = TopLevel;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<TopLevel, A::Error> {
                let mut m = Members::default();
                while let Some(key) = map.next_key::<Key>()? {
                    let (slot, name) = match key {
                        Key::Jsonrpc => (&mut m.jsonrpc, "jsonrpc"),
                        Key::Id => (&mut m.id, "id"),
                        Key::Method => (&mut m.method, "method"),
                        Key::Params => (&mut m.params, "params"),
                        Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    if slot.is_some() {
                        // Still read (and syntax-check) the value, but keep the first.
                        map.next_value::<IgnoredAny>()?;
                        if name == "id" {
                            m.id_repeated = true;
                        } else {
                            m.repeated.get_or_insert(name);
                        }
                    } else {
                        *slot = Some(map.next_value::<Value>()?);
                    }
                }
                Ok(TopLevel::Object(m))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<TopLevel, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(TopLevel::Array)
            }
            fn visit_bool<E>(self, _: bool) -> Result<TopLevel, E> {
                Ok(TopLevel::Scalar)
            }
            fn visit_i64<E>(self, _: i64) -> Result<TopLevel, E> {
                Ok(TopLevel::Scalar)
            }
            fn visit_u64<E>(self, _: u64) -> Result<TopLevel, E> {
                Ok(TopLevel::Scalar)
            }
            fn visit_f64<E>(self, _: f64) -> Result<TopLevel, E> {
                Ok(TopLevel::Scalar)
            }
            fn visit_str<E>(self, _: &str) -> Result<TopLevel, E> {
                Ok(TopLevel::Scalar)
            }
            fn visit_unit<E>(self) -> Result<TopLevel, E> {
                Ok(TopLevel::Scalar)
            }
        }
        d.deserialize_any(TopVisitor)
    }
}

/// Parses a request body: one JSON-RPC 2.0 request object, in one pass over the bytes
/// (members other than `jsonrpc`, `id`, `method` and `params` are skipped unread).
///
/// # Errors
/// [`EnvelopeError::Parse`] for invalid JSON; [`EnvelopeError::Invalid`] for batches,
/// non-objects, an envelope member that appears more than once, a missing or wrong
/// `jsonrpc`, a non-string `method`, an `id` that is not a string, number or null (or a
/// string over [`MAX_ID_BYTES`]), or `params` that is not an object or array.
pub fn parse_request(body: &[u8]) -> Result<JsonRpcRequest, EnvelopeError> {
    let top: TopLevel =
        serde_json::from_slice(body).map_err(|e| EnvelopeError::Parse(e.to_string()))?;
    let m = match top {
        TopLevel::Object(m) => m,
        TopLevel::Array => {
            return Err(EnvelopeError::Invalid {
                id: None,
                reason: "batch requests are not supported".into(),
            });
        }
        TopLevel::Scalar => {
            return Err(EnvelopeError::Invalid {
                id: None,
                reason: "the request must be a JSON object".into(),
            });
        }
    };
    let bad_id = |reason: String| EnvelopeError::Invalid {
        id: Some(RequestId(Value::Null)),
        reason,
    };
    if m.id_repeated {
        return Err(bad_id(
            "`id` appears more than once in the request object".into(),
        ));
    }
    let id = match m.id {
        None => None,
        Some(Value::Number(n))
            if n.is_f64()
                && n.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.abs() > MAX_EXACT_ID) =>
        {
            // Parsed as a float, the integer has already lost digits: echoing it
            // would give the client back a different id.
            return Err(bad_id(
                "`id` is an integer too large to echo exactly; send it as a string".into(),
            ));
        }
        Some(Value::String(s)) if s.len() > MAX_ID_BYTES => {
            return Err(bad_id(format!(
                "`id` is {} bytes long; string ids are at most {MAX_ID_BYTES} bytes",
                s.len()
            )));
        }
        Some(v @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(RequestId(v)),
        Some(_) => {
            return Err(bad_id("`id` must be a string, a number or null".into()));
        }
    };
    let invalid = |reason: &str| EnvelopeError::Invalid {
        id: id.clone(),
        reason: reason.into(),
    };
    if let Some(name) = m.repeated {
        return Err(invalid(&format!(
            "`{name}` appears more than once in the request object"
        )));
    }
    if m.jsonrpc != Some(Value::String("2.0".into())) {
        return Err(invalid("`jsonrpc` must be \"2.0\""));
    }
    let method = match m.method {
        Some(Value::String(m)) => m,
        Some(_) => return Err(invalid("`method` must be a string")),
        None => return Err(invalid("`method` is missing")),
    };
    let params = match m.params {
        None => Value::Null,
        Some(p @ (Value::Object(_) | Value::Array(_))) => p,
        Some(_) => return Err(invalid("`params` must be an object or an array")),
    };
    Ok(JsonRpcRequest { id, method, params })
}

/// The `id` of a request body that will not be parsed whole (one refused for its
/// size, [`crate::protocol::value_count`]), read without building any other member:
/// the id when the body is a JSON object whose first `id` is a string of at most
/// [`MAX_ID_BYTES`], a number or `null`; otherwise `None` (the error then carries
/// `"id": null`).
pub fn request_id(body: &[u8]) -> Option<RequestId> {
    use serde::de::IgnoredAny;
    struct IdOnly(Option<RequestId>);
    impl<'de> serde::Deserialize<'de> for IdOnly {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct IdVisitor;
            impl<'de> serde::de::Visitor<'de> for IdVisitor {
                type Value = IdOnly;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a JSON-RPC request object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<IdOnly, A::Error> {
                    let mut id = None;
                    let mut seen = false;
                    while let Some(key) = map.next_key::<Key>()? {
                        if seen || !matches!(key, Key::Id) {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                        seen = true;
                        // Borrowed text: nothing is built from an id that is no scalar.
                        let raw = map.next_value::<&serde_json::value::RawValue>()?;
                        id = (raw.get().len() <= MAX_ID_BYTES + 2)
                            .then(|| serde_json::from_str::<Value>(raw.get()).ok())
                            .flatten()
                            .filter(|v| v.is_null() || v.is_number() || v.is_string())
                            .map(RequestId);
                    }
                    Ok(IdOnly(id))
                }
            }
            d.deserialize_map(IdVisitor)
        }
    }
    serde_json::from_slice::<IdOnly>(body)
        .ok()
        .and_then(|IdOnly(id)| id)
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

/// Renders `{"jsonrpc":"2.0","id":…,"result":<result_json>}` around a result that
/// is already JSON text (an event serialized once for all its subscribers), without
/// parsing or re-serializing it.
///
/// # Errors
/// The serializer's error for `id` (it cannot fail for the ids a request can carry).
pub fn success_raw(id: &RequestId, result_json: &str) -> Result<String, serde_json::Error> {
    let id = serde_json::to_string(&id.0)?;
    let mut out = String::with_capacity(result_json.len() + id.len() + 32);
    out.push_str(r#"{"jsonrpc":"2.0","id":"#);
    out.push_str(&id);
    out.push_str(r#","result":"#);
    out.push_str(result_json);
    out.push('}');
    Ok(out)
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
    fn success_raw_is_success_text_around_the_same_json() {
        let result = json!({"task": {"id": "t\"1", "n": 2.5, "s": "é\n"}});
        for id in [json!(7), json!("a\"b"), Value::Null, json!(-1.5)] {
            let id = RequestId(id);
            let raw = success_raw(&id, &serde_json::to_string(&result).unwrap()).unwrap();
            assert_eq!(raw, success_text(&id, &result).unwrap());
            let back: Value = serde_json::from_str(&raw).unwrap();
            assert_eq!(back, success(&id, &result));
        }
    }

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
            br#"true"#,
            br#"null"#,
            br#""str""#,
            br#"-1.5"#,
        ] {
            assert!(
                matches!(parse_request(b), Err(EnvelopeError::Invalid { .. })),
                "{b:?}"
            );
        }
    }

    #[test]
    fn request_id_reads_only_the_id() {
        let id = |body: &str| request_id(body.as_bytes()).map(|r| r.0);
        assert_eq!(
            id(r#"{"params":{"k":[0,0,0]},"id":"a-1","method":"x"}"#),
            Some(json!("a-1"))
        );
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":7}"#), Some(json!(7)));
        assert_eq!(id(r#"{"id":null}"#), Some(Value::Null));
        assert_eq!(id(r#"{"id":[1,2]}"#), None, "not a valid id");
        assert_eq!(id(r#"{"id":1,"id":2}"#), Some(json!(1)), "the first one");
        let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_ID_BYTES + 1));
        assert_eq!(id(&long), None, "longer than an id may be");
        assert_eq!(id("[1]"), None);
        assert_eq!(id(r#"{"id":1,"#), None, "not JSON");
    }

    #[test]
    fn ids_are_capped_like_task_ids() {
        assert_eq!(MAX_ID_BYTES, crate::handler::MAX_ID_BYTES);
        let body = |id: &str| {
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": "m"})).unwrap()
        };
        let at_cap = "é".repeat(MAX_ID_BYTES / 2);
        assert_eq!(
            parse_request(&body(&at_cap)).unwrap().id,
            Some(RequestId(json!(at_cap)))
        );
        let over = format!("{at_cap}x");
        match parse_request(&body(&over)) {
            Err(EnvelopeError::Invalid { id, reason }) => {
                assert_eq!(id, Some(RequestId(Value::Null)));
                assert!(reason.contains("1025 bytes"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn repeated_envelope_members_are_refused_not_last_wins() {
        let cases: [(&[u8], Option<Value>, &str); 6] = [
            (
                br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#,
                Some(Value::Null),
                "`id`",
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
                Some(json!(1)),
                "`method`",
            ),
            (
                br#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":"x","method":"m"}"#,
                Some(json!("x")),
                "`jsonrpc`",
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{},"params":{"a":1}}"#,
                Some(json!(1)),
                "`params`",
            ),
            // A repeat written with an escape is the same member.
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"a","\u006dethod":"b"}"#,
                Some(json!(1)),
                "`method`",
            ),
            (
                br#"{"jsonrpc":"2.0","method":"a","method":"b"}"#,
                None,
                "`method`",
            ),
        ];
        for (body, want_id, name) in cases {
            match parse_request(body) {
                Err(EnvelopeError::Invalid { id, reason }) => {
                    assert_eq!(id, want_id.map(RequestId), "{body:?}");
                    assert!(
                        reason.contains(name) && reason.contains("more than once"),
                        "{reason}"
                    );
                }
                other => panic!("{:?}: {other:?}", String::from_utf8_lossy(body)),
            }
        }
        // Other members may repeat (they are not read), and are skipped.
        let r = parse_request(
            br#"{"jsonrpc":"2.0","x":1,"x":[2],"id":1,"method":"m","params":{"a":1,"a":2}}"#,
        )
        .unwrap();
        assert_eq!(r.method, "m");
        // Invalid JSON inside a repeated or skipped member is still a parse error.
        for body in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"m","method":[}"#[..],
            br#"{"jsonrpc":"2.0","x":[1,,],"id":1,"method":"m"}"#,
            br#"[1,]"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m"} x"#,
        ] {
            assert!(
                matches!(parse_request(body), Err(EnvelopeError::Parse(_))),
                "{body:?}"
            );
        }
    }

    /// Found by tests/properties.rs: without serde_json's `float_roundtrip`, this float in
    /// `params` was read back one unit in the last place off.
    #[test]
    fn floats_in_params_are_read_exactly() {
        let f = 2.4156312745741978e-47_f64;
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"p":[{f:e}]}}}}"#);
        let r = parse_request(body.as_bytes()).unwrap();
        assert_eq!(r.params["p"][0].as_f64(), Some(f));
    }
}
