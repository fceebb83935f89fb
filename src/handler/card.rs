//! GetExtendedAgentCard (spec §3.1.11), and replacing what of the card is enforced.

use super::config::HandlerConfig;
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
            .terms
            .get()
            .extended_agent_card
            .clone()
            .ok_or(A2aError::ExtendedAgentCardNotConfigured)
    }

    /// Enforces what `config`'s card declares (streaming, input modes, the extended
    /// card; see [`HandlerConfig::with_card`]) from the next request on, in place of
    /// what this handler was built with: for a card rendered again while serving (the
    /// upstream A2A agent's card changed). Its other settings stay.
    pub fn publish_card(&self, config: &HandlerConfig) {
        self.inner.terms.set(config);
    }
}
