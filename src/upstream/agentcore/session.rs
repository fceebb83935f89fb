//! Runtime session ids (runtime contract §1.1 "Session-ID rules"); one invocation per
//! session at a time is [`crate::upstream::turns`]'s (pitfalls §6 #9 and #10).
//!
//! The session id is `a2a-` followed by the hex SHA-256 of (tenant, owner,
//! contextId): 68 characters of `[a-z0-9-]`, starting with a letter, so it satisfies
//! both the request limit (33–256) and the response pattern
//! (`[a-zA-Z0-9][a-zA-Z0-9-_]*`, at most 100). Every task of one A2A context maps to
//! the same runtime session (same microVM, same agent memory); a different caller or
//! tenant using the same contextId gets a different session.

use sha2::{Digest, Sha256};

/// The runtime session id for a context of a caller.
pub fn session_id(tenant: &str, owner: &str, context_id: &str) -> String {
    let mut h = Sha256::new();
    // Length-prefixed fields, so ("ab", "c") and ("a", "bc") differ.
    for field in [tenant, owner, context_id] {
        h.update((field.len() as u64).to_be_bytes());
        h.update(field.as_bytes());
    }
    let digest = h.finalize();
    let mut id = String::with_capacity(68);
    id.push_str("a2a-");
    for b in digest {
        id.push_str(&format!("{b:02x}"));
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_valid_and_scoped() {
        let a = session_id("", "alice", "ctx-1");
        assert_eq!(a, session_id("", "alice", "ctx-1"));
        assert_ne!(a, session_id("", "bob", "ctx-1"));
        assert_ne!(a, session_id("t2", "alice", "ctx-1"));
        assert_ne!(session_id("a", "bc", "x"), session_id("ab", "c", "x"));
        assert!((33..=100).contains(&a.len()), "{}", a.len());
        assert!(a.as_bytes()[0].is_ascii_alphanumeric());
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
    }
}
