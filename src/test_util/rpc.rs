//! One JSON-RPC 2.0 call over HTTP, as an A2A 1.0 client makes it (A2A spec §9, the
//! JSON-RPC binding).

use std::time::Duration;

use serde_json::{Value, json};

/// How long [`rpc`] waits for the whole reply before the call panics.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(30);

/// The request object of a call: `{"jsonrpc": "2.0", "id": 1, "method", "params"}`.
pub fn rpc_body(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

/// POSTs `method(params)` to the JSON-RPC endpoint `url` with `A2A-Version: 1.0` and
/// returns the parsed response object (`result` or `error`, as the server sent it).
/// Panics when the request fails, takes longer than [`RPC_TIMEOUT`], or the body is not
/// JSON.
pub async fn rpc(client: &reqwest::Client, url: &str, method: &str, params: Value) -> Value {
    rpc_with(client.post(url), method, params).await
}

/// [`rpc`] on a request the caller started (`client.post(url)` with its own headers, e.g.
/// a bearer token or a `traceparent`).
pub async fn rpc_with(request: reqwest::RequestBuilder, method: &str, params: Value) -> Value {
    let response = request
        .header("A2A-Version", "1.0")
        .json(&rpc_body(method, params))
        .timeout(RPC_TIMEOUT)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"));
    let status = response.status();
    let text = response
        .text()
        .await
        .unwrap_or_else(|e| panic!("{method}: reading the reply: {e}"));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{method}: HTTP {status}, not JSON ({e}): {text}"))
}

/// The `result` of [`rpc`]; panics, naming the method, when the reply is an `error`.
pub async fn rpc_result(client: &reqwest::Client, url: &str, method: &str, params: Value) -> Value {
    let reply = rpc(client, url, method, params).await;
    assert!(reply.get("error").is_none(), "{method}: {reply}");
    reply["result"].clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JSON-RPC endpoint on 127.0.0.1:0 that answers `echo` with what it received (the
    /// request object and the `A2A-Version` header) and anything else with an error.
    async fn endpoint() -> String {
        let app = axum::Router::new().route(
            "/",
            axum::routing::post(|headers: axum::http::HeaderMap, body: String| async move {
                let req: Value = serde_json::from_str(&body).unwrap();
                let version = headers["a2a-version"].to_str().unwrap().to_owned();
                let reply = if req["method"] == "echo" {
                    json!({"jsonrpc": "2.0", "id": req["id"], "result": {"request": req, "version": version}})
                } else {
                    json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32601, "message": "no"}})
                };
                reply.to_string()
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    #[tokio::test]
    async fn a_call_sends_the_envelope_and_the_version_and_returns_the_reply() {
        let url = endpoint().await;
        let client = reqwest::Client::new();
        let reply = rpc(&client, &url, "echo", json!({"a": 1})).await;
        assert_eq!(
            reply["result"]["request"],
            json!({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"a": 1}})
        );
        assert_eq!(reply["result"]["version"], "1.0");
        let result = rpc_result(&client, &url, "echo", json!([])).await;
        assert_eq!(result["request"]["params"], json!([]));
        let reply = rpc(&client, &url, "other", json!({})).await;
        assert_eq!(reply["error"]["code"], -32601);
    }

    #[tokio::test]
    #[should_panic(expected = "other: {")]
    async fn rpc_result_panics_on_an_error_naming_the_method() {
        let url = endpoint().await;
        rpc_result(&reqwest::Client::new(), &url, "other", json!({})).await;
    }
}
