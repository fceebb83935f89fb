//! a2a-gateway: an A2A 1.0 server that fronts a hosted agent runtime.
//!
//! Module map (three roles kept apart, see `docs/architecture.md`):
//! - [`protocol`]: wire types, JSON-RPC envelope (serde only).
//! - [`error`]: [`A2aError`], mapped to JSON-RPC code, HTTP status and ErrorInfo.
//! - [`executor`]: the executor API: [`AgentExecutor`], [`RequestContext`], [`EventQueue`], [`TaskUpdater`].
//! - [`store`]: the [`TaskStore`] trait (event log + snapshot) and its backends.
//! - [`handler`]: [`RequestHandler`], the protocol semantics (no HTTP inside).
//! - [`config`]: [`Config`], layered (defaults < TOML file < `A2A_GATEWAY_*` env < CLI) and validated.

pub mod config;
pub mod error;
pub mod protocol;

pub use config::Config;
pub use error::A2aError;
pub mod executor;

pub use executor::{AgentExecutor, CallContext, EventQueue, RequestContext, TaskUpdater};
pub mod store;

pub use store::TaskStore;
pub mod handler;

pub use handler::{HandlerConfig, RequestHandler};
pub mod transport;
pub mod server;
