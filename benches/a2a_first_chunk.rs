//! What the gateway adds before the first chunk of an A2A agent's streamed answer
//! (issue 41): one client, one `SendStreamingMessage` at a time, alternately straight to a
//! fake A2A 1.0 agent (benches/common/a2a_agent.rs, 3 chunks) and through
//! `a2a-gateway serve` with `upstream.kind = "a2a"` in front of the same agent (memory
//! store; every event is stored before it is relayed, as always). The time is from the
//! request's start to the arrival of the first `artifactUpdate` event, over a kept-alive
//! HTTP/1.1 connection; each stream is then read to its end. One warm-up call each, then
//! `BENCH_ITERS` (default 300) of each, interleaved; p50 and p90 of both and the
//! difference of the p50s.
//!
//! `cargo bench --bench a2a_first_chunk` (loopback only).

use std::time::{Duration, Instant};

use serde_json::json;

mod common;
use common::percentile;

/// The time to the first `artifactUpdate` of one streamed call to `url` (then the rest
/// of the stream is read).
async fn first_chunk(client: &reqwest::Client, url: &str, i: usize) -> Duration {
    let body = json!({"jsonrpc": "2.0", "id": i, "method": "SendStreamingMessage",
        "params": {"message": {"messageId": format!("m-{i}-{}", a2a_gateway::executor::new_id()),
            "role": "ROLE_USER", "parts": [{"text": "stream"}]}}});
    let start = Instant::now();
    let mut resp = client
        .post(url)
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .expect("request");
    assert!(resp.status().is_success(), "{}", resp.status());
    let mut seen = String::new();
    let mut first = None;
    while let Some(chunk) = resp.chunk().await.expect("chunk") {
        if first.is_none() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("\"artifactUpdate\"") {
                first = Some(start.elapsed());
            }
        }
    }
    first.expect("an artifactUpdate in the stream")
}

fn main() {
    let iters = common::env_u64("BENCH_ITERS", 300) as usize;
    let rt = common::runtime();
    let agent = rt.block_on(common::a2a_agent::start(3, 0));
    let dir = tempfile::tempdir().unwrap();
    let gw = common::serve(
        common::BIN,
        dir.path(),
        &[
            ("A2A_GATEWAY_STORE__URL", "memory:".to_owned()),
            ("A2A_GATEWAY_UPSTREAM__KIND", "a2a".to_owned()),
            ("A2A_GATEWAY_UPSTREAM__URL", agent.clone()),
            ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "none".to_owned()),
            (
                "A2A_GATEWAY_LOG__LEVEL",
                "warn,a2a_gateway::cli::serve=info".to_owned(),
            ),
        ],
    );
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let (mut direct, mut through) = (Vec::new(), Vec::new());
    rt.block_on(async {
        first_chunk(&client, &agent, 0).await;
        first_chunk(&client, &gw.url, 0).await;
        for i in 1..=iters {
            direct.push(first_chunk(&client, &agent, i).await);
            through.push(first_chunk(&client, &gw.url, i).await);
        }
    });
    direct.sort();
    through.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("{iters} calls each, 1 client, interleaved; time to the first artifactUpdate");
    println!("| path | p50 | p90 |");
    println!("|---|---:|---:|");
    for (name, v) in [
        ("direct to the agent", &direct),
        ("through the gateway", &through),
    ] {
        println!(
            "| {name} | {:.3} ms | {:.3} ms |",
            ms(percentile(v, 0.5)),
            ms(percentile(v, 0.9))
        );
    }
    println!(
        "| added by the gateway (p50) | **{:.3} ms** | |",
        ms(percentile(&through, 0.5)) - ms(percentile(&direct, 0.5))
    );
}
