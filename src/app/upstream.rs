//! The executor `[upstream]` describes: the one `match` on the runtime kind (today the
//! AgentCore executor, with its readiness check "a token is obtainable"); and the
//! conversion of the `[upstream]` section into the executor's own settings
//! ([`agentcore_settings`]), so that `upstream` never reads the configuration.

use std::fmt;
use std::sync::Arc;

use super::AppError;
use crate::config::{
    A2aProtocolBinding, A2aProtocolVersion, A2aUpstreamConfig, AgentCoreUpstreamConfig,
    AgentRuntimeArn, AuthKind, Config, DEFAULT_SESSION_NAME, HttpVersion as Cfg, UpstreamConfig,
    UserId,
};
use crate::executor::AgentExecutor;
use crate::server::ReadinessCheck;
use crate::upstream::a2a::{A2aExecutor, A2aSettings, BindingChoice, UpstreamCard, VersionChoice};
use crate::upstream::auth::{AssumeRoleSettings, CredentialKey, CredentialPool, SigV4Settings};
use crate::upstream::{
    AgentCoreExecutor, AgentCoreSettings, AuthSettings, ConnectionSettings, HttpVersion,
    OAuth2Settings, TokenEndpoint, UpstreamError,
};

/// Builds the executor for `[upstream]`, plus a readiness check ("a token is
/// obtainable") when it has one, with credentials of its own.
///
/// # Errors
/// No upstream configured, or settings the executor refuses.
pub fn build_executor(
    config: &Config,
) -> Result<(Arc<dyn AgentExecutor>, Option<ReadinessCheck>), AppError> {
    let (executor, ready, _) = build_executor_parts(config, &CredentialPool::new())?;
    Ok((executor, ready))
}

/// The credentials `auth` describes, taken from `pool` when an agent built before
/// uses the same credential (one cache, one fetch for both), else built and kept there
/// (see [`CredentialPool`]). OAuth tokens are fetched by a client with `ca_file` and
/// `connect_timeout`.
///
/// # Errors
/// [`UpstreamError::Settings`] for an unreadable `ca_file`.
pub fn pooled_credentials(
    pool: &CredentialPool,
    auth: &AuthSettings,
    ca_file: Option<&std::path::Path>,
    connect_timeout: std::time::Duration,
) -> Result<Arc<dyn crate::upstream::Credentials>, UpstreamError> {
    pool.get_or_build(CredentialKey::of(auth, ca_file, connect_timeout), || {
        crate::upstream::auth::from_settings(auth, || {
            crate::upstream::http::build_client(HttpVersion::Auto, ca_file, connect_timeout)
        })
    })
}

/// The credentials of `connection`'s auth, from `pool` ([`pooled_credentials`]).
fn connection_credentials(
    pool: &CredentialPool,
    connection: &ConnectionSettings,
) -> Result<Arc<dyn crate::upstream::Credentials>, UpstreamError> {
    pooled_credentials(
        pool,
        &connection.auth,
        connection.ca_file.as_deref(),
        connection.connect_timeout,
    )
}

/// What [`build_executor_parts`] builds: the executor, its readiness check, and for an
/// `a2a` upstream the executor as such.
pub type ExecutorParts = (
    Arc<dyn AgentExecutor>,
    Option<ReadinessCheck>,
    Option<A2aExecutor>,
);

/// [`build_executor`] with the credentials from `pool` ([`pooled_credentials`]), and for
/// an `a2a` upstream its executor as such (for the gateway's card to follow the agent's
/// card: [`super::Gateway::follow_upstream_card`]): what `serve` and a `SIGHUP` reload do
/// for the agent at `/` and each agent of `[agents.<id>]`, with one pool.
///
/// # Errors
/// As [`build_executor`].
pub fn build_executor_parts(
    config: &Config,
    pool: &CredentialPool,
) -> Result<ExecutorParts, AppError> {
    // One arm per runtime kind (`upstream.kind`). A new kind adds: its folder under
    // `src/upstream/` (an `impl Runtime` run by `RuntimeExecutor`, passing
    // `upstream/conformance.rs` against the mock), its variant of `UpstreamConfig` (its own
    // keys, `[upstream.auth]` shared) and this arm, which converts that variant into the
    // kind's settings and builds its executor.
    match &config.upstream {
        UpstreamConfig::AgentCore(c) => {
            let executor = agentcore_executor(agentcore_settings(c)?, pool)?;
            let probe = executor.clone();
            let ready: ReadinessCheck = Arc::new(move || {
                let probe = probe.clone();
                Box::pin(async move { probe.token_ready().await })
            });
            Ok((Arc::new(executor), Some(ready), None))
        }
        UpstreamConfig::A2a(c) => {
            let executor = a2a_executor(a2a_settings(c)?, pool)?;
            let ready = a2a_readiness(&executor);
            Ok((Arc::new(executor.clone()), Some(ready), Some(executor)))
        }
    }
}

/// The AgentCore executor of `settings`, its credentials from `pool`.
fn agentcore_executor(
    settings: AgentCoreSettings,
    pool: &CredentialPool,
) -> Result<AgentCoreExecutor, UpstreamError> {
    let credentials = connection_credentials(pool, &settings.connection)?;
    AgentCoreExecutor::with_credentials(settings, credentials)
}

/// The A2A executor of `settings`, its credentials from `pool`.
fn a2a_executor(
    settings: A2aSettings,
    pool: &CredentialPool,
) -> Result<A2aExecutor, UpstreamError> {
    let credentials = connection_credentials(pool, &settings.connection)?;
    A2aExecutor::with_credentials(settings, credentials)
}

/// An `a2a` upstream's executor and the agent's card read at start (`None`: it could
/// not be read then), for the gateway's card to follow the agent's
/// ([`super::Gateway::follow_upstream_card`]).
#[derive(Debug, Clone)]
pub struct UpstreamCardSource {
    /// The executor, which reads and keeps the agent's card.
    pub executor: A2aExecutor,
    /// The card read at start.
    pub card: Option<Arc<UpstreamCard>>,
}

/// How long `serve` waits for an `a2a` agent's card before it starts without it.
const CARD_AT_START: std::time::Duration = std::time::Duration::from_secs(10);

/// [`build_executor`], and for an `a2a` upstream its executor with its card, read now
/// (at most 10 s): no card when the agent is unreachable or its card unusable (logged;
/// `serve` starts anyway, `/readyz` says why until the card is read, and the gateway's
/// card is `[agent]`'s until then).
///
/// # Errors
/// As [`build_executor`].
pub async fn build_executor_with_card(
    config: &Config,
    pool: &CredentialPool,
) -> Result<
    (
        Arc<dyn AgentExecutor>,
        Option<ReadinessCheck>,
        Option<UpstreamCardSource>,
    ),
    AppError,
> {
    let UpstreamConfig::A2a(c) = &config.upstream else {
        let (executor, ready, _) = build_executor_parts(config, pool)?;
        return Ok((executor, ready, None));
    };
    let executor = a2a_executor(a2a_settings(c)?, pool)?;
    let card = match tokio::time::timeout(CARD_AT_START, executor.card()).await {
        Ok(Ok(card)) => Some(card),
        Ok(Err(e)) => {
            tracing::warn!(reason = %crate::upstream::a2a::executor::public_reason(&e), detail = %crate::upstream::a2a::executor::detail(&e), "no usable card from the upstream A2A agent; serving [agent]'s card, not ready until it is read");
            None
        }
        Err(_) => {
            tracing::warn!(
                "the upstream A2A agent's card was not read within 10 s; serving [agent]'s card, not ready until it is read"
            );
            None
        }
    };
    let ready = a2a_readiness(&executor);
    let source = UpstreamCardSource {
        executor: executor.clone(),
        card,
    };
    Ok((Arc::new(executor), Some(ready), Some(source)))
}

/// The readiness check of an `a2a` upstream: its card is read (tried again at each
/// probe until it is), and a token is obtainable.
pub fn a2a_readiness(executor: &A2aExecutor) -> ReadinessCheck {
    let probe = executor.clone();
    Arc::new(move || {
        let probe = probe.clone();
        Box::pin(async move { probe.ready().await })
    })
}

/// Converts the loaded `[upstream]` section of kind `a2a` into the A2A executor's
/// settings: the agent's base URL and card URL
/// ([`A2aUpstreamConfig::base_url`], [`A2aUpstreamConfig::card_url`]), the version
/// choice, the resume bounds (`resume_secs`, `submitted_stall_secs`),
/// `card_min_refresh_secs`, AgentCore specifics for `agent_runtime_arn`, and the keys shared with the
/// `agentcore` kind (timeouts, limits, retries, identity headers, auth).
///
/// # Errors
/// [`UpstreamError::Settings`] when no upstream is configured, a header name is invalid,
/// or an auth key is missing.
pub fn a2a_settings(c: &A2aUpstreamConfig) -> Result<A2aSettings, UpstreamError> {
    let settings_err = |e: &dyn fmt::Display| UpstreamError::Settings(e.to_string());
    let base = c.base_url().map_err(|e| settings_err(&e))?;
    let card = c.card_url().map_err(|e| settings_err(&e))?;
    let mut s = A2aSettings::for_url(base.as_str());
    s.card_url = card.to_string();
    s.protocol_version = match c.protocol_version {
        A2aProtocolVersion::Auto => VersionChoice::Auto,
        A2aProtocolVersion::V1_0 => VersionChoice::V1_0,
        A2aProtocolVersion::V0_3 => VersionChoice::V0_3,
    };
    s.protocol_binding = match c.protocol_binding {
        A2aProtocolBinding::Auto => BindingChoice::Auto,
        A2aProtocolBinding::JsonRpc => BindingChoice::JsonRpc,
        A2aProtocolBinding::HttpJson => BindingChoice::HttpJson,
    };
    s.agentcore = c.is_agentcore();
    s.resume_for = std::time::Duration::from_secs(c.resume_secs);
    s.stall_for = std::time::Duration::from_secs(c.submitted_stall_secs);
    s.card_min_refresh = std::time::Duration::from_secs(c.card_min_refresh_secs);
    s.card_refresh = std::time::Duration::from_secs(c.card_refresh_secs);
    s.stop_session_url = c.stop_session_url().map(|u| u.to_string());
    s.connection = connection_settings(&c.connection)?;
    Ok(s)
}

/// Converts the loaded `[upstream]` section of kind `agentcore` (secret files already read by the config
/// loader) into the AgentCore executor's settings. The URLs come from
/// [`AgentCoreUpstreamConfig::invocation_url`] and `stop_session_url` (none when it cannot be
/// derived or `stop_session_on_cancel` is off); timeouts are whole seconds; retry
/// delays keep their defaults.
///
/// # Errors
/// [`UpstreamError::Settings`] when no upstream is configured, a header name is
/// invalid, or an OAuth / bearer key the loader should have required is missing.
pub fn agentcore_settings(c: &AgentCoreUpstreamConfig) -> Result<AgentCoreSettings, UpstreamError> {
    let settings_err = |e: &dyn fmt::Display| UpstreamError::Settings(e.to_string());
    let url = c.invocation_url().map_err(|e| settings_err(&e))?;
    let mut s = AgentCoreSettings::for_url(url.as_str());
    s.stop_session_url = c.stop_session_url().ok().map(|u| u.to_string());
    s.stop_session_on_cancel = c.stop_session_on_cancel;
    s.connection = connection_settings(c)?;
    s.include_message = c.include_message;
    s.user_id = c.user_id == UserId::Caller;
    Ok(s)
}

/// Converts the keys of `[upstream]` every kind shares (HTTP version, `ca_file`, the
/// `*_timeout_secs`, `max_stream_secs`, the byte limits, `max_retries`, the identity
/// headers and `[upstream.auth]`) into [`ConnectionSettings`]; timeouts are whole
/// seconds, retry delays keep their defaults.
///
/// # Errors
/// [`UpstreamError::Settings`] when a header name is invalid, or an OAuth / bearer /
/// SigV4 key the loader should have required is missing.
pub fn connection_settings(
    c: &AgentCoreUpstreamConfig,
) -> Result<ConnectionSettings, UpstreamError> {
    let header = |key: &str, name: &str| {
        if name.is_empty() {
            return Ok(None);
        }
        http::HeaderName::from_bytes(name.as_bytes())
            .map(Some)
            .map_err(|_| {
                UpstreamError::Settings(format!(
                    "upstream.{key} `{name}` is not a valid HTTP header name"
                ))
            })
    };
    let a = &c.auth;
    let missing = |key: &str| UpstreamError::Settings(format!("upstream.auth.{key} is required"));
    let auth = match a.kind {
        AuthKind::None => AuthSettings::None,
        AuthKind::Forward => AuthSettings::Forward,
        AuthKind::Bearer => AuthSettings::Bearer(a.token.clone().ok_or_else(|| missing("token"))?),
        AuthKind::OAuth2 => AuthSettings::OAuth2(OAuth2Settings {
            client_id: a.client_id.clone().ok_or_else(|| missing("client_id"))?,
            client_secret: a
                .client_secret
                .clone()
                .ok_or_else(|| missing("client_secret"))?,
            scope: a.scope.clone(),
            endpoint: match (&a.token_url, &a.discovery_url) {
                (Some(t), _) => TokenEndpoint::Url(t.to_string()),
                (None, Some(d)) => TokenEndpoint::Discovery(d.to_string()),
                (None, None) => return Err(missing("token_url")),
            },
            refresh_before_expiry: a.refresh_before_expiry(),
        }),
        AuthKind::SigV4 => AuthSettings::SigV4(SigV4Settings {
            region: c
                .signing_region()
                .ok_or_else(|| missing("region"))?
                .to_owned(),
            assume_role: a.assume_role_arn.as_ref().map(|arn| AssumeRoleSettings {
                role_arn: arn.clone(),
                external_id: a.external_id.clone(),
                session_name: a
                    .session_name
                    .clone()
                    .unwrap_or_else(|| DEFAULT_SESSION_NAME.to_owned()),
            }),
            refresh_before_expiry: a.credentials_refresh(),
        }),
    };
    Ok(ConnectionSettings {
        http_version: match c.http_version {
            Cfg::Auto => HttpVersion::Auto,
            Cfg::Http2 => HttpVersion::Http2,
            Cfg::Http1 => HttpVersion::Http1,
        },
        ca_file: c.ca_file.clone(),
        connect_timeout: c.connect_timeout(),
        read_timeout: c.read_timeout(),
        write_timeout: c.write_timeout(),
        pool_timeout: c.pool_timeout(),
        request_timeout: c.request_timeout(),
        max_stream: c.max_stream(),
        max_event_bytes: usize::try_from(c.max_event_bytes).unwrap_or(usize::MAX),
        max_stream_bytes: c.max_stream_bytes,
        max_reply_bytes: c.max_reply_bytes,
        max_retries: c.max_retries,
        caller_header: header("caller_header", &c.caller_header)?,
        tenant_header: header("tenant_header", &c.tenant_header)?,
        auth,
        ..ConnectionSettings::default()
    })
}

/// AgentCore settings for a hosted runtime given by its ARN alone: the invocation and
/// stop-session URLs are derived from the ARN
/// (`arn:aws:bedrock-agentcore:{region}:{account}:runtime/{id}`, fully percent-encoded
/// as one path segment, region taken from the ARN) and `qualifier` (`DEFAULT` when
/// `None`). Auth defaults to [`AuthSettings::None`].
///
/// # Errors
/// [`UpstreamError::Settings`] naming `agent_runtime_arn` when the ARN is malformed, or
/// `qualifier` when it is not an endpoint name.
pub fn agentcore_settings_for_arn(
    arn: &str,
    qualifier: Option<&str>,
) -> Result<AgentCoreSettings, UpstreamError> {
    let parsed: AgentRuntimeArn = arn
        .parse()
        .map_err(|e| UpstreamError::Settings(format!("upstream.agent_runtime_arn `{arn}`: {e}")))?;
    let qualifier = qualifier.unwrap_or("DEFAULT");
    if qualifier.is_empty()
        || !qualifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(UpstreamError::Settings(format!(
            "upstream.qualifier `{qualifier}` must be an endpoint name ([A-Za-z0-9_-])"
        )));
    }
    let mut s = AgentCoreSettings::for_url(parsed.action_url("invocations", qualifier));
    s.stop_session_url = Some(parsed.action_url("stopruntimesession", qualifier));
    Ok(s)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn derives_urls_from_arn() {
        let s = agentcore_settings_for_arn(
            "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/my_agent-AbC123",
            None,
        )
        .unwrap();
        assert_eq!(
            s.invocation_url,
            "https://bedrock-agentcore.eu-west-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aeu-west-1%3A123456789012%3Aruntime%2Fmy_agent-AbC123/invocations?qualifier=DEFAULT"
        );
        assert!(
            s.stop_session_url
                .unwrap()
                .contains("/stopruntimesession?qualifier=DEFAULT")
        );
    }

    #[test]
    fn a2a_resume_keys_reach_the_settings() {
        let c: crate::config::UpstreamConfig = toml::from_str(
            "kind = \"a2a\"\nurl = \"http://h/\"\nresume_secs = 60\nsubmitted_stall_secs = 7\ncard_min_refresh_secs = 2\ncard_refresh_secs = 9",
        )
        .unwrap();
        let crate::config::UpstreamConfig::A2a(c) = c else {
            panic!("{c:?}")
        };
        let s = a2a_settings(&c).unwrap();
        assert_eq!(s.resume_for, Duration::from_secs(60));
        assert_eq!(s.stall_for, Duration::from_secs(7));
        assert_eq!(s.card_min_refresh, Duration::from_secs(2));
        assert_eq!(s.card_refresh, Duration::from_secs(9));
    }

    #[test]
    fn malformed_arn_names_the_key() {
        for arn in [
            "",
            "arn:aws:s3:::bucket",
            "arn:aws:bedrock-agentcore:us-east-1:123:runtime/x",
            "arn:aws:bedrock-agentcore::123456789012:runtime/x",
            "arn:aws:bedrock-agentcore:us-east-1:123456789012:agent/x",
        ] {
            let e = agentcore_settings_for_arn(arn, None)
                .unwrap_err()
                .to_string();
            assert!(e.contains("upstream.agent_runtime_arn"), "{e}");
        }
        let e = agentcore_settings_for_arn(
            "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/x",
            Some("a b"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("upstream.qualifier"), "{e}");
    }

    #[test]
    fn converts_the_config_section() {
        let toml = r#"
            agent_runtime_arn = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-1"
            qualifier = "prod"
            http_version = "http2"
            read_timeout_secs = 60
            max_retries = 1
            [auth]
            kind = "oauth2"
            client_id = "cid"
            client_secret = "very-secret-value"
            scope = "a/invoke"
            discovery_url = "https://idp.example.com/.well-known/openid-configuration"
            refresh_before_expiry_secs = 120
        "#;
        let c: AgentCoreUpstreamConfig = toml::from_str(toml).unwrap();
        let s = agentcore_settings(&c).unwrap();
        assert!(
            s.invocation_url.starts_with(
                "https://bedrock-agentcore.us-west-2.amazonaws.com/runtimes/arn%3Aaws"
            )
        );
        assert!(
            s.invocation_url.ends_with("/invocations?qualifier=prod"),
            "{}",
            s.invocation_url
        );
        assert!(
            s.stop_session_url
                .as_deref()
                .unwrap()
                .ends_with("/stopruntimesession?qualifier=prod")
        );
        assert_eq!(s.connection.http_version, HttpVersion::Http2);
        assert_eq!(s.connection.read_timeout, Duration::from_secs(60));
        assert_eq!(s.connection.max_retries, 1);
        let AuthSettings::OAuth2(o) = &s.connection.auth else {
            panic!("{:?}", s.connection.auth)
        };
        assert_eq!(
            o.endpoint,
            TokenEndpoint::Discovery(
                "https://idp.example.com/.well-known/openid-configuration".into()
            )
        );
        assert_eq!(o.refresh_before_expiry, Duration::from_secs(120));
        assert_eq!(
            s.connection.caller_header.as_ref().map(|h| h.as_str()),
            Some("x-amzn-bedrock-agentcore-runtime-custom-caller")
        );
        let c: AgentCoreUpstreamConfig = toml::from_str(
            "url = \"http://h/invocations\"\ncaller_header = \"X-Who\"\ntenant_header = \"\"\n[auth]\nkind = \"forward\"",
        )
        .unwrap();
        let s = agentcore_settings(&c).unwrap();
        assert_eq!(
            s.connection.caller_header.as_ref().map(|h| h.as_str()),
            Some("x-who")
        );
        assert_eq!(s.connection.tenant_header, None);
        assert!(matches!(s.connection.auth, AuthSettings::Forward));
        assert!(agentcore_settings(&AgentCoreUpstreamConfig::default()).is_err());
    }
}
