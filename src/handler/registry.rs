//! The registry of live task drivers, one per task being worked on or followed:
//! reaching a task's driver, starting one when none is live.

use super::driver::Driver;
use super::driver::command::{Handle, TaskKey};
use super::request_handler::RequestHandler;

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
        let mut reg = self
            .inner
            .registry
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(h) = reg.get(key).filter(|h| !h.cmd.is_closed()) {
            return f(h);
        }
        let h = Driver::spawn(self.inner.clone(), key.clone(), known_new);
        let out = f(&h);
        reg.insert(key.clone(), h);
        out
    }
}
