//! The JSON-RPC client (spec §9): one POST per call to the card's JSONRPC URL.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::client::{Binding, Codes, Events, Failure, Operation, Opts};
use super::sse;

/// JSON-RPC at `url`.
pub struct JsonRpc {
    /// The interface URL.
    pub url: String,
    /// The HTTP client.
    pub http: reqwest::Client,
}

fn failure(error: &Value) -> Failure {
    Failure {
        reason: error["data"][0]["reason"]
            .as_str()
            .unwrap_or("<no ErrorInfo>")
            .to_owned(),
        code: error["code"].to_string(),
    }
}

fn unframe(v: Value) -> Result<Value, Failure> {
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    match v.get("error") {
        // A refusal before the body was read (415, 413) cannot echo the id.
        Some(e) => {
            assert!(v["id"] == 1 || v["id"].is_null(), "{v}");
            Err(failure(e))
        }
        None => {
            assert_eq!(v["id"], 1, "the id is echoed on every event: {v}");
            Ok(v["result"].clone())
        }
    }
}

impl JsonRpc {
    async fn post(&self, op: Operation, request: Value, opts: &Opts) -> reqwest::Response {
        let mut req = self
            .http
            .post(&self.url)
            .header(
                "content-type",
                opts.content_type.unwrap_or("application/json"),
            )
            .header("a2a-version", opts.version.unwrap_or("1.0"))
            .body(
                json!({"jsonrpc": "2.0", "id": 1, "method": op.name(), "params": request})
                    .to_string(),
            );
        if let Some(last) = &opts.last_event_id {
            req = req.header("last-event-id", last);
        }
        if let Some(bearer) = &opts.bearer {
            req = req.bearer_auth(bearer);
        }
        req.send().await.expect("the gateway answers")
    }
}

#[async_trait]
impl Binding for JsonRpc {
    fn name(&self) -> &'static str {
        "JSONRPC"
    }

    fn code(&self, codes: Codes) -> String {
        codes.jsonrpc.to_string()
    }

    async fn unary(&self, op: Operation, request: Value, opts: &Opts) -> Result<Value, Failure> {
        let resp = self.post(op, request, opts).await;
        let status = resp.status().as_u16();
        let v: Value = resp.json().await.expect("a JSON body");
        assert!(
            matches!(status, 200 | 401 | 403 | 415 | 503),
            "HTTP {status}: {v}"
        );
        unframe(v)
    }

    async fn stream(&self, op: Operation, request: Value, opts: &Opts) -> Result<Events, Failure> {
        let resp = self.post(op, request, opts).await;
        let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
        if ct.starts_with("text/event-stream") {
            return Ok(sse::events(resp, unframe));
        }
        let v: Value = resp.json().await.expect("a JSON body");
        Err(unframe(v).expect_err("a JSON answer to a stream call is an error"))
    }
}
