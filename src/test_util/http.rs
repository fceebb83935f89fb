//! Plain HTTP reads a test makes beside the A2A calls (the agent card, a JWKS, a health
//! or metrics document).

use serde::de::DeserializeOwned;

use super::rpc::RPC_TIMEOUT;

/// GETs `url` and parses its body as JSON into `T` (a `serde_json::Value`, an
/// `AgentCard`, ...), whatever the status. Panics, naming the URL, when the request fails,
/// takes longer than [`RPC_TIMEOUT`], or the body does not parse.
pub async fn get_json<T: DeserializeOwned>(client: &reqwest::Client, url: &str) -> T {
    let response = client
        .get(url)
        .timeout(RPC_TIMEOUT)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status();
    let text = response
        .text()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: reading the body: {e}"));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("GET {url}: HTTP {status}, not the JSON expected ({e}): {text}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_json_body_is_parsed_into_the_type_asked_for() {
        let app = axum::Router::new()
            .route(
                "/card",
                axum::routing::get(|| async { r#"{"name": "echo"}"# }),
            )
            .route("/text", axum::routing::get(|| async { "not json" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let client = reqwest::Client::new();
        let card: serde_json::Value = get_json(&client, &format!("{base}/card")).await;
        assert_eq!(card["name"], "echo");
        #[derive(serde::Deserialize)]
        struct Named {
            name: String,
        }
        let named: Named = get_json(&client, &format!("{base}/card")).await;
        assert_eq!(named.name, "echo");
        let url = format!("{base}/text");
        let failed = tokio::spawn(async move {
            let _: serde_json::Value = get_json(&reqwest::Client::new(), &url).await;
        })
        .await
        .expect_err("not JSON");
        let text = failed.into_panic();
        let text = text.downcast_ref::<String>().unwrap();
        assert!(
            text.contains("/text: HTTP 200 OK, not the JSON expected"),
            "{text}"
        );
    }
}
