//! Several gateway instances on one shared store (PostgreSQL), with no sticky
//! routing and no other infrastructure.
//!
//! The store stays the only channel between instances; this module adds four
//! things on top of it, each through a [`ClusterBackend`] (implemented by the
//! PostgreSQL store, `src/store/postgres/cluster.rs`):
//!
//! - **Wake-ups.** Every committed append sends a notification carrying only the
//!   task's [`tag`] (64 bits of a hash of its key) and its last sequence number
//!   (`LISTEN/NOTIFY`, delivered after commit, a few dozen bytes). One listener
//!   connection per instance receives them and wakes the local subscribers of that
//!   task ([`Cluster::watch`]), which then read the events from the log after their
//!   last sequence number: a notification is a hint, never the data. A tag collision
//!   only causes a needless re-read. The listener's liveness is checked by a
//!   heartbeat (the instance notifies itself and expects the echo); a dropped or
//!   silent listener is replaced and **every** watch is woken, so every subscriber
//!   re-reads from its last sequence number: a lost notification delays an event,
//!   never loses it. Subscribers also re-read every [`ClusterOptions::fallback_poll`]
//!   without any wake-up, which bounds the delay if notifications stop.
//! - **Leases.** A task's driver holds the task's lease while it processes a command
//!   (a turn, a cancel, a close) and releases it when it goes idle
//!   ([`Cluster::claim`], [`Cluster::release`]). A lease names its instance; an
//!   instance is alive while its heartbeat row is younger than
//!   [`ClusterOptions::lease`]. So at most one instance writes a task's log at a time,
//!   and messages to one task are run one after the other across instances: a message
//!   arriving at an instance while another one holds the lease waits for the release
//!   (a release also notifies).
//! - **Cancel requests.** CancelTask on an instance that does not hold the lease
//!   notifies the holder (`c:` + tag); the holder's [`Cluster::cancel_requests`]
//!   yields the task's key and the handler cancels the run there (the executor's
//!   cancel path, i.e. StopRuntimeSession for AgentCore), which writes CANCELED for
//!   every instance to read.
//!
//! - **Session leases** ([`session`]). At most one invocation per runtime session is
//!   in flight across all instances: the AgentCore executor takes the session's lease
//!   ([`Cluster::lock_session`]) around each invocation, after its per-process lock.
//!   The lease is a row per session of an agent naming the instance (`a2a_session_leases`
//!   keyed by agent and session id: two agents never queue behind each other), valid
//!   while that instance heart-beats; it is deleted (and `s:` + tag notified) when the
//!   invocation ends. A waiter sleeps until that notification, re-trying at least
//!   every [`ClusterOptions::sweep_interval`], and takes a dead holder's row over once
//!   the holder's heartbeat is older than the lease. Why a row and not PostgreSQL
//!   advisory locks: a session-level advisory lock lives on one connection, so every
//!   invocation in flight (up to 15 minutes each) would pin a pooled connection, and
//!   every waiter another one blocked inside `pg_advisory_lock`, where a cancel can
//!   only abandon the connection; through PgBouncer in transaction mode session locks
//!   do not work at all. The row costs two short statements per invocation and no
//!   connection while held or waited for. Order among instances waiting for one
//!   session is not first-come-first-served (within an instance it is).
//!
//! Recovery: the handler's sweep ([`Cluster::orphans`] every
//! [`ClusterOptions::sweep_interval`]) ends FAILED every SUBMITTED, WORKING or
//! AUTH_REQUIRED task whose lease belongs to an instance without a heartbeat for the
//! lease time, or that has no lease at all, naming the lost instance. Taking a task
//! over is one conditional row update, so two instances never both close it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::scope::TaskKey;
use crate::store::StoreError;
use crate::store::cluster::{ClusterBackend, Listener, tag};

pub mod session;

pub use crate::store::cluster::{Holder, Orphan};
pub use session::{AgentSessionLeases, SessionLease, session_tag};

/// Timings of a [`Cluster`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOptions {
    /// An instance without a heartbeat for this long is dead (`[store] lease_secs`).
    pub lease: Duration,
    /// Between instance heartbeats (a sixth of the lease).
    pub heartbeat: Duration,
    /// Between sweeps for orphaned tasks (a sixth of the lease).
    pub sweep_interval: Duration,
    /// Between listener heartbeats; an echo missing for this long replaces the
    /// listener.
    pub listener_heartbeat: Duration,
    /// A subscriber re-reads the log at least this often without a wake-up.
    pub fallback_poll: Duration,
}

impl ClusterOptions {
    /// The timings for a lease of `lease`.
    pub fn with_lease(lease: Duration) -> Self {
        let sixth = (lease / 6).max(Duration::from_millis(200));
        Self {
            lease,
            heartbeat: sixth,
            sweep_interval: sixth,
            listener_heartbeat: sixth.clamp(Duration::from_millis(200), Duration::from_secs(5)),
            fallback_poll: Duration::from_secs(5),
        }
    }
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self::with_lease(Duration::from_secs(30))
    }
}

/// A subscriber's wake-up: resolves when the task's tag was notified, when the
/// listener was replaced, or after the fallback poll interval.
pub struct Wake {
    rx: watch::Receiver<u64>,
    poll: Duration,
}

impl Wake {
    /// Waits for the next reason to re-read the task's log.
    pub async fn changed(&mut self) {
        tokio::select! {
            r = self.rx.changed() => {
                if r.is_err() {
                    tokio::time::sleep(self.poll).await;
                }
            }
            _ = tokio::time::sleep(self.poll) => {}
        }
    }
}

struct Shared {
    backend: Arc<dyn ClusterBackend>,
    instance: String,
    options: ClusterOptions,
    /// Wake-up senders by tag.
    watches: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// Tasks whose lease this instance holds, by tag.
    claimed: Mutex<HashMap<String, TaskKey>>,
    cancels: mpsc::UnboundedSender<TaskKey>,
    /// Listener heartbeat echoes received.
    echo: watch::Sender<u64>,
}

/// This instance's membership of the cluster (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("instance", &self.shared.instance)
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

/// A new instance id: `name` (the host name when empty) and 8 random hex digits,
/// so a restarted process never takes its predecessor's leases for its own.
pub fn instance_id(name: &str) -> String {
    let name = if name.is_empty() {
        std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "gateway".to_owned())
    } else {
        name.to_owned()
    };
    format!("{name}-{:08x}", rand::random::<u32>())
}

impl Cluster {
    /// Joins the cluster as `instance`: writes the first heartbeat, opens the
    /// listener, and starts the heartbeat and listener tasks. The second value yields
    /// the keys of tasks other instances asked this one to cancel.
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the first heartbeat or listener fails.
    pub async fn join(
        backend: Arc<dyn ClusterBackend>,
        instance: String,
        options: ClusterOptions,
    ) -> Result<(Self, mpsc::UnboundedReceiver<TaskKey>), StoreError> {
        backend.heartbeat(&instance).await?;
        let first = backend.listen().await?;
        backend.enable_notifications();
        let (cancels, cancel_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            backend,
            instance,
            options,
            watches: Mutex::new(HashMap::new()),
            claimed: Mutex::new(HashMap::new()),
            cancels,
            echo: watch::channel(0).0,
        });
        let stop = CancellationToken::new();
        tokio::spawn(heartbeats(shared.clone(), stop.clone()));
        tokio::spawn(listen_loop(shared.clone(), first, stop.clone()));
        tracing::info!(instance = %shared.instance, lease_secs = shared.options.lease.as_secs_f64(), "joined the gateway cluster");
        Ok((Self { shared, stop }, cancel_rx))
    }

    /// This instance's id.
    pub fn instance(&self) -> &str {
        &self.shared.instance
    }

    /// The timings.
    pub fn options(&self) -> &ClusterOptions {
        &self.shared.options
    }

    /// The wake-up of the task's subscribers on this instance.
    pub fn watch(&self, key: &TaskKey) -> Wake {
        self.wake_for(tag(&key.0, &key.1), self.shared.options.fallback_poll)
    }

    /// A wake-up on notifications of `tag`, or after `poll` without one.
    fn wake_for(&self, tag: String, poll: Duration) -> Wake {
        let mut map = lock(&self.shared.watches);
        let rx = map
            .entry(tag)
            .or_insert_with(|| watch::channel(0).0)
            .subscribe();
        Wake { rx, poll }
    }

    /// Takes the task's lease for this instance. `Ok(true)`: newly taken (what other
    /// instances wrote since must be re-read); `Ok(false)`: already held here.
    ///
    /// # Errors
    /// `Err(Ok(holder))` when another instance holds it, `Err(Err(_))` on a store
    /// failure.
    pub async fn claim(&self, key: &TaskKey) -> Result<bool, Result<String, StoreError>> {
        let tag = tag(&key.0, &key.1);
        if lock(&self.shared.claimed).contains_key(&tag) {
            return Ok(false);
        }
        match self
            .shared
            .backend
            .claim(&self.shared.instance, &key.0, &key.1)
            .await
        {
            Ok(Ok(())) => {
                lock(&self.shared.claimed).insert(tag, key.clone());
                Ok(true)
            }
            Ok(Err(holder)) => Err(Ok(holder)),
            Err(e) => Err(Err(e)),
        }
    }

    /// Whether this instance holds the task's lease.
    pub fn holds(&self, key: &TaskKey) -> bool {
        lock(&self.shared.claimed).contains_key(&tag(&key.0, &key.1))
    }

    /// Releases the task's lease if this instance holds it (a failure is logged: the
    /// lease then lapses with this instance, or goes at its next release).
    pub async fn release(&self, key: &TaskKey) {
        let tag = tag(&key.0, &key.1);
        if lock(&self.shared.claimed).remove(&tag).is_none() {
            return;
        }
        if let Err(e) = self
            .shared
            .backend
            .release(&self.shared.instance, &key.0, &key.1, &tag)
            .await
        {
            tracing::warn!(task.id = %key.1, error = %e, "cannot release the task's lease");
        }
    }

    /// Who holds the task's lease (alive: a heartbeat within the lease time).
    ///
    /// # Errors
    /// [`StoreError::Backend`].
    pub async fn holder(&self, key: &TaskKey) -> Result<Option<Holder>, StoreError> {
        self.shared
            .backend
            .holder(&key.0, &key.1, self.shared.options.lease)
            .await
    }

    /// Whether `holder` has missed its heartbeat: none written for more than one and a
    /// half heartbeat intervals (`None` age: it has no heartbeat row at all). Such an
    /// instance has most likely stopped (killed, frozen, cut off) but still holds its
    /// leases until they lapse ([`ClusterOptions::lease`]); a live but slow one only
    /// looks so for a moment.
    pub fn missed_heartbeat(&self, holder: &Holder) -> bool {
        let every = self.shared.options.heartbeat;
        holder
            .heartbeat_age
            .is_none_or(|age| age > every + every / 2)
    }

    /// Asks the instance holding the task's lease to cancel it.
    ///
    /// # Errors
    /// [`StoreError::Backend`].
    pub async fn request_cancel(&self, key: &TaskKey) -> Result<(), StoreError> {
        let payload = format!("c:{}", tag(&key.0, &key.1));
        self.shared.backend.notify(&payload).await
    }

    /// Orphaned tasks (see [`ClusterBackend::orphans`]), up to `limit`.
    ///
    /// # Errors
    /// [`StoreError::Backend`].
    pub async fn orphans(&self, limit: usize) -> Result<Vec<Orphan>, StoreError> {
        self.shared
            .backend
            .orphans(self.shared.options.lease, limit)
            .await
    }

    /// Takes an orphan's lease for this instance; `true` when this instance now
    /// holds it and should close the task.
    ///
    /// # Errors
    /// [`StoreError::Backend`].
    pub async fn take_over(&self, orphan: &Orphan) -> Result<bool, StoreError> {
        let taken = self
            .shared
            .backend
            .take_over(&self.shared.instance, orphan)
            .await?;
        if taken {
            lock(&self.shared.claimed).insert(
                tag(&orphan.scope, &orphan.task_id),
                (orphan.scope.clone(), orphan.task_id.clone()),
            );
        }
        Ok(taken)
    }

    /// Leaves the cluster at shutdown: stops the background tasks, drops this
    /// instance's leases and row.
    pub async fn leave(&self) {
        self.stop.cancel();
        if let Err(e) = self.shared.backend.leave(&self.shared.instance).await {
            tracing::warn!(error = %e, "cannot remove this instance's leases");
        }
    }

    /// Stops the background tasks without leaving (the instance looks dead to the
    /// others once its heartbeat lapses): for tests of a crashed instance.
    pub fn halt(&self) {
        self.stop.cancel();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Wakes every watch: after the listener was replaced, any notification may have
    /// been lost.
    fn wake_all(&self) {
        for tx in lock(&self.watches).values() {
            tx.send_modify(|n| *n += 1);
        }
    }

    fn dispatch(&self, payload: &str) {
        let mut parts = payload.splitn(3, ':');
        let (kind, tag) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        match kind {
            // An append (`e:TAG:SEQ`), a released task lease (`r:TAG`) or a
            // released session lease (`s:TAG`).
            "e" | "r" | "s" => {
                if let Some(tx) = lock(&self.watches).get(tag) {
                    tx.send_modify(|n| *n += 1);
                }
            }
            "c" => {
                let key = lock(&self.claimed).get(tag).cloned();
                if let Some(key) = key {
                    let _ = self.cancels.send(key);
                }
            }
            // `h:INSTANCE:N`, this instance's listener heartbeat.
            "h" => {
                let mut rest = payload[2..].rsplitn(2, ':');
                let n = rest.next().and_then(|n| n.parse::<u64>().ok());
                if rest.next() == Some(self.instance.as_str())
                    && let Some(n) = n
                {
                    self.echo.send_replace(n);
                }
            }
            _ => {}
        }
    }
}

/// Writes the instance heartbeat, and forgets watches nobody holds.
async fn heartbeats(shared: Arc<Shared>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(shared.options.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = shared.backend.heartbeat(&shared.instance).await {
            tracing::warn!(error = %e, "cannot write this instance's heartbeat");
        }
        lock(&shared.watches).retain(|_, tx| tx.receiver_count() > 0);
    }
}

/// Keeps one listener connection: reads it in a task of its own, checks it with a
/// heartbeat, and replaces it (waking every watch) when it drops or falls silent.
async fn listen_loop(shared: Arc<Shared>, first: Box<dyn Listener>, stop: CancellationToken) {
    let mut next = Some(first);
    let mut n = 0u64;
    let mut backoff = Duration::from_millis(100);
    loop {
        let listener = match next.take() {
            Some(l) => l,
            None => match shared.backend.listen().await {
                Ok(l) => {
                    backoff = Duration::from_millis(100);
                    tracing::info!("notification listener reconnected; subscribers re-read");
                    l
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "cannot open the notification listener");
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            },
        };
        // Everything sent before this listener listened may be unseen.
        shared.wake_all();
        let reader = spawn_reader(shared.clone(), listener);
        let mut echo = shared.echo.subscribe();
        let mut tick = tokio::time::interval(shared.options.listener_heartbeat);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        'check: loop {
            tokio::select! {
                _ = stop.cancelled() => { reader.abort(); return; }
                _ = tick.tick() => {}
            }
            if reader.is_finished() {
                break 'check;
            }
            n += 1;
            let payload = format!("h:{}:{n}", shared.instance);
            if let Err(e) = shared.backend.notify(&payload).await {
                tracing::warn!(error = %e, "cannot send the listener heartbeat");
                continue;
            }
            let deadline = tokio::time::sleep(shared.options.listener_heartbeat * 2);
            tokio::pin!(deadline);
            loop {
                if *echo.borrow_and_update() >= n {
                    continue 'check;
                }
                tokio::select! {
                    _ = stop.cancelled() => { reader.abort(); return; }
                    r = echo.changed() => if r.is_err() { break 'check },
                    _ = &mut deadline => {
                        tracing::warn!("notification listener silent (no heartbeat echo); replacing it");
                        break 'check;
                    }
                }
            }
        }
        reader.abort();
    }
}

fn spawn_reader(shared: Arc<Shared>, mut listener: Box<dyn Listener>) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match listener.recv().await {
                Ok(Some(payload)) => shared.dispatch(&payload),
                Ok(None) => {
                    tracing::warn!("notification listener connection lost; subscribers re-read");
                    shared.wake_all();
                }
                Err(e) => {
                    tracing::warn!(error = %e, "notification listener failed");
                    return;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_ids_differ_per_process_start() {
        let (a, b) = (instance_id("gw"), instance_id("gw"));
        assert!(a.starts_with("gw-") && b.starts_with("gw-"));
        assert_ne!(a, b);
    }
}
