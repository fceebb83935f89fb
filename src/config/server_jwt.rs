//! `[server.auth.jwt]`: OAuth 2.0 / OpenID Connect bearer tokens (JWT, RFC 7519) the
//! gateway accepts as a resource server, verified against the issuer's JWKS (RFC 7517).

use std::fmt;
use std::path::PathBuf;

use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::error::Invalid;
use super::serde_util::http_url_opt;

/// The algorithms accepted when `algorithms` is not set.
pub const DEFAULT_ALGORITHMS: [&str; 3] = ["RS256", "ES256", "EdDSA"];

/// Every algorithm name `algorithms` may list (RFC 7518 §3.1 and RFC 8037; `none` never).
pub const KNOWN_ALGORITHMS: [&str; 12] = [
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA", "HS256",
    "HS384", "HS512",
];

/// `[server.auth.jwt]`: who issues the tokens and what they must say.
///
/// After [`Config::load`](super::Config::load): `issuer` and at least one `audience` are
/// set, exactly one of `jwks_url` / `discovery_url` (or neither when only HMAC
/// algorithms are allowed), `algorithms` names known algorithms only, and an HMAC
/// algorithm is allowed only with `hmac_secret_file`, whose bytes are then loaded.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct JwtConfig {
    /// The exact `iss` every token must carry (RFC 7519 §4.1.1).
    pub issuer: String,
    /// The accepted `aud` values (one string or a list): a token must name at least one.
    #[serde(deserialize_with = "one_or_many")]
    pub audience: Vec<String>,
    /// The issuer's JWKS document (`https://…/.well-known/jwks.json`).
    #[serde(
        default,
        with = "http_url_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub jwks_url: Option<Url>,
    /// The issuer's OpenID Connect discovery document
    /// (`https://…/.well-known/openid-configuration`): its `jwks_uri` is used, and its
    /// `issuer` must equal `issuer`. The card declares it as an `openIdConnect` scheme.
    #[serde(
        default,
        with = "http_url_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub discovery_url: Option<Url>,
    /// The token endpoint the card declares in its `oauth2` client-credentials flow (when
    /// `discovery_url` is not set). Informative only: the gateway never calls it.
    #[serde(
        default,
        with = "http_url_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub token_url: Option<Url>,
    /// Accepted `alg` values. Default RS256, ES256, EdDSA. `none` is never accepted; HS256,
    /// HS384 and HS512 only with `hmac_secret_file` (and never with a JWKS key).
    pub algorithms: Vec<String>,
    /// Clock skew allowed on `exp`, `nbf` and `iat`, in seconds. Default 60.
    pub leeway_secs: u64,
    /// Scopes every token must carry (in `scope`, space-separated, or `scp`, a string or a
    /// list); a token without one of them is refused with 403 `insufficient_scope`.
    pub required_scopes: Vec<String>,
    /// The claim naming the caller (the task owner). Default `sub`; `client_id` or `azp`
    /// for client-credentials tokens of some providers.
    pub caller_claim: String,
    /// How the caller claim becomes the owner of the caller's tasks: `namespaced`
    /// (default), `jwt:<issuer>#<claim value>`, never equal to an API key's caller nor
    /// to another issuer's owner; or `claim`, the bare value, in one namespace with
    /// the API keys on purpose (docs/authentication.md#owner-namespaces).
    pub owner: super::OwnerForm,
    /// Whether every token must carry the tenant claim (`[server.auth] tenant_claim`,
    /// which must then be set) with a non-empty value: one without it is refused with
    /// 403 / `PERMISSION_DENIED` naming the claim instead of running in the default
    /// tenant. Default false.
    pub require_tenant_claim: bool,
    /// A file holding the shared secret for HS256/HS384/HS512 tokens (trailing newline
    /// removed). Read once at load; never printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hmac_secret_file: Option<PathBuf>,
    /// JWKS refresh period when the response has no usable `Cache-Control: max-age`, in
    /// seconds. Default 300.
    pub refresh_secs: u64,
    /// Lower bound on the refresh period (a tiny `max-age` is raised to it), in seconds.
    /// Default 60.
    pub min_refresh_secs: u64,
    /// Upper bound on the refresh period (a huge `max-age` is lowered to it), in seconds.
    /// Default 86400.
    pub max_refresh_secs: u64,
    /// Least time between two fetches caused by tokens with an unknown `kid`, in seconds:
    /// a flood of such tokens costs at most one fetch per period. Default 30.
    pub unknown_kid_refetch_secs: u64,
    /// Whether a token that passed every check is remembered (by its SHA-256, until its
    /// `exp` or the next JWKS fetch), so the same token again skips the signature check.
    /// Default true; false verifies every request in full.
    pub cache_verified: bool,
    /// The secret read from `hmac_secret_file`.
    #[serde(skip)]
    pub(crate) hmac_secret: Option<HmacSecret>,
}

/// An HMAC secret's bytes: compared for equality, never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct HmacSecret(pub(crate) Vec<u8>);

impl HmacSecret {
    /// The secret's bytes.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for HmacSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(super::serde_util::REDACTED)
    }
}

impl Default for JwtConfig {
    fn default() -> Self {
        Self {
            issuer: String::new(),
            audience: Vec::new(),
            jwks_url: None,
            discovery_url: None,
            token_url: None,
            algorithms: DEFAULT_ALGORITHMS.map(str::to_owned).to_vec(),
            leeway_secs: 60,
            required_scopes: Vec::new(),
            caller_claim: "sub".into(),
            owner: super::OwnerForm::Namespaced,
            require_tenant_claim: false,
            hmac_secret_file: None,
            refresh_secs: 300,
            min_refresh_secs: 60,
            max_refresh_secs: 86_400,
            unknown_kid_refetch_secs: 30,
            cache_verified: true,
            hmac_secret: None,
        }
    }
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

const AT: &str = "server.auth.jwt";

impl JwtConfig {
    /// The secret for HMAC algorithms, when `hmac_secret_file` was loaded.
    pub fn hmac_secret(&self) -> Option<&HmacSecret> {
        self.hmac_secret.as_ref()
    }

    /// Sets the HMAC secret directly (tests and embedders; the file is the config path).
    pub fn set_hmac_secret(&mut self, secret: impl Into<Vec<u8>>) {
        self.hmac_secret = Some(HmacSecret(secret.into()));
    }

    /// Whether `algorithms` allows an HMAC algorithm.
    pub fn allows_hmac(&self) -> bool {
        self.algorithms.iter().any(|a| a.starts_with("HS"))
    }

    /// Whether `algorithms` allows a public-key algorithm (whose keys come from a JWKS).
    pub fn allows_public_keys(&self) -> bool {
        self.algorithms.iter().any(|a| !a.starts_with("HS"))
    }

    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        let at = |f: &str| format!("{AT}.{f}");
        if self.issuer.trim().is_empty() {
            return Err(Invalid::new(
                at("issuer"),
                "is required: the exact `iss` of the tokens",
            ));
        }
        if self.audience.is_empty() || self.audience.iter().any(|a| a.trim().is_empty()) {
            return Err(Invalid::new(
                at("audience"),
                "needs at least one non-empty value: the `aud` the tokens are issued for",
            ));
        }
        if self.algorithms.is_empty() {
            return Err(Invalid::new(at("algorithms"), "must not be empty"));
        }
        for alg in &self.algorithms {
            if !KNOWN_ALGORITHMS.contains(&alg.as_str()) {
                return Err(Invalid::new(
                    at("algorithms"),
                    format!(
                        "{alg:?} is not an accepted algorithm (one of {})",
                        KNOWN_ALGORITHMS.join(", ")
                    ),
                ));
            }
        }
        if self.allows_hmac() != self.hmac_secret_file.is_some() && self.hmac_secret.is_none() {
            return Err(Invalid::new(
                at("hmac_secret_file"),
                "HS256/HS384/HS512 in algorithms and hmac_secret_file go together: HMAC tokens are only verified with a configured secret",
            ));
        }
        match (&self.jwks_url, &self.discovery_url) {
            (Some(_), Some(_)) => {
                return Err(Invalid::new(
                    at("discovery_url"),
                    format!(
                        "set either {} or {}, not both",
                        at("jwks_url"),
                        at("discovery_url")
                    ),
                ));
            }
            (None, None) if self.allows_public_keys() => {
                return Err(Invalid::new(
                    at("jwks_url"),
                    format!(
                        "{} or {} is required for {}",
                        at("jwks_url"),
                        at("discovery_url"),
                        self.algorithms.join(", ")
                    ),
                ));
            }
            _ => {}
        }
        if self.caller_claim.trim().is_empty() {
            return Err(Invalid::new(at("caller_claim"), "must not be empty"));
        }
        if self.min_refresh_secs == 0 || self.min_refresh_secs > self.max_refresh_secs {
            return Err(Invalid::new(
                at("min_refresh_secs"),
                "must be at least 1 and at most max_refresh_secs",
            ));
        }
        Ok(())
    }

    /// Reads `hmac_secret_file`. Runs after [`validate`](Self::validate).
    pub(crate) fn load_secret(&mut self) -> Result<(), Invalid> {
        let Some(path) = &self.hmac_secret_file else {
            return Ok(());
        };
        let at = format!("{AT}.hmac_secret_file");
        let text = std::fs::read(path).map_err(|e| {
            Invalid::new(at.clone(), format!("cannot read {}: {e}", path.display()))
        })?;
        let mut secret = text;
        while secret.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            secret.pop();
        }
        if secret.len() < 32 {
            return Err(Invalid::new(
                at,
                format!(
                    "{} must hold at least 32 bytes (RFC 7518 §3.2), e.g. from `openssl rand -hex 32`",
                    path.display()
                ),
            ));
        }
        self.hmac_secret = Some(HmacSecret(secret));
        Ok(())
    }
}
