//! Inbound identity (`[server.auth]`, A2A spec §7): who is calling, and in which tenant.
//!
//! The gateway is an OAuth 2.0 resource server. A request carries one credential in
//! `Authorization: Bearer <credential>` and must satisfy one of the configured schemes:
//!
//! - [`api_key`]: static keys, several per caller, each optionally bound to a tenant;
//! - [`jwt`]: JWTs of one issuer verified against its [`jwks`] (or an HMAC secret).
//!
//! The [`Authenticator`] turns the headers into an [`Identity`] or an [`AuthFailure`]
//! ([`failure`]); the transports only call it and render the failure in their framing
//! (`crate::transport::auth`). [`Identity::tenant_for`] binds the tenant a request names
//! to the credential.

pub mod api_key;
pub mod card;
pub mod failure;
pub mod jwks;
pub mod jwt;
pub mod verified_cache;

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use http::{HeaderMap, header};
use secrecy::SecretString;

use crate::config::{SHA256_LEN, ServerAuthConfig, ServerAuthKind};
use crate::telemetry::metrics::AUTH_FAILURES;
pub use failure::{AuthFailure, TokenProblem};
pub use jwks::{Jwks, JwksStatus};

/// Who a credential stands for.
#[derive(Clone)]
pub struct Identity {
    /// The caller as the credential names it: the key's `caller` or the JWT's caller
    /// claim (without its issuer). Tasks, logs and `[agents.<id>] callers` use
    /// [`owner`](Self::owner).
    pub caller: String,
    /// The owner of the caller's tasks (docs/authentication.md#owner-namespaces): a
    /// key's `caller`; a JWT's `jwt:<issuer>#<claim>` (or the bare claim with
    /// `[server.auth.jwt] owner = "claim"`). Never equal across schemes or issuers
    /// unless so configured.
    pub owner: String,
    /// The scheme that accepted the credential.
    pub scheme: ServerAuthKind,
    /// The tenants the credential may use, its default first; `None` when tenants are
    /// not bound to credentials (the request's `tenant` is used as sent).
    pub tenants: Option<Vec<String>>,
    /// The bearer token as presented (JWT scheme only), for `upstream.auth.kind =
    /// "forward"`. Never logged.
    pub bearer: Option<SecretString>,
}

impl fmt::Debug for Identity {
    /// Never the bearer token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("caller", &self.caller)
            .field("owner", &self.owner)
            .field("scheme", &self.scheme)
            .field("tenants", &self.tenants)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// The tenant of a request that names `requested` (`""`: none): the credential's
    /// default when it names none, `requested` when the credential allows it, or when
    /// tenants are not bound.
    ///
    /// # Errors
    /// [`AuthFailure::TenantNotAllowed`] for a tenant the credential does not allow.
    pub fn tenant_for(&self, requested: &str) -> Result<String, AuthFailure> {
        let Some(tenants) = &self.tenants else {
            return Ok(requested.to_owned());
        };
        if requested.is_empty() {
            return Ok(tenants.first().cloned().unwrap_or_default());
        }
        if tenants.iter().any(|t| t == requested) {
            Ok(requested.to_owned())
        } else {
            Err(AuthFailure::TenantNotAllowed)
        }
    }
}

struct Schemes {
    api_keys: Option<RwLock<Arc<api_key::ApiKeys>>>,
    jwt: Option<jwt::JwtVerifier>,
    /// `Some(default tenant)` when tenants are bound to credentials.
    default_tenant: Option<String>,
}

/// Decides who is calling. Cheap to clone. The default authenticates nobody and lets
/// everyone through as the anonymous owner (`[server.auth] kind = "none"`).
#[derive(Clone, Default)]
pub struct Authenticator {
    schemes: Option<Arc<Schemes>>,
}

impl fmt::Debug for Authenticator {
    /// Caller names and the issuer's key set only, never digests or secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.schemes {
            None => f.write_str("Authenticator::None"),
            Some(s) => {
                let mut d = f.debug_struct("Authenticator");
                if let Some(keys) = &s.api_keys {
                    let keys = keys.read().map(|k| k.clone()).unwrap_or_default();
                    d.field("api_keys", &keys.callers());
                }
                if let Some(j) = &s.jwt {
                    d.field("jwks", &j.jwks);
                }
                d.finish()
            }
        }
    }
}

impl Authenticator {
    /// No authentication: every request is the anonymous owner.
    pub fn none() -> Self {
        Self::default()
    }

    /// Requires one of `keys`, given as `(caller, SHA-256 of the key)`; no tenant binding.
    pub fn api_keys(keys: impl IntoIterator<Item = (String, [u8; SHA256_LEN])>) -> Self {
        let keys = api_key::ApiKeys {
            keys: keys
                .into_iter()
                .map(|(caller, digest)| api_key::Key {
                    caller,
                    tenant: None,
                    digest,
                })
                .collect(),
        };
        Self {
            schemes: Some(Arc::new(Schemes {
                api_keys: Some(RwLock::new(Arc::new(keys))),
                jwt: None,
                default_tenant: None,
            })),
        }
    }

    /// The authenticator `[server.auth]` describes (after [`Config::load`], which checked
    /// it). A key without a usable digest is left out, so it can never match. Call
    /// [`start`](Self::start) inside the runtime to refresh JWKS keys in the background.
    ///
    /// [`Config::load`]: crate::config::Config::load
    pub fn from_config(config: &ServerAuthConfig) -> Self {
        if !config.required() {
            return Self::none();
        }
        let api_keys = config
            .uses(ServerAuthKind::ApiKey)
            .then(|| RwLock::new(Arc::new(api_key::ApiKeys::from_config(config))));
        let jwt = if config.uses(ServerAuthKind::Jwt) {
            config
                .jwt
                .as_ref()
                .map(|j| jwt::JwtVerifier::new(j, config.tenant_claim.as_deref()))
        } else {
            None
        };
        let default_tenant = config
            .binds_tenants()
            .then(|| config.default_tenant.clone().unwrap_or_default());
        Self {
            schemes: Some(Arc::new(Schemes {
                api_keys,
                jwt,
                default_tenant,
            })),
        }
    }

    /// Starts the background JWKS refresh (a no-op without the jwt scheme or outside a
    /// tokio runtime).
    pub fn start(&self) {
        if let Some(jwks) = self.jwks() {
            jwks.start();
        }
    }

    /// Replaces the API keys with those of `config` (`SIGHUP`), keeping everything else.
    /// Requests in flight finish with the keys they started with.
    ///
    /// # Errors
    /// When API keys are not a configured scheme.
    pub fn reload_keys(&self, config: &ServerAuthConfig) -> Result<usize, String> {
        let slot = self
            .schemes
            .as_ref()
            .and_then(|s| s.api_keys.as_ref())
            .ok_or("the api_key scheme is not configured")?;
        let keys = api_key::ApiKeys::from_config(config);
        let n = keys.keys.len();
        *slot.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(keys);
        Ok(n)
    }

    /// Whether the `api_key` scheme is configured (so that [`Authenticator::reload_keys`]
    /// has keys to replace).
    pub fn api_keys_configured(&self) -> bool {
        self.schemes.as_ref().is_some_and(|s| s.api_keys.is_some())
    }

    /// The issuer's key set, with the jwt scheme and a JWKS.
    pub fn jwks(&self) -> Option<&Jwks> {
        self.schemes.as_ref()?.jwt.as_ref()?.jwks.as_ref()
    }

    /// Whether requests must authenticate.
    pub fn required(&self) -> bool {
        self.schemes.is_some()
    }

    /// Readiness of the schemes: `Err` while a JWKS was never fetched; `Ok(Some(note))`
    /// when the held keys are stale (the last fetch failed); `Ok(None)` otherwise.
    ///
    /// # Errors
    /// Why no JWT can be verified yet.
    pub fn readiness(&self) -> Result<Option<String>, String> {
        let Some(jwks) = self.jwks() else {
            return Ok(None);
        };
        let status = jwks.status();
        match (status.last_success, status.last_error) {
            (None, Some(e)) => Err(format!("no JWKS signing keys yet: {e}")),
            (None, None) => Err("no JWKS signing keys yet (first fetch in progress)".into()),
            (Some(at), Some(e)) => {
                let age = at.elapsed().map(|d| d.as_secs()).unwrap_or(0);
                Ok(Some(format!(
                    "JWKS stale: keeping {} keys fetched {age} s ago; last fetch failed: {e}",
                    status.keys
                )))
            }
            (Some(_), None) => Ok(None),
        }
    }

    /// The identity `headers` authenticate: `Ok(None)` when no authentication is
    /// configured.
    ///
    /// # Errors
    /// [`AuthFailure`] when a credential is required and missing or not accepted.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Option<Identity>, AuthFailure> {
        let Some(schemes) = &self.schemes else {
            return Ok(None);
        };
        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        let Some(value) = values.next() else {
            return Err(AuthFailure::Missing);
        };
        let not_accepted = AuthFailure::Invalid(TokenProblem::NotAccepted);
        if values.next().is_some() {
            return Err(not_accepted);
        }
        if value.len() > jwt::MAX_TOKEN_BYTES + 16 {
            return Err(AuthFailure::Invalid(TokenProblem::TooLong));
        }
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.trim().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|token| !token.is_empty())
            .ok_or(not_accepted)?;
        let bound = |own: Option<Vec<String>>| {
            schemes.default_tenant.as_ref().map(|default| {
                own.filter(|t| !t.is_empty())
                    .unwrap_or_else(|| vec![default.clone()])
            })
        };
        if let Some(keys) = &schemes.api_keys {
            let keys = keys.read().map(|k| k.clone()).unwrap_or_default();
            if let Some(key) = keys.find(token) {
                return Ok(Some(Identity {
                    caller: key.caller.clone(),
                    owner: key.caller.clone(),
                    scheme: ServerAuthKind::ApiKey,
                    tenants: bound(key.tenant.clone().map(|t| vec![t])),
                    bearer: None,
                }));
            }
        }
        match &schemes.jwt {
            Some(verifier) if jwt::JwtVerifier::looks_like_jwt(token) => {
                let v = verifier.verify(token).await?;
                Ok(Some(Identity {
                    owner: verifier.owner_of(&v.caller),
                    caller: v.caller,
                    scheme: ServerAuthKind::Jwt,
                    tenants: bound(v.tenants),
                    bearer: Some(SecretString::from(token.to_owned())),
                }))
            }
            _ => Err(not_accepted),
        }
    }

    /// [`authenticate`](Self::authenticate) for a transport: on failure, logs it at `warn`
    /// with `peer` (never the credential) and counts it in `a2a_auth_failures_total`.
    ///
    /// # Errors
    /// The [`AuthFailure`], for the binding to render.
    pub async fn verify(
        &self,
        headers: &HeaderMap,
        peer: Option<SocketAddr>,
    ) -> Result<Option<Identity>, AuthFailure> {
        self.authenticate(headers)
            .await
            .inspect_err(|failure| record(*failure, peer))
    }
}

/// Logs a refusal at `warn` with `peer` and counts it in `a2a_auth_failures_total`.
pub fn record(failure: AuthFailure, peer: Option<SocketAddr>) {
    metrics::counter!(AUTH_FAILURES, "reason" => failure.reason()).increment(1);
    let peer = peer.map_or_else(|| "unknown".to_owned(), |p| p.to_string());
    tracing::warn!(%peer, reason = failure.reason(), "authentication failed");
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    fn with_auth(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, value.parse().unwrap());
        headers
    }

    fn two_callers() -> Authenticator {
        Authenticator::api_keys([
            ("a".to_owned(), Sha256::digest(b"key-a").into()),
            ("b".to_owned(), Sha256::digest(b"key-b").into()),
            ("b".to_owned(), Sha256::digest(b"key-b2").into()),
        ])
    }

    async fn caller(auth: &Authenticator, value: &str) -> Result<Option<String>, AuthFailure> {
        auth.authenticate(&with_auth(value))
            .await
            .map(|i| i.map(|i| i.caller))
    }

    #[tokio::test]
    async fn none_lets_everyone_through_anonymously() {
        assert!(
            Authenticator::none()
                .authenticate(&HeaderMap::new())
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn keys_map_to_their_callers() {
        let auth = two_callers();
        assert_eq!(caller(&auth, "Bearer key-a").await, Ok(Some("a".into())));
        assert_eq!(caller(&auth, "bearer  key-b ").await, Ok(Some("b".into())));
        assert_eq!(caller(&auth, "Bearer key-b2").await, Ok(Some("b".into())));
    }

    #[tokio::test]
    async fn missing_wrong_or_malformed_credentials_are_refused() {
        let auth = two_callers();
        assert_eq!(
            auth.authenticate(&HeaderMap::new()).await.unwrap_err(),
            AuthFailure::Missing
        );
        let no = Err(AuthFailure::Invalid(TokenProblem::NotAccepted));
        for bad in [
            "Bearer key-c",
            "Bearer",
            "Bearer ",
            "Basic a2V5LWE=",
            "key-a",
            "Bearer eyJh.eyJz.c2ln",
        ] {
            assert_eq!(caller(&auth, bad).await, no, "{bad}");
        }
        let mut twice = with_auth("Bearer key-a");
        twice.append(header::AUTHORIZATION, "Bearer key-b".parse().unwrap());
        assert_eq!(
            auth.authenticate(&twice).await.unwrap_err(),
            AuthFailure::Invalid(TokenProblem::NotAccepted)
        );
        assert_eq!(
            caller(&Authenticator::api_keys([]), "Bearer key-a").await,
            no
        );
        let long = format!("Bearer {}", "k".repeat(64 * 1024));
        assert_eq!(
            caller(&auth, &long).await,
            Err(AuthFailure::Invalid(TokenProblem::TooLong))
        );
    }

    #[tokio::test]
    async fn keys_are_reloaded() {
        let auth = two_callers();
        let mut config = ServerAuthConfig {
            kind: ServerAuthKind::ApiKey,
            ..Default::default()
        };
        config.keys.push(crate::config::ApiKeyConfig::from_sha256(
            "c",
            crate::config::sha256_hex("key-c"),
        ));
        assert_eq!(auth.reload_keys(&config), Ok(1));
        assert_eq!(caller(&auth, "Bearer key-c").await, Ok(Some("c".into())));
        assert!(caller(&auth, "Bearer key-a").await.is_err());
    }

    #[test]
    fn tenants_bind_to_the_credential() {
        let id = |tenants: Option<Vec<&str>>| Identity {
            caller: "c".into(),
            owner: "c".into(),
            scheme: ServerAuthKind::Jwt,
            tenants: tenants.map(|t| t.into_iter().map(str::to_owned).collect()),
            bearer: None,
        };
        assert_eq!(id(None).tenant_for("x").unwrap(), "x");
        let bound = id(Some(vec!["t1", "t2"]));
        assert_eq!(bound.tenant_for("").unwrap(), "t1");
        assert_eq!(bound.tenant_for("t2").unwrap(), "t2");
        assert_eq!(bound.tenant_for("t3"), Err(AuthFailure::TenantNotAllowed));
    }

    #[test]
    fn debug_shows_callers_only() {
        let debug = format!("{:?}", two_callers());
        assert!(debug.contains("\"a\""), "{debug}");
        assert!(!debug.contains("key-a"), "{debug}");
        let id = Identity {
            caller: "c".into(),
            owner: "jwt:i#c".into(),
            scheme: ServerAuthKind::Jwt,
            tenants: None,
            bearer: Some(SecretString::from("tok-secret".to_owned())),
        };
        assert!(!format!("{id:?}").contains("tok-secret"));
    }
}
