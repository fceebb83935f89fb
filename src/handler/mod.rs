//! The request handler: A2A protocol semantics of every operation (spec §3.1),
//! independent of any transport. It owns the task lifecycle rules, the task store,
//! the event log and fan-out to subscribers, and runs executors. It knows nothing of
//! HTTP and nothing of any upstream.
//!
//! The operations, one file per family as the spec groups them: `send` (SendMessage,
//! SendStreamingMessage), `tasks` (GetTask, ListTasks, CancelTask), `subscribe`
//! (SubscribeToTask), `push` (the push-config operations), `card`
//! (GetExtendedAgentCard); beside them the handler's own jobs: `lifecycle` (restart
//! recovery, shutdown), `retention` (the periodic clean-up), `remote` (several
//! instances on one store). Each adds its methods to [`RequestHandler`]
//! (`request_handler`) and uses what lies below: `validation` (a request's checks),
//! `stream` (response streams), `registry` (reaching a task's driver), `driver` (one
//! task's single writer), `follow` (reading a task's log), `turns`, `input_modes`,
//! `config` (the settings), `card_terms` (what of the card is enforced, swappable) and `shared` (what the handler's clones and its drivers
//! share). This file is the map.

mod card;
mod card_terms;
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
mod run_limits;
mod send;
mod shared;
mod stream;
mod subscribe;
mod task_size;
mod tasks;
mod turns;
mod validation;
mod write_budget;

pub use config::{HandlerConfig, default_share};
pub use input_modes::{InputModes, part_media_type};
pub use push::MAX_CONFIGS_PER_TASK;
pub use request_handler::RequestHandler;
pub use stream::{EventStream, SequencedEvent};
pub use task_size::{DEFAULT_MAX_TASK_BYTES, DEFAULT_MAX_TASK_VALUES};
pub use validation::MAX_ID_BYTES;

pub use retention::{
    DEFAULT_PURGE_BATCH, MaintenanceConfig, MaintenanceReport, stale_reason, ttl_reason,
};
pub use turns::TURN_ENDED_METADATA;
