//! The HTTP+JSON binding over real sockets, beyond the shared scenario table
//! (`tests/bindings.rs`): routes and tenants, media types, the table of bad input (every
//! refusal is the JSON error body, never axum's plain text, a 500 or a panic),
//! authentication, and `server.bindings`.

mod bindings_common;

use a2a_gateway::config::Binding;
use a2a_gateway::test_util::{PgSchema, get_json};
use a2a_gateway::transport::TransportConfig;
use a2a_gateway::transport::auth::Authenticator;
use bindings_common::server::{Server, start, start_on, start_with};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Digest;

fn send_body(text: &str) -> String {
    json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": [{"text": text}]}})
        .to_string()
}

/// Status, content type and JSON body of a request to `path` under the REST URL.
async fn call(
    s: &Server,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
) -> (u16, String, Value) {
    let mut req = s.http.request(method, format!("{}{path}", s.rest_url()));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if let Some(body) = body {
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            req = req.header("content-type", "application/json");
        }
        req = req.body(body);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = resp.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|_| json!({"not json": text}));
    (status, ct, v)
}

fn reason(v: &Value) -> &str {
    v["error"]["details"][0]["reason"]
        .as_str()
        .unwrap_or("<none>")
}

#[tokio::test]
async fn the_card_declares_each_served_binding_at_its_url() {
    let s = start().await;
    let got: Vec<(String, String)> = s
        .card
        .supported_interfaces
        .iter()
        .map(|i| (i.protocol_binding.clone(), i.url.clone()))
        .collect();
    let host = s.url.trim_start_matches("http://").trim_end_matches('/');
    assert_eq!(
        got,
        [
            ("JSONRPC".to_owned(), s.url.clone()),
            ("HTTP+JSON".to_owned(), format!("{}a2a/rest", s.url)),
            ("GRPC".to_owned(), host.to_owned()),
            // A2A 0.3, served on JSON-RPC.
            ("JSONRPC".to_owned(), s.url.clone()),
        ]
    );
    // The served card says the same.
    let card: Value = get_json(&s.http, &format!("{}.well-known/agent-card.json", s.url)).await;
    assert_eq!(
        card["supportedInterfaces"][1]["protocolBinding"],
        "HTTP+JSON"
    );
    assert_eq!(card["supportedInterfaces"][1]["protocolVersion"], "1.0");
}

#[tokio::test]
async fn a_path_tenant_is_the_calls_tenant() {
    let s = start().await;
    let ct = [("content-type", "application/json")];
    let (status, _, v) = call(
        &s,
        Method::POST,
        "/acme/message:send",
        &ct,
        Some(send_body("echo t")),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let id = v["task"]["id"].as_str().unwrap().to_owned();
    let (status, _, task) = call(&s, Method::GET, &format!("/acme/tasks/{id}"), &[], None).await;
    assert_eq!((status, task["id"].as_str()), (200, Some(id.as_str())));
    // Neither the default tenant nor another one sees it.
    for path in [format!("/tasks/{id}"), format!("/other/tasks/{id}")] {
        let (status, _, v) = call(&s, Method::GET, &path, &[], None).await;
        assert_eq!((status, reason(&v)), (404, "TASK_NOT_FOUND"), "{path}");
    }
    let (_, _, listed) = call(&s, Method::GET, "/acme/tasks", &[], None).await;
    assert_eq!(listed["tasks"][0]["id"], id.as_str());
    let (_, _, listed) = call(&s, Method::GET, "/other/tasks", &[], None).await;
    assert_eq!(listed["tasks"], json!([]));
    // A percent-encoded tenant is decoded; the same tenant in the body is accepted, a
    // different one refused.
    let body = json!({"tenant": "a b", "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "echo x"}]}});
    let (status, _, _) = call(
        &s,
        Method::POST,
        "/a%20b/message:send",
        &ct,
        Some(body.to_string()),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, v) = call(
        &s,
        Method::POST,
        "/acme/message:send",
        &ct,
        Some(body.to_string()),
    )
    .await;
    assert_eq!((status, reason(&v)), (400, "INVALID_PARAMS"));
    // Cancel and subscribe under the tenant.
    let (_, _, held) = call(
        &s,
        Method::POST,
        "/acme/message:send",
        &ct,
        Some(json!({"message": {"messageId": "h", "role": "ROLE_USER", "parts": [{"text": "hold"}]}, "configuration": {"returnImmediately": true}}).to_string()),
    )
    .await;
    let held = held["task"]["id"].as_str().unwrap();
    let (status, _, v) = call(
        &s,
        Method::POST,
        &format!("/acme/tasks/{held}:cancel"),
        &[],
        None,
    )
    .await;
    assert_eq!(
        (status, v["status"]["state"].as_str()),
        (200, Some("TASK_STATE_CANCELED"))
    );
}

#[tokio::test]
async fn subscribe_answers_get_and_post() {
    let s = start().await;
    let (_, _, v) = call(
        &s,
        Method::POST,
        "/message:send",
        &[],
        Some(send_body("ask")),
    )
    .await;
    let id = v["task"]["id"].as_str().unwrap();
    for method in [Method::GET, Method::POST] {
        let resp = s
            .http
            .request(
                method.clone(),
                format!("{}/tasks/{id}:subscribe", s.rest_url()),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{method}");
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        // The stream stays open on INPUT_REQUIRED or ends; read the first event only.
        let mut body = resp.bytes_stream();
        let chunk = futures::StreamExt::next(&mut body).await.unwrap().unwrap();
        let text = String::from_utf8_lossy(&chunk);
        assert!(text.contains("id: "), "{text}");
        let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
        let ev: Value = serde_json::from_str(data).unwrap();
        assert_eq!(ev["task"]["id"], id, "a bare StreamResponse, no envelope");
    }
}

#[tokio::test]
async fn media_type_follows_accept_and_both_are_accepted() {
    let s = start().await;
    let a2a = [
        ("accept", "application/a2a+json"),
        ("content-type", "application/a2a+json"),
    ];
    let (status, ct, v) = call(
        &s,
        Method::POST,
        "/message:send",
        &a2a,
        Some(send_body("echo m")),
    )
    .await;
    assert_eq!((status, ct.as_str()), (200, "application/a2a+json"), "{v}");
    let (status, ct, _) = call(&s, Method::GET, "/tasks/nope", &a2a, None).await;
    assert_eq!((status, ct.as_str()), (404, "application/a2a+json"));
    let plain = [("content-type", "application/json; charset=utf-8")];
    let (status, ct, _) = call(
        &s,
        Method::POST,
        "/message:send",
        &plain,
        Some(send_body("echo m")),
    )
    .await;
    assert_eq!((status, ct.as_str()), (200, "application/json"));
    let (_, ct, _) = call(&s, Method::GET, "/tasks", &[("accept", "*/*")], None).await;
    assert_eq!(ct, "application/json");
}

/// Name, method, path, headers, body, expected status and reason.
type Case<'a> = (
    &'a str,
    Method,
    String,
    Vec<(&'a str, &'a str)>,
    Option<String>,
    u16,
    &'a str,
);

#[tokio::test]
async fn bad_input_gets_the_json_error_body_never_a_500() {
    let s = start_with(TransportConfig {
        max_body_bytes: 4096,
        ..TransportConfig::default()
    })
    .await;
    let json_ct = ("content-type", "application/json");
    let long_tenant = "t".repeat(2000);
    let big = format!("{{\"message\": \"{}\"}}", "x".repeat(8192));
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        ("unknown route", Method::GET, "/nope/nope/nope".into(), vec![], None, 404, "METHOD_NOT_FOUND"),
        ("interface root", Method::GET, "".into(), vec![], None, 404, "METHOD_NOT_FOUND"),
        ("unknown verb suffix", Method::POST, "/message:shout".into(), vec![], None, 404, "METHOD_NOT_FOUND"),
        ("GET message:send", Method::GET, "/message:send".into(), vec![], None, 405, "METHOD_NOT_FOUND"),
        ("PUT tasks", Method::PUT, "/tasks".into(), vec![], None, 405, "METHOD_NOT_FOUND"),
        ("DELETE a task", Method::DELETE, "/tasks/t1".into(), vec![], None, 405, "METHOD_NOT_FOUND"),
        ("GET :cancel", Method::GET, "/tasks/t1:cancel".into(), vec![], None, 405, "METHOD_NOT_FOUND"),
        ("POST a task without a verb", Method::POST, "/tasks/t1".into(), vec![], None, 405, "METHOD_NOT_FOUND"),
        ("POST a misspelt verb", Method::POST, "/tasks/t1:cancle".into(), vec![], None, 404, "METHOD_NOT_FOUND"),
        ("PATCH :subscribe", Method::PATCH, "/tasks/t1:subscribe".into(), vec![], None, 405, "METHOD_NOT_FOUND"),
        ("tenant PUT", Method::PUT, "/acme/message:send".into(), vec![], None, 405, "METHOD_NOT_FOUND"),
        ("malformed body", Method::POST, "/message:send".into(), vec![json_ct], Some("{\"message\":".into()), 400, "PARSE_ERROR"),
        ("body is an array", Method::POST, "/message:send".into(), vec![json_ct], Some("[1,2]".into()), 400, "INVALID_PARAMS"),
        ("body of wrong types", Method::POST, "/message:send".into(), vec![json_ct], Some("{\"message\":{\"parts\":7}}".into()), 400, "INVALID_PARAMS"),
        ("empty body", Method::POST, "/message:send".into(), vec![], Some(String::new()), 400, "INVALID_PARAMS"),
        ("cancel body id differs", Method::POST, "/tasks/t1:cancel".into(), vec![json_ct], Some("{\"id\":\"t2\"}".into()), 400, "INVALID_PARAMS"),
        ("oversized body", Method::POST, "/message:send".into(), vec![json_ct], Some(big), 413, "INVALID_REQUEST"),
        ("text/plain body", Method::POST, "/message:send".into(), vec![("content-type", "text/plain")], Some(send_body("echo")), 415, "CONTENT_TYPE_NOT_SUPPORTED"),
        ("page size not a number", Method::GET, "/tasks?pageSize=ten".into(), vec![], None, 400, "INVALID_PARAMS"),
        ("unknown query parameter", Method::GET, "/tasks?pagesize=5".into(), vec![], None, 400, "INVALID_PARAMS"),
        ("repeated query parameter", Method::GET, "/tasks?pageSize=1&pageSize=2".into(), vec![], None, 400, "INVALID_PARAMS"),
        ("includeArtifacts not a bool", Method::GET, "/tasks?includeArtifacts=maybe".into(), vec![], None, 400, "INVALID_PARAMS"),
        ("history on a subscribe", Method::GET, "/tasks/t1:subscribe?historyLength=1".into(), vec![], None, 400, "INVALID_PARAMS"),
        ("tenant not UTF-8", Method::GET, "/%FF/tasks".into(), vec![], None, 400, "INVALID_PARAMS"),
        ("task id not UTF-8", Method::GET, "/tasks/%C3%28".into(), vec![], None, 400, "INVALID_PARAMS"),
        ("tenant too long", Method::GET, format!("/{long_tenant}/tasks"), vec![], None, 400, "INVALID_PARAMS"),
        ("version 0.3", Method::GET, "/tasks".into(), vec![("a2a-version", "0.3")], None, 400, "VERSION_NOT_SUPPORTED"),
        ("version in the query", Method::GET, "/tasks?A2A-Version=2.0".into(), vec![], None, 400, "VERSION_NOT_SUPPORTED"),
        ("bad Last-Event-ID", Method::GET, "/tasks/t1:subscribe".into(), vec![("last-event-id", "x")], None, 400, "INVALID_PARAMS"),
        ("two Last-Event-ID headers", Method::GET, "/tasks/t1:subscribe".into(), vec![("last-event-id", "3"), ("last-event-id", "5")], None, 400, "INVALID_PARAMS"),
        ("unknown task", Method::GET, "/tasks/t1".into(), vec![], None, 404, "TASK_NOT_FOUND"),
    ];
    for (name, method, path, headers, body, want_status, want_reason) in cases {
        let (status, ct, v) = call(&s, method, &path, &headers, body).await;
        assert_eq!(
            (status, reason(&v)),
            (want_status, want_reason),
            "{name}: {v}"
        );
        assert_eq!(ct, "application/json", "{name}");
        assert_eq!(v["error"]["code"], status, "{name}");
        assert!(v["error"]["message"].is_string(), "{name}");
    }
    let two = [("last-event-id", "3"), ("last-event-id", "5")];
    let (_, _, v) = call(&s, Method::GET, "/tasks/t1:subscribe", &two, None).await;
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("several Last-Event-ID headers: send one")),
        "{v}"
    );
    // A 405 names what the route takes.
    let resp = s
        .http
        .get(format!("{}/tasks/t1:cancel", s.rest_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["allow"], "POST");
    // The Allow of `/tasks/{id}` follows its verb suffix, never a method it refuses.
    for (method, path, allow) in [
        (Method::POST, "/tasks/t1", "GET, HEAD"),
        (Method::DELETE, "/tasks/t1", "GET, HEAD"),
        (Method::PUT, "/acme/tasks/t1:subscribe", "GET, HEAD, POST"),
    ] {
        let resp = s
            .http
            .request(method.clone(), format!("{}{path}", s.rest_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 405, "{method} {path}");
        assert_eq!(resp.headers()["allow"], allow, "{method} {path}");
    }
    // HEAD reads like GET: an unknown task is 404, as GET says.
    let resp = s
        .http
        .head(format!("{}/tasks/t1", s.rest_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let resp = s
        .http
        .put(format!("{}/message:send", s.rest_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["allow"], "POST");
    // The server still answers.
    let (status, _, _) = call(
        &s,
        Method::POST,
        "/message:send",
        &[],
        Some(send_body("echo ok")),
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn authentication_refusals_use_the_rest_error_shape() {
    let s = start_with(TransportConfig {
        auth: Authenticator::api_keys([(
            "alice".to_owned(),
            sha2::Sha256::digest(b"key-a").into(),
        )]),
        ..TransportConfig::default()
    })
    .await;
    for (auth, challenge) in [
        (None, "Bearer realm=\"a2a-gateway\""),
        (
            Some("Bearer wrong"),
            "Bearer realm=\"a2a-gateway\", error=\"invalid_token\", error_description=\"the credential is not accepted\"",
        ),
    ] {
        let mut req = s.http.get(format!("{}/tasks", s.rest_url()));
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 401);
        assert_eq!(resp.headers()["www-authenticate"], challenge);
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["code"], 401);
        assert_eq!(v["error"]["status"], "UNAUTHENTICATED");
        assert_eq!(reason(&v), "UNAUTHENTICATED");
    }
    let (status, _, v) = call(
        &s,
        Method::GET,
        "/tasks",
        &[("authorization", "Bearer key-a")],
        None,
    )
    .await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test]
async fn server_bindings_decide_what_is_served() {
    let only_rpc = start_with(TransportConfig {
        bindings: vec![Binding::Jsonrpc],
        ..TransportConfig::default()
    })
    .await;
    assert_eq!(
        only_rpc.card.supported_interfaces.len(),
        2,
        "JSON-RPC for 1.0 and for 0.3"
    );
    let resp = only_rpc
        .http
        .get(format!("{}a2a/rest/tasks", only_rpc.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);

    let only_rest = start_with(TransportConfig {
        bindings: vec![Binding::Rest],
        ..TransportConfig::default()
    })
    .await;
    assert_eq!(
        only_rest.card.supported_interfaces[0].protocol_binding,
        "HTTP+JSON"
    );
    let resp = only_rest
        .http
        .post(&only_rest.url)
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).to_string())
        .send()
        .await
        .unwrap();
    assert!(
        matches!(resp.status().as_u16(), 404 | 405),
        "{}",
        resp.status()
    );
    let (status, _, _) = call(&only_rest, Method::GET, "/tasks", &[], None).await;
    assert_eq!(status, 200);
}

/// PostgreSQL cannot store a NUL character: a NUL in a path tenant or task id must be
/// refused as invalid (400), not reach the store and come back as a 500.
#[tokio::test]
async fn nul_characters_in_the_path_are_invalid_params_on_postgresql() {
    let Some(schema) =
        PgSchema::create("nul_characters_in_the_path_are_invalid_params_on_postgresql").await
    else {
        return;
    };
    let store = a2a_gateway::store::open_store(&schema.url(), 2)
        .await
        .unwrap();
    let s = start_on(store, TransportConfig::default()).await;
    let ct = [("content-type", "application/json")];
    for (method, path, body) in [
        (Method::GET, "/%00/tasks", None),
        (Method::GET, "/tasks/a%00b", None),
        (Method::GET, "/tasks?contextId=%00", None),
        (Method::POST, "/%00/message:send", Some(send_body("echo x"))),
        (Method::POST, "/tasks/a%00b:cancel", None),
    ] {
        let (status, _, v) = call(&s, method.clone(), path, &ct, body).await;
        assert_eq!(
            (status, reason(&v)),
            (400, "INVALID_PARAMS"),
            "{method} {path}: {v}"
        );
    }
    let (status, _, _) = call(
        &s,
        Method::POST,
        "/message:send",
        &ct,
        Some(send_body("echo ok")),
    )
    .await;
    assert_eq!(status, 200);
    schema.close().await;
}
