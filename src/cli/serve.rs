//! `a2a-gateway serve`: load the config, build store and executor, recover tasks a
//! previous run left unfinished, and serve until SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use tokio::net::TcpListener;

use super::CliError;
use crate::app::Gateway;
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
    let otlp = crate::telemetry::init_with(&config.log, &config.telemetry)?;
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
/// (used by `serve` and `demo`). With `reload`, `SIGHUP` reloads the API keys from
/// those sources (see [`super::reload`]).
pub(super) async fn serve_config(
    config: &Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    reload: Option<ConfigSources>,
) -> Result<(), CliError> {
    // gRPC's own port is bound first, so that the card names the port bound when
    // `grpc_listen` asks for any free one (port 0), as it does for `listen`.
    let grpc_listener = match config.server.grpc_listen {
        Some(addr) if config.server.serves(crate::config::Binding::Grpc) => Some(
            TcpListener::bind(addr)
                .await
                .map_err(|e| format!("server.grpc_listen {addr}: cannot listen: {e}"))?,
        ),
        _ => None,
    };
    let with_bound_port;
    let config = match (&grpc_listener, config.server.grpc_listen) {
        (Some(l), Some(addr)) if addr.port() == 0 => {
            let mut c = config.clone();
            c.server.grpc_listen = Some(l.local_addr()?);
            with_bound_port = c;
            &with_bound_port
        }
        _ => config,
    };
    let metrics = crate::ops::install_metrics();
    // The executor first: a config it refuses must not leave a new database behind.
    let (executor, ready) = super::build_executor(config)?;
    let (store, backend) = super::build_store_for_cluster(config).await?;
    let closing = store.clone();
    let push = if config.push.enabled {
        Some(
            crate::push::PushService::open(&config.push, store.clone())
                .await
                .map_err(|e| format!("[push]: {e}"))?,
        )
    } else {
        None
    };
    let mut gateway = Gateway::with_push(config, executor, store, ready, push);
    let handler = gateway.state.handler.clone();
    crate::allocator::spawn_collector(move || handler.active_runs() == 0);
    if let Some(sources) = reload {
        super::reload::spawn_key_reload(gateway.state.config.auth.clone(), sources);
    }
    let cluster = match backend {
        Some(backend) => {
            let id = crate::cluster::instance_id(&config.store.instance_name);
            let options = crate::cluster::ClusterOptions::with_lease(config.store.lease());
            let (cluster, cancels) = crate::cluster::Cluster::join(backend, id, options).await?;
            gateway
                .state
                .handler
                .join_cluster(cluster.clone(), cancels)?;
            // Leases replace the stale sweep and the start-up recovery.
            gateway.maintenance.stale_after = None;
            Some(cluster)
        }
        None => None,
    };
    let recovered = if cluster.is_none() && config.store.recover_on_start {
        gateway.state.handler.recover_interrupted().await?
    } else {
        0
    };
    if recovered > 0 {
        tracing::warn!(
            tasks = recovered,
            "marked tasks interrupted by the previous run FAILED"
        );
    }
    gateway.router = gateway.router.merge(crate::ops::metrics_routes(
        metrics,
        gateway.state.handler.clone(),
    ));
    let tls = match (&config.server.tls_cert_file, &config.server.tls_key_file) {
        (Some(cert), Some(key)) => Some(crate::tls::server_config(cert, key)?),
        _ => None,
    };
    let local = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(
        listen = %local,
        public_url = %config.server.public_url(),
        store = %config.store.url,
        instance = cluster.as_ref().map_or("", |c| c.instance()),
        max_connections = gateway.connections.max_connections,
        "a2a-gateway listening on {scheme}://{local}/"
    );
    if let Some(l) = &grpc_listener {
        tracing::info!(listen = %l.local_addr()?, "gRPC listening on its own port");
    }
    let grace = config.server.shutdown_grace();
    gateway
        .serve_all(listener, grpc_listener, tls, grace, shutdown)
        .await?;
    if let Some(cluster) = cluster {
        cluster.leave().await;
    }
    closing.close().await;
    tracing::info!("a2a-gateway stopped");
    Ok(())
}
