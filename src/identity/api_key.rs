//! Static API keys (`[[server.auth.keys]]`), presented as `Authorization: Bearer <key>`.
//!
//! Only SHA-256 digests are held. The presented key is hashed and compared with **every**
//! configured digest in constant time (`subtle`), so neither the position of a match nor
//! the length of a common prefix shows in the timing. A caller may have several keys
//! (rotation with overlap).

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::{SHA256_LEN, ServerAuthConfig};

/// One accepted key: who it stands for, its tenant, and the SHA-256 of the key.
#[derive(Clone)]
pub(crate) struct Key {
    pub(crate) caller: String,
    pub(crate) tenant: Option<String>,
    pub(crate) digest: [u8; SHA256_LEN],
}

/// The accepted keys.
#[derive(Clone, Default)]
pub(crate) struct ApiKeys {
    pub(crate) keys: Vec<Key>,
}

impl ApiKeys {
    /// The keys of `[[server.auth.keys]]` that have a digest (after load, all of them).
    pub(crate) fn from_config(config: &ServerAuthConfig) -> Self {
        Self {
            keys: config
                .keys
                .iter()
                .filter_map(|k| {
                    Some(Key {
                        caller: k.caller.clone(),
                        tenant: k.tenant.clone(),
                        digest: k.digest()?,
                    })
                })
                .collect(),
        }
    }

    /// The key `token` is, if any: every digest is compared, whatever matched before.
    pub(crate) fn find(&self, token: &str) -> Option<&Key> {
        let presented: [u8; SHA256_LEN] = Sha256::digest(token.as_bytes()).into();
        let mut matched = None;
        for key in &self.keys {
            if bool::from(presented.ct_eq(&key.digest)) {
                matched = Some(key);
            }
        }
        matched
    }

    /// The distinct caller names (for `Debug`).
    pub(crate) fn callers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for k in &self.keys {
            if !out.contains(&k.caller.as_str()) {
                out.push(&k.caller);
            }
        }
        out
    }
}
