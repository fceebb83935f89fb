//! The failure texts of the `a2a` kind: the shared upstream errors
//! ([`UpstreamError`]) built naming the peer "the A2A agent" ([`A2A_AGENT`]), in the
//! public reason and in the logged detail alike.

use crate::upstream::errors::{Peer, UpstreamError};

/// How the `a2a` kind's failure texts name its upstream.
pub const A2A_AGENT: Peer = Peer {
    the: "the A2A agent",
    lead: "the A2A agent",
};

/// The public reason of `e` ([`UpstreamError::public_reason_for`]) naming the A2A agent.
pub fn public_reason(e: &UpstreamError) -> String {
    e.public_reason_for(A2A_AGENT)
}

/// The logged detail of `e` ([`UpstreamError::detail_for`]) naming the A2A agent.
pub fn detail(e: &UpstreamError) -> String {
    e.detail_for(A2A_AGENT)
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
