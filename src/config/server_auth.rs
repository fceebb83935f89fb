//! `[server.auth]`: how callers authenticate to the gateway (inbound).
//!
//! Only hashes of API keys are configured (`sha256`), or a file holding the raw key
//! (`key_file`), hashed at load. The raw key itself is never a config value. JWT bearer
//! tokens are configured in `[server.auth.jwt]` ([`JwtConfig`]). A caller may hold several
//! keys (rotation with overlap); each key may bind its caller to a tenant.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::Invalid;
use super::serde_util::secret_string_opt;
use super::server_jwt::JwtConfig;

/// Length in bytes of a SHA-256 digest.
pub const SHA256_LEN: usize = 32;

/// `[server.auth]`: inbound authentication.
///
/// After [`Config::load`](super::Config::load), the `api_key` scheme guarantees at least
/// one key, distinct keys, and every key's [`ApiKeyConfig::digest`] set; the `jwt` scheme
/// guarantees a valid `[server.auth.jwt]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerAuthConfig {
    /// One scheme: `none` (default; every caller is the `anonymous` owner), `api_key`
    /// (`Authorization: Bearer <key>` of one of `keys`) or `jwt` (a bearer JWT that
    /// `[server.auth.jwt]` accepts). For several schemes use `schemes` instead.
    pub kind: ServerAuthKind,
    /// Several schemes at once (`["api_key", "jwt"]`): a request must satisfy one of them.
    /// Set this or `kind`, not both.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub schemes: Vec<ServerAuthKind>,
    /// `[[server.auth.keys]]`: the accepted keys and the caller each one stands for
    /// (`api_key` only). A caller may have several keys.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<ApiKeyConfig>,
    /// `[server.auth.jwt]`: the accepted JWTs (`jwt` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwt: Option<JwtConfig>,
    /// The JWT claim naming the caller's tenant (a string, or a list of the tenants the
    /// caller may use, the first being its default). Unset: JWTs bind no tenant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant_claim: Option<String>,
    /// The tenant of a credential that names none (a key without `tenant`, a token without
    /// the claim). Setting it, `tenant_claim` or any key's `tenant` binds every call's
    /// tenant to its credential: a request naming another tenant is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_tenant: Option<String>,
}

/// The inbound authentication scheme.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerAuthKind {
    /// No authentication: one shared `anonymous` owner.
    #[default]
    None,
    /// Static API keys sent as bearer tokens.
    ApiKey,
    /// JWT bearer tokens (OAuth 2.0 / OpenID Connect), `[server.auth.jwt]`.
    Jwt,
}

/// One `[[server.auth.keys]]` entry: a caller and its key, as a hash or a file.
#[derive(Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// The caller this key authenticates; it becomes the owner of the caller's tasks.
    pub caller: String,
    /// Hex SHA-256 of the key (64 hex digits). Set this or `key_file`. Never printed.
    #[serde(
        default,
        with = "secret_string_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub sha256: Option<String>,
    /// File holding the raw key, read and hashed once at load (trailing newline removed).
    /// Set this or `sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
    /// The tenant this key binds its calls to (see `server.auth.default_tenant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The digest from `sha256` or `key_file`, filled at load.
    #[serde(skip)]
    pub(crate) digest: Option<[u8; SHA256_LEN]>,
}

impl fmt::Debug for ApiKeyConfig {
    /// The caller and key file only: hashes are not shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKeyConfig")
            .field("caller", &self.caller)
            .field(
                "sha256",
                &self.sha256.as_ref().map(|_| super::serde_util::REDACTED),
            )
            .field("key_file", &self.key_file)
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

impl ApiKeyConfig {
    /// A key for `caller` given by its hex SHA-256 (as in the config file).
    pub fn from_sha256(caller: impl Into<String>, sha256: impl Into<String>) -> Self {
        ApiKeyConfig {
            caller: caller.into(),
            sha256: Some(sha256.into()),
            key_file: None,
            tenant: None,
            digest: None,
        }
    }

    /// The same key, binding its calls to `tenant`.
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }

    /// The SHA-256 of the key: filled at load, or parsed from `sha256`. `None` only for an
    /// entry that was never loaded and has no valid `sha256`.
    pub fn digest(&self) -> Option<[u8; SHA256_LEN]> {
        self.digest
            .or_else(|| self.sha256.as_deref().and_then(|hex| parse_hex(hex).ok()))
    }
}

/// Hex SHA-256 of `key`, as `sha256` expects it.
pub fn sha256_hex(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Parses 64 hex digits (either case) into a digest; the error says what is wrong without
/// repeating the value.
fn parse_hex(hex: &str) -> Result<[u8; SHA256_LEN], String> {
    let bytes = hex.as_bytes();
    if bytes.len() != 2 * SHA256_LEN {
        return Err(format!(
            "must be 64 hexadecimal digits (the SHA-256 of the key), found {} characters",
            hex.chars().count()
        ));
    }
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; SHA256_LEN];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        match (nibble(pair[0]), nibble(pair[1])) {
            (Some(hi), Some(lo)) => out[i] = (hi << 4) | lo,
            _ => {
                return Err(
                    "must be 64 hexadecimal digits (the SHA-256 of the key), found a character that is not 0-9 or a-f"
                        .to_owned(),
                );
            }
        }
    }
    Ok(out)
}

const KIND: &str = "server.auth.kind";
const KEYS: &str = "server.auth.keys";

impl ServerAuthConfig {
    /// The configured schemes (`schemes`, else `kind`), `none` left out: empty when no
    /// authentication is required.
    pub fn effective_schemes(&self) -> Vec<ServerAuthKind> {
        let all = if self.schemes.is_empty() {
            vec![self.kind]
        } else {
            self.schemes.clone()
        };
        let mut out: Vec<ServerAuthKind> = Vec::new();
        for s in all {
            if s != ServerAuthKind::None && !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }

    /// Whether callers must authenticate.
    pub fn required(&self) -> bool {
        !self.effective_schemes().is_empty()
    }

    /// Whether `scheme` is configured.
    pub fn uses(&self, scheme: ServerAuthKind) -> bool {
        self.effective_schemes().contains(&scheme)
    }

    /// Whether the tenant of a call is bound to its credential (`tenant_claim`,
    /// `default_tenant` or a key's `tenant` is set).
    pub fn binds_tenants(&self) -> bool {
        self.tenant_claim.is_some()
            || self.default_tenant.is_some()
            || self.keys.iter().any(|k| k.tenant.is_some())
    }

    /// The key-file and `jwt`-table form of [`ServerAuthConfig`] for a JWT scheme only.
    pub fn jwt_only(jwt: JwtConfig) -> Self {
        Self {
            kind: ServerAuthKind::Jwt,
            jwt: Some(jwt),
            ..Self::default()
        }
    }

    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        if self.kind != ServerAuthKind::None && !self.schemes.is_empty() {
            return Err(Invalid::new(
                "server.auth.schemes",
                format!("set either {KIND} or server.auth.schemes, not both"),
            ));
        }
        let api_key = self.uses(ServerAuthKind::ApiKey);
        let jwt = self.uses(ServerAuthKind::Jwt);
        if !api_key && !self.keys.is_empty() {
            return Err(Invalid::new(
                KEYS,
                format!(
                    "is only used with the api_key scheme: set {KIND} = \"api_key\" (or add it to server.auth.schemes) to require them"
                ),
            ));
        }
        match (&self.jwt, jwt) {
            (Some(_), false) => {
                return Err(Invalid::new(
                    "server.auth.jwt",
                    format!(
                        "is only used with the jwt scheme: set {KIND} = \"jwt\" (or add it to server.auth.schemes)"
                    ),
                ));
            }
            (None, true) => {
                return Err(Invalid::because_of(
                    "server.auth.jwt",
                    KIND,
                    "is required with the jwt scheme (issuer, audience, jwks_url or discovery_url)",
                ));
            }
            (Some(j), true) => j.validate()?,
            (None, false) => {}
        }
        if !self.required() {
            if self.binds_tenants() {
                return Err(Invalid::new(
                    "server.auth.default_tenant",
                    "tenants can only be bound to credentials when authentication is on (api_key or jwt)",
                ));
            }
            return Ok(());
        }
        if self.tenant_claim.is_some() && !jwt {
            return Err(Invalid::new(
                "server.auth.tenant_claim",
                "is only used with the jwt scheme",
            ));
        }
        if self.jwt.as_ref().is_some_and(|j| j.require_tenant_claim) && self.tenant_claim.is_none()
        {
            return Err(Invalid::new(
                "server.auth.jwt.require_tenant_claim",
                "needs server.auth.tenant_claim: the claim every token must carry",
            ));
        }
        if let Some(c) = &self.tenant_claim
            && c.trim().is_empty()
        {
            return Err(Invalid::new(
                "server.auth.tenant_claim",
                "must not be empty",
            ));
        }
        if api_key && self.keys.is_empty() {
            return Err(Invalid::because_of(
                KEYS,
                KIND,
                "needs at least one key with the api_key scheme (add [[server.auth.keys]] with caller and sha256 or key_file)".to_string(),
            ));
        }
        for (i, key) in self.keys.iter().enumerate() {
            let at = |field: &str| format!("{KEYS}.{i}.{field}");
            if let Some(problem) = super::key_caller_problem(&key.caller) {
                return Err(Invalid::new(at("caller"), problem));
            }
            match (&key.sha256, &key.key_file) {
                (Some(hex), None) => {
                    parse_hex(hex).map_err(|message| Invalid::new(at("sha256"), message))?;
                }
                (None, Some(_)) => {}
                (Some(_), Some(_)) => {
                    return Err(Invalid::new(
                        at("key_file"),
                        format!(
                            "set either {} or {}, not both",
                            at("sha256"),
                            at("key_file")
                        ),
                    ));
                }
                (None, None) => {
                    return Err(Invalid::new(
                        at("sha256"),
                        format!("{} or {} is required", at("sha256"), at("key_file")),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Fills every key's digest, from `sha256` or by reading and hashing `key_file`; refuses
    /// two entries with the same key; reads the JWT HMAC secret. Runs after
    /// [`validate`](Self::validate), and again on reload (`SIGHUP`).
    pub(crate) fn load_keys(&mut self) -> Result<(), Invalid> {
        if let Some(jwt) = &mut self.jwt {
            jwt.load_secret()?;
        }
        let mut seen: HashMap<[u8; SHA256_LEN], usize> = HashMap::new();
        for (i, key) in self.keys.iter_mut().enumerate() {
            let digest = match (&key.sha256, &key.key_file) {
                (Some(hex), _) => {
                    parse_hex(hex).map_err(|m| Invalid::new(format!("{KEYS}.{i}.sha256"), m))?
                }
                (None, Some(path)) => {
                    let at = format!("{KEYS}.{i}.key_file");
                    let text = std::fs::read_to_string(path).map_err(|e| {
                        Invalid::new(at.clone(), format!("cannot read {}: {e}", path.display()))
                    })?;
                    let raw = text.trim_end_matches(['\n', '\r']);
                    if raw.is_empty() {
                        return Err(Invalid::new(at, format!("{} is empty", path.display())));
                    }
                    if !raw.bytes().all(|b| b.is_ascii_graphic()) {
                        return Err(Invalid::new(
                            at,
                            format!(
                                "{} must hold one key of visible ASCII characters (no spaces), e.g. from `openssl rand -hex 32`",
                                path.display()
                            ),
                        ));
                    }
                    Sha256::digest(raw.as_bytes()).into()
                }
                (None, None) => continue,
            };
            if let Some(first) = seen.insert(digest, i) {
                return Err(Invalid::new(
                    format!("{KEYS}.{i}"),
                    format!("has the same key as {KEYS}.{first}; every key must be distinct"),
                ));
            }
            key.digest = Some(digest);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_errors() {
        let hex = sha256_hex("k");
        let digest = parse_hex(&hex).unwrap();
        assert_eq!(digest, <[u8; 32]>::from(Sha256::digest(b"k")));
        assert_eq!(parse_hex(&hex.to_ascii_uppercase()).unwrap(), digest);
        assert!(parse_hex(&hex[..63]).unwrap_err().contains("found 63"));
        let bad = format!("{}g", &hex[..63]);
        assert!(!parse_hex(&bad).unwrap_err().contains(&bad));
    }

    #[test]
    fn debug_hides_the_hash() {
        let key = ApiKeyConfig::from_sha256("a", sha256_hex("k"));
        let debug = format!("{key:?}");
        assert!(debug.contains("\"a\""), "{debug}");
        assert!(!debug.contains(&sha256_hex("k")), "{debug}");
    }
}
