//! GetExtendedAgentCard (spec §3.1.11).

use super::request_handler::RequestHandler;
use crate::error::A2aError;
use crate::executor::CallContext;
use crate::protocol::AgentCard;

impl RequestHandler {
    /// GetExtendedAgentCard (spec §3.1.11).
    ///
    /// # Errors
    /// UnsupportedOperation when the card does not offer it,
    /// ExtendedAgentCardNotConfigured when it does but none is configured.
    pub fn get_extended_agent_card(&self, _call: &CallContext) -> Result<AgentCard, A2aError> {
        if !self.inner.config.extended_agent_card_enabled {
            return Err(A2aError::UnsupportedOperation(
                "this agent offers no extended agent card".into(),
            ));
        }
        self.inner
            .config
            .extended_agent_card
            .clone()
            .ok_or(A2aError::ExtendedAgentCardNotConfigured)
    }
}
