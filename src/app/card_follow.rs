//! The gateway's card following its upstream A2A agent's card. An agent of `kind =
//! "a2a"` publishes a card whose name, description, version, skills, modes and
//! streaming come from the agent's card where `[agent]` leaves them at their defaults
//! ([`super::card::with_upstream_card`]). That card is read again as its cache headers
//! say ([`crate::upstream::a2a::card_cache`]); each time it differs from the one
//! published, the gateway's public and extended cards are rendered again (new `ETag`
//! and `Last-Modified`, both generations) and the handler enforces what they declare
//! (streaming, input modes) from the next request on. An agent unreachable at start is
//! tried again every `card_min_refresh_secs`; its card is merged once it is read.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::card::{handler_config, with_upstream_card};
use crate::config::Config;
use crate::push::PushService;
use crate::transport::AppState;
use crate::upstream::a2a::{A2aExecutor, UpstreamCard};

/// Shortest pause between two reads by the follower, whatever the settings say.
const FLOOR: Duration = Duration::from_millis(500);

/// What renders one agent's card again: its configuration as it would be without an
/// upstream card (the agent at `/`: the whole configuration; `[agents.<id>]`: its
/// [`super::gateway::agent_config`]), its id (`""` for `/`), push, and the state
/// serving it.
pub(super) struct Publisher {
    pub(super) base: Config,
    pub(super) agent: String,
    pub(super) push: Option<Arc<PushService>>,
    pub(super) state: AppState,
}

impl Publisher {
    /// Serves the card of `base` merged with `card` (public and extended) and has the
    /// handler enforce it. Returns whether the public card changed.
    pub(super) fn publish(&self, card: &UpstreamCard) -> bool {
        let merged = with_upstream_card(&self.base, card);
        let (hc, public) = handler_config(&merged, self.push.clone(), &self.agent);
        self.state.handler.publish_card(&hc);
        self.state.card.set(public)
    }
}

/// Publishes `seen` (the card read at start, if any) now, then spawns the follower:
/// each time `executor`'s card goes stale (or a call read a new one), it is read and,
/// when it differs from the one published, published. Ends when `stop` is cancelled.
pub(super) fn start(
    publisher: Publisher,
    executor: A2aExecutor,
    seen: Option<Arc<UpstreamCard>>,
    stop: CancellationToken,
) {
    if let Some(card) = &seen {
        publisher.publish(card);
    }
    tokio::spawn(async move {
        let mut seen = seen;
        loop {
            let read = tokio::select! {
                () = stop.cancelled() => return,
                read = executor.card() => read,
            };
            if let Ok(card) = read
                && seen.as_deref() != Some(&*card)
            {
                let changed = publisher.publish(&card);
                if changed {
                    tracing::info!(
                        agent = %publisher.agent,
                        "the upstream A2A agent's card changed: the gateway's card is rendered again"
                    );
                }
                seen = Some(card);
            }
            let now = Instant::now();
            let next = executor
                .card_stale_at()
                .unwrap_or(now + executor.card_min_refresh())
                .max(now + FLOOR);
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep_until(next) => {}
                () = executor.card_changed() => {}
            }
        }
    });
}
