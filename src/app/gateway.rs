//! A [`Gateway`] from its parts: the request handler over an executor and a store, the
//! transport state and the router, as `[server]` and `[store]` set them; and serving it
//! (the retention job, the push sender, the shutdown sequence).

use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::card::{agent_card, extended_agent_card, push_extension};
use crate::config::Config;
use crate::executor::AgentExecutor;
use crate::handler::{HandlerConfig, MaintenanceConfig, RequestHandler};
use crate::push::PushService;
use crate::server::{self, ReadinessCheck};
use crate::store::TaskStore;
use crate::transport::auth::Authenticator;
use crate::transport::browser_guard::BrowserGuard;
use crate::transport::{AppState, TransportConfig};

/// A gateway ready to serve: its state (handler, card, limits) and router.
#[derive(Clone)]
pub struct Gateway {
    /// Shared by every route.
    pub state: AppState,
    /// The full router (A2A + operations).
    pub router: Router,
    /// The retention job [`serve`](Self::serve) runs (from `[store]`).
    pub maintenance: MaintenanceConfig,
    /// Header and idle timeouts and the connection cap of the listener (from `[server]`).
    pub connections: server::ConnectionLimits,
}

impl Gateway {
    /// Builds a gateway running `executor` over `store` as `config` describes.
    /// `ready` adds a readiness condition (e.g. "a token is obtainable").
    pub fn new(
        config: &Config,
        executor: Arc<dyn AgentExecutor>,
        store: Arc<dyn TaskStore>,
        ready: Option<ReadinessCheck>,
    ) -> Self {
        Self::with_push(config, executor, store, ready, None)
    }

    /// [`Gateway::new`] with push notifications sent by `push` (see
    /// [`PushService::open`]): the card says `pushNotifications: true` (and names the
    /// signature scheme and JWKS), the push-config operations are served, and
    /// [`serve`](Self::serve) runs the sender. `None`: push is not offered.
    pub fn with_push(
        config: &Config,
        executor: Arc<dyn AgentExecutor>,
        store: Arc<dyn TaskStore>,
        ready: Option<ReadinessCheck>,
        push: Option<Arc<PushService>>,
    ) -> Self {
        let mut card = agent_card(config);
        if let Some(p) = &push {
            card.capabilities.push_notifications = Some(true);
            card.capabilities.extensions.push(push_extension(config, p));
        }
        let handler_config = HandlerConfig {
            max_concurrent_tasks: config.server.max_concurrent_tasks,
            max_list_page_bytes: config.server.max_list_page_bytes,
            extended_agent_card: extended_agent_card(config, &card),
            extended_agent_card_enabled: config.agent.extended.is_some(),
            push,
            ..HandlerConfig::default()
        }
        .with_card(&card);
        let handler = RequestHandler::new(executor, store, handler_config);
        let transport = TransportConfig {
            max_body_bytes: usize::try_from(config.server.max_body_bytes).unwrap_or(usize::MAX),
            sse_keepalive: config.server.sse_keepalive(),
            auth: Authenticator::from_config(&config.server.auth),
            bindings: config.server.bindings.clone(),
            grpc_own_listener: config.server.grpc_listen.is_some(),
            card_v03_fields: config.agent.v03_card_fields,
            request_message_timeout: config.server.header_timeout(),
            browser: BrowserGuard::new(
                &config.server.allowed_origins,
                config.server.host_names(),
                config.server.listen.ip().is_loopback(),
            ),
        };
        transport.auth.start();
        let state = AppState::new(handler, card, transport);
        let router = server::router(state.clone(), ready);
        Self {
            state,
            router,
            maintenance: MaintenanceConfig::from_store_config(&config.store),
            connections: server::ConnectionLimits::from_config(&config.server),
        }
    }

    /// Serves on `listener` until `shutdown` resolves, running the retention job
    /// ([`RequestHandler::spawn_maintenance`]) meanwhile; then stops the job and accepting, gives
    /// running tasks `server.shutdown_grace_secs` to finish, marks the rest FAILED,
    /// and ends open streams.
    ///
    /// # Errors
    /// I/O errors of the listener.
    pub async fn serve(
        self,
        listener: TcpListener,
        grace: std::time::Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.serve_all(listener, None, None, grace, shutdown).await
    }

    /// Like [`Gateway::serve`], with HTTPS when `tls` is set, and gRPC also served on
    /// `grpc_listener` (`server.grpc_listen`, the same TLS) until the main listener
    /// stops.
    ///
    /// # Errors
    /// I/O errors of either listener.
    pub async fn serve_all(
        self,
        listener: TcpListener,
        grpc_listener: Option<TcpListener>,
        tls: Option<Arc<rustls::ServerConfig>>,
        grace: std::time::Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let stop = self.stop(grace, shutdown);
        let stopped = CancellationToken::new();
        let grpc = grpc_listener.map(|grpc_listener| {
            let app = crate::transport::grpc::router(self.state.clone());
            tokio::spawn(serve_one(
                grpc_listener,
                app,
                tls.clone(),
                self.connections.clone(),
                stopped.clone().cancelled_owned(),
            ))
        });
        let main_stop = {
            let stopped = stopped.clone();
            async move {
                stop.await;
                stopped.cancel();
            }
        };
        let result = serve_one(listener, self.router, tls, self.connections, main_stop).await;
        stopped.cancel();
        if let Some(grpc) = grpc {
            grpc.await.map_err(std::io::Error::other)??;
        }
        result
    }

    /// Like [`Gateway::serve`], over HTTPS with `tls` (see [`crate::tls::server_config`]).
    ///
    /// # Errors
    /// I/O errors of the listener.
    pub async fn serve_tls(
        self,
        listener: TcpListener,
        tls: Arc<rustls::ServerConfig>,
        grace: std::time::Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.serve_all(listener, None, Some(tls), grace, shutdown)
            .await
    }

    /// Starts the retention job, then returns the shutdown sequence: after
    /// `shutdown`, stop the job, refuse new messages, give running tasks `grace`, mark
    /// the rest FAILED, then end open streams.
    fn stop(
        &self,
        grace: std::time::Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let state = self.state.clone();
        let jobs = CancellationToken::new();
        let job = state
            .handler
            .spawn_maintenance(self.maintenance.clone(), jobs.clone());
        let sender = state.handler.push().map(|p| p.spawn(jobs.clone()));
        async move {
            shutdown.await;
            jobs.cancel();
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), job).await;
            if let Some(sender) = sender {
                let _ = tokio::time::timeout(std::time::Duration::from_secs(20), sender).await;
            }
            tracing::info!(
                grace_secs = grace.as_secs(),
                "shutting down: no new messages; waiting for running tasks"
            );
            state.handler.shutdown(grace).await;
            state.shutdown.cancel();
        }
    }
}

/// Serves `app` on `listener`, over HTTPS when `tls` is set, until `stop` resolves.
async fn serve_one(
    listener: TcpListener,
    app: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: server::ConnectionLimits,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    match tls {
        Some(tls) => crate::tls::serve_tls_with_limits(listener, app, tls, limits, stop).await,
        None => server::serve_with_limits(listener, app, limits, stop).await,
    }
}
