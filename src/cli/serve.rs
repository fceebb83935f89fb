//! `a2a-gateway serve`: load the config, start the gateway it describes
//! ([`crate::app::start`]: store, executor, recovery of tasks a previous run left
//! unfinished, ...), say where it listens, and serve until SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use tokio::net::TcpListener;

use super::CliError;
use crate::config::{Config, ConfigSources};

/// Runs `serve`.
pub(super) async fn run(
    file: Option<PathBuf>,
    listen: Option<SocketAddr>,
) -> Result<ExitCode, CliError> {
    let mut sources = ConfigSources::discover(file);
    if let Some(addr) = listen {
        sources = sources.with_override("server.listen", addr.to_string());
    }
    let unused: Vec<String> = sources
        .unused_env_vars()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let mut config = Config::load(sources.clone())?;
    // Kept until the end: dropping it flushes the spans still queued for OTLP.
    let otlp = crate::app::init_telemetry(&config)?;
    for var in unused {
        tracing::warn!(%var, "environment variable sets no config key (expected A2A_GATEWAY_<SECTION>__<KEY>)");
    }
    let listen = config.server.listen;
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| format!("server.listen {listen}: cannot listen: {e}"))?;
    if listen.port() == 0 {
        // Port 0 picks a free port: the card (public URL derived from `listen`) names
        // the port actually bound, not 0.
        config.server.listen = listener.local_addr()?;
    }
    serve_config(
        &config,
        listener,
        crate::server::shutdown_signals(),
        Some(sources),
    )
    .await?;
    drop(otlp);
    Ok(ExitCode::SUCCESS)
}

/// Serves the gateway `config` describes on `listener` until `shutdown` resolves
/// (used by `serve` and `demo`): [`crate::app::start`] builds it, this says where it
/// listens, and it serves. With `reload`, `SIGHUP` reloads the API keys from those
/// sources (see [`crate::app::reload`]).
pub(super) async fn serve_config(
    config: &Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    reload: Option<ConfigSources>,
) -> Result<(), CliError> {
    crate::app::warn_unknown_callers(config);
    let running = crate::app::start(config, listener, reload).await?;
    let local = running.local_addr()?;
    let scheme = if running.tls() { "https" } else { "http" };
    tracing::info!(
        listen = %local,
        public_url = %crate::config::masked(&config.server.public_url()),
        store = %config.store.url,
        instance = running.instance(),
        max_connections = running.max_connections(),
        "a2a-gateway listening on {scheme}://{local}/"
    );
    if let Some(grpc) = running.grpc_addr() {
        tracing::info!(listen = %grpc?, "gRPC listening on its own port");
    }
    for (agent, grpc) in running.agent_grpc_addrs() {
        tracing::info!(agent = %agent, listen = %grpc?, "gRPC of agent {agent} listening on its own port");
    }
    running.serve(shutdown).await?;
    tracing::info!("a2a-gateway stopped");
    Ok(())
}
