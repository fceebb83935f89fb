//! [`CardCache`]: the agent's card as the executor uses it, read at the first need and
//! read again once its freshness is over: `Cache-Control: max-age` (at least
//! `card_min_refresh`, at most a day; `no-cache` / `no-store` count as 0), else
//! `card_refresh` (300 s by default); revalidated with `If-None-Match` when it came with an
//! `ETag`. One refresh at a time; a failed refresh keeps the card it had (and tries again
//! after `card_min_refresh`). Whoever waits on [`CardCache::changed`] is woken when a card
//! that differs from the one held (or the first one) is read.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use super::card::UpstreamCard;
use super::client::{CardAnswer, Rpc};
use super::settings::{A2aSettings, VersionChoice};
use super::wire::WireVersion;
use crate::executor::CallContext;
use crate::upstream::errors::UpstreamError;

/// Longest freshness honoured.
const MAX_FRESH: Duration = Duration::from_secs(86_400);

#[derive(Debug, Clone)]
struct Held {
    card: Arc<UpstreamCard>,
    fresh_until: Instant,
    etag: Option<String>,
}

/// The card, kept fresh (see the module docs).
#[derive(Debug, Default)]
pub struct CardCache {
    held: RwLock<Option<Held>>,
    refresh: tokio::sync::Mutex<()>,
    changed: tokio::sync::Notify,
}

impl CardCache {
    fn fresh(&self) -> Option<Arc<UpstreamCard>> {
        let held = self.held.read().expect("card lock");
        held.as_ref()
            .filter(|h| Instant::now() < h.fresh_until)
            .map(|h| h.card.clone())
    }

    /// When the card held goes stale (and the next [`get`](Self::get) reads it again);
    /// `None` while none is held.
    pub fn stale_at(&self) -> Option<Instant> {
        self.held
            .read()
            .expect("card lock")
            .as_ref()
            .map(|h| h.fresh_until)
    }

    /// Makes the card held stale now, so that the next [`get`](Self::get) reads it again
    /// (revalidating with its `ETag`): the agent refused a call its card allowed.
    pub fn expire(&self) {
        if let Some(h) = self.held.write().expect("card lock").as_mut() {
            h.fresh_until = Instant::now();
        }
    }

    /// Resolves once a card that differs from the one held before (or the first card)
    /// has been read since the last time it resolved (one waiter at a time).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// The card: the one held while it is fresh, else read (or revalidated) now.
    ///
    /// # Errors
    /// Why it could not be read, when no card is held at all.
    pub async fn get(
        &self,
        rpc: &Rpc,
        s: &A2aSettings,
    ) -> Result<Arc<UpstreamCard>, UpstreamError> {
        if let Some(card) = self.fresh() {
            return Ok(card);
        }
        let _one = self.refresh.lock().await;
        if let Some(card) = self.fresh() {
            return Ok(card);
        }
        let before = self.held.read().expect("card lock").clone();
        let version = match s.protocol_version {
            VersionChoice::V0_3 => WireVersion::V0_3,
            _ => WireVersion::V1_0,
        };
        let fresh_for = |max_age: Option<Duration>| {
            max_age
                .unwrap_or(s.card_refresh)
                .clamp(s.card_min_refresh, MAX_FRESH.max(s.card_min_refresh))
        };
        let answer = rpc
            .get_card(
                &s.card_url,
                version,
                &CallContext::anonymous(),
                before.as_ref().and_then(|h| h.etag.as_deref()),
            )
            .await;
        let mut changed = false;
        let held = match (answer, before) {
            (Ok(CardAnswer::NotModified { max_age }), Some(h)) => Held {
                fresh_until: Instant::now() + fresh_for(max_age),
                ..h
            },
            (
                Ok(CardAnswer::Card {
                    card,
                    max_age,
                    etag,
                }),
                before,
            ) => match UpstreamCard::read(&card, s) {
                Ok(card) => {
                    if before.as_ref().is_none_or(|b| *b.card != card) {
                        changed = true;
                        tracing::info!(
                            upstream.endpoint = %crate::log_url::LogUrl(&card.endpoint),
                            upstream.version = card.wire.header(),
                            upstream.binding = card.binding.name(),
                            upstream.streaming = card.streaming,
                            "read the A2A agent's card"
                        );
                    }
                    Held {
                        card: Arc::new(card),
                        fresh_until: Instant::now() + fresh_for(max_age),
                        etag,
                    }
                }
                Err(why) => return self.keep(before, UpstreamError::A2a(why), s),
            },
            (Ok(CardAnswer::NotModified { .. }), None) => {
                return Err(UpstreamError::A2a(
                    "answered 304 Not Modified to a card request without If-None-Match".into(),
                ));
            }
            (Err(e), before) => return self.keep(before, e, s),
        };
        let card = held.card.clone();
        *self.held.write().expect("card lock") = Some(held);
        if changed {
            self.changed.notify_one();
        }
        Ok(card)
    }

    /// A refresh failed with `e`: keeps the card held before, if any, for another
    /// `card_min_refresh`; else the error.
    fn keep(
        &self,
        before: Option<Held>,
        e: UpstreamError,
        s: &A2aSettings,
    ) -> Result<Arc<UpstreamCard>, UpstreamError> {
        let Some(mut h) = before else {
            return Err(e);
        };
        tracing::warn!(reason = %super::reasons::detail(&e), "cannot read the A2A agent's card again; the one read before is kept");
        h.fresh_until = Instant::now() + s.card_min_refresh;
        let card = h.card.clone();
        *self.held.write().expect("card lock") = Some(h);
        Ok(card)
    }
}

#[cfg(test)]
mod tests {
    use super::super::client::max_age;
    use std::time::Duration;

    #[test]
    fn reads_the_freshness_of_cache_control() {
        let h = |v: &str| {
            let mut m = http::HeaderMap::new();
            m.insert(http::header::CACHE_CONTROL, v.parse().unwrap());
            max_age(&m)
        };
        assert_eq!(h("public, max-age=600"), Some(Duration::from_secs(600)));
        assert_eq!(h("no-cache"), Some(Duration::ZERO));
        assert_eq!(h("max-age=60, no-store"), Some(Duration::ZERO));
        assert_eq!(h("public"), None);
        assert_eq!(h("max-age=x"), None);
        assert_eq!(max_age(&http::HeaderMap::new()), None);
    }
}
