//! Web pages cannot drive the gateway (issue 43, item 5): `a2a-gateway serve` as its
//! own process, with no inbound authentication. A request carrying an `Origin` that
//! `[server] allowed_origins` does not list, or a `Host` that is not one of the
//! gateway's names (DNS rebinding), gets 403 on the A2A routes; programs, which send
//! neither, are served; the health endpoints answer whatever the `Host`.

use std::time::Duration;

use a2a_gateway::test_util::{GatewayProcess, rpc_body};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");

fn gateway(server_extra: &str) -> GatewayProcess {
    GatewayProcess::init(BIN)
        .config(format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n{server_extra}\n\n[store]\nurl = \"memory:\"\n\n\
             [upstream]\nurl = \"http://127.0.0.1:9/invocations\"\nmax_retries = 0\n\
             stop_session_on_cancel = false\n\n[upstream.auth]\nkind = \"none\"\n"
        ))
        .arg("serve")
        .timeout(Duration::from_secs(20))
        .start()
}

/// The status of ListTasks (JSON-RPC) and of the card with `headers`.
async fn statuses(gw: &GatewayProcess, headers: &[(&str, &str)]) -> (u16, u16) {
    let client = reqwest::Client::new();
    let mut rpc = client.post(&gw.url).json(&rpc_body("ListTasks", json!({})));
    let mut card = client.get(format!("{}.well-known/agent-card.json", gw.url));
    for (k, v) in headers {
        rpc = rpc.header(*k, *v);
        card = card.header(*k, *v);
    }
    let rpc = rpc.send().await.unwrap();
    let card = card.send().await.unwrap();
    (rpc.status().as_u16(), card.status().as_u16())
}

fn port(gw: &GatewayProcess) -> u16 {
    reqwest::Url::parse(&gw.url).unwrap().port().unwrap()
}

#[tokio::test]
async fn by_default_a_browser_origin_and_a_foreign_host_are_refused() {
    let gw = gateway("");
    let p = port(&gw);
    assert_eq!(statuses(&gw, &[]).await, (200, 200), "a program");
    let localhost = format!("localhost:{p}");
    assert_eq!(statuses(&gw, &[("host", &localhost)]).await, (200, 200));
    let v6 = format!("[::1]:{p}");
    assert_eq!(statuses(&gw, &[("host", &v6)]).await, (200, 200));

    assert_eq!(
        statuses(&gw, &[("origin", "https://evil.example")]).await,
        (403, 403),
        "a page elsewhere"
    );
    let rebound = format!("rebind.evil.example:{p}");
    assert_eq!(
        statuses(&gw, &[("host", &rebound)]).await,
        (403, 403),
        "DNS rebinding"
    );
    let resp = reqwest::Client::new()
        .post(&gw.url)
        .header("host", &rebound)
        .json(&rpc_body("ListTasks", json!({})))
        .send()
        .await
        .unwrap();
    let text = resp.text().await.unwrap();
    assert!(
        text.contains("allowed_hosts"),
        "the refusal says what to set: {text}"
    );
    let health = reqwest::Client::new()
        .get(format!("{}healthz", gw.url))
        .header("host", &rebound)
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200, "probes name the instance by address");
}

#[tokio::test]
async fn listed_origins_and_hosts_are_served() {
    let gw = gateway(
        "public_url = \"https://agents.example.com/\"\n\
         allowed_origins = [\"https://app.example.com\"]\n\
         allowed_hosts = [\"gw.internal\"]",
    );
    let p = port(&gw);
    assert_eq!(
        statuses(&gw, &[("origin", "https://app.example.com")]).await,
        (200, 200)
    );
    assert_eq!(
        statuses(&gw, &[("origin", "https://other.example.com")]).await,
        (403, 403)
    );
    for host in [
        "agents.example.com".to_owned(),
        format!("gw.internal:{p}"),
        format!("127.0.0.1:{p}"),
    ] {
        assert_eq!(
            statuses(&gw, &[("host", &host)]).await,
            (200, 200),
            "{host}"
        );
    }
    let other = format!("other.example.com:{p}");
    assert_eq!(statuses(&gw, &[("host", &other)]).await, (403, 403));
}
