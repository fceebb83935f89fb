//! The failure texts of the `a2a` kind: the shared upstream errors
//! ([`UpstreamError`]) name the AgentCore runtime; for this kind the peer is "the A2A
//! agent", in the public reason and in the logged detail alike.

use crate::upstream::errors::UpstreamError;

/// The public reason of `e` ([`UpstreamError::public_reason`]) for an A2A agent: the
/// shared reasons name the AgentCore runtime where the peer is the agent.
pub fn public_reason(e: &UpstreamError) -> String {
    name_the_agent(&e.public_reason())
}

/// The logged detail of `e` (its `Display`) for an A2A agent, named as in
/// [`public_reason`].
pub fn detail(e: &UpstreamError) -> String {
    name_the_agent(&e.to_string())
}

/// `text` of the shared upstream errors with the peer named "the A2A agent" (both
/// "the AgentCore runtime …" and a leading "AgentCore runtime answered HTTP …").
fn name_the_agent(text: &str) -> String {
    text.replace("the AgentCore runtime", "the A2A agent")
        .replace("AgentCore runtime", "the A2A agent")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::upstream::TimeoutKind;
    use crate::upstream::errors::{StatusError, UpstreamError};

    /// Every shared reason names the A2A agent, in the caller's text and in the log's.
    #[test]
    fn the_shared_reasons_name_the_a2a_agent() {
        let html = StatusError::from_response(
            501,
            &http::HeaderMap::new(),
            b"<html><body>nope</body></html>",
            None,
        );
        let errors = [
            UpstreamError::status(html),
            UpstreamError::Connect("tcp connect error".into()),
            UpstreamError::Send("boom".into()),
            UpstreamError::Broken {
                bytes: 12,
                reason: "eof".into(),
            },
            UpstreamError::Timeout {
                kind: TimeoutKind::Read,
                after: Duration::from_secs(9),
            },
            UpstreamError::Truncated,
        ];
        for e in &errors {
            for text in [public_reason(e), detail(e)] {
                assert!(!text.contains("AgentCore"), "{text}");
                assert!(text.contains("the A2A agent"), "{text}");
                assert!(!text.contains("the the"), "{text}");
            }
        }
        assert!(
            public_reason(&errors[0]).starts_with("the A2A agent answered HTTP 501"),
            "{}",
            public_reason(&errors[0])
        );
    }
}
