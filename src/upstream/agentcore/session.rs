//! Runtime session ids and the one-invocation-per-session lock (runtime contract
//! §1.1 "Session-ID rules", pitfalls §6 #9 and #10).
//!
//! The session id is `a2a-` followed by the hex SHA-256 of (tenant, owner,
//! contextId): 68 characters of `[a-z0-9-]`, starting with a letter, so it satisfies
//! both the request limit (33–256) and the response pattern
//! (`[a-zA-Z0-9][a-zA-Z0-9-_]*`, at most 100). Every task of one A2A context maps to
//! the same runtime session (same microVM, same agent memory); a different caller or
//! tenant using the same contextId gets a different session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

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

/// Serialises invocations per runtime session inside this process: the agent's
/// in-memory state is not safe under concurrent invocations of one session, and
/// the runtime does not refuse them. A second task of the same context waits until
/// the first one's invocation is over. Entries disappear when no one holds or waits
/// for them.
#[derive(Debug, Default)]
pub struct SessionLocks {
    locks: Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>,
}

/// Holds a session's turn; dropping it lets the next invocation in.
pub type SessionGuard = tokio::sync::OwnedMutexGuard<()>;

impl SessionLocks {
    /// Waits for the turn of `session`. Cancel-safe: dropping the future gives up the
    /// place in line.
    pub async fn lock(&self, session: &str) -> SessionGuard {
        self.entry(session).lock_owned().await
    }

    /// The turn of `session` if no one holds it now; `None` when an invocation of the
    /// session is in flight (the caller then waits with [`lock`](Self::lock)).
    pub fn try_lock(&self, session: &str) -> Option<SessionGuard> {
        self.entry(session).try_lock_owned().ok()
    }

    fn entry(&self, session: &str) -> Arc<tokio::sync::Mutex<()>> {
        {
            let mut map = self.locks.lock().expect("session map lock");
            if let Some(l) = map.get(session).and_then(Weak::upgrade) {
                l
            } else {
                if map.len() >= 1024 {
                    map.retain(|_, w| w.strong_count() > 0);
                }
                let l = Arc::new(tokio::sync::Mutex::new(()));
                map.insert(session.to_owned(), Arc::downgrade(&l));
                l
            }
        }
    }

    /// Whether an invocation of `session` is in flight or waiting (for tests and metrics).
    pub fn is_busy(&self, session: &str) -> bool {
        let map = self.locks.lock().expect("session map lock");
        map.get(session).is_some_and(|w| w.strong_count() > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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

    #[tokio::test]
    async fn second_invocation_waits_its_turn() {
        let locks = Arc::new(SessionLocks::default());
        let g = locks.lock("s").await;
        let l2 = locks.clone();
        let waiter = tokio::spawn(async move {
            let _g = l2.lock("s").await;
        });
        // A different session is not blocked.
        let _other = locks.lock("t").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished());
        drop(g);
        waiter.await.unwrap();
        assert!(!locks.is_busy("s"));
    }
}
