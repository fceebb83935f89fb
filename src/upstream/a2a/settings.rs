//! [`A2aSettings`]: everything the `a2a` kind needs, as plain Rust values (the gateway's
//! `app` converts the `[upstream]` section of `kind = "a2a"` into it).

use std::time::Duration;

use crate::upstream::connection::ConnectionSettings;

/// Which A2A version the agent is spoken to in (`upstream.protocol_version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VersionChoice {
    /// From the card (1.0 when it lists a 1.0 JSON-RPC interface, else 0.3); 0.3 for
    /// an AgentCore A2A runtime.
    #[default]
    Auto,
    /// A2A 1.0.
    V1_0,
    /// A2A 0.3.
    V0_3,
}

/// Which binding the agent is called over (`upstream.protocol_binding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BindingChoice {
    /// JSON-RPC when the card lists it for the version, else HTTP+JSON (1.0).
    #[default]
    Auto,
    /// JSON-RPC.
    JsonRpc,
    /// HTTP+JSON (A2A 1.0 only).
    HttpJson,
}

/// Settings of [`A2aExecutor`](super::A2aExecutor). Build one with
/// [`for_url`](Self::for_url), then adjust the public fields.
#[derive(Debug, Clone)]
pub struct A2aSettings {
    /// The agent's JSON-RPC endpoint when its card names none that fits (always, for an
    /// AgentCore A2A runtime: `…/runtimes/{ARN}/invocations/?qualifier=…`). Ends in `/`.
    pub base_url: String,
    /// Where the agent's card is read: `<base_url>.well-known/agent-card.json`.
    pub card_url: String,
    /// The version spoken.
    pub protocol_version: VersionChoice,
    /// The binding used.
    pub protocol_binding: BindingChoice,
    /// An AgentCore A2A runtime: every call carries the runtime session header, the
    /// JSON-RPC endpoint is `base_url` whatever the card says, -32054 ("session
    /// operation in progress") is retried.
    pub agentcore: bool,
    /// StopRuntimeSession URL of an AgentCore runtime, called after a cancel; `None`
    /// disables it.
    pub stop_session_url: Option<String>,
    /// How the agent is reached: HTTP version, roots, timeouts, limits, retries,
    /// identity headers, authentication (shared with every kind; a blocking call's
    /// whole reply must be complete within `request_timeout`, one stream may last
    /// `max_stream`, `max_reply_bytes` bounds the card too; retries also cover
    /// AgentCore's -32054 "session operation in progress").
    pub connection: ConnectionSettings,
    /// After the agent's stream broke before the task settled: how long the gateway
    /// tries to get the task back (resubscribing, then polling GetTask) before it fails
    /// the task (`upstream.resume_secs`). Default 300 s.
    pub resume_for: Duration,
    /// First GetTask polling interval; doubles up to `poll_max`. Default 250 ms.
    pub poll_initial: Duration,
    /// Longest GetTask polling interval. Default 5 s.
    pub poll_max: Duration,
    /// After the agent's answer broke off (an error, not a clean end) while its task
    /// was still SUBMITTED: how long the task may stay SUBMITTED, unchanged, before the
    /// gateway takes the agent's executor for crashed and fails the task (an a2a-sdk
    /// 0.3 agent whose executor raises drops the stream and leaves the task SUBMITTED
    /// for good). Also bounds a silent resubscription in that case
    /// (`upstream.submitted_stall_secs`). Default 30 s; at most `resume_for` applies in
    /// any case.
    pub stall_for: Duration,
    /// How long the agent's card is used before it is read again when its answer has no
    /// `Cache-Control: max-age`. Default 300 s.
    pub card_refresh: Duration,
    /// The shortest time between two reads of the card (also after a failed read, and
    /// for `no-cache`; `upstream.card_min_refresh_secs`). Default 30 s.
    pub card_min_refresh: Duration,
}

impl A2aSettings {
    /// Settings for the agent at `base_url` (a final `/` is added when missing), with
    /// the defaults of `[upstream]`.
    pub fn for_url(base_url: impl Into<String>) -> Self {
        let mut base_url = base_url.into();
        let (path, query) = match base_url.split_once('?') {
            Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
            None => (base_url.clone(), None),
        };
        let path = if path.ends_with('/') {
            path
        } else {
            format!("{path}/")
        };
        base_url = match &query {
            Some(q) => format!("{path}?{q}"),
            None => path.clone(),
        };
        let card_url = match &query {
            Some(q) => format!("{path}.well-known/agent-card.json?{q}"),
            None => format!("{path}.well-known/agent-card.json"),
        };
        Self {
            base_url,
            card_url,
            protocol_version: VersionChoice::Auto,
            protocol_binding: BindingChoice::Auto,
            agentcore: false,
            stop_session_url: None,
            connection: ConnectionSettings {
                caller_header: None,
                tenant_header: None,
                ..ConnectionSettings::default()
            },
            resume_for: Duration::from_secs(300),
            poll_initial: Duration::from_millis(250),
            poll_max: Duration::from_secs(5),
            stall_for: Duration::from_secs(30),
            card_refresh: Duration::from_secs(300),
            card_min_refresh: Duration::from_secs(30),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_is_below_the_base_url() {
        let s = A2aSettings::for_url("http://127.0.0.1:9/agent");
        assert_eq!(s.base_url, "http://127.0.0.1:9/agent/");
        assert_eq!(
            s.card_url,
            "http://127.0.0.1:9/agent/.well-known/agent-card.json"
        );
        let s = A2aSettings::for_url("https://h/runtimes/x/invocations/?qualifier=DEFAULT");
        assert_eq!(
            s.card_url,
            "https://h/runtimes/x/invocations/.well-known/agent-card.json?qualifier=DEFAULT"
        );
    }
}
