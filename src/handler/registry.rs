//! The registry of live task drivers, one per task being worked on or followed:
//! reaching a task's driver, starting one when none is live, and asking it a
//! [`Command`].

use tokio::sync::oneshot;

use super::driver::Driver;
use super::driver::command::{Command, Handle, TaskKey};
use super::request_handler::RequestHandler;
use crate::error::A2aError;

impl RequestHandler {
    /// Runs `f` on the task's driver handle (spawning the driver if none is
    /// live) while holding the registry lock. A driver decides to exit under the
    /// same lock, after checking for queued commands and subscribers, so a command
    /// sent or a subscription made inside `f` is never lost to a driver that
    /// exits in between.
    pub(super) fn with_handle<T>(
        &self,
        key: &TaskKey,
        known_new: bool,
        f: impl FnOnce(&Handle) -> T,
    ) -> T {
        let mut reg = self.inner.lock_registry();
        if let Some(h) = reg.get(key).filter(|h| !h.cmd.is_closed()) {
            return f(h);
        }
        let h = Driver::spawn(self.inner.clone(), key.clone(), known_new);
        let out = f(&h);
        reg.insert(key.clone(), h);
        out
    }

    /// Whether a driver of the task is live here.
    pub(super) fn has_driver(&self, key: &TaskKey) -> bool {
        self.inner
            .lock_registry()
            .get(key)
            .is_some_and(|h| !h.cmd.is_closed())
    }

    /// Asks the task's driver and waits for its answer: sends the [`Command`] that
    /// `command` builds around the reply channel (starting a driver when none is live;
    /// `known_new` as for [`with_handle`](Self::with_handle), on the first attempt
    /// only). A driver that went idle and exited just as the command was sent, or that
    /// dropped it unanswered, is asked again with a new command: three attempts in all.
    ///
    /// # Errors
    /// What `command` returns (nothing is sent then), the driver's own answer, or
    /// Internal after three attempts.
    pub(super) async fn ask<T>(
        &self,
        key: &TaskKey,
        mut known_new: bool,
        mut command: impl FnMut(oneshot::Sender<Result<T, A2aError>>) -> Result<Command, A2aError>,
    ) -> Result<T, A2aError> {
        for _ in 0..3 {
            let (tx, rx) = oneshot::channel();
            let cmd = command(tx)?;
            let sent = self.with_handle(key, known_new, |h| h.cmd.unbounded_send(cmd).is_ok());
            known_new = false;
            if !sent {
                continue; // the driver just went idle and exited; start a new one
            }
            if let Ok(r) = rx.await {
                return r;
            }
        }
        Err(A2aError::internal(
            "task driver unavailable after three attempts",
        ))
    }
}
