//! Verification of one JWT bearer token (RFC 7519, RFC 8725 best practices) against
//! `[server.auth.jwt]`.
//!
//! Order: length (at most 16 KiB) → header (`alg` in the allowed list: never `none`;
//! HMAC only with the configured secret, never with a JWKS key) → key (by `kid`, one
//! rate-limited JWKS refetch when unknown; its type and `alg` must match the token's) →
//! signature → `exp`, `nbf` (with leeway), `iss`, `aud` (by `jsonwebtoken`) → `iat` not in
//! the future → required scopes → the caller claim → the tenant claim (present and not
//! empty with `require_tenant_claim`).
//!
//! A token that passed is remembered (by its SHA-256, until its `exp` or the next JWKS
//! fetch; [`super::verified_cache`]): the same token again skips the signature check.

use std::str::FromStr;
use std::sync::Arc;

use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use serde_json::{Map, Value};

use super::failure::{AuthFailure, TokenProblem};
use super::jwks::Jwks;
use super::verified_cache::{self, Verified, VerifiedCache};
use crate::config::{JwtConfig, OwnerForm, caller_name_problem, jwt_owner};

/// Longest token read, in bytes.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The verifier of one issuer's tokens.
#[derive(Clone)]
pub(crate) struct JwtVerifier {
    issuer: String,
    audience: Vec<String>,
    algorithms: Vec<Algorithm>,
    leeway: u64,
    pub(crate) required_scopes: Vec<String>,
    caller_claim: String,
    /// How the caller claim becomes the owner (`[server.auth.jwt] owner`).
    owner_form: OwnerForm,
    tenant_claim: Option<String>,
    /// `Some(claim)` when every token must carry the tenant claim
    /// (`require_tenant_claim`): its name, for the refusal.
    required_tenant_claim: Option<&'static str>,
    hmac: Option<DecodingKey>,
    pub(crate) jwks: Option<Jwks>,
    /// The tokens that passed, shared by the clones (`None`: `cache_verified = false`).
    cache: Option<Arc<VerifiedCache>>,
}

impl JwtVerifier {
    /// The verifier `config` describes (after load), reading tenants from `tenant_claim`.
    pub(crate) fn new(config: &JwtConfig, tenant_claim: Option<&str>) -> Self {
        let algorithms = config
            .algorithms
            .iter()
            .filter_map(|a| Algorithm::from_str(a).ok())
            .filter(|a| a.family() != AlgorithmFamily::Hmac || config.hmac_secret().is_some())
            .collect();
        Self {
            issuer: config.issuer.clone(),
            audience: config.audience.clone(),
            algorithms,
            leeway: config.leeway_secs,
            required_scopes: config.required_scopes.clone(),
            caller_claim: config.caller_claim.clone(),
            owner_form: config.owner,
            tenant_claim: tenant_claim.map(str::to_owned),
            // Leaked once per verifier (built at start): the refusal is `Copy`.
            required_tenant_claim: tenant_claim
                .filter(|_| config.require_tenant_claim)
                .map(|c| &*Box::leak(c.to_owned().into_boxed_str())),
            hmac: config
                .hmac_secret()
                .and_then(|s| DecodingKey::from_secret(s.expose()).ok()),
            jwks: Jwks::from_config(config),
            cache: config.cache_verified.then(Arc::default),
        }
    }

    /// The owner of the tasks of a token whose caller claim is `caller`
    /// (`crate::config::jwt_owner` with this issuer).
    pub(crate) fn owner_of(&self, caller: &str) -> String {
        jwt_owner(self.owner_form, &self.issuer, caller)
    }

    /// Whether `token` has the shape of a JWS compact serialization (three base64url
    /// parts), so that it is worth verifying as a JWT rather than as an API key.
    pub(crate) fn looks_like_jwt(token: &str) -> bool {
        let mut parts = token.split('.');
        let ok = |p: Option<&str>| {
            p.is_some_and(|p| {
                p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
        };
        let (h, c, s) = (parts.next(), parts.next(), parts.next());
        ok(h) && h.is_some_and(|h| !h.is_empty()) && ok(c) && ok(s) && parts.next().is_none()
    }

    /// Verifies `token`: from the cache when the very same token passed before, with
    /// the key set still held and before its `exp`; otherwise every check, and a pass is
    /// cached.
    ///
    /// # Errors
    /// [`AuthFailure::Invalid`] naming the first check that failed,
    /// [`AuthFailure::InsufficientScope`], [`AuthFailure::TenantClaimMissing`] (with
    /// `require_tenant_claim`), or [`AuthFailure::KeysUnavailable`] when the
    /// token needs a JWKS key and no key set was ever fetched.
    pub(crate) async fn verify(&self, token: &str) -> Result<Verified, AuthFailure> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(AuthFailure::Invalid(TokenProblem::TooLong));
        }
        let now = jsonwebtoken::get_current_timestamp();
        let Some(cache) = &self.cache else {
            return self.verify_fully(token, now).await.map(|(v, _)| v);
        };
        let digest = verified_cache::digest(token);
        // Read before verifying: a fetch meanwhile makes the entry stale at once.
        let generation = self.jwks.as_ref().map_or(0, Jwks::generation);
        if let Some(v) = cache.get(&digest, now, generation) {
            return Ok(v);
        }
        let (verified, exp) = self.verify_fully(token, now).await?;
        cache.insert(digest, verified.clone(), exp, now, generation);
        Ok(verified)
    }

    /// Every check of `token` at `now` (Unix seconds): what it says, and its `exp`.
    async fn verify_fully(&self, token: &str, now: u64) -> Result<(Verified, u64), AuthFailure> {
        let invalid = AuthFailure::Invalid;
        let header = match jsonwebtoken::decode_header(token) {
            Ok(h) => h,
            // `alg: none` (and any unknown algorithm) does not parse as a header.
            Err(_) if raw_alg(token).is_some() => return Err(invalid(TokenProblem::Algorithm)),
            Err(_) => return Err(invalid(TokenProblem::Malformed)),
        };
        let alg = header.alg;
        if !self.algorithms.contains(&alg) {
            return Err(invalid(TokenProblem::Algorithm));
        }
        let key = if alg.family() == AlgorithmFamily::Hmac {
            self.hmac.clone().ok_or(invalid(TokenProblem::Algorithm))?
        } else {
            let jwks = self.jwks.as_ref().ok_or(invalid(TokenProblem::Algorithm))?;
            let key = jwks
                .key_for(header.kid.as_deref(), alg)
                .await
                .map_err(|()| AuthFailure::KeysUnavailable)?
                .ok_or(invalid(TokenProblem::UnknownKey))?;
            if !key.fits(alg) {
                return Err(invalid(TokenProblem::Algorithm));
            }
            key.key
        };
        let mut validation = Validation::new(alg);
        validation.algorithms = vec![alg];
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&self.audience);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| invalid(problem(e.kind())))?;
        let claims = data.claims;
        if let Some(iat) = claims.get("iat") {
            match iat.as_f64() {
                Some(t) if t <= (now + self.leeway) as f64 => {}
                _ => return Err(invalid(TokenProblem::IssuedInFuture)),
            }
        }
        if !self.required_scopes.is_empty() {
            let granted = scopes(&claims);
            if !self
                .required_scopes
                .iter()
                .all(|s| granted.contains(&s.as_str()))
            {
                return Err(AuthFailure::InsufficientScope);
            }
        }
        let caller = claims
            .get(&self.caller_claim)
            .and_then(Value::as_str)
            // Kept bare (`owner = "claim"`), a claim must also not take the form of a
            // namespaced owner (`jwt:…`), whose tasks it would then read: the key rule.
            .filter(|c| match self.owner_form {
                OwnerForm::Claim => crate::config::key_caller_problem(c).is_none(),
                OwnerForm::Namespaced => caller_name_problem(c).is_none(),
            })
            .ok_or(invalid(TokenProblem::MissingClaim))?
            .to_owned();
        let tenants = match &self.tenant_claim {
            None => None,
            Some(name) => match claims.get(name) {
                None | Some(Value::Null) => None,
                Some(Value::String(t)) => Some(vec![t.clone()]),
                Some(Value::Array(list)) => {
                    let list: Option<Vec<String>> =
                        list.iter().map(|v| v.as_str().map(str::to_owned)).collect();
                    match list {
                        Some(l) if !l.is_empty() => Some(l),
                        _ => return Err(invalid(TokenProblem::MissingClaim)),
                    }
                }
                Some(_) => return Err(invalid(TokenProblem::MissingClaim)),
            },
        };
        if let Some(claim) = self.required_tenant_claim
            && tenants
                .as_ref()
                .and_then(|t| t.first())
                .is_none_or(String::is_empty)
        {
            return Err(AuthFailure::TenantClaimMissing(claim));
        }
        // Present (a required claim) and a number (checked by `jsonwebtoken`).
        let exp = claims.get("exp").and_then(Value::as_f64).unwrap_or(0.0) as u64;
        Ok((Verified { caller, tenants }, exp))
    }
}

/// The scopes a token grants: `scope` (space-separated, RFC 8693 §4.2) and `scp` (a
/// string or a list, as Entra ID and Okta send it).
fn scopes(claims: &Map<String, Value>) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for name in ["scope", "scp"] {
        match claims.get(name) {
            Some(Value::String(s)) => out.extend(s.split_whitespace()),
            Some(Value::Array(list)) => out.extend(list.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    out
}

/// The `alg` of a header that `jsonwebtoken` refused (e.g. `none`), if it is readable.
fn raw_alg(token: &str) -> Option<String> {
    let header = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header.trim_end_matches('='))
        .ok()?;
    let json: Value = serde_json::from_slice(&bytes).ok()?;
    json.get("alg")?.as_str().map(str::to_owned)
}

fn problem(kind: &ErrorKind) -> TokenProblem {
    match kind {
        ErrorKind::InvalidSignature
        | ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidEddsaKey
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::InvalidKeyFormat => TokenProblem::Signature,
        ErrorKind::ExpiredSignature => TokenProblem::Expired,
        ErrorKind::ImmatureSignature => TokenProblem::NotYetValid,
        ErrorKind::InvalidIssuer => TokenProblem::Issuer,
        ErrorKind::InvalidAudience => TokenProblem::Audience,
        ErrorKind::MissingRequiredClaim(_) | ErrorKind::InvalidClaimFormat(_) => {
            TokenProblem::MissingClaim
        }
        ErrorKind::InvalidAlgorithm
        | ErrorKind::MissingAlgorithm
        | ErrorKind::UnsupportedAlgorithm
        | ErrorKind::InvalidAlgorithmName => TokenProblem::Algorithm,
        _ => TokenProblem::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwt_shape() {
        assert!(JwtVerifier::looks_like_jwt("eyJh.eyJz.c2ln"));
        assert!(JwtVerifier::looks_like_jwt("eyJh.eyJz."));
        assert!(!JwtVerifier::looks_like_jwt("0123456789abcdef"));
        assert!(!JwtVerifier::looks_like_jwt("a.b"));
        assert!(!JwtVerifier::looks_like_jwt("a.b.c.d"));
        assert!(!JwtVerifier::looks_like_jwt("a.b+.c"));
        assert!(!JwtVerifier::looks_like_jwt(".b.c"));
    }

    #[test]
    fn scopes_come_from_scope_and_scp() {
        let claims: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "scope": "a b", "scp": ["c"]
        }))
        .unwrap();
        assert_eq!(scopes(&claims), ["a", "b", "c"]);
    }

    #[test]
    fn none_is_recognised_as_an_algorithm_problem() {
        let h = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        assert_eq!(raw_alg(&format!("{h}.e30.")).as_deref(), Some("none"));
    }
}
