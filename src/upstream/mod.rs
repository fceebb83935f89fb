//! The runtime side: executors that forward each A2A message to a hosted agent runtime
//! and turn its reply into A2A task events. One folder per runtime kind, beside what
//! every kind shares:
//!
//! - [`runtime`]: the [`Runtime`] trait a kind implements, and [`RuntimeExecutor`], the
//!   one executor over any kind (session turns ([`turns`]) and leases, credentials,
//!   retries, reply into task events, failure reasons, metrics).
//! - [`agentcore`]: the Amazon Bedrock AgentCore Runtime kind, [`AgentCore`];
//!   [`AgentCoreExecutor`] is the executor over it, with its [`AgentCoreSettings`]. The
//!   wire contract it follows is `shared/docs/agentcore-runtime.md` ("the runtime
//!   contract", sections cited as §n); what upstream agents can rely on is
//!   `docs/upstream-contract.md`.
//! - [`connection`]: [`ConnectionSettings`], the HTTP settings every kind shares
//!   (timeouts, limits, retries, identity headers, roots, authentication).
//! - [`http`]: the reqwest client and per-phase time limits, the retry policy and
//!   `Retry-After`, bounded SSE decoding.
//! - [`auth`]: authentication settings, the bearer-token cache (single flight), the
//!   OAuth client-credentials source, and AWS SigV4 with the standard credential chain;
//!   every request is authenticated at one place, `Credentials::authorize`.
//! - [`reply`]: JSON / SSE reply → [`reply::UpstreamEvent`]s, the control vocabulary,
//!   and the sink into A2A task events.
//! - [`errors`]: readable failure reasons; [`text`]: their small text helpers.
//! - `mock` and `conformance` (feature `test-util`): a scripted runtime on
//!   `127.0.0.1:0` and the checks every kind passes against it; `raw_mock`, a
//!   byte-level runtime for faults no HTTP library would send.
//!
//! `upstream` imports only the executor API, `protocol` and `telemetry` (see
//! `tests/layers.rs`): the gateway's `app` converts the configuration into each kind's
//! settings.

pub mod a2a;
pub mod agentcore;
pub mod auth;
#[cfg(feature = "test-util")]
pub mod conformance;
pub mod connection;
pub mod errors;
pub mod http;
pub(crate) mod meter;
#[cfg(feature = "test-util")]
pub mod mock;
#[cfg(feature = "test-util")]
pub mod raw_mock;
pub mod reply;
pub mod runtime;
pub mod text;
pub mod turns;

pub use agentcore::{
    AgentCore, AgentCoreExecutor, AgentCoreSettings, SESSION_HEADER, USER_ID_HEADER,
    identity_header_value,
};
pub use auth::{
    AuthSettings, Credentials, NO_FORWARDABLE_TOKEN, OAuth2Settings, TokenCache, TokenEndpoint,
    TokenError, TokenSource,
};
pub use connection::ConnectionSettings;
pub use errors::{StatusError, TimeoutKind, UpstreamError};
pub use http::HttpVersion;
pub use meter::QUEUED as QUEUED_MESSAGES;
pub use runtime::{QUEUED_STATUS_TEXT, Runtime, RuntimeExecutor};
