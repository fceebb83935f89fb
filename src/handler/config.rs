//! The handler's settings: its limits and the capabilities its card declares.

use std::sync::Arc;

use super::input_modes::InputModes;
use crate::config::DEFAULT_LIST_PAGE_BYTES;
pub use crate::config::default_share;
use crate::protocol::AgentCard;

/// Handler limits and capabilities.
#[derive(Debug, Clone)]
pub struct HandlerConfig {
    /// Offer SendStreamingMessage and SubscribeToTask (`capabilities.streaming`).
    pub streaming: bool,
    /// The extended agent card, when `capabilities.extendedAgentCard` is true.
    pub extended_agent_card: Option<AgentCard>,
    /// Whether the public card sets `capabilities.extendedAgentCard`.
    pub extended_agent_card_enabled: bool,
    /// Most executor runs at once; more are refused with a retryable error.
    pub max_concurrent_tasks: usize,
    /// Most runs of one caller (an owner within a tenant) at once, a message queued
    /// behind a running turn counting as one; more are refused with a retryable error
    /// naming `max_tasks_per_caller`. `None`: [`default_share`] of
    /// `max_concurrent_tasks`.
    pub max_tasks_per_caller: Option<usize>,
    /// Most runs of one tenant at once, counted as for callers; more are refused with a
    /// retryable error naming `max_tasks_per_tenant`. The default tenant `""` (calls
    /// that name none) is not bounded as one. `None`: [`default_share`] of
    /// `max_concurrent_tasks`.
    pub max_tasks_per_tenant: Option<usize>,
    /// Bytes of messages (their JSON) one caller may store per minute, a token bucket
    /// refilled at that rate; a message finding its caller's bucket short is refused
    /// with a retryable error naming `max_message_bytes_per_caller_per_minute` (see the
    /// `write_budget` module). Default 268435456 (256 MiB).
    pub max_message_bytes_per_caller_per_minute: u64,
    /// Most values (JSON values, as the per-request limit counts them) a task's stored
    /// JSON may hold for it to take another message; a message to a task over it is
    /// refused with InvalidParams naming `max_task_values` (see the `task_size` module).
    /// Default [`DEFAULT_MAX_TASK_VALUES`](super::DEFAULT_MAX_TASK_VALUES).
    pub max_task_values: usize,
    /// Most bytes of stored JSON a task may hold for it to take another message, as
    /// `max_task_values`. Default
    /// [`DEFAULT_MAX_TASK_BYTES`](super::DEFAULT_MAX_TASK_BYTES) (32 MiB).
    pub max_task_bytes: u64,
    /// Capacity of each run's [`EventQueue`](crate::EventQueue), in events.
    pub event_queue_capacity: usize,
    /// Live store writes buffered per subscriber before it falls back to reading the
    /// store: the capacity of each task's broadcast bus (rounded up to a power of two),
    /// allocated when the task's driver starts (about 31 bytes per slot). Each slot holds
    /// the events of one write (one event at model token rates, up to 64 in a burst
    /// with the default `event_queue_capacity`). Default 16.
    pub subscriber_buffer: usize,
    /// Extension URIs the card marks `required` (spec §3.3.4): the task operations
    /// refuse a call whose `A2A-Extensions` does not activate every one of them
    /// (see [`RequestHandler::check_extensions`](super::RequestHandler::check_extensions)).
    pub required_extensions: Vec<String>,
    /// The media types a message part may have (`defaultInputModes` and the skills'
    /// `inputModes`); the default accepts everything.
    pub input_modes: InputModes,
    /// Push notifications (`capabilities.pushNotifications`): `None` refuses the
    /// push-config operations and inline configs with PushNotificationNotSupported.
    pub push: Option<Arc<crate::push::PushService>>,
    /// A ListTasks page's byte bound, in bytes of the listed tasks' stored JSON (see
    /// [`TaskQuery::max_bytes`](crate::store::TaskQuery::max_bytes)): the page ends early, with a `nextPageToken`, before
    /// the task that would take it past this. Default [`DEFAULT_LIST_PAGE_BYTES`].
    pub max_list_page_bytes: u64,
    /// The agent of the gateway this handler serves (`[agents.<id>]`; `""`: the agent
    /// at `/`): the label of its metrics and the field of its logs.
    pub agent: String,
}

impl HandlerConfig {
    /// [`max_tasks_per_caller`](Self::max_tasks_per_caller) with its default applied.
    pub fn caller_task_limit(&self) -> usize {
        self.max_tasks_per_caller
            .unwrap_or_else(|| default_share(self.max_concurrent_tasks))
    }

    /// [`max_tasks_per_tenant`](Self::max_tasks_per_tenant) with its default applied.
    pub fn tenant_task_limit(&self) -> usize {
        self.max_tasks_per_tenant
            .unwrap_or_else(|| default_share(self.max_concurrent_tasks))
    }

    /// Takes what the public `card` declares: `capabilities.streaming` (absent means
    /// off, spec §3.3.4), its required extensions and its input modes, so the handler
    /// enforces exactly what the card promises.
    pub fn with_card(mut self, card: &AgentCard) -> Self {
        self.streaming = card.capabilities.streaming.unwrap_or(false);
        self.required_extensions = card
            .capabilities
            .extensions
            .iter()
            .filter(|e| e.required)
            .map(|e| e.uri.clone())
            .collect();
        self.input_modes = InputModes::from_card(card);
        self
    }
}

impl Default for HandlerConfig {
    fn default() -> Self {
        Self {
            streaming: true,
            extended_agent_card: None,
            extended_agent_card_enabled: false,
            max_concurrent_tasks: 1024,
            max_tasks_per_caller: None,
            max_tasks_per_tenant: None,
            max_message_bytes_per_caller_per_minute: 256 * 1024 * 1024,
            max_task_values: super::DEFAULT_MAX_TASK_VALUES,
            max_task_bytes: super::DEFAULT_MAX_TASK_BYTES,
            event_queue_capacity: crate::executor::EventQueue::DEFAULT_CAPACITY,
            subscriber_buffer: 16,
            required_extensions: Vec::new(),
            input_modes: InputModes::default(),
            max_list_page_bytes: DEFAULT_LIST_PAGE_BYTES,
            push: None,
            agent: String::new(),
        }
    }
}
