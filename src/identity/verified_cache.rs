//! The tokens already verified, so that a caller presenting the same JWT on every request
//! (as a client-credentials caller does until its token expires) pays the signature check
//! once, not on every request.
//!
//! What makes reusing a verification safe:
//!
//! - an entry is keyed by the SHA-256 of the whole token (header, claims and signature), so
//!   only the very same bytes hit it; the token itself is never kept;
//! - only successes are kept (a refused token is checked in full every time it comes);
//! - an entry is used only strictly before the token's `exp` (without the leeway: after it
//!   the full check, with its leeway, decides);
//! - an entry is used only while the key set it was verified with is still the one held:
//!   every JWKS fetch that installs keys starts a new generation, so a key removed at the
//!   provider stops its tokens at the next refresh, exactly as without the cache;
//! - everything else a verification decides (issuer, audience, algorithms, required
//!   scopes, the caller and tenant claims) comes from the configuration, which does not
//!   change while the gateway runs;
//! - at most [`CAPACITY`] entries: when full, expired and old-generation entries are
//!   dropped, and if that frees nothing the whole cache is emptied.

use std::collections::HashMap;
use std::sync::RwLock;

use sha2::{Digest, Sha256};

/// What a verified token says about its bearer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verified {
    /// The caller claim's value.
    pub(crate) caller: String,
    /// The tenant claim's values (first: the default), when the claim is configured and
    /// present.
    pub(crate) tenants: Option<Vec<String>>,
}

/// Most entries held (each a few hundred bytes).
pub const CAPACITY: usize = 10_000;

/// The SHA-256 of a token: the cache key.
pub(crate) type TokenDigest = [u8; 32];

/// The digest `token` is cached under.
pub(crate) fn digest(token: &str) -> TokenDigest {
    Sha256::digest(token.as_bytes()).into()
}

struct Entry {
    verified: Verified,
    /// The token's `exp` (Unix seconds): the entry is used while now < `exp`.
    exp: u64,
    /// The key-set generation the token was verified with.
    generation: u64,
}

/// Verified tokens by digest.
#[derive(Default)]
pub(crate) struct VerifiedCache {
    entries: RwLock<HashMap<TokenDigest, Entry>>,
}

impl VerifiedCache {
    /// What the token with `digest` was verified to say, if it was verified with key-set
    /// `generation` and `now` (Unix seconds) is before its `exp`.
    pub(crate) fn get(&self, digest: &TokenDigest, now: u64, generation: u64) -> Option<Verified> {
        let entries = self.entries.read().ok()?;
        let e = entries.get(digest)?;
        (now < e.exp && e.generation == generation).then(|| e.verified.clone())
    }

    /// Keeps `verified` for the token with `digest`, expiring at `exp` (Unix seconds),
    /// verified with key-set `generation`.
    pub(crate) fn insert(
        &self,
        digest: TokenDigest,
        verified: Verified,
        exp: u64,
        now: u64,
        generation: u64,
    ) {
        if exp <= now {
            return;
        }
        let Ok(mut entries) = self.entries.write() else {
            return;
        };
        if entries.len() >= CAPACITY && !entries.contains_key(&digest) {
            entries.retain(|_, e| now < e.exp && e.generation == generation);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        entries.insert(
            digest,
            Entry {
                verified,
                exp,
                generation,
            },
        );
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.read().map(|e| e.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verified(caller: &str) -> Verified {
        Verified {
            caller: caller.into(),
            tenants: Some(vec!["t1".into()]),
        }
    }

    #[test]
    fn a_hit_needs_the_same_token_before_exp_and_the_same_key_set() {
        let cache = VerifiedCache::default();
        let (a, b) = (digest("token-a"), digest("token-b"));
        cache.insert(a, verified("alice"), 1_000, 900, 1);
        assert_eq!(cache.get(&a, 900, 1), Some(verified("alice")));
        assert_eq!(cache.get(&a, 999, 1), Some(verified("alice")));
        assert_eq!(cache.get(&b, 900, 1), None, "another token");
        assert_eq!(
            cache.get(&a, 1_000, 1),
            None,
            "at exp: the full check decides"
        );
        assert_eq!(cache.get(&a, 900, 2), None, "the key set changed since");
    }

    #[test]
    fn expired_tokens_are_not_kept() {
        let cache = VerifiedCache::default();
        cache.insert(digest("t"), verified("c"), 100, 100, 1);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn a_full_cache_drops_stale_entries_first_then_everything() {
        let cache = VerifiedCache::default();
        for i in 0..CAPACITY {
            // Half of them expire at 50, half at 1000.
            let exp = if i % 2 == 0 { 50 } else { 1_000 };
            cache.insert(digest(&format!("t{i}")), verified("c"), exp, 10, 1);
        }
        assert_eq!(cache.len(), CAPACITY);
        cache.insert(digest("new"), verified("n"), 1_000, 60, 1);
        assert_eq!(cache.len(), CAPACITY / 2 + 1);
        assert_eq!(cache.get(&digest("t1"), 60, 1), Some(verified("c")));
        // Full of live entries: emptied, then the new one is kept.
        for i in 0..CAPACITY {
            cache.insert(digest(&format!("u{i}")), verified("c"), 1_000, 60, 1);
        }
        cache.insert(digest("newer"), verified("n"), 1_000, 60, 1);
        assert!(cache.len() <= CAPACITY);
        assert_eq!(cache.get(&digest("newer"), 60, 1), Some(verified("n")));
    }
}
