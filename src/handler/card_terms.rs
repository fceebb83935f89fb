//! [`CardTerms`]: what the handler enforces from the card it serves (streaming, the
//! input modes, the extended card), held apart from the other settings so that a card
//! rendered again while serving (an upstream A2A agent whose card changed) is enforced
//! from the next request on. Read with one uncontended lock and an `Arc` clone.

use std::sync::{Arc, RwLock};

use super::config::HandlerConfig;
use super::input_modes::InputModes;
use crate::protocol::AgentCard;

/// The card-derived terms of a [`HandlerConfig`].
#[derive(Debug, Clone)]
pub(crate) struct CardTerms {
    /// `capabilities.streaming`: SendStreamingMessage and SubscribeToTask are offered.
    pub(crate) streaming: bool,
    /// The media types a message part may have.
    pub(crate) input_modes: InputModes,
    /// The extended agent card, when configured.
    pub(crate) extended_agent_card: Option<AgentCard>,
}

impl CardTerms {
    fn of(config: &HandlerConfig) -> Self {
        Self {
            streaming: config.streaming,
            input_modes: config.input_modes.clone(),
            extended_agent_card: config.extended_agent_card.clone(),
        }
    }
}

/// The terms in use, swapped whole.
#[derive(Debug)]
pub(crate) struct LiveTerms(RwLock<Arc<CardTerms>>);

impl LiveTerms {
    /// The terms of `config`.
    pub(crate) fn of(config: &HandlerConfig) -> Self {
        Self(RwLock::new(Arc::new(CardTerms::of(config))))
    }

    /// The terms in use now.
    pub(crate) fn get(&self) -> Arc<CardTerms> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the terms in use with those of `config`.
    pub(crate) fn set(&self, config: &HandlerConfig) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(CardTerms::of(config));
    }
}
