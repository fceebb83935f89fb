//! Property tests (proptest, bounded case counts) of every parser that reads untrusted
//! input: the JSON-RPC envelope, the `Last-Event-ID` header, the ListTasks page token and
//! config loading. None may panic on any input; each agrees with a simple reference or
//! round-trips what this server writes. `fuzz/` runs the same parsers under libFuzzer.

use a2a_gateway::config::{Config, ConfigSources};
use a2a_gateway::error::A2aError;
use a2a_gateway::protocol::jsonrpc::{EnvelopeError, MAX_ID_BYTES, RequestId, parse_request};
use a2a_gateway::store::PageCursor;
use a2a_gateway::transport::operations::parse_last_event_id;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        prop_oneof![Just("jsonrpc"), Just("id"), Just("method"), Just("params")]
            .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(3, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("jsonrpc".to_owned()),
                        Just("id".to_owned()),
                        Just("method".to_owned()),
                        Just("params".to_owned()),
                        "[a-z]{0,6}"
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// What the envelope parser must answer for a body without repeated members: the
/// straightforward reading of JSON-RPC 2.0 over a parsed value.
fn reference(v: &Value) -> Result<(Option<Value>, String, Value), ()> {
    let obj = v.as_object().ok_or(())?;
    let id = match obj.get("id") {
        None => None,
        Some(Value::String(s)) if s.len() > MAX_ID_BYTES => return Err(()),
        Some(Value::Number(n))
            if n.is_f64()
                && n.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.abs() > 2f64.powi(53)) =>
        {
            return Err(());
        }
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(id.clone()),
        Some(_) => return Err(()),
    };
    if obj.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(());
    }
    let method = obj
        .get("method")
        .and_then(Value::as_str)
        .ok_or(())?
        .to_owned();
    let params = match obj.get("params") {
        None => Value::Null,
        Some(p @ (Value::Object(_) | Value::Array(_))) => p.clone(),
        Some(_) => return Err(()),
    };
    Ok((id, method, params))
}

/// Multiplies every property's case count: `A2A_GATEWAY_PROPTEST_SCALE` (default 1), so
/// `bench/properties.sh` can run the same properties far longer than `cargo test` does.
fn scaled(cases: u32) -> u32 {
    std::env::var("A2A_GATEWAY_PROPTEST_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .filter(|&n| n > 0)
        .map_or(cases, |n| cases.saturating_mul(n))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: scaled(512), ..ProptestConfig::default() })]

    #[test]
    fn envelope_never_panics_on_bytes(body in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_request(&body);
    }

    #[test]
    fn envelope_never_panics_on_json_like_text(body in r#"[\[\]{}:,"0-9a-z\\ .eE+-]{0,96}"#) {
        let _ = parse_request(body.as_bytes());
    }

    #[test]
    fn envelope_agrees_with_the_reference(v in json_value()) {
        let body = serde_json::to_vec(&v).unwrap();
        match (parse_request(&body), reference(&v)) {
            (Ok(r), Ok((id, method, params))) => {
                prop_assert_eq!(r.id, id.map(RequestId));
                prop_assert_eq!(r.method, method);
                prop_assert_eq!(r.params, params);
            }
            (Err(EnvelopeError::Invalid { .. }), Err(())) => {}
            (got, want) => prop_assert!(false, "{v}: parser {got:?}, reference {want:?}"),
        }
    }

    #[test]
    fn well_formed_requests_round_trip(
        id in prop_oneof![
            Just(None),
            Just(Some(Value::Null)),
            any::<i64>().prop_map(|n| Some(json!(n))),
            any::<u64>().prop_map(|n| Some(json!(n))),
            ".{0,40}".prop_map(|s| Some(json!(s))),
            Just(Some(json!("i".repeat(MAX_ID_BYTES)))),
        ],
        method in ".{0,24}",
        params in prop_oneof![Just(None), json_value().prop_map(|v| Some(json!({"p": v})))],
        extra in json_value(),
    ) {
        let mut obj = Map::new();
        obj.insert("x-extra".into(), extra);
        obj.insert("jsonrpc".into(), json!("2.0"));
        obj.insert("method".into(), json!(method));
        if let Some(id) = &id { obj.insert("id".into(), id.clone()); }
        if let Some(p) = &params { obj.insert("params".into(), p.clone()); }
        let r = parse_request(&serde_json::to_vec(&obj).unwrap()).unwrap();
        prop_assert_eq!(r.id, id.map(RequestId));
        prop_assert_eq!(r.method, method);
        prop_assert_eq!(r.params, params.unwrap_or(Value::Null));
    }

    #[test]
    fn a_repeated_envelope_member_is_invalid(
        twice in prop_oneof![Just("jsonrpc"), Just("id"), Just("method"), Just("params")],
        first in json_value(),
        second in json_value(),
        at in 0usize..5,
    ) {
        let mut members = vec![
            r#""jsonrpc":"2.0""#.to_owned(),
            r#""id":1"#.to_owned(),
            r#""method":"GetTask""#.to_owned(),
            r#""params":{}"#.to_owned(),
        ];
        members.retain(|m| !m.starts_with(&format!("\"{twice}\"")));
        members.push(format!("\"{twice}\":{first}"));
        members.insert(at.min(members.len()), format!("\"{twice}\":{second}"));
        let body = format!("{{{}}}", members.join(","));
        let got = parse_request(body.as_bytes());
        prop_assert!(matches!(got, Err(EnvelopeError::Invalid { .. })), "{body}: {got:?}");
    }

    #[test]
    fn last_event_id_never_panics_and_quotes_little(s in any::<String>()) {
        match parse_last_event_id(Some(&s)) {
            Ok(None) => prop_assert!(s.trim().is_empty()),
            Ok(Some(n)) => {
                let digits = s.trim().trim_start_matches('0');
                prop_assert_eq!(if digits.is_empty() { "0" } else { digits }, n.to_string());
            }
            Err(A2aError::InvalidParams(reason)) => {
                prop_assert!(reason.len() <= 64 * 4 + 80, "{}", reason.len());
            }
            Err(e) => prop_assert!(false, "{e:?}"),
        }
    }

    #[test]
    fn last_event_id_reads_every_u64(n in any::<u64>(), zeros in 0usize..4) {
        let s = format!(" {}{n} ", "0".repeat(zeros));
        prop_assert_eq!(parse_last_event_id(Some(&s)).ok(), Some(Some(n)));
    }

    #[test]
    fn last_event_id_refuses_any_non_digit(a in "[0-9]{0,5}", c in r"[^0-9\s]", b in "[0-9]{0,5}") {
        let s = format!("{a}{c}{b}");
        prop_assume!(s.trim() == s);
        prop_assert!(parse_last_event_id(Some(&s)).is_err(), "{:?}", s);
    }

    #[test]
    fn page_token_never_panics(s in any::<String>()) {
        let _ = PageCursor::decode(&s);
    }

    #[test]
    fn page_token_decodes_what_it_encodes(status_millis in any::<i64>(), id in any::<String>()) {
        let c = PageCursor { status_millis, id };
        prop_assert_eq!(PageCursor::decode(&c.encode()), Some(c));
    }

    #[test]
    fn page_token_of_any_bytes_is_stable(raw in prop::collection::vec(any::<u8>(), 0..64)) {
        use base64::Engine;
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&raw);
        if let Some(c) = PageCursor::decode(&token) {
            prop_assert_eq!(PageCursor::decode(&c.encode()), Some(c));
        }
    }
}

/// A config file line: a known `[section]` header, a `key = value` with a known or odd
/// key and an arbitrary TOML-ish value, or noise.
fn config_line() -> impl Strategy<Value = String> {
    let section = prop_oneof![
        Just("server"),
        Just("server.auth"),
        Just("store"),
        Just("upstream"),
        Just("upstream.auth"),
        Just("agent"),
        Just("log"),
        Just("nope"),
    ];
    let key = prop_oneof![
        Just("listen"),
        Just("public_url"),
        Just("max_body_bytes"),
        Just("max_connections"),
        Just("header_timeout_secs"),
        Just("idle_timeout_secs"),
        Just("kind"),
        Just("url"),
        Just("keys"),
        Just("runtime_arn"),
        Just("token_url"),
        Just("client_secret"),
        Just("level"),
        Just("format"),
        Just("name"),
        Just("retention_days"),
        Just("tls_cert_file"),
        Just("x"),
    ];
    let value = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        ".{0,24}".prop_map(|s| format!("{s:?}")),
        r#"[\[\]{}=,"0-9a-z:/. -]{0,24}"#,
        Just("[{caller = \"a\", sha256 = \"00\"}]".to_owned()),
        Just("\"127.0.0.1:0\"".to_owned()),
        Just("\"sqlite::memory:\"".to_owned()),
    ];
    prop_oneof![
        section.prop_map(|s| format!("[{s}]")),
        (key, value).prop_map(|(k, v)| format!("{k} = {v}")),
        ".{0,20}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: scaled(128), ..ProptestConfig::default() })]

    #[test]
    fn config_loading_never_panics(
        lines in prop::collection::vec(config_line(), 0..12),
        env in prop::collection::vec(
            ("A2A_GATEWAY_(SERVER|STORE|UPSTREAM|AGENT|LOG)__[A-Z_]{1,16}", ".{0,24}"),
            0..4,
        ),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.toml");
        std::fs::write(&path, lines.join("\n")).unwrap();
        let sources = ConfigSources { file: Some(path), env, overrides: Vec::new() };
        match Config::load(sources) {
            Ok(config) => {
                let _ = config.redacted_toml();
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}
