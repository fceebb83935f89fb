//! The standard AWS credential chain, from `aws-config` (default features off: the
//! HTTP client is `aws-smithy-http-client` on rustls with ring, no aws-lc or cmake):
//! environment (`AWS_ACCESS_KEY_ID`, ...), shared config and credentials files
//! (`AWS_PROFILE`, role_arn + source_profile chains, credential_process), web identity
//! (`AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`, STS `AssumeRoleWithWebIdentity`,
//! honouring `AWS_ENDPOINT_URL_STS`), the ECS / EKS Pod Identity container endpoint
//! (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` / `_FULL_URI`,
//! `AWS_CONTAINER_AUTHORIZATION_TOKEN[_FILE]`), EC2 IMDSv2
//! (`AWS_EC2_METADATA_SERVICE_ENDPOINT`), in that order; and STS `AssumeRole` on top
//! when configured. The provider does not cache: [`super::cache`] does.

use aws_config::sts::AssumeRoleProvider;
use aws_config::{BehaviorVersion, Region};
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_http_client::tls;

use crate::upstream::auth::{SigV4Settings, TokenError};

/// The chain's provider for `settings` (its STS calls in `settings.region`), with the
/// configured role assumed on top. Reads the environment and the shared files; no
/// credential is fetched here.
///
/// # Errors
/// A [`TokenError`] when the chain has no provider.
pub async fn provider(settings: &SigV4Settings) -> Result<SharedCredentialsProvider, TokenError> {
    Ok(load(settings).await?.1)
}

/// The SDK configuration the chain was loaded with (region, HTTP client, endpoints from
/// the environment), and the provider [`provider`] returns.
///
/// # Errors
/// As [`provider`].
pub async fn load(
    settings: &SigV4Settings,
) -> Result<(aws_config::SdkConfig, SharedCredentialsProvider), TokenError> {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https();
    let sdk = aws_config::defaults(BehaviorVersion::v2026_01_12())
        .http_client(http)
        .region(Region::new(settings.region.clone()))
        .load()
        .await;
    let base = sdk
        .credentials_provider()
        .ok_or_else(|| TokenError::new("the AWS credential chain has no provider"))?;
    let provider = match &settings.assume_role {
        None => base,
        Some(role) => {
            let mut b = AssumeRoleProvider::builder(role.role_arn.clone())
                .session_name(role.session_name.clone())
                .configure(&sdk);
            if let Some(id) = &role.external_id {
                b = b.external_id(id.clone());
            }
            SharedCredentialsProvider::new(b.build_from_provider(base).await)
        }
    };
    Ok((sdk, provider))
}

/// Who the chain's credentials are, asked of STS (`sts:GetCallerIdentity`, which needs no
/// permission): `ARN (account ACCOUNT)`. For `check-config --probe`.
///
/// # Errors
/// No credentials, or STS refused them (its error code and message, never a secret).
pub async fn caller_identity(settings: &SigV4Settings) -> Result<String, TokenError> {
    let (sdk, provider) = load(settings).await?;
    let conf = aws_sdk_sts::config::Builder::from(&sdk)
        .credentials_provider(provider)
        .build();
    let out = aws_sdk_sts::Client::from_conf(conf)
        .get_caller_identity()
        .send()
        .await
        .map_err(|e| {
            let e = aws_sdk_sts::error::DisplayErrorContext(e);
            TokenError::new(format!("sts:GetCallerIdentity failed: {e}"))
        })?;
    Ok(format!(
        "{} (account {})",
        out.arn().unwrap_or("unknown"),
        out.account().unwrap_or("unknown")
    ))
}
