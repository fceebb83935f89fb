//! Assembling a gateway from its parts: the agent card from `[agent]` and
//! `[server]`, the request handler over an executor and a store, and the router.

use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ServerConfig};
use crate::executor::AgentExecutor;
use crate::handler::{HandlerConfig, MaintenanceConfig, RequestHandler};
use crate::protocol::{
    AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentProvider, AgentSkill,
};
use crate::push::PushService;
use crate::server::{self, ReadinessCheck};
use crate::store::TaskStore;
use crate::transport::auth::Authenticator;
use crate::transport::{AppState, TransportConfig};

/// Name of the security scheme the card declares with `[server.auth] kind = "api_key"`.
pub const API_KEY_SCHEME: &str = crate::identity::card::API_KEY_SCHEME;

/// The public agent card described by `config` (`[agent]`), declaring every binding of
/// `server.bindings` at `server.public_url` (see [`crate::transport::interfaces`]), and
/// every `[server.auth]` scheme in `securitySchemes` / `securityRequirements` (spec §4.5,
/// see [`crate::identity::card`]).
pub fn agent_card(config: &Config) -> AgentCard {
    let a = &config.agent;
    let (security_schemes, security_requirements) =
        crate::identity::card::security(&config.server.auth);
    AgentCard {
        name: a.name.clone(),
        description: a.description.clone(),
        supported_interfaces: interfaces(&config.server),
        provider: a.provider.as_ref().map(|p| AgentProvider {
            url: p.url.to_string(),
            organization: p.organization.clone(),
        }),
        version: a.version.clone(),
        documentation_url: a.documentation_url.as_ref().map(ToString::to_string),
        capabilities: AgentCapabilities {
            streaming: Some(a.streaming),
            push_notifications: Some(false),
            extensions: a
                .extensions
                .iter()
                .map(|e| AgentExtension {
                    uri: e.uri.clone(),
                    description: e.description.clone(),
                    required: e.required,
                    params: e.params.clone().map(serde_json::Value::Object),
                })
                .collect(),
            extended_agent_card: Some(a.extended.is_some()),
        },
        security_schemes,
        security_requirements,
        default_input_modes: a.default_input_modes.clone(),
        default_output_modes: a.default_output_modes.clone(),
        skills: a.skills.iter().map(skill).collect(),
        icon_url: None,
    }
}

fn skill(s: &crate::config::SkillConfig) -> AgentSkill {
    AgentSkill {
        id: s.id.clone(),
        name: s.name.clone(),
        description: s.description.clone(),
        tags: s.tags.clone(),
        examples: s.examples.clone(),
        input_modes: s.input_modes.clone().unwrap_or_default(),
        output_modes: s.output_modes.clone().unwrap_or_default(),
    }
}

/// The extended agent card (`[agent.extended]`, spec §3.1.11): the public `card` with
/// the extended description and the extended skills after the public ones. `None`
/// without `[agent.extended]`.
pub fn extended_agent_card(config: &Config, card: &AgentCard) -> Option<AgentCard> {
    let ext = config.agent.extended.as_ref()?;
    let mut extended = card.clone();
    if let Some(d) = &ext.description {
        extended.description = d.clone();
    }
    extended.skills.extend(ext.skills.iter().map(skill));
    Some(extended)
}

/// The card extension that tells receivers how webhook calls are signed: `signature`
/// (`v1a` or `v1`) and, for `v1a`, `jwksUri` (the public keys).
fn push_extension(config: &Config, push: &PushService) -> AgentExtension {
    let mut params = serde_json::Map::new();
    let (scheme, description) = match push.signature() {
        crate::config::SignatureScheme::V1a => {
            let jwks = config
                .server
                .public_url()
                .join(crate::push::JWKS_PATH.trim_start_matches('/'))
                .map(|u| u.to_string())
                .unwrap_or_default();
            params.insert("jwksUri".into(), jwks.into());
            (
                "v1a",
                "Push notifications are signed per Standard Webhooks v1a (Ed25519); verify webhook-signature with a key of jwksUri.",
            )
        }
        crate::config::SignatureScheme::V1 => (
            "v1",
            "Push notifications are signed per Standard Webhooks v1 (HMAC-SHA256 with a shared whsec_ secret).",
        ),
    };
    params.insert("signature".into(), scheme.into());
    AgentExtension {
        uri: crate::push::SIGNATURE_EXTENSION.to_owned(),
        description: Some(description.to_owned()),
        required: false,
        params: Some(serde_json::Value::Object(params)),
    }
}

/// The interfaces the card declares, in `server.bindings` order (see
/// [`crate::transport::interfaces`]); gRPC at [`ServerConfig::grpc_address`] when it has a
/// listener of its own.
pub fn interfaces(server: &ServerConfig) -> Vec<AgentInterface> {
    let grpc = server.grpc_listen.map(|_| server.grpc_address());
    crate::transport::interfaces::supported_interfaces(
        server.public_url().as_str(),
        &server.bindings,
        grpc.as_deref(),
    )
}

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
