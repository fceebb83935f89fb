//! A "spell" of one recurring listener condition (accept errors, the connection limit): logged
//! once when it starts and once when it ends, counted in between, so a flood of failures
//! never floods the log.

use std::time::Duration;

use tokio::time::Instant;

/// Shortest and longest wait after a failed `accept` (doubling in between).
const BACKOFF_MIN: Duration = Duration::from_millis(5);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// One recurring condition: whether it is on, since when, and how often it hit.
#[derive(Debug, Default)]
pub(crate) struct Spell {
    started: Option<Instant>,
    hits: u64,
}

impl Spell {
    /// Records one occurrence; `true` when it starts a spell (the caller logs it then).
    pub(crate) fn hit(&mut self) -> bool {
        self.hits += 1;
        if self.started.is_none() {
            self.started = Some(Instant::now());
            return true;
        }
        false
    }

    /// The condition is over: the spell's hit count and length when one was on.
    pub(crate) fn end(&mut self) -> Option<(u64, Duration)> {
        let started = self.started.take()?;
        let hits = std::mem::take(&mut self.hits);
        Some((hits, started.elapsed()))
    }

    /// The wait before the next `accept` after a failure: 5 ms doubling per hit in this
    /// spell, at most 1 s.
    pub(crate) fn backoff(&self) -> Duration {
        let doublings = u32::try_from(self.hits.saturating_sub(1))
            .unwrap_or(u32::MAX)
            .min(16);
        (BACKOFF_MIN * 2u32.pow(doublings)).min(BACKOFF_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn logs_once_per_spell_and_backs_off() {
        let mut s = Spell::default();
        assert!(s.hit());
        assert_eq!(s.backoff(), Duration::from_millis(5));
        assert!(!s.hit());
        assert_eq!(s.backoff(), Duration::from_millis(10));
        for _ in 0..20 {
            assert!(!s.hit());
        }
        assert_eq!(s.backoff(), BACKOFF_MAX);
        tokio::time::advance(Duration::from_secs(3)).await;
        let (hits, took) = s.end().unwrap();
        assert_eq!(hits, 22);
        assert!(took >= Duration::from_secs(3));
        assert!(s.end().is_none());
        assert!(s.hit(), "a new spell starts after the end");
    }
}
