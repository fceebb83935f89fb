//! Giving freed memory back to the system once the gateway goes quiet.
//!
//! The `a2a-gateway` binary's allocator, mimalloc (feature `mimalloc`), returns the
//! memory it freed to the system (purges it) `MIMALLOC_PURGE_DELAY` milliseconds after
//! the free (1,000 by default), but it only looks for purges that are due inside its
//! own allocation and free paths. A gateway that went idle after a very large reply
//! thus kept the memory that reply used resident for as long as it stayed idle (238 to
//! 334 MiB five seconds after one 60 MB reply on SQLite, 273 to 356 MiB on PostgreSQL;
//! BENCHMARKS.md "Issue 14, nineteenth pass").
//!
//! [`spawn_collector`] asks mimalloc for the purges that are due (`mi_collect(false)`:
//! not forced, so memory freed less than the delay ago stays cached for reuse) every
//! [`COLLECT_EVERY`] while the gateway is quiet (`serve`: no executor run in
//! progress). Under load it does nothing: the allocator's own paths find the purges
//! then, and collecting there as well cost about 5% more CPU per relayed event on
//! SQLite in the same benchmark. `MIMALLOC_PURGE_DELAY=-1` in the environment turns
//! purging off altogether (memory stays cached for the next large reply), `0` purges
//! at once.
//!
//! Without the `mimalloc` feature (the system allocator), nothing is spawned.

use std::time::Duration;

/// How often the collector looks (1 s): with mimalloc's default purge delay, memory
/// freed by a finished reply is given back within about two seconds of the gateway
/// going quiet.
pub const COLLECT_EVERY: Duration = Duration::from_secs(1);

/// Spawns the collector on the current tokio runtime (call it from inside one); it
/// runs until the runtime stops and collects at each tick of [`COLLECT_EVERY`] where
/// `quiet()` is true. A no-op without the `mimalloc` feature. Calling it in a process
/// whose global allocator is not mimalloc is harmless: mimalloc's own heap is then
/// empty.
pub fn spawn_collector(quiet: impl Fn() -> bool + Send + 'static) {
    #[cfg(feature = "mimalloc")]
    tokio::spawn(collect_while_quiet(quiet, mi_collect));
    #[cfg(not(feature = "mimalloc"))]
    let _ = quiet;
}

/// Calls `collect` at each tick of [`COLLECT_EVERY`] where `quiet()` is true, forever.
#[cfg_attr(not(any(feature = "mimalloc", test)), allow(dead_code))]
async fn collect_while_quiet(quiet: impl Fn() -> bool, collect: impl Fn()) {
    let mut tick = tokio::time::interval(COLLECT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if quiet() {
            collect();
        }
    }
}

/// mimalloc's `mi_collect(false)`: frees the calling thread's empty pages and purges
/// what is due.
#[cfg(feature = "mimalloc")]
#[allow(unsafe_code)] // The crate's one call into C: see the SAFETY note.
fn mi_collect() {
    // SAFETY: `mi_collect` takes no pointer and may be called from any thread at any
    // time; with `force = false` it only gives back what mimalloc already holds as free.
    unsafe { libmimalloc_sys::mi_collect(false) }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn collects_once_a_second_only_while_quiet() {
        let quiet = Arc::new(AtomicBool::new(false));
        let collected = Arc::new(AtomicUsize::new(0));
        let (q, c) = (quiet.clone(), collected.clone());
        let task = tokio::spawn(collect_while_quiet(
            move || q.load(Ordering::SeqCst),
            move || {
                c.fetch_add(1, Ordering::SeqCst);
            },
        ));
        // Busy for ten seconds: nothing is collected.
        tokio::time::sleep(Duration::from_millis(10_500)).await;
        assert_eq!(collected.load(Ordering::SeqCst), 0);
        // Quiet for three seconds: one collection per tick.
        quiet.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(collected.load(Ordering::SeqCst), 3);
        // Busy again: no more.
        quiet.store(false, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(collected.load(Ordering::SeqCst), 3);
        task.abort();
    }

    #[cfg(feature = "mimalloc")]
    #[test]
    fn mi_collect_runs_in_a_process_whose_allocator_is_not_mimalloc() {
        // The test binaries keep the system allocator: the call must still be safe.
        mi_collect();
        mi_collect();
    }
}
