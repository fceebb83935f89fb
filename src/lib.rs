//! a2a-gateway: an A2A 1.0 server that fronts a hosted agent runtime.
//!
//! Module map (three roles kept apart: transport, handler, executor):
//! - [`protocol`]: wire types and the JSON-RPC envelope (serde only).
//! - [`error`]: [`A2aError`], mapped to JSON-RPC code, HTTP status and ErrorInfo.
//! - [`executor`]: the executor API: [`AgentExecutor`], [`RequestContext`],
//!   [`EventQueue`], [`TaskUpdater`].
//! - [`store`]: the [`TaskStore`] trait (event log + snapshot) and its backends.
//! - [`upstream`]: the AgentCore proxy executor ([`upstream::AgentCoreExecutor`]).
//! - [`handler`]: [`RequestHandler`], the protocol semantics (no HTTP inside).
//! - [`transport`]: the JSON-RPC binding, SSE rendering, the agent card.
//! - [`server`], [`app`]: HTTP server assembly; a [`app::Gateway`] from [`Config`].
//! - [`config`], [`telemetry`]: configuration layering and logging.
//! - [`ops`]: `/metrics`; [`tls`]: HTTPS with rustls.
//! - [`cli`]: the `a2a-gateway` commands; [`demo`]: the local stand-ins `demo` runs.
//!
//! The library leaves the process allocator to the program that links it. The
//! `a2a-gateway` binary, the gateway examples and the in-process benchmarks install
//! mimalloc when the default feature `mimalloc` is on (it cost less CPU per request and per
//! event than glibc's malloc: BENCHMARKS.md, issue 14); a crate depending on this one can
//! turn the feature off (`default-features = false`) to avoid building it.
//! [`allocator`] gives mimalloc's freed memory back to the system while `serve` is quiet.

pub mod agents;
pub mod allocator;
pub mod app;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod demo;
pub mod error;
pub mod executor;
pub mod handler;
pub mod identity;
pub mod ops;
pub mod protocol;
pub mod push;
pub mod server;
pub mod store;
pub mod telemetry;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
pub mod tls;
pub mod transport;
pub mod upstream;

pub use config::Config;
pub use error::A2aError;
pub use executor::{AgentExecutor, CallContext, EventQueue, RequestContext, TaskUpdater};
pub use handler::{HandlerConfig, RequestHandler};
pub use store::TaskStore;
