//! AWS Signature Version 4 (IAM inbound auth on the runtime; runtime contract §3, §8):
//! [`SigV4`], the [`Credentials`] that sign each request, over
//!
//! - [`chain`]: the standard AWS credential chain (`aws-config`), with an optional
//!   STS `AssumeRole` on top;
//! - [`cache`]: our credential cache (single-flight refresh before expiry, valid
//!   credentials kept when a refresh fails, never expired ones);
//! - [`signer`]: SigV4 over the exact request sent (`aws-sigv4`'s key derivation, the
//!   daily signing key cached, `ring`'s HMAC; the crate's whole `sign` as the reference
//!   and for any other request shape), with [`canonical`], the canonical request it hashes.

pub mod cache;
pub mod canonical;
pub mod chain;
pub mod signer;

use std::time::SystemTime;

use async_trait::async_trait;
use aws_credential_types::provider::SharedCredentialsProvider;
use secrecy::SecretString;

use super::credentials::Credentials;
use super::settings::SigV4Settings;
use super::token::TokenError;
use crate::executor::CallContext;
pub use cache::CredentialCache;
pub use signer::SERVICE;

/// AWS exceptions that mean "these credentials expired or were rotated": the cache
/// drops them and the request is sent once more, signed with fresh ones.
pub const STALE_CREDENTIAL_ERRORS: &[&str] = &[
    "ExpiredTokenException",
    "ExpiredToken",
    "InvalidClientTokenId",
];

/// SigV4-signed requests (`[upstream.auth] kind = "sigv4"`): service
/// `bedrock-agentcore`, the configured region, credentials from the AWS chain through
/// one [`CredentialCache`]. No bearer token is ever sent.
pub struct SigV4 {
    settings: SigV4Settings,
    /// Made at first use (building the chain reads files and may be async).
    cache: tokio::sync::OnceCell<CredentialCache>,
    signer: signer::Signer,
}

impl std::fmt::Debug for SigV4 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigV4")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl SigV4 {
    /// Signs with credentials from the standard AWS chain (built at first use).
    pub fn new(settings: SigV4Settings) -> Self {
        Self {
            settings,
            cache: tokio::sync::OnceCell::new(),
            signer: signer::Signer::new(),
        }
    }

    /// Signs with credentials from `provider` (a test's, a bench's), cached the same way.
    pub fn with_provider(settings: SigV4Settings, provider: SharedCredentialsProvider) -> Self {
        let cache = CredentialCache::new(provider, settings.refresh_before_expiry);
        Self {
            settings,
            cache: tokio::sync::OnceCell::new_with(Some(cache)),
            signer: signer::Signer::new(),
        }
    }

    async fn cache(&self) -> Result<&CredentialCache, TokenError> {
        // The chain's future is large and awaited once: boxed, so that every request's
        // `authorize` future does not carry (and copy) its room.
        self.cache
            .get_or_try_init(|| {
                Box::pin(async {
                    let provider = chain::provider(&self.settings).await?;
                    Ok(CredentialCache::new(
                        provider,
                        self.settings.refresh_before_expiry,
                    ))
                })
            })
            .await
    }
}

/// Where the chain's credentials come from, for `check-config`: one fetch through the
/// chain (and the assumed role) for `settings`, described by the provider that
/// answered, the access key id shortened (`ASIA…WXYZ`), the account when the source
/// tells it, and the expiry. Never a secret.
///
/// # Errors
/// Why the chain found no credentials.
pub async fn describe_source(settings: &SigV4Settings) -> Result<String, TokenError> {
    let provider = chain::provider(settings).await?;
    let cache = CredentialCache::new(provider, settings.refresh_before_expiry);
    let c = cache.get().await?;
    let key = c.access_key_id();
    let short = match (
        key.get(..4),
        key.len().checked_sub(4).and_then(|n| key.get(n..)),
    ) {
        (Some(head), Some(tail)) if key.len() > 8 => format!("{head}…{tail}"),
        _ => "…".to_owned(),
    };
    let mut out = format!(
        "AWS credentials from the chain's {} provider (access key {short}",
        provider_name(&c)
    );
    if let Some(account) = c.account_id() {
        out.push_str(&format!(", account {}", account.as_str()));
    }
    match c.expiry() {
        None => out.push_str(", no expiry)"),
        Some(at) => {
            let left = at
                .duration_since(SystemTime::now())
                .unwrap_or_default()
                .as_secs();
            let when = httpdate::fmt_http_date(at);
            out.push_str(&format!(", expiring {when}, in {left} s)"));
        }
    }
    if let Some(role) = &settings.assume_role {
        out.push_str(&format!(", then the role {} (AssumeRole)", role.role_arn));
    }
    Ok(out)
}

/// The name of the provider that made `c` (`Environment`, `ProfileFile`,
/// `WebIdentityToken`, `EcsContainer`, `IMDSv2`, `AssumeRoleProvider`, ...).
/// `aws-credential-types` shows it only in `Debug` (whose secret is redacted).
fn provider_name(c: &aws_credential_types::Credentials) -> String {
    let debug = format!("{c:?}");
    debug
        .split_once("provider_name: \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map_or_else(|| "unnamed".to_owned(), |(name, _)| name.to_owned())
}

#[async_trait]
impl Credentials for SigV4 {
    /// No bearer token: SigV4 signs instead ([`authorize`](Self::authorize)).
    async fn token(&self, _caller: &CallContext) -> Result<Option<SecretString>, TokenError> {
        Ok(None)
    }

    async fn authorize(
        &self,
        request: &mut reqwest::Request,
        _caller: &CallContext,
    ) -> Result<Option<SecretString>, TokenError> {
        let credentials = self.cache().await?.get().await?;
        self.signer.sign(
            request,
            &credentials,
            signer::Scope {
                region: &self.settings.region,
                service: SERVICE,
            },
            SystemTime::now(),
        )?;
        Ok(None)
    }

    fn on_rejected(&self, status: u16, error_type: Option<&str>) -> bool {
        let stale =
            status == 403 && error_type.is_some_and(|t| STALE_CREDENTIAL_ERRORS.contains(&t));
        if stale && let Some(cache) = self.cache.get() {
            cache.invalidate();
        }
        stale
    }

    async fn ready(&self) -> Result<(), TokenError> {
        self.cache().await?.get().await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_provider_name_is_read_from_debug() {
        let c = aws_credential_types::Credentials::new("AKID", "s3cret", None, None, "Environment");
        assert_eq!(super::provider_name(&c), "Environment");
    }
}
