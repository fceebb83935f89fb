//! The seeds' hello-world agent over A2A JSON-RPC: every message gets a task that answers
//! "Hello, World! I have received your request (<text>)" in a `result` artifact.
//!
//! ```text
//! cargo run --example hello_world -- --listen 127.0.0.1:9999
//! ```
//!
//! Serves JSON-RPC at `http://<listen>/` and the card at
//! `/.well-known/agent-card.json`, with the in-memory task store.

use std::sync::Arc;

use a2a_gateway::agents::hello_world::HelloWorldAgentExecutor;
use a2a_gateway::handler::{HandlerConfig, RequestHandler};
use a2a_gateway::protocol::AgentSkill;
use a2a_gateway::server::{router, serve, shutdown_signal, simple_card};
use a2a_gateway::store::MemoryTaskStore;
use a2a_gateway::transport::{AppState, TransportConfig};
use clap::Parser;

/// Command line.
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on; also the address the agent card advertises.
    #[arg(long, default_value = "127.0.0.1:9999")]
    listen: std::net::SocketAddr,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let addr = listener.local_addr()?;
    let skill = AgentSkill {
        id: "hello_world".into(),
        name: "Returns hello world".into(),
        description: "Answers any text with a greeting.".into(),
        tags: vec!["hello world".into()],
        examples: vec!["hi".into()],
        input_modes: vec![],
        output_modes: vec![],
    };
    let card = simple_card(
        "Hello World Agent",
        "Just a hello world agent",
        &format!("http://{addr}/"),
        vec![skill],
    );
    let handler = RequestHandler::new(
        Arc::new(HelloWorldAgentExecutor::new()),
        Arc::new(MemoryTaskStore::new()),
        HandlerConfig::default(),
    );
    let app = router(
        AppState::new(handler.clone(), card, TransportConfig::default()),
        None,
    );
    tracing::info!(%addr, "serving hello_world");
    serve(listener, app, shutdown_signal()).await?;
    handler.shutdown(std::time::Duration::from_secs(10)).await;
    Ok(())
}
