//! The opaque ListTasks page token: a keyset position over (status timestamp desc, id asc).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// A position in the ListTasks order: the last task of the previous page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageCursor {
    /// That task's status timestamp in milliseconds since the Unix epoch.
    pub status_millis: i64,
    /// That task's id.
    pub id: String,
}

impl PageCursor {
    /// Encodes the cursor as an opaque URL-safe token.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("v1:{}:{}", self.status_millis, self.id))
    }

    /// Decodes a token made by [`encode`](Self::encode); `None` for anything else,
    /// including an id with a NUL (no task id has one, and PostgreSQL refuses one in
    /// a text parameter).
    pub fn decode(token: &str) -> Option<Self> {
        let raw = URL_SAFE_NO_PAD.decode(token).ok()?;
        let raw = String::from_utf8(raw).ok()?;
        let rest = raw.strip_prefix("v1:")?;
        let (millis, id) = rest.split_once(':')?;
        if id.contains('\0') {
            return None;
        }
        Some(Self {
            status_millis: millis.parse().ok()?,
            id: id.to_owned(),
        })
    }

    /// Whether a task at (`millis`, `id`) comes after this cursor in the order.
    pub fn is_before(&self, millis: i64, id: &str) -> bool {
        millis < self.status_millis || (millis == self.status_millis && id > self.id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let c = PageCursor {
            status_millis: 1_700_000_000_123,
            id: "a:b".into(),
        };
        assert_eq!(PageCursor::decode(&c.encode()), Some(c));
        for bad in [
            "",
            "!!",
            "djE6",
            "djE6eDp5",
            &URL_SAFE_NO_PAD.encode("v2:1:a"),
            &URL_SAFE_NO_PAD.encode("v1:1:a\0b"),
        ] {
            assert_eq!(PageCursor::decode(bad), None, "{bad}");
        }
    }
}
