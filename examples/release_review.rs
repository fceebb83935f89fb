//! The seeds' release-review agent over A2A JSON-RPC: asks for a `service@1.2.3`
//! reference (INPUT_REQUIRED), reviews it, and can be canceled while reviewing.
//!
//! ```text
//! cargo run --example release_review -- --listen 127.0.0.1:9999
//! ```
//!
//! Serves JSON-RPC at `http://<listen>/` and the card at
//! `/.well-known/agent-card.json`, with the in-memory task store.

use std::sync::Arc;

use a2a_gateway::agents::release_review::ReleaseReviewAgentExecutor;
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
    /// How long a review takes, in milliseconds (long enough to try CancelTask).
    #[arg(long, default_value_t = 0)]
    review_delay_ms: u64,
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
        id: "release_review".into(),
        name: "Release review".into(),
        description: "Reviews a release named as service@1.2.3.".into(),
        tags: vec!["release".into(), "review".into()],
        examples: vec!["Review billing@1.2.3".into()],
        input_modes: vec![],
        output_modes: vec![],
    };
    let card = simple_card(
        "Release Review Agent",
        "Reviews a release before it ships",
        &format!("http://{addr}/"),
        vec![skill],
    );
    let handler = RequestHandler::new(
        Arc::new(ReleaseReviewAgentExecutor::with_review_delay(
            std::time::Duration::from_millis(args.review_delay_ms),
        )),
        Arc::new(MemoryTaskStore::new()),
        HandlerConfig::default(),
    );
    let app = router(
        AppState::new(handler.clone(), card, TransportConfig::default()),
        None,
    );
    tracing::info!(%addr, "serving release_review");
    serve(listener, app, shutdown_signal()).await?;
    handler.shutdown(std::time::Duration::from_secs(10)).await;
    Ok(())
}
