//! The seeds' hello-world agent over A2A 1.0 JSON-RPC.
//!
//! `cargo run --example hello_world -- --listen 127.0.0.1:9999`

use std::net::SocketAddr;
use std::sync::Arc;

use a2a_gateway::agents::hello_world::HelloWorldAgentExecutor;
use a2a_gateway::protocol::AgentSkill;
use clap::Parser;

/// The process allocator: mimalloc as in the `a2a-gateway` binary (feature `mimalloc`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Command line.
#[derive(Parser)]
struct Args {
    /// Address to serve on; it is also the URL in the agent card.
    #[arg(long, default_value = "127.0.0.1:9999")]
    listen: SocketAddr,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    a2a_gateway::telemetry::init(&Default::default());
    let skill = AgentSkill {
        id: "hello_world".into(),
        name: "Returns hello world".into(),
        description: "Answers every message with a greeting".into(),
        tags: vec!["hello world".into()],
        examples: vec!["hi".into(), "hello world".into()],
        input_modes: vec![],
        output_modes: vec![],
    };
    let served = a2a_gateway::server::serve_example(
        Arc::new(HelloWorldAgentExecutor::new()),
        "Hello World Agent",
        "Just a hello world agent",
        vec![skill],
        args.listen,
    )
    .await;
    a2a_gateway::telemetry::flush_log();
    served
}
