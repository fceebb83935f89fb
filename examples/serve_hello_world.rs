//! `a2a-gateway serve` with the hello-world agent in place of the upstream executor: the
//! gateway side of `bench/floor.sh`.
//!
//! It assembles the gateway as `serve` does: the configuration from the usual sources
//! (`--config`, `$A2A_GATEWAY_CONFIG`, `A2A_GATEWAY_*` variables; `[upstream]` is not
//! used), the log of `[log]` on stderr, the Prometheus recorder and `GET /metrics`, the
//! store of `store.url` (memory by default), the whole router with its limits and
//! authentication, and the connection limits of `[server]`. Only the executor differs:
//! every message is answered by [`HelloWorldAgentExecutor`], so no upstream is called.
//!
//! `cargo run --release --example serve_hello_world -- --listen 127.0.0.1:9991`

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use a2a_gateway::agents::hello_world::HelloWorldAgentExecutor;
use a2a_gateway::app::Gateway;
use a2a_gateway::config::{Config, ConfigSources};
use clap::Parser;

/// The process allocator: mimalloc as in the `a2a-gateway` binary (feature `mimalloc`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Command line.
#[derive(Parser)]
struct Args {
    /// TOML config file (same discovery as `serve`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Listen address (overrides server.listen).
    #[arg(long)]
    listen: Option<SocketAddr>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args = Args::parse();
    let mut sources = ConfigSources::discover(args.config);
    if let Some(addr) = args.listen {
        sources = sources.with_override("server.listen", addr.to_string());
    }
    let config = Config::load(sources)?;
    let otlp = a2a_gateway::telemetry::init_with(&config.log, &config.telemetry)?;
    let metrics = a2a_gateway::ops::install_metrics();
    let store = a2a_gateway::app::build_store(&config).await?;
    let mut gateway = Gateway::new(
        &config,
        Arc::new(HelloWorldAgentExecutor::new()),
        store,
        None,
    );
    let handler = gateway.state.handler.clone();
    a2a_gateway::allocator::spawn_collector(move || handler.active_runs() == 0);
    gateway.router = gateway.router.merge(a2a_gateway::ops::metrics_routes(
        metrics,
        gateway.state.handler.clone(),
    ));
    let listener = tokio::net::TcpListener::bind(config.server.listen).await?;
    println!(
        "serve_hello_world listening on http://{}/",
        listener.local_addr()?
    );
    gateway
        .serve(
            listener,
            config.server.shutdown_grace(),
            a2a_gateway::server::shutdown_signal(),
        )
        .await?;
    drop(otlp);
    a2a_gateway::telemetry::flush_log();
    Ok(())
}
