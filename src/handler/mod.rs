//! The request handler: A2A protocol semantics of every operation (spec §3.1),
//! independent of any transport. It owns the task lifecycle rules, the task store,
//! the event log and fan-out to subscribers, and runs executors. It knows nothing of
//! HTTP and nothing of any upstream.
//!
//! One file per operation family, as the spec groups them: `send` SendMessage
//! and SendStreamingMessage, `tasks` GetTask, ListTasks and CancelTask, `subscribe`
//! SubscribeToTask, `push` the push-config operations, `card` GetExtendedAgentCard;
//! `validation` the checks they share, `stream` their response streams, `lifecycle`
//! start-up recovery and shutdown, `retention` the periodic clean-up, `remote` several
//! instances on one store. Below them: `driver` (one task's single writer), `registry`
//! (finding a task's driver), `follow` (reading a task's log), `turns`, `input_modes`;
//! `config` the settings and `shared` what every clone and driver share;
//! `request_handler` the [`RequestHandler`] they all belong to. This file is the map.

mod card;
mod config;
mod driver;
mod follow;
mod input_modes;
mod lifecycle;
mod push;
mod registry;
mod remote;
mod request_handler;
mod retention;
mod send;
mod shared;
mod stream;
mod subscribe;
mod tasks;
mod turns;
mod validation;

pub use config::{DEFAULT_LIST_PAGE_BYTES, HandlerConfig};
pub use input_modes::{InputModes, parse_media_range, part_media_type};
pub use push::MAX_CONFIGS_PER_TASK;
pub use request_handler::RequestHandler;
pub use stream::{EventStream, SequencedEvent};
pub use validation::MAX_ID_BYTES;

pub use retention::{
    DEFAULT_PURGE_BATCH, MaintenanceConfig, MaintenanceReport, stale_reason, ttl_reason,
};
pub use turns::TURN_ENDED_METADATA;
