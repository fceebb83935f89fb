//! Retrying an invocation before the first reply byte: the backoff ([`RetryPolicy`])
//! and the runtime's `Retry-After` ([`parse_retry_after`], RFC 9110 §10.2.3).

use std::time::Duration;

use chrono::{DateTime, Utc};
use http::HeaderValue;
use rand::Rng;

/// When and how often to retry an attempt that failed before any reply byte.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Delay before the first retry (before jitter); doubles per retry.
    pub base_delay: Duration,
    /// Longest delay, and longest `Retry-After` honoured.
    pub max_delay: Duration,
}

impl RetryPolicy {
    /// The delay before retry number `retry` (1-based): `Retry-After` when the runtime
    /// sent one, else `base · 2^(retry-1)` capped at `max_delay`, with "equal jitter"
    /// (uniform in the upper half). `None` when `Retry-After` asks for longer than
    /// `max_delay` (waiting that long inside a task is worse than failing it).
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if let Some(ra) = retry_after {
            return (ra <= self.max_delay).then_some(ra);
        }
        let exp = self
            .base_delay
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20))
            .min(self.max_delay);
        let half = exp / 2;
        let jitter = rand::rng().random_range(0..=half.as_millis() as u64);
        Some(half + Duration::from_millis(jitter))
    }
}

/// Parses `Retry-After`: delay-seconds or an HTTP-date (relative to `now`; a date in
/// the past is zero).
pub fn parse_retry_after(value: &HeaderValue, now: DateTime<Utc>) -> Option<Duration> {
    let s = value.to_str().ok()?.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = DateTime::parse_from_rfc2822(s).ok()?.with_timezone(&Utc);
    Some((when - now).to_std().unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        let now = DateTime::parse_from_rfc3339("2025-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            parse_retry_after(&HeaderValue::from_static("3"), now),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            parse_retry_after(
                &HeaderValue::from_static("Wed, 01 Jan 2025 00:00:05 GMT"),
                now
            ),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            parse_retry_after(
                &HeaderValue::from_static("Tue, 31 Dec 2024 00:00:05 GMT"),
                now
            ),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after(&HeaderValue::from_static("soon"), now),
            None
        );
    }

    #[test]
    fn backoff_grows_with_jitter_and_honours_retry_after() {
        let p = RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(2),
        };
        for _ in 0..100 {
            let d1 = p.delay(1, None).unwrap();
            assert!(
                d1 >= Duration::from_millis(100) && d1 <= Duration::from_millis(200),
                "{d1:?}"
            );
            let d3 = p.delay(3, None).unwrap();
            assert!(
                d3 >= Duration::from_millis(400) && d3 <= Duration::from_millis(800),
                "{d3:?}"
            );
            let d9 = p.delay(9, None).unwrap();
            assert!(d9 <= Duration::from_secs(2));
        }
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(1))),
            Some(Duration::from_secs(1))
        );
        assert_eq!(p.delay(1, Some(Duration::from_secs(60))), None);
    }
}
