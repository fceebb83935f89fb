//! The test-support library of the tests and benchmarks (feature `test-util`, which every
//! test and bench build turns on through the crate's dev-dependency on itself; `cargo
//! build` and the release binary leave it out).
//!
//! - [`GatewayProcess`]: the `a2a-gateway` binary as a child process, built with
//!   [`GatewayProcess::init`] (`.args(..)`, `.env(..)`, `.config(..)`, `.listen(..)`):
//!   started in a (temporary) directory with a cleared environment, its URL read from the
//!   line that says it listens, its output kept (and printed when the test fails), signals,
//!   SIGKILL, RSS and CPU time; dropped, it is killed.
//! - [`PgSchema`]: a fresh PostgreSQL schema per test on `A2A_GATEWAY_TEST_POSTGRES_URL`,
//!   dropped when the value is (also when the test panics).
//! - [`rpc`], [`rpc_with`], [`rpc_result`]: one JSON-RPC call over HTTP, its parsed reply;
//!   [`rpc_stream`]: a streaming call, its events; [`get_json`]: a plain GET (the card).
//! - [`A2aAgent`]: an upstream A2A agent of `tests/a2a_agents` (official SDKs) with its
//!   call log.
//! - [`user_message`], [`free_port`], [`ci`], [`skip`], [`python`], [`python_with`],
//!   [`ChildGuard`], [`PythonPeer`] (a Python peer that prints its URL first, such as the
//!   AWS doubles), [`strip_ansi`], and the `/proc` readers in [`proc_stat`].
//!
//! The rule for a peer a test needs (PostgreSQL, the Python venv, a program on `PATH`):
//! without it the test is skipped with a note, unless `CI=true`, where it fails ([`skip`]).

mod a2a_agent;
mod agentcore_app;
mod child;
mod env;
mod gateway;
mod http;
mod message;
mod net;
mod official_client;
mod output;
mod peer;
mod postgres;
pub mod proc_stat;
mod rpc;
mod stream;

pub use a2a_agent::{A2aAgent, AgentKind, agent_python};
pub use agentcore_app::AgentCoreApp;
pub use child::ChildGuard;
pub use env::{ci, python, python_with, skip};
pub use gateway::{GatewayBuilder, GatewayProcess};
pub use http::get_json;
pub use message::user_message;
pub use net::free_port;
pub use official_client::{official_client, python_for};
pub use output::strip_ansi;
pub use peer::PythonPeer;
pub use postgres::PgSchema;
pub use rpc::{RPC_TIMEOUT, rpc, rpc_body, rpc_result, rpc_with};
pub use stream::{StreamEvent, StreamEvents, rpc_stream, rpc_stream_with};
