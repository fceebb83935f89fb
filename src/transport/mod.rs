//! Transport adapters: turn HTTP requests into [`RequestHandler`] calls and render
//! results and errors back. Only this module (and `server`) knows HTTP.
//!
//! - [`operations`]: the one operation table every binding shares (decode, dispatch,
//!   version, content type, caller).
//! - [`jsonrpc`]: the JSON-RPC 2.0 binding (spec §9) at `POST /`.
//! - [`compat03`]: A2A 0.3 method names and shapes on the JSON-RPC binding, translated
//!   to and from the 1.0 operations.
//! - [`http_body`]: bounded request-body reading for the HTTP bindings.
//! - [`auth`]: inbound authentication (`[server.auth]`) of every JSON-RPC request.
//! - [`sse`]: rendering of response streams as `text/event-stream`.
//! - [`agent_card`]: `GET /.well-known/agent-card.json` with ETag and caching.

pub mod agent_card;
pub mod auth;
pub mod compat03;
pub mod http_body;
pub mod jsonrpc;
pub mod operations;
pub mod sse;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use tokio_util::sync::CancellationToken;

use crate::handler::RequestHandler;
use agent_card::CardDocument;

/// Transport limits and inbound authentication.
#[derive(Debug, Clone)]
pub struct TransportConfig {
    /// Largest accepted request body in bytes; larger bodies get HTTP 413 without
    /// being read whole.
    pub max_body_bytes: usize,
    /// Interval between SSE keep-alive comment lines.
    pub sse_keepalive: Duration,
    /// Who may call `POST /`, and as which owner. Default: no authentication.
    pub auth: auth::Authenticator,
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 10 * 1024 * 1024,
            sse_keepalive: Duration::from_secs(15),
            auth: auth::Authenticator::none(),
        }
    }
}

/// What the HTTP routes share. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The protocol handler.
    pub handler: RequestHandler,
    /// The public agent card, pre-rendered.
    pub card: Arc<CardDocument>,
    /// Limits.
    pub config: Arc<TransportConfig>,
    /// Cancelled at shutdown: open streams end cleanly.
    pub shutdown: CancellationToken,
}

/// The A2A routes: `POST /` (JSON-RPC, authenticated as `state.config.auth` says) and the
/// public agent card at `/.well-known/agent-card.json` (also the pre-1.0
/// `/.well-known/agent.json`).
pub fn a2a_routes(state: AppState) -> Router {
    Router::new()
        .route("/", post(jsonrpc::handle))
        .route("/.well-known/agent-card.json", get(agent_card::handle))
        .route("/.well-known/agent.json", get(agent_card::handle))
        .with_state(state)
}
