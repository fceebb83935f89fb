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

pub mod agents;
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
pub mod tls;
pub mod transport;
pub mod upstream;

/// The process's allocator: mimalloc (feature `mimalloc`, on by default). The gateway
/// allocates and frees many small objects per request and per event on every worker
/// thread; mimalloc's thread-local free lists cost measurably less CPU there than glibc's
/// malloc (figures in BENCHMARKS.md, issue 14). Build with `--no-default-features` for the
/// system allocator.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub use config::Config;
pub use error::A2aError;
pub use executor::{AgentExecutor, CallContext, EventQueue, RequestContext, TaskUpdater};
pub use handler::{HandlerConfig, RequestHandler};
pub use store::TaskStore;
