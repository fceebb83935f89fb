//! The HTTP+JSON client (spec §11): the request message spread over method, path
//! (`/{tenant}`, ids), query string and body, at the card's HTTP+JSON URL.

use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Map, Value};

use super::client::{Binding, Codes, Events, Failure, Operation, Opts};
use super::sse;

/// HTTP+JSON at `url` (no trailing `/`).
pub struct Rest {
    /// The interface URL.
    pub url: String,
    /// The HTTP client.
    pub http: reqwest::Client,
    /// Subscribe with GET (the proto's verb) rather than POST (the spec prose's).
    pub subscribe_with_get: bool,
}

fn take_str(m: &mut Map<String, Value>, k: &str) -> String {
    match m.remove(k) {
        Some(Value::String(s)) => s,
        other => panic!("{k} must be a string, got {other:?}"),
    }
}

fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Method, path, query and body of `op` for `request`.
fn shape(
    op: Operation,
    request: Value,
    subscribe_with_get: bool,
) -> (Method, String, Vec<(String, String)>, Option<Value>) {
    let Value::Object(mut m) = request else {
        panic!("a request message is an object")
    };
    let prefix = match m.remove("tenant") {
        Some(Value::String(t)) if !t.is_empty() => format!("/{}", enc(&t)),
        _ => String::new(),
    };
    let query = |m: Map<String, Value>| -> Vec<(String, String)> {
        m.into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => (k, s),
                other => (k, other.to_string()),
            })
            .collect()
    };
    let (method, path, q, body) = match op {
        Operation::SendMessage => (Method::POST, "/message:send".to_owned(), vec![], Some(m)),
        Operation::SendStreamingMessage => {
            (Method::POST, "/message:stream".to_owned(), vec![], Some(m))
        }
        Operation::GetTask => {
            let id = take_str(&mut m, "id");
            (Method::GET, format!("/tasks/{}", enc(&id)), query(m), None)
        }
        Operation::ListTasks => (Method::GET, "/tasks".to_owned(), query(m), None),
        Operation::CancelTask => {
            let id = take_str(&mut m, "id");
            (
                Method::POST,
                format!("/tasks/{}:cancel", enc(&id)),
                vec![],
                Some(m),
            )
        }
        Operation::SubscribeToTask => {
            let id = take_str(&mut m, "id");
            let path = format!("/tasks/{}:subscribe", enc(&id));
            if subscribe_with_get {
                (Method::GET, path, vec![], None)
            } else {
                (Method::POST, path, vec![], Some(m))
            }
        }
        Operation::CreateTaskPushNotificationConfig => {
            let task = take_str(&mut m, "taskId");
            let path = format!("/tasks/{}/pushNotificationConfigs", enc(&task));
            (Method::POST, path, vec![], Some(m))
        }
        Operation::ListTaskPushNotificationConfigs => {
            let task = take_str(&mut m, "taskId");
            let path = format!("/tasks/{}/pushNotificationConfigs", enc(&task));
            (Method::GET, path, query(m), None)
        }
        Operation::GetTaskPushNotificationConfig | Operation::DeleteTaskPushNotificationConfig => {
            let task = take_str(&mut m, "taskId");
            let id = take_str(&mut m, "id");
            let path = format!("/tasks/{}/pushNotificationConfigs/{}", enc(&task), enc(&id));
            let method = if op == Operation::GetTaskPushNotificationConfig {
                Method::GET
            } else {
                Method::DELETE
            };
            (method, path, query(m), None)
        }
        Operation::GetExtendedAgentCard => {
            (Method::GET, "/extendedAgentCard".to_owned(), vec![], None)
        }
    };
    (
        method,
        format!("{prefix}{path}"),
        q,
        body.map(Value::Object),
    )
}

/// The failure an error body carries, checking the body's shape on the way.
fn failure(status: u16, v: &Value) -> Failure {
    let e = &v["error"];
    assert_eq!(e["code"], status, "error.code is the HTTP status: {v}");
    assert!(e["status"].is_string() && e["message"].is_string(), "{v}");
    let info = &e["details"][0];
    assert_eq!(
        info["@type"], "type.googleapis.com/google.rpc.ErrorInfo",
        "{v}"
    );
    assert_eq!(info["domain"], "a2a-protocol.org", "{v}");
    Failure {
        reason: info["reason"].as_str().unwrap_or("<no reason>").to_owned(),
        code: status.to_string(),
    }
}

fn unframe(v: Value) -> Result<Value, Failure> {
    if v.get("error").is_some() {
        let status = v["error"]["code"].as_u64().unwrap_or(0) as u16;
        return Err(failure(status, &v));
    }
    Ok(v)
}

impl Rest {
    async fn send(&self, op: Operation, request: Value, opts: &Opts) -> reqwest::Response {
        let (method, path, query, body) = shape(op, request, self.subscribe_with_get);
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .query(&query)
            .header("a2a-version", opts.version.unwrap_or("1.0"));
        if let Some(body) = body {
            req = req
                .header(
                    "content-type",
                    opts.content_type.unwrap_or("application/json"),
                )
                .body(body.to_string());
        }
        if let Some(last) = &opts.last_event_id {
            req = req.header("last-event-id", last);
        }
        if let Some(bearer) = &opts.bearer {
            req = req.bearer_auth(bearer);
        }
        req.send().await.expect("the gateway answers")
    }
}

async fn json_of(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ct.starts_with("application/json"), "HTTP {status} as {ct}");
    (status, resp.json().await.expect("a JSON body"))
}

#[async_trait]
impl Binding for Rest {
    fn name(&self) -> &'static str {
        "HTTP+JSON"
    }

    fn code(&self, codes: Codes) -> String {
        codes.http.to_string()
    }

    async fn unary(&self, op: Operation, request: Value, opts: &Opts) -> Result<Value, Failure> {
        let (status, v) = json_of(self.send(op, request, opts).await).await;
        if status == 200 {
            Ok(v)
        } else {
            Err(failure(status, &v))
        }
    }

    async fn stream(&self, op: Operation, request: Value, opts: &Opts) -> Result<Events, Failure> {
        let resp = self.send(op, request, opts).await;
        let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
        if ct.starts_with("text/event-stream") {
            assert_eq!(resp.status(), 200);
            return Ok(sse::events(resp, unframe));
        }
        let (status, v) = json_of(resp).await;
        Err(failure(status, &v))
    }
}
