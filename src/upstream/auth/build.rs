//! [`from_settings`]: the one place that turns [`AuthSettings`] into the
//! [`Credentials`] value of its kind.

use std::sync::Arc;

use super::credentials::{CachedToken, Credentials, ForwardCaller, NoCredentials, StaticBearer};
use super::oauth::OAuthClientCredentials;
use super::settings::AuthSettings;
use super::sigv4::SigV4;

/// The credentials `auth` describes. OAuth fetches its tokens with the client
/// `token_http` makes (called only for OAuth), refreshing them
/// `refresh_before_expiry` before they expire. SigV4 builds its AWS credential chain
/// at its first use (no I/O here).
///
/// # Errors
/// What `token_http` returns.
pub fn from_settings<E>(
    auth: &AuthSettings,
    token_http: impl FnOnce() -> Result<reqwest::Client, E>,
) -> Result<Arc<dyn Credentials>, E> {
    Ok(match auth {
        AuthSettings::None => Arc::new(NoCredentials),
        AuthSettings::Forward => Arc::new(ForwardCaller),
        AuthSettings::Bearer(t) => Arc::new(StaticBearer::new(t.clone())),
        AuthSettings::OAuth2(o) => {
            let source = Arc::new(OAuthClientCredentials::new(o, token_http()?));
            Arc::new(CachedToken::new(source, o.refresh_before_expiry))
        }
        AuthSettings::SigV4(s) => Arc::new(SigV4::new(s.clone())),
    })
}
