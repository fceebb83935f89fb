//! a2a-gateway: an A2A 1.0 server that fronts a hosted agent runtime.
//!
//! Module map (three roles kept apart, see `docs/architecture.md`):
//! - [`protocol`]: wire types, JSON-RPC envelope (serde only).
//! - [`error`]: [`A2aError`], mapped to JSON-RPC code, HTTP status and ErrorInfo.
//! - [`executor`]: the executor API: [`AgentExecutor`], [`RequestContext`], [`EventQueue`], [`TaskUpdater`].
//! - [`store`]: the [`TaskStore`] trait (event log + snapshot) and its backends.
//! - [`upstream`]: the AgentCore proxy executor ([`upstream::AgentCoreExecutor`]).
//! - [`handler`]: [`RequestHandler`], the protocol semantics (no HTTP inside).

pub mod error;
pub mod protocol;

pub use error::A2aError;
pub mod executor;
pub mod upstream;

pub use executor::{AgentExecutor, CallContext, EventQueue, RequestContext, TaskUpdater};
