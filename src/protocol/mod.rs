//! A2A 1.0 wire types (serde only; no HTTP, no tokio).
//!
//! JSON follows ProtoJSON as the A2A specification requires (§5.5, ADR-001):
//! field names are lowerCamelCase on output; on input both lowerCamelCase and the
//! proto `snake_case` names are accepted; unknown fields are ignored; enums are the
//! proto names as strings (`TASK_STATE_WORKING`, `ROLE_USER`), and the proto enum
//! numbers and the 0.3 spellings (`working`, `user`) are accepted on input;
//! timestamps are RFC 3339 UTC with millisecond precision.

mod agent_card;
mod events;
pub mod jsonrpc;
mod params;
mod part;
mod push;
mod task;
pub mod time;
pub mod v03;
pub mod value_count;

pub use agent_card::*;
pub use events::*;
pub use params::*;
pub use part::*;
pub use push::*;
pub use task::*;

/// Free-form metadata: a JSON object with string keys (proto `google.protobuf.Struct`).
/// Every wire type that carries metadata names it; it lives here, beside the map, so
/// that they need not import each other for it.
pub type Metadata = serde_json::Map<String, serde_json::Value>;
