//! The agent's input modes: which media types a message part may have (the card's
//! `defaultInputModes` and each skill's `inputModes`, spec §4.4.1, §4.4.5). A part
//! whose media type none of them accepts is refused with
//! `ContentTypeNotSupportedError` (-32005) before the executor sees the message.
//!
//! Matching rules:
//! - A part's media type is its `mediaType`; without one, a text part is
//!   `text/plain`, a data part `application/json`, and a file part (raw bytes or a
//!   URL) `application/octet-stream` (the type of unknown content, RFC 9110 §8.3).
//! - Only the essence counts: parameters (`; charset=utf-8`) are dropped on both
//!   sides, and the comparison ignores ASCII case.
//! - A configured `*/*` accepts every part; `type/*` (for example `image/*` or
//!   `text/*`) accepts every subtype of that type. Nothing else is a wildcard:
//!   `application/json` does not accept `application/ld+json`.
//! - A request names no skill, so a part is accepted when the default modes or any
//!   skill's modes accept it.

use crate::config::parse_media_range;
use crate::error::A2aError;
use crate::protocol::{AgentCard, Message, Part, PartContent};

/// The media ranges a message part is checked against. Empty accepts everything
/// (a handler built without a card, as in tests of executors).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputModes {
    /// Normalized ranges (`type/subtype`, lower case, no parameters).
    ranges: Vec<(String, String)>,
}

/// The media type a part is checked as (see the module rules).
pub fn part_media_type(part: &Part) -> String {
    if let Some(mt) = part.media_type.as_deref().filter(|m| !m.trim().is_empty()) {
        return mt.to_owned();
    }
    match part.content {
        PartContent::Text(_) => "text/plain",
        PartContent::Data(_) => "application/json",
        PartContent::Raw(_) | PartContent::Url(_) => "application/octet-stream",
    }
    .to_owned()
}

impl InputModes {
    /// Accepts what `modes` lists. Entries that are not media types are skipped
    /// (configuration validation refuses them first).
    pub fn new<'a>(modes: impl IntoIterator<Item = &'a str>) -> Self {
        let mut ranges: Vec<(String, String)> = modes
            .into_iter()
            .filter_map(|m| parse_media_range(m).ok())
            .collect();
        ranges.sort();
        ranges.dedup();
        Self { ranges }
    }

    /// What `card` declares: its `defaultInputModes` and every skill's `inputModes`.
    pub fn from_card(card: &AgentCard) -> Self {
        Self::new(
            card.default_input_modes
                .iter()
                .chain(card.skills.iter().flat_map(|s| s.input_modes.iter()))
                .map(String::as_str),
        )
    }

    /// Everything is accepted (no modes configured).
    pub fn accepts_all(&self) -> bool {
        self.ranges.is_empty() || self.ranges.iter().any(|(t, s)| t == "*" && s == "*")
    }

    /// Whether media type `mt` is accepted. A value that is not a media type is not.
    pub fn accepts(&self, mt: &str) -> bool {
        if self.accepts_all() {
            return true;
        }
        let Ok((ty, sub)) = parse_media_range(mt) else {
            return false;
        };
        self.ranges
            .iter()
            .any(|(t, s)| *t == ty && (s == "*" || *s == sub))
    }

    /// Checks every part of `message`.
    ///
    /// # Errors
    /// [`A2aError::ContentTypeNotSupported`] (-32005) naming the first refused part,
    /// its media type and the accepted ones.
    pub fn check(&self, message: &Message) -> Result<(), A2aError> {
        if self.accepts_all() {
            return Ok(());
        }
        for (i, part) in message.parts.iter().enumerate() {
            let mt = part_media_type(part);
            if !self.accepts(&mt) {
                let shown: String = mt.chars().take(128).collect();
                let accepted: Vec<String> = self
                    .ranges
                    .iter()
                    .map(|(t, s)| format!("{t}/{s}"))
                    .collect();
                return Err(A2aError::ContentTypeNotSupported(format!(
                    "message.parts[{i}] has media type {shown:?}, which this agent does not accept; it accepts {}",
                    accepted.join(", ")
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn part(v: serde_json::Value) -> Part {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn default_media_types_of_parts() {
        assert_eq!(part_media_type(&part(json!({"text": "x"}))), "text/plain");
        assert_eq!(
            part_media_type(&part(json!({"data": {"a": 1}}))),
            "application/json"
        );
        assert_eq!(
            part_media_type(&part(json!({"url": "https://x/y"}))),
            "application/octet-stream"
        );
        assert_eq!(
            part_media_type(&part(json!({"raw": "AAE=", "mediaType": "image/png"}))),
            "image/png"
        );
        assert_eq!(
            part_media_type(&part(json!({"text": "# t", "mediaType": "text/markdown"}))),
            "text/markdown"
        );
    }

    #[test]
    fn matching_rules() {
        let m = InputModes::new(["text/plain", "image/*", "Application/JSON; charset=utf-8"]);
        for ok in [
            "text/plain",
            "TEXT/Plain; charset=utf-8",
            "image/png",
            "image/svg+xml",
            "application/json",
        ] {
            assert!(m.accepts(ok), "{ok}");
        }
        for bad in [
            "text/markdown",
            "application/ld+json",
            "video/mp4",
            "text",
            "",
            "*/*",
        ] {
            assert!(!m.accepts(bad), "{bad}");
        }
        assert!(InputModes::new(["*/*"]).accepts("video/mp4"));
        assert!(InputModes::new(["text/*"]).accepts("text/csv"));
        assert!(InputModes::default().accepts("anything"));
    }

    #[test]
    fn check_names_the_refused_part() {
        let m = InputModes::new(["text/plain"]);
        let mut msg = crate::executor::new_user_text_message("hi");
        assert!(m.check(&msg).is_ok());
        msg.parts
            .push(part(json!({"raw": "AAE=", "mediaType": "image/png"})));
        let e = m.check(&msg).unwrap_err();
        assert_eq!(e.jsonrpc_code(), -32005);
        assert!(
            e.to_string().contains("parts[1]") && e.to_string().contains("image/png"),
            "{e}"
        );
    }
}
