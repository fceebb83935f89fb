//! a2a-gateway: an A2A 1.0 server that fronts a hosted agent runtime.
//!
//! Module map, bottom up: a module imports only the modules of its own line or below it
//! (`tests/layers.rs` holds this table as an allow-list per module and checks every
//! `crate::` path against it, and the file-level import graph against cycles).
//!
//! 1. The vocabulary, importing nothing of ours but each other:
//!    - [`scope`]: the caller boundary ([`scope::Scope`]: tenant, owner) that keys every
//!      task.
//!    - [`protocol`]: A2A wire types and the JSON-RPC envelope (serde only).
//!    - [`error`]: [`A2aError`], the spec's errors, mapped to JSON-RPC code, HTTP status and
//!      ErrorInfo (a protocol word; a top-level file so that its many importers keep their
//!      path).
//!    - [`log_url`]: URLs with their secrets hidden, the one rule for the configuration's
//!      own output and for every log line (a leaf that imports nothing of ours).
//!    - [`config`]: the serde types of the configuration and their value rules (may name
//!      `protocol` types).
//!    - [`allocator`]: gives mimalloc's freed memory back to the system while `serve` is
//!      quiet (a leaf that imports nothing of ours).
//! 2. [`telemetry`]: the metrics catalogue, spans, log helpers.
//! 3. [`executor`]: the executor API: [`AgentExecutor`], [`RequestContext`],
//!    [`EventQueue`], [`TaskUpdater`].
//! 4. [`store`]: the [`TaskStore`] trait (event log + snapshot) and its backends.
//! 5. Beside each other, never each other:
//!    - [`upstream`]: the runtime kinds (today AgentCore, [`upstream::AgentCoreExecutor`])
//!      and what they share (HTTP, auth, reply); it imports neither `store`, `cluster`
//!      nor `config`.
//!    - [`identity`]: inbound authentication, [`push`]: push delivery, [`cluster`]: several
//!      instances on one PostgreSQL.
//!    - [`agents`]: the example executors (executors, as `upstream` is).
//! 6. [`handler`]: [`RequestHandler`], the protocol semantics (no HTTP inside; neither
//!    `upstream` nor `identity`).
//! 7. [`transport`] (the JSON-RPC, REST and gRPC bindings, SSE rendering, the agent card),
//!    then [`server`] (HTTP server assembly), then [`ops`] (`/metrics`) and [`tls`] (HTTPS with
//!    rustls around the server's accept loop).
//! 8. [`app`] (the one place that turns a [`Config`] into settings and starts every part:
//!    cards, store, executor, telemetry, a [`app::Gateway`], serving), then [`cli`]
//!    (argument parsing and printing of the `a2a-gateway` commands) with [`demo`] (the
//!    local stand-ins `demo` runs; they speak HTTP only and import nothing of ours).
//!
//! Outside the table: `test_util` (feature `test-util`), the support library of the tests
//! and benches, which may reach every layer.
//!
//! The library leaves the process allocator to the program that links it. The
//! `a2a-gateway` binary, the gateway examples and the in-process benchmarks install
//! mimalloc when the default feature `mimalloc` is on (it cost less CPU per request and per
//! event than glibc's malloc: BENCHMARKS.md, issue 14); a crate depending on this one can
//! turn the feature off (`default-features = false`) to avoid building it.

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
pub mod log_url;
pub mod ops;
pub mod protocol;
pub mod push;
pub mod scope;
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
