//! The `a2a` kind: an agent that speaks A2A itself (0.3 or 1.0; any A2A agent, or an
//! AgentCore runtime with `serverProtocol = A2A`), fronted by the gateway as an
//! executor. The gateway terminates A2A on both sides: its tasks, ids, store, push and
//! identity stay its own.
//!
//! - [`settings`]: [`A2aSettings`], plain values.
//! - [`card`]: the agent's card: endpoint, version, streaming, published fields;
//!   [`card_cache`]: kept fresh by its cache headers.
//! - [`wire`]: what differs between 1.0 and 0.3 on the wire (through
//!   [`crate::protocol::v03`], the one translation).
//! - [`client`]: the client (retries, SSE, the one `authorize`), JSON-RPC or
//!   HTTP+JSON ([`rest`]).
//! - [`links`]: gateway task → the agent's task and context.
//! - [`relay`]: the agent's events → the gateway task's.
//! - [`reasons`]: the failure texts, naming the A2A agent.
//! - [`executor`]: [`A2aExecutor`], the `AgentExecutor` (and why not a `Runtime`).

pub mod card;
pub mod card_cache;
pub mod client;
pub mod executor;
pub mod links;
pub mod reasons;
pub mod relay;
pub mod rest;
pub mod settings;
pub mod wire;

pub use card::UpstreamCard;
pub use executor::A2aExecutor;
pub use settings::{A2aSettings, BindingChoice, VersionChoice};
