//! [`CredentialPool`]: one [`Credentials`] value (with its cache) per distinct
//! credential, shared by every agent of a gateway that authenticates with it.
//!
//! Two agents of one gateway (`[agents.<id>]`) whose upstream auth is the same credential
//! (the same SigV4 region and role, or the same OAuth client at the same token endpoint)
//! share one cache: one AWS credential fetch, one STS `AssumeRole`, one token request
//! for both. Different credentials never share: another role, external id, session
//! name or region; another client id, secret, scope or token endpoint (or the CA file and
//! connect timeout of the client that fetches its tokens). Kinds without a fetch (`none`,
//! `bearer`, `forward`) are built per agent: they have nothing to share.
//!
//! The key ([`CredentialKey`]) holds an OAuth client secret only as its SHA-256, and its
//! `Debug` shows neither the secret nor its hash, nor an external id.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};

use super::credentials::Credentials;
use super::settings::{AuthSettings, SigV4Settings, TokenEndpoint};

/// What makes two credentials the same (see the module docs).
#[derive(Clone, PartialEq, Eq)]
pub enum CredentialKey {
    /// `kind = "sigv4"`: the signing region, the role assumed (with its external id and
    /// session name) and the refresh margin.
    SigV4(SigV4Settings),
    /// `kind = "oauth2"`: the client, its secret's SHA-256, the scopes, the token
    /// endpoint, the refresh margin, and the CA file and connect timeout of the client
    /// that fetches the tokens.
    OAuth2 {
        /// The client id.
        client_id: String,
        /// SHA-256 of the client secret (never the secret).
        secret_sha256: [u8; 32],
        /// The scopes asked for.
        scope: Option<String>,
        /// Where the tokens come from.
        endpoint: TokenEndpoint,
        /// Refresh margin before expiry.
        refresh_before_expiry: Duration,
        /// The CA file of the token client.
        ca_file: Option<PathBuf>,
        /// The connect timeout of the token client.
        connect_timeout: Duration,
    },
}

impl fmt::Debug for CredentialKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SigV4(s) => {
                let role = s.assume_role.as_ref();
                f.debug_struct("SigV4")
                    .field("region", &s.region)
                    .field("role_arn", &role.map(|r| r.role_arn.as_str()))
                    .field(
                        "external_id",
                        &role
                            .and_then(|r| r.external_id.as_ref())
                            .map(|_| "[redacted]"),
                    )
                    .field("session_name", &role.map(|r| r.session_name.as_str()))
                    .finish_non_exhaustive()
            }
            Self::OAuth2 {
                client_id,
                scope,
                endpoint,
                ..
            } => f
                .debug_struct("OAuth2")
                .field("client_id", client_id)
                .field("client_secret", &"[redacted]")
                .field("scope", scope)
                .field("endpoint", endpoint)
                .finish_non_exhaustive(),
        }
    }
}

impl CredentialKey {
    /// The key of `auth` when it is a credential worth sharing (SigV4, OAuth2), whose
    /// tokens (for OAuth) are fetched by a client with `ca_file` and `connect_timeout`;
    /// `None` for the kinds without a fetch.
    pub fn of(
        auth: &AuthSettings,
        ca_file: Option<&std::path::Path>,
        connect_timeout: Duration,
    ) -> Option<Self> {
        match auth {
            AuthSettings::SigV4(s) => Some(Self::SigV4(s.clone())),
            AuthSettings::OAuth2(o) => Some(Self::OAuth2 {
                client_id: o.client_id.clone(),
                secret_sha256: Sha256::digest(o.client_secret.expose_secret().as_bytes()).into(),
                scope: o.scope.clone(),
                endpoint: o.endpoint.clone(),
                refresh_before_expiry: o.refresh_before_expiry,
                ca_file: ca_file.map(std::path::Path::to_path_buf),
                connect_timeout,
            }),
            AuthSettings::None | AuthSettings::Bearer(_) | AuthSettings::Forward => None,
        }
    }
}

/// One pooled credential: its key and the value every agent with that key shares.
type Entry = (CredentialKey, Arc<dyn Credentials>);

/// The credentials built so far, one per [`CredentialKey`] (see the module docs).
/// Clones share the pool.
#[derive(Clone, Default)]
pub struct CredentialPool {
    entries: Arc<Mutex<Vec<Entry>>>,
}

impl fmt::Debug for CredentialPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        f.debug_list()
            .entries(entries.iter().map(|(k, _)| k))
            .finish()
    }
}

impl CredentialPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// The credentials of `key`: the ones built for it before, else those `build`
    /// makes (kept for the next agent with the same key). Without a key (a kind
    /// without a fetch) `build` makes new ones, not kept.
    ///
    /// # Errors
    /// What `build` returns.
    pub fn get_or_build<E>(
        &self,
        key: Option<CredentialKey>,
        build: impl FnOnce() -> Result<Arc<dyn Credentials>, E>,
    ) -> Result<Arc<dyn Credentials>, E> {
        let Some(key) = key else {
            return build();
        };
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, c)) = entries.iter().find(|(k, _)| *k == key) {
            return Ok(c.clone());
        }
        let built = build()?;
        entries.push((key, built.clone()));
        Ok(built)
    }

    /// Forgets the credentials no agent uses any more (held by the pool alone): after a
    /// reload changed or removed the agents that used them.
    pub fn prune(&self) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|(_, c)| Arc::strong_count(c) > 1);
    }

    /// How many distinct credentials the pool holds.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether the pool holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::auth::credentials::NoCredentials;
    use crate::upstream::auth::settings::{AssumeRoleSettings, OAuth2Settings};
    use secrecy::SecretString;

    fn oauth(client: &str, secret: &str) -> AuthSettings {
        AuthSettings::OAuth2(OAuth2Settings {
            client_id: client.into(),
            client_secret: SecretString::from(secret.to_owned()),
            scope: Some("invoke".into()),
            endpoint: TokenEndpoint::Url("https://idp.example/token".into()),
            refresh_before_expiry: Duration::from_secs(30),
        })
    }

    fn sigv4(role: Option<(&str, Option<&str>, &str)>) -> AuthSettings {
        AuthSettings::SigV4(SigV4Settings {
            region: "us-east-1".into(),
            assume_role: role.map(|(arn, ext, name)| AssumeRoleSettings {
                role_arn: arn.into(),
                external_id: ext.map(str::to_owned),
                session_name: name.into(),
            }),
            refresh_before_expiry: Duration::from_secs(300),
        })
    }

    fn key(auth: &AuthSettings) -> Option<CredentialKey> {
        CredentialKey::of(auth, None, Duration::from_secs(5))
    }

    #[test]
    fn same_credentials_share_and_different_ones_never_do() {
        let pool = CredentialPool::new();
        let mut builds = 0;
        let mut get = |auth: &AuthSettings| {
            pool.get_or_build(key(auth), || {
                builds += 1;
                Ok::<_, ()>(Arc::new(NoCredentials) as Arc<dyn Credentials>)
            })
            .unwrap()
        };
        let a = get(&oauth("c1", "s1"));
        let b = get(&oauth("c1", "s1"));
        assert!(
            Arc::ptr_eq(&a, &b),
            "the same OAuth client shares its cache"
        );
        for other in [oauth("c2", "s1"), oauth("c1", "s2")] {
            assert!(!Arc::ptr_eq(&a, &get(&other)), "{other:?}");
        }
        let role = Some(("arn:aws:iam::1:role/r", Some("ext"), "gw"));
        let s = get(&sigv4(role));
        assert!(Arc::ptr_eq(&s, &get(&sigv4(role))));
        for other in [
            sigv4(None),
            sigv4(Some(("arn:aws:iam::1:role/other", Some("ext"), "gw"))),
            sigv4(Some(("arn:aws:iam::1:role/r", Some("ext2"), "gw"))),
            sigv4(Some(("arn:aws:iam::1:role/r", Some("ext"), "other"))),
        ] {
            assert!(!Arc::ptr_eq(&s, &get(&other)), "{other:?}");
        }
        // Kinds without a fetch are never pooled.
        let n = get(&AuthSettings::None);
        assert!(!Arc::ptr_eq(&n, &get(&AuthSettings::None)));
        assert_eq!(builds, 1 + 2 + 1 + 4 + 2);
        // What no agent holds any more is forgotten.
        drop((a, b, s, n));
        assert_eq!(pool.len(), 8);
        pool.prune();
        assert!(pool.is_empty());
    }

    #[test]
    fn keys_never_show_secrets() {
        let secret = "hunter2-client-secret";
        let k = key(&oauth("c1", secret)).unwrap();
        let shown = format!("{k:?}");
        assert!(shown.contains("c1") && !shown.contains(secret), "{shown}");
        let hash: String = Sha256::digest(secret.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(!shown.contains(&hash[..8]), "{shown}");
        let k = key(&sigv4(Some((
            "arn:aws:iam::1:role/r",
            Some("ext-id-xyz"),
            "gw",
        ))))
        .unwrap();
        let shown = format!("{k:?}");
        assert!(
            shown.contains("role/r") && !shown.contains("ext-id-xyz"),
            "{shown}"
        );
    }
}
