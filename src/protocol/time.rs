//! RFC 3339 timestamps in UTC with millisecond precision (A2A spec §5.6.1).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serializer};

/// A point in time, always UTC.
pub type Timestamp = DateTime<Utc>;

/// The current time, truncated to whole milliseconds so that a value read back from
/// JSON or a database compares equal to the value written.
pub fn now() -> Timestamp {
    let t = Utc::now();
    DateTime::from_timestamp_millis(t.timestamp_millis()).unwrap_or(t)
}

/// Formats `t` as `2025-10-28T10:30:00.000Z`.
pub fn format(t: &Timestamp) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses an RFC 3339 timestamp with any offset and converts it to UTC.
///
/// # Errors
/// Returns the chrono parse error for text that is not RFC 3339.
pub fn parse(s: &str) -> Result<Timestamp, chrono::ParseError> {
    Ok(DateTime::parse_from_rfc3339(s)?.with_timezone(&Utc))
}

/// serde helpers for `Option<Timestamp>` fields in the A2A millisecond format.
pub mod opt_millis {
    use super::*;

    /// Serializes `Some(t)` as an RFC 3339 string with milliseconds.
    pub fn serialize<S: Serializer>(v: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(t) => s.serialize_str(&format(t)),
            None => s.serialize_none(),
        }
    }

    /// Deserializes an RFC 3339 string (any offset) or `null`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        let v: Option<String> = Option::deserialize(d)?;
        match v {
            None => Ok(None),
            Some(s) => parse(&s).map(Some).map_err(|e| {
                serde::de::Error::custom(format!("invalid RFC 3339 timestamp {s:?}: {e}"))
            }),
        }
    }
}
