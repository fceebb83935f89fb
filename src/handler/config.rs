//! The handler's settings: its limits and the capabilities its card declares.

use std::sync::Arc;

use super::input_modes::InputModes;
use crate::config::DEFAULT_LIST_PAGE_BYTES;
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
