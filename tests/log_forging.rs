//! Client strings cannot forge log lines (issue 43, item 7): `a2a-gateway serve` in the
//! default `pretty` format, and in `json`, given a `contextId` with a newline and an
//! ESC sequence; the upstream (a closed port) fails the task, so lines are logged
//! inside the task's span, which carries the `contextId`. No line of the log may begin
//! with the forged text, and no ESC may reach it.

use std::time::Duration;

use a2a_gateway::test_util::{GatewayProcess, rpc_body, user_message};

const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");

const FORGED: &str = "2026-12-07T00:00:00.000000Z  INFO a2a_gateway: FORGED";

async fn log_of_a_forging_request(format: &str) -> String {
    let gw = GatewayProcess::init(BIN)
        .config(format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[store]\nurl = \"memory:\"\n\n\
             [upstream]\nurl = \"http://127.0.0.1:9/invocations\"\nmax_retries = 0\n\
             stop_session_on_cancel = false\n\n[upstream.auth]\nkind = \"none\"\n\n\
             [log]\nformat = \"{format}\"\nlevel = \"debug\"\n"
        ))
        .arg("serve")
        .timeout(Duration::from_secs(20))
        .start();
    let mut message = user_message("hello");
    message["contextId"] = format!("ctx\n{FORGED}\u{1b}[2J").into();
    let resp = reqwest::Client::new()
        .post(&gw.url)
        .json(&rpc_body(
            "SendMessage",
            serde_json::json!({"message": message}),
        ))
        .send()
        .await
        .unwrap();
    let v: serde_json::Value = resp.json().await.unwrap();
    assert!(v.get("result").is_some(), "the message is taken: {v}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    gw.logs()
}

#[tokio::test]
async fn a_context_id_with_a_newline_and_esc_forges_no_line() {
    for format in ["pretty", "json"] {
        let log = log_of_a_forging_request(format).await;
        assert!(
            log.contains("FORGED"),
            "{format}: the value is logged: {log}"
        );
        assert!(
            !log.lines().any(|l| l.starts_with(FORGED)),
            "{format}: a forged line: {log}"
        );
        assert!(
            !log.contains('\u{1b}'),
            "{format}: an ESC reached the log: {log}"
        );
    }
}
