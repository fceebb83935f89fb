//! What `serve` (and `demo`) start from a [`Config`]: telemetry, the executor, the task
//! store with its cluster side, push delivery, the [`Gateway`] with its metrics route, the
//! recovery of tasks a previous run left unfinished, TLS; then serving until shutdown.
//! [`start`] builds everything and hands back a [`Running`] gateway, which the command
//! announces and then [serves](Running::serve).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use super::{AppError, Gateway, build_store_for_cluster};
use crate::cluster::Cluster;
use crate::config::{Config, ConfigSources};
use crate::store::TaskStore;

/// Installs the log and, with `telemetry.otlp_endpoint`, the OTLP span export, as
/// `[log]` and `[telemetry]` say (see [`crate::telemetry::init_with`]). Keep the returned
/// guard until exit: dropping it flushes the spans still queued.
///
/// # Errors
/// A readable reason for an unusable `otlp_endpoint`.
pub fn init_telemetry(
    config: &Config,
) -> Result<Option<crate::telemetry::otlp::OtlpGuard>, AppError> {
    Ok(crate::telemetry::init_with(&config.log, &config.telemetry)?)
}

/// Installs the log `[log]` describes, without span export (see
/// [`crate::telemetry::init`]).
pub fn init_log(config: &Config) {
    crate::telemetry::init(&config.log);
}

/// A gateway built from its configuration, bound and ready to accept (see [`start`]).
pub struct Running {
    gateway: Gateway,
    listener: TcpListener,
    grpc_listener: Option<TcpListener>,
    agent_grpc: Vec<(String, TcpListener)>,
    tls: Option<Arc<rustls::ServerConfig>>,
    cluster: Option<Cluster>,
    store: Arc<dyn TaskStore>,
    grace: Duration,
}

/// Builds the gateway `config` describes to serve on `listener` (and on
/// `server.grpc_listen` when gRPC has a listener of its own): the metrics recorder, the
/// executor, the store (migrated) and its cluster side, push delivery, the allocator's
/// quiet-time collector, with `reload` the API keys' reload on `SIGHUP` (see
/// [`super::reload`]), the cluster membership or the recovery of interrupted tasks, the
/// `/metrics` route and TLS.
///
/// # Errors
/// A listener that cannot be bound, an executor or store the configuration does not
/// allow, a cluster that cannot be joined, unreadable TLS files.
pub async fn start(
    config: &Config,
    listener: TcpListener,
    reload: Option<ConfigSources>,
) -> Result<Running, AppError> {
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
    // Each agent's own gRPC port too (`[agents.<id>] grpc_listen`).
    let mut agent_grpc = Vec::new();
    for (id, entry) in &config.agents {
        if let Some(addr) = entry.grpc_listen {
            let l = TcpListener::bind(addr)
                .await
                .map_err(|e| format!("agents.{id}.grpc_listen {addr}: cannot listen: {e}"))?;
            agent_grpc.push((id.clone(), l));
        }
    }
    let with_bound_port;
    let config = {
        let mut c = None::<Config>;
        if let (Some(l), Some(addr)) = (&grpc_listener, config.server.grpc_listen)
            && addr.port() == 0
        {
            c.get_or_insert_with(|| config.clone()).server.grpc_listen = Some(l.local_addr()?);
        }
        for (id, l) in &agent_grpc {
            if config.agents[id].grpc_listen.is_some_and(|a| a.port() == 0) {
                let c = c.get_or_insert_with(|| config.clone());
                if let Some(entry) = c.agents.get_mut(id) {
                    entry.grpc_listen = Some(l.local_addr()?);
                }
            }
        }
        match c {
            Some(c) => {
                with_bound_port = c;
                &with_bound_port
            }
            None => config,
        }
    };
    let metrics = crate::ops::install_metrics();
    // The executors first: a config they refuse must not leave a new database behind.
    // An `a2a` upstream's card (read now, at most 10 s) fills what its agent's own
    // card does not set (see `card::with_upstream_card`), and is followed while serving
    // (see `card_follow`).
    let mut sources = Vec::new();
    // One credential cache per distinct credential, whichever agents use it.
    let credentials = crate::upstream::auth::CredentialPool::new();
    let root = if config.serves_root_agent() {
        let (executor, ready, source) =
            super::upstream::build_executor_with_card(config, &credentials).await?;
        sources.extend(source.map(|s| (String::new(), s)));
        Some((executor, ready))
    } else {
        None
    };
    let mut agents = Vec::new();
    for (id, entry) in &config.agents {
        let agent_config = super::gateway::agent_config(config, id, entry);
        let (executor, ready, source) =
            super::upstream::build_executor_with_card(&agent_config, &credentials)
                .await
                .map_err(|e| format!("[agents.{id}]: {e}"))?;
        sources.extend(source.map(|s| (id.clone(), s)));
        agents.push(super::gateway::AgentParts {
            id: id.clone(),
            executor,
            ready,
        });
    }
    let (store, backend) = build_store_for_cluster(config).await?;
    super::owners::namespace_owners(config, store.as_ref()).await?;
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
    let mut gateway = Gateway::with_agents(config, root, agents, store, push);
    gateway.share_credentials(credentials);
    for (id, source) in sources {
        gateway.follow_upstream_card(&id, source);
    }
    let handlers = gateway.handlers();
    crate::allocator::spawn_collector(move || handlers.iter().all(|h| h.active_runs() == 0));
    if let Some(sources) = reload {
        super::reload::spawn_key_reload(
            gateway.state.config.auth.clone(),
            sources,
            Some(gateway.reload.clone()),
        );
    }
    let cluster = match backend {
        Some(backend) => {
            let id = crate::cluster::instance_id(&config.store.instance_name);
            let options = crate::cluster::ClusterOptions::with_lease(config.store.lease());
            let (cluster, cancels) = crate::cluster::Cluster::join(backend, id, options).await?;
            // The first handler takes the cluster's jobs for every agent (they share
            // its registry of drivers); the others' executors take its session leases.
            gateway
                .state
                .handler
                .join_cluster(cluster.clone(), cancels)?;
            for h in gateway.handlers().iter().skip(1) {
                h.use_cluster_session_leases();
            }
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
    Ok(Running {
        gateway,
        listener,
        grpc_listener,
        agent_grpc,
        tls,
        cluster,
        store: closing,
        grace: config.server.shutdown_grace(),
    })
}

impl Running {
    /// The address the gateway accepts on.
    ///
    /// # Errors
    /// The listener's own error.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The addresses of the agents' own gRPC listeners (`[agents.<id>] grpc_listen`),
    /// by agent id.
    pub fn agent_grpc_addrs(&self) -> Vec<(String, std::io::Result<SocketAddr>)> {
        self.agent_grpc
            .iter()
            .map(|(id, l)| (id.clone(), l.local_addr()))
            .collect()
    }

    /// The address of gRPC's own listener (`server.grpc_listen`), if it has one.
    ///
    /// # Errors
    /// The listener's own error.
    pub fn grpc_addr(&self) -> Option<std::io::Result<SocketAddr>> {
        self.grpc_listener.as_ref().map(TcpListener::local_addr)
    }

    /// Whether it serves HTTPS.
    pub fn tls(&self) -> bool {
        self.tls.is_some()
    }

    /// This instance's id in the cluster, or `""` for a single instance.
    pub fn instance(&self) -> &str {
        self.cluster.as_ref().map_or("", |c| c.instance())
    }

    /// The connection cap of the listener (`server.max_connections`, or its default).
    pub fn max_connections(&self) -> usize {
        self.gateway.connections.max_connections
    }

    /// Serves until `shutdown` resolves (see [`Gateway::serve_all`]), then leaves the
    /// cluster and closes the store.
    ///
    /// # Errors
    /// I/O errors of the listeners.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), AppError> {
        // Each agent's own gRPC listener, until the main listener stops.
        let stopped = tokio_util::sync::CancellationToken::new();
        let mut agent_grpc = Vec::new();
        for (id, listener) in self.agent_grpc {
            // Each call goes to the agent as the last reload left it (its callers
            // included); a removed agent's port answers NOT_FOUND.
            let app = crate::transport::agents::grpc_for(self.gateway.agents.clone(), id);
            agent_grpc.push(tokio::spawn(super::gateway::serve_one(
                listener,
                app,
                self.tls.clone(),
                self.gateway.connections.clone(),
                stopped.clone().cancelled_owned(),
            )));
        }
        let result = self
            .gateway
            .serve_all(
                self.listener,
                self.grpc_listener,
                self.tls,
                self.grace,
                shutdown,
            )
            .await;
        stopped.cancel();
        for served in agent_grpc {
            served.await.map_err(std::io::Error::other)??;
        }
        result?;
        if let Some(cluster) = self.cluster {
            cluster.leave().await;
        }
        self.store.close().await;
        Ok(())
    }
}
