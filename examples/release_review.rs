//! The seeds' release-review agent over A2A 1.0 JSON-RPC: asks for the release as
//! `service@1.2.3` (INPUT_REQUIRED) when the message does not name one, then
//! reviews it; CancelTask ends a review CANCELED.
//!
//! `cargo run --example release_review -- --listen 127.0.0.1:9999 [--review-delay-ms 2000]`

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use a2a_gateway::agents::release_review::ReleaseReviewAgentExecutor;
use a2a_gateway::protocol::AgentSkill;
use clap::Parser;

/// Command line.
#[derive(Parser)]
struct Args {
    /// Address to serve on; it is also the URL in the agent card.
    #[arg(long, default_value = "127.0.0.1:9999")]
    listen: SocketAddr,
    /// How long a review takes (milliseconds), so that cancel can be tried.
    #[arg(long, default_value_t = 0)]
    review_delay_ms: u64,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    a2a_gateway::telemetry::init(&Default::default());
    let skill = AgentSkill {
        id: "release_review".into(),
        name: "Release review".into(),
        description: "Reviews a release named as service@1.2.3".into(),
        tags: vec!["release".into(), "review".into()],
        examples: vec!["Review checkout@2.4.1".into()],
        input_modes: vec![],
        output_modes: vec![],
    };
    let served = a2a_gateway::server::serve_example(
        Arc::new(ReleaseReviewAgentExecutor::with_review_delay(
            Duration::from_millis(args.review_delay_ms),
        )),
        "Release Review Agent",
        "Reviews releases; asks for the release when it is not named",
        vec![skill],
        args.listen,
    )
    .await;
    a2a_gateway::telemetry::flush_log();
    served
}
