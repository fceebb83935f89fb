//! The one place that turns a [`Config`](crate::config::Config) into a running gateway:
//! every configuration-to-settings step and the start of every part. The command line
//! (`cli`) parses arguments, calls in here and prints.
//!
//! - [`card`]: the agent cards from `[agent]` and `[server]`; `card_follow`: an `a2a`
//!   agent's card followed while serving;
//! - [`gateway`]: a [`Gateway`] (handler, transport state, router) and serving it;
//! - [`upstream`]: the executor `[upstream]` describes, and the conversion of that
//!   section into the executor's settings;
//! - [`store`]: the task store `[store]` describes, with its cluster side; [`owners`]:
//!   the owner step of migration 0008 on it;
//! - [`serve`]: what `serve` starts ([`start`]: telemetry, executor, store, push,
//!   cluster, recovery, metrics, TLS) and serves ([`Running::serve`]);
//! - [`reload`]: the API keys read again on `SIGHUP`.

pub mod card;
mod card_follow;
pub mod gateway;
pub mod owners;
pub mod reload;
pub mod serve;
pub mod store;
pub mod upstream;

pub use card::{API_KEY_SCHEME, agent_card, extended_agent_card, interfaces};
pub use gateway::Gateway;
pub use reload::warn_unknown_callers;
pub use serve::{Running, init_log, init_telemetry, start};
pub use store::{build_store, build_store_for_cluster, check_store_location, read_store};
pub use upstream::{
    UpstreamCardSource, a2a_readiness, a2a_settings, agentcore_settings, build_executor,
    build_executor_parts,
};

/// Why the gateway could not be built or started: one line for the operator. Never holds
/// a secret.
pub type AppError = Box<dyn std::error::Error + Send + Sync>;
