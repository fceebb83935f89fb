//! How to authenticate to the runtime, as plain values: [`AuthSettings`] and the OAuth
//! client-credentials [`OAuth2Settings`] (the gateway's `app` converts
//! `[upstream.auth]` into them).

use std::fmt;
use std::time::Duration;

use secrecy::SecretString;

/// Where the OAuth token endpoint is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenEndpoint {
    /// The token endpoint URL itself.
    Url(String),
    /// An OIDC / OAuth discovery document URL
    /// (`…/.well-known/openid-configuration`); its `token_endpoint` is fetched once
    /// and cached (runtime contract §2.2).
    Discovery(String),
}

/// OAuth 2.0 client-credentials settings (runtime contract §2.2).
#[derive(Clone)]
pub struct OAuth2Settings {
    /// The client id.
    pub client_id: String,
    /// The client secret, sent with HTTP Basic client authentication.
    pub client_secret: SecretString,
    /// Space-separated scopes; `None` lets the server grant its defaults.
    pub scope: Option<String>,
    /// Where to get tokens.
    pub endpoint: TokenEndpoint,
    /// Refresh this long before the token expires (config `refresh_before_expiry_secs`,
    /// default 30 s).
    pub refresh_before_expiry: Duration,
}

impl fmt::Debug for OAuth2Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth2Settings")
            .field("client_id", &self.client_id)
            .field("client_secret", &"[redacted]")
            .field("scope", &self.scope)
            .field("endpoint", &self.endpoint)
            .field("refresh_before_expiry", &self.refresh_before_expiry)
            .finish()
    }
}

/// AWS Signature Version 4 settings (`kind = "sigv4"`, IAM inbound auth on the runtime;
/// runtime contract §3 and §8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigV4Settings {
    /// The signing region: the runtime ARN's, or the configured one; never the URL's host.
    pub region: String,
    /// An IAM role assumed (STS `AssumeRole`) on top of the chain's credentials.
    pub assume_role: Option<AssumeRoleSettings>,
    /// Cached credentials are replaced this long before they expire (config
    /// `credentials_refresh_secs`, default 300 s).
    pub refresh_before_expiry: Duration,
}

/// STS `AssumeRole` on top of the AWS credential chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssumeRoleSettings {
    /// The role's ARN (`arn:aws:iam::123456789012:role/NAME`).
    pub role_arn: String,
    /// The `ExternalId` the role's trust policy may require.
    pub external_id: Option<String>,
    /// The `RoleSessionName` (shows in CloudTrail).
    pub session_name: String,
}

/// How the executor authenticates to the runtime (`[upstream.auth] kind`).
#[derive(Clone)]
pub enum AuthSettings {
    /// No `Authorization` header (a local runtime).
    None,
    /// A static bearer token (`kind = "bearer"`). A 401 with it fails the task.
    Bearer(SecretString),
    /// Client-credentials tokens, cached (`kind = "oauth2"`).
    OAuth2(OAuth2Settings),
    /// The caller's own verified JWT
    /// ([`CallContext::caller_token`](crate::executor::CallContext::caller_token)), per
    /// request (`kind = "forward"`). A call without one fails its task; a 401 fails it
    /// too (the runtime refused the caller's token).
    Forward,
    /// Every request signed with AWS SigV4 (`kind = "sigv4"`), credentials from the
    /// standard AWS chain, cached.
    SigV4(SigV4Settings),
}

impl fmt::Debug for AuthSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Bearer(_) => f.write_str("Bearer([redacted])"),
            Self::OAuth2(o) => f.debug_tuple("OAuth2").field(o).finish(),
            Self::Forward => f.write_str("Forward"),
            Self::SigV4(s) => f.debug_tuple("SigV4").field(s).finish(),
        }
    }
}
