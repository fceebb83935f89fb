//! One invocation per session at a time inside this process: [`SessionLocks`]. Across
//! the instances of a cluster the executor also takes the session's lease
//! ([`crate::executor::SessionLeases`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

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
