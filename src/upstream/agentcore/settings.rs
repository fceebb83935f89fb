//! [`AgentCoreSettings`]: everything the AgentCore executor needs, as plain Rust
//! values (the gateway's `app` converts the `[upstream]` config section into it).

use crate::upstream::connection::ConnectionSettings;

/// Settings of [`AgentCoreExecutor`](super::AgentCoreExecutor). Build one with
/// [`for_url`](Self::for_url) (the gateway's `app` derives the URL from the runtime ARN
/// in `[upstream]`), then adjust the public fields (the shared ones in
/// [`connection`](Self::connection)).
#[derive(Debug, Clone)]
pub struct AgentCoreSettings {
    /// The invocation URL: `https://bedrock-agentcore.{region}.amazonaws.com/runtimes/{ARN}/invocations?qualifier=…`
    /// (contract §1.1) or an override such as `http://127.0.0.1:8080/invocations`.
    pub invocation_url: String,
    /// The StopRuntimeSession URL used on cancel (contract §1.5); `None` disables it.
    pub stop_session_url: Option<String>,
    /// How the runtime is reached: HTTP version, roots, timeouts, limits, retries,
    /// identity headers, authentication (shared with every kind).
    pub connection: ConnectionSettings,
    /// Also send the whole A2A `message`, `taskId` and `contextId` in the payload.
    /// Default false.
    pub include_message: bool,
    /// Call StopRuntimeSession when a task is canceled. Default true.
    pub stop_session_on_cancel: bool,
    /// Send the verified caller (the task owner) as
    /// `X-Amzn-Bedrock-AgentCore-Runtime-User-Id` (config `user_id = "caller"`).
    /// Default false.
    pub user_id: bool,
}

impl AgentCoreSettings {
    /// Settings for an explicit invocation URL (a local runtime, a VPC endpoint). The
    /// stop-session URL is the same URL with a final `/invocations` path segment
    /// replaced by `/stopruntimesession` (none when the path does not end so).
    pub fn for_url(invocation_url: impl Into<String>) -> Self {
        let invocation_url = invocation_url.into();
        let stop_session_url = stop_url_for(&invocation_url);
        Self {
            invocation_url,
            stop_session_url,
            connection: ConnectionSettings::default(),
            include_message: false,
            stop_session_on_cancel: true,
            user_id: false,
        }
    }
}

fn stop_url_for(invocation_url: &str) -> Option<String> {
    let (path, query) = match invocation_url.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (invocation_url, None),
    };
    let base = path.trim_end_matches('/').strip_suffix("/invocations")?;
    Some(match query {
        Some(q) => format!("{base}/stopruntimesession?{q}"),
        None => format!("{base}/stopruntimesession"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::auth::{AuthSettings, OAuth2Settings, TokenEndpoint};
    use secrecy::SecretString;
    use std::time::Duration;

    #[test]
    fn stop_url_for_override() {
        assert_eq!(
            AgentCoreSettings::for_url("http://127.0.0.1:8080/invocations")
                .stop_session_url
                .as_deref(),
            Some("http://127.0.0.1:8080/stopruntimesession")
        );
        assert_eq!(
            AgentCoreSettings::for_url("http://h/x").stop_session_url,
            None
        );
    }

    #[test]
    fn debug_hides_secrets() {
        let mut s = AgentCoreSettings::for_url("http://h/invocations");
        s.connection.auth = AuthSettings::OAuth2(OAuth2Settings {
            client_id: "cid".into(),
            client_secret: SecretString::from("very-secret-value"),
            scope: None,
            endpoint: TokenEndpoint::Url("http://t".into()),
            refresh_before_expiry: Duration::from_secs(30),
        });
        assert!(!format!("{s:?}").contains("very-secret"));
        s.connection.auth = AuthSettings::Bearer(SecretString::from("very-secret-value"));
        assert!(!format!("{s:?}").contains("very-secret"));
    }
}
