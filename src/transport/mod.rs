//! Transport adapters: turn HTTP requests into [`RequestHandler`] calls and render
//! results and errors back. Only this module (and `server`) knows HTTP.
//!
//! - [`operations`]: the one operation table every binding shares (decode, dispatch,
//!   version, content type, caller).
//! - [`jsonrpc`]: the JSON-RPC 2.0 binding (spec §9) at `POST /`.
//! - [`rest`]: the HTTP+JSON binding (spec §11) under [`rest::REST_PATH`].
//! - [`interfaces`]: the card's `supportedInterfaces`, one per served binding.
//! - [`compat03`]: A2A 0.3 method names and shapes on the JSON-RPC binding, translated
//!   to and from the 1.0 operations.
//! - [`http_body`]: bounded request-body reading for the HTTP bindings.
//! - [`auth`]: inbound authentication (`[server.auth]`) of every A2A request.
//! - [`grpc`]: the gRPC binding (spec §10), `lf.a2a.v1.A2AService` on tonic.
//! - [`sse`]: rendering of response streams as `text/event-stream`.
//! - [`hint`]: the plain-text hint of `GET /` and unknown paths.
//! - [`agent_card`]: `GET /.well-known/agent-card.json` with ETag and caching.
//! - [`agents`]: several agents on one listener, each under its path prefix.

pub mod agent_card;
pub mod agents;
pub mod auth;
pub mod browser_guard;
pub mod compat03;
pub mod grpc;
pub mod hint;
pub mod http_body;
pub mod interfaces;
pub mod jsonrpc;
pub mod operations;
pub mod rest;
pub mod sse;
pub mod unread_body;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::config::Binding;
use crate::handler::RequestHandler;
use agent_card::LiveCard;

/// Transport limits and inbound authentication.
#[derive(Debug, Clone)]
pub struct TransportConfig {
    /// Largest accepted request body in bytes; larger bodies get HTTP 413 without
    /// being read whole.
    pub max_body_bytes: usize,
    /// Interval between SSE keep-alive comment lines.
    pub sse_keepalive: Duration,
    /// Who may call the A2A operations (every binding), and as which owner. Default: no
    /// authentication.
    pub auth: auth::Authenticator,
    /// The bindings served (`server.bindings`). Default all three; gRPC is served by
    /// [`grpc::router`], beside [`a2a_routes`] or on its own listener.
    pub bindings: Vec<Binding>,
    /// gRPC has a listener of its own (`server.grpc_listen`), so the HTTP listener
    /// does not route gRPC calls. Default false.
    pub grpc_own_listener: bool,
    /// The public card also carries the A2A 0.3 discovery fields (`agent.v03_card_fields`).
    /// Default true.
    pub card_v03_fields: bool,
    /// How long a gRPC call's request message may take to arrive whole after the call's
    /// headers (`server.header_timeout_secs`); later, the call ends with
    /// `DEADLINE_EXCEEDED`. Default 30 s.
    pub request_message_timeout: Duration,
    /// The `Origin` and `Host` rules of the A2A routes (`server.allowed_origins`,
    /// `server.allowed_hosts`). Default: no origin allowed, no `Host` check.
    pub browser: browser_guard::BrowserGuard,
    /// The agent of the gateway these routes serve (`[agents.<id>]`) and who may use
    /// it. Default: the agent at `/`, every caller.
    pub agent: AgentAccess,
}

/// Which agent of the gateway a set of A2A routes serves, and who may use it.
#[derive(Debug, Clone, Default)]
pub struct AgentAccess {
    /// The agent id (`""`: the agent at `/`): every call's
    /// [`CallContext::agent`](crate::executor::CallContext::agent).
    pub id: String,
    /// The callers allowed (`[agents.<id>] callers`); `None`: every caller. Any other
    /// gets 403 / `PERMISSION_DENIED` before the operation runs.
    pub callers: Option<Arc<[String]>>,
    /// The path prefix the routes are mounted under, starting and ending with `/`
    /// (`""`: none, the agent at `/`); named by the hint of an unknown path.
    pub prefix: String,
}

impl TransportConfig {
    /// Whether `binding` is served.
    pub fn serves(&self, binding: Binding) -> bool {
        self.bindings.contains(&binding)
    }
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 10 * 1024 * 1024,
            sse_keepalive: Duration::from_secs(15),
            auth: auth::Authenticator::none(),
            bindings: Binding::ALL.to_vec(),
            grpc_own_listener: false,
            card_v03_fields: true,
            request_message_timeout: Duration::from_secs(30),
            browser: browser_guard::BrowserGuard::default(),
            agent: AgentAccess::default(),
        }
    }
}

/// What the HTTP routes share. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The protocol handler.
    pub handler: RequestHandler,
    /// The public agent card, pre-rendered; replaced whole when it is rendered again.
    pub card: Arc<LiveCard>,
    /// Limits.
    pub config: Arc<TransportConfig>,
    /// Cancelled at shutdown: open streams end cleanly.
    pub shutdown: CancellationToken,
}

/// The A2A routes of the enabled bindings (`state.config.bindings`), behind the
/// `Origin` and `Host` rules of `state.config.browser` ([`browser_guard`]), all
/// authenticated as `state.config.auth` says: JSON-RPC at `POST /`, HTTP+JSON under
/// [`rest::REST_PATH`]; the public agent card at `/.well-known/agent-card.json`
/// (also the pre-1.0 `/.well-known/agent.json`); with push notifications signed `v1a`,
/// the signing keys at [`crate::push::JWKS_PATH`]. `GET /`, paths no route takes and
/// methods a route does not take answer with [`hint`].
pub fn a2a_routes(state: AppState) -> Router {
    let bindings = &state.config.bindings;
    let mut router = Router::new()
        .route("/.well-known/agent-card.json", get(agent_card::handle))
        .route("/.well-known/agent.json", get(agent_card::handle));
    if let Some(jwks) = state.handler.push().and_then(|p| p.jwks()) {
        let body = jwks.to_string();
        router = router.route(
            crate::push::JWKS_PATH,
            get(move || {
                let body = body.clone();
                async move {
                    (
                        [
                            (axum::http::header::CONTENT_TYPE, "application/jwk-set+json"),
                            (axum::http::header::CACHE_CONTROL, "public, max-age=300"),
                        ],
                        body,
                    )
                }
            }),
        );
    }
    let root = get(hint::root);
    router = router.route(
        "/",
        if bindings.contains(&Binding::Jsonrpc) {
            root.post(jsonrpc::handle)
        } else {
            root
        },
    );
    if bindings.contains(&Binding::Rest) {
        router = router.nest(rest::REST_PATH, rest::routes());
    }
    let browser = Arc::new(state.config.browser.clone());
    router
        .fallback(hint::unknown)
        .method_not_allowed_fallback(hint::wrong_method)
        .with_state(state)
        .layer(axum::middleware::from_fn(unread_body::close_after_refusal))
        .layer(axum::middleware::from_fn_with_state(
            browser,
            browser_guard::guard,
        ))
}
