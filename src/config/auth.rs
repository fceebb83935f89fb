//! `[upstream.auth]`: how the gateway authenticates to the upstream runtime.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Url;
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::error::{Invalid, nonzero};
use super::serde_util::{http_url_opt, secret_opt};

/// `[upstream.auth]`: credentials for the upstream.
///
/// After [`Config::load`](super::Config::load) the fields a kind needs are guaranteed set:
/// for `oauth2`, `client_id`, `client_secret` (filled from `client_secret_file` when that is
/// used) and exactly one of `token_url` / `discovery_url`; for `bearer`, `token` (filled from
/// `token_file` when that is used). Keys that do not belong to the chosen kind are refused.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamAuthConfig {
    /// How to authenticate. Default `none`.
    pub kind: AuthKind,
    /// OAuth2 client id (`oauth2`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// OAuth2 client secret (`oauth2`). Filled from `client_secret_file` at load when that
    /// is set instead. Never printed.
    #[serde(default, with = "secret_opt", skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<SecretString>,
    /// File holding the OAuth2 client secret (`oauth2`); read once at load, trailing newline
    /// removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret_file: Option<PathBuf>,
    /// Space-separated OAuth2 scopes to request (`oauth2`); unset requests none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// OAuth2 token endpoint (`oauth2`). Set this or `discovery_url`.
    #[serde(
        default,
        with = "http_url_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub token_url: Option<Url>,
    /// OpenID Connect discovery document whose `token_endpoint` is used (`oauth2`). Set this
    /// or `token_url`.
    #[serde(
        default,
        with = "http_url_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub discovery_url: Option<Url>,
    /// A cached token is replaced this many seconds before it expires (`oauth2`). Default 30.
    pub refresh_before_expiry_secs: u64,
    /// Static bearer token (`bearer`). Filled from `token_file` at load when that is set
    /// instead. Never printed.
    #[serde(default, with = "secret_opt", skip_serializing_if = "Option::is_none")]
    pub token: Option<SecretString>,
    /// File holding the static bearer token (`bearer`); read once at load, trailing newline
    /// removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// The SigV4 signing region (`sigv4`). Default: the region of
    /// `upstream.agent_runtime_arn`; required when there is no ARN, and must equal the
    /// ARN's when both are set. Never taken from the URL's host name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// An IAM role to assume (STS `AssumeRole`) with the credentials the standard AWS
    /// chain finds (`sigv4`); requests are then signed as that role.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assume_role_arn: Option<String>,
    /// The `ExternalId` sent with `AssumeRole` (`sigv4`, with `assume_role_arn`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
    /// The `RoleSessionName` sent with `AssumeRole` (`sigv4`, with `assume_role_arn`).
    /// Default `a2a-gateway`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_name: Option<String>,
    /// Cached AWS credentials are replaced this many seconds before they expire
    /// (`sigv4`). Default 300 (5 minutes).
    pub credentials_refresh_secs: u64,
}

impl Default for UpstreamAuthConfig {
    fn default() -> Self {
        UpstreamAuthConfig {
            kind: AuthKind::None,
            client_id: None,
            client_secret: None,
            client_secret_file: None,
            scope: None,
            token_url: None,
            discovery_url: None,
            refresh_before_expiry_secs: 30,
            token: None,
            token_file: None,
            region: None,
            assume_role_arn: None,
            external_id: None,
            session_name: None,
            credentials_refresh_secs: DEFAULT_CREDENTIALS_REFRESH_SECS,
        }
    }
}

/// The upstream authentication scheme.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthKind {
    /// OAuth2 client-credentials grant (HTTP Basic client authentication), token cached.
    #[serde(rename = "oauth2")]
    OAuth2,
    /// A static bearer token.
    Bearer,
    /// No `Authorization` header (local runtimes).
    #[default]
    None,
    /// The caller's own JWT, as the gateway verified it (`[server.auth]` scheme `jwt`), is
    /// sent as `Authorization: Bearer`: for runtimes whose JWT authorizer trusts the same
    /// provider. A call without one (an API key) fails its task; an API key is never sent.
    Forward,
    /// AWS Signature Version 4 (IAM inbound auth on the runtime), service
    /// `bedrock-agentcore`, with credentials from the standard AWS chain (environment,
    /// shared profile, web identity, ECS / EKS Pod Identity container endpoint, EC2
    /// IMDSv2), optionally an assumed role on top.
    #[serde(rename = "sigv4")]
    SigV4,
}

/// Default of `upstream.auth.credentials_refresh_secs`.
pub const DEFAULT_CREDENTIALS_REFRESH_SECS: u64 = 300;

/// Default `RoleSessionName` of `upstream.auth.assume_role_arn`.
pub const DEFAULT_SESSION_NAME: &str = "a2a-gateway";

impl AuthKind {
    fn name(self) -> &'static str {
        match self {
            AuthKind::OAuth2 => "oauth2",
            AuthKind::Bearer => "bearer",
            AuthKind::None => "none",
            AuthKind::Forward => "forward",
            AuthKind::SigV4 => "sigv4",
        }
    }
}

const KIND: &str = "upstream.auth.kind";

impl UpstreamAuthConfig {
    /// `refresh_before_expiry_secs` as a [`Duration`].
    pub fn refresh_before_expiry(&self) -> Duration {
        Duration::from_secs(self.refresh_before_expiry_secs)
    }

    /// `credentials_refresh_secs` as a [`Duration`].
    pub fn credentials_refresh(&self) -> Duration {
        Duration::from_secs(self.credentials_refresh_secs)
    }

    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        let set = |present: bool, field: &str| present.then(|| format!("upstream.auth.{field}"));
        let oauth_keys = [
            set(self.client_id.is_some(), "client_id"),
            set(self.client_secret.is_some(), "client_secret"),
            set(self.client_secret_file.is_some(), "client_secret_file"),
            set(self.scope.is_some(), "scope"),
            set(self.token_url.is_some(), "token_url"),
            set(self.discovery_url.is_some(), "discovery_url"),
        ];
        let bearer_keys = [
            set(self.token.is_some(), "token"),
            set(self.token_file.is_some(), "token_file"),
        ];
        let sigv4_keys = [
            set(self.region.is_some(), "region"),
            set(self.assume_role_arn.is_some(), "assume_role_arn"),
            set(self.external_id.is_some(), "external_id"),
            set(self.session_name.is_some(), "session_name"),
        ];
        let foreign = |keys: &[Option<String>], belongs: &str| {
            keys.iter().flatten().next().map(|key| {
                Invalid::new(
                    key.clone(),
                    format!(
                        "is only used when {KIND} = \"{belongs}\", but {KIND} is \"{}\"",
                        self.kind.name()
                    ),
                )
            })
        };
        match self.kind {
            AuthKind::OAuth2 => {
                if let Some(err) = foreign(&bearer_keys, "bearer") {
                    return Err(err);
                }
                if let Some(err) = foreign(&sigv4_keys, "sigv4") {
                    return Err(err);
                }
                if self
                    .client_id
                    .as_deref()
                    .is_none_or(|id| id.trim().is_empty())
                {
                    return Err(Invalid::because_of(
                        "upstream.auth.client_id",
                        KIND,
                        "is required when upstream.auth.kind = \"oauth2\"",
                    ));
                }
                one_of(
                    self.client_secret.is_some(),
                    self.client_secret_file.is_some(),
                    "upstream.auth.client_secret",
                    "upstream.auth.client_secret_file",
                )?;
                one_of(
                    self.token_url.is_some(),
                    self.discovery_url.is_some(),
                    "upstream.auth.token_url",
                    "upstream.auth.discovery_url",
                )?;
            }
            AuthKind::Bearer => {
                if let Some(err) = foreign(&oauth_keys, "oauth2") {
                    return Err(err);
                }
                if let Some(err) = foreign(&sigv4_keys, "sigv4") {
                    return Err(err);
                }
                one_of(
                    self.token.is_some(),
                    self.token_file.is_some(),
                    "upstream.auth.token",
                    "upstream.auth.token_file",
                )?;
            }
            AuthKind::None | AuthKind::Forward => {
                if let Some(err) = foreign(&oauth_keys, "oauth2") {
                    return Err(err);
                }
                if let Some(err) = foreign(&bearer_keys, "bearer") {
                    return Err(err);
                }
                if let Some(err) = foreign(&sigv4_keys, "sigv4") {
                    return Err(err);
                }
            }
            AuthKind::SigV4 => {
                if let Some(err) = foreign(&oauth_keys, "oauth2") {
                    return Err(err);
                }
                if let Some(err) = foreign(&bearer_keys, "bearer") {
                    return Err(err);
                }
                self.validate_sigv4()?;
            }
        }
        Ok(())
    }

    /// The `sigv4` keys' own rules (the region against the ARN is checked by
    /// [`AgentCoreUpstreamConfig`](super::AgentCoreUpstreamConfig), which knows the ARN).
    fn validate_sigv4(&self) -> Result<(), Invalid> {
        nonzero(
            "upstream.auth.credentials_refresh_secs",
            self.credentials_refresh_secs,
        )?;
        if let Some(region) = &self.region
            && !is_region(region)
        {
            return Err(Invalid::new(
                "upstream.auth.region",
                format!("`{region}` is not an AWS region name (such as us-east-1)"),
            ));
        }
        if let Some(arn) = &self.assume_role_arn
            && !is_role_arn(arn)
        {
            return Err(Invalid::new(
                "upstream.auth.assume_role_arn",
                format!("`{arn}` is not an IAM role ARN (arn:PARTITION:iam::ACCOUNT:role/NAME)"),
            ));
        }
        for (key, value) in [
            ("external_id", &self.external_id),
            ("session_name", &self.session_name),
        ] {
            if value.is_some() && self.assume_role_arn.is_none() {
                return Err(Invalid::because_of(
                    format!("upstream.auth.{key}"),
                    "upstream.auth.assume_role_arn",
                    "is only sent with AssumeRole: set upstream.auth.assume_role_arn too",
                ));
            }
        }
        // STS's own limits: RoleSessionName 2-64 of [\w+=,.@-], ExternalId 2-1224 of
        // [\w+=,.@:/-].
        if let Some(name) = &self.session_name
            && !sts_value(name, 64, "+=,.@-")
        {
            return Err(Invalid::new(
                "upstream.auth.session_name",
                "must be 2-64 characters of letters, digits and +=,.@_-",
            ));
        }
        if let Some(id) = &self.external_id
            && !sts_value(id, 1224, "+=,.@:/-")
        {
            return Err(Invalid::new(
                "upstream.auth.external_id",
                "must be 2-1224 characters of letters, digits and +=,.@:/_-",
            ));
        }
        Ok(())
    }

    /// Drops `client_secret` / `token` where they were read from `client_secret_file` /
    /// `token_file` (what the configuration is printed from: its files, not the secrets).
    pub(crate) fn forget_file_secrets(&mut self) {
        if self.client_secret_file.is_some() {
            self.client_secret = None;
        }
        if self.token_file.is_some() {
            self.token = None;
        }
    }

    /// Reads `client_secret_file` / `token_file` into `client_secret` / `token`.
    pub(crate) fn load_secret_files(&mut self) -> Result<(), Invalid> {
        if let Some(path) = &self.client_secret_file {
            self.client_secret = Some(read_secret("upstream.auth.client_secret_file", path)?);
        }
        if let Some(path) = &self.token_file {
            self.token = Some(read_secret("upstream.auth.token_file", path)?);
        }
        Ok(())
    }
}

/// An AWS region name: lowercase letters, digits and `-`, such as `us-east-1`.
fn is_region(s: &str) -> bool {
    (4..=32).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().any(|b| b == b'-')
}

/// `arn:PARTITION:iam::ACCOUNT:role/NAME`.
fn is_role_arn(s: &str) -> bool {
    let parts: Vec<&str> = s.splitn(6, ':').collect();
    matches!(parts.as_slice(), ["arn", p, "iam", "", account, resource]
        if !p.is_empty()
            && account.len() == 12
            && account.bytes().all(|b| b.is_ascii_digit())
            && resource.strip_prefix("role/").is_some_and(|n| !n.is_empty()))
}

/// A value STS accepts: 2 to `max` characters of ASCII letters, digits, `_` and `extra`.
fn sts_value(s: &str, max: usize, extra: &str) -> bool {
    (2..=max).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || extra.as_bytes().contains(&b))
}

/// Exactly one of two alternative keys must be set (the kind asked for one of them).
fn one_of(a: bool, b: bool, key_a: &str, key_b: &str) -> Result<(), Invalid> {
    match (a, b) {
        (true, false) | (false, true) => Ok(()),
        (true, true) => Err(Invalid::because_of(
            key_b,
            key_a,
            format!("set either {key_a} or {key_b}, not both"),
        )),
        (false, false) => Err(Invalid::because_of(
            key_a,
            KIND,
            format!("{key_a} or {key_b} is required for this upstream.auth.kind"),
        )),
    }
}

/// Reads a secret from a file, without its trailing line break.
pub(super) fn read_secret(key: &str, path: &Path) -> Result<SecretString, Invalid> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Invalid::new(key, format!("cannot read {}: {e}", path.display())))?;
    let secret = text.trim_end_matches(['\n', '\r']);
    if secret.is_empty() {
        return Err(Invalid::new(key, format!("{} is empty", path.display())));
    }
    Ok(SecretString::from(secret))
}
