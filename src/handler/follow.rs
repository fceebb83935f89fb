//! Following a task's event log: live events from the task's broadcast bus (one
//! [`EventGroup`] per store write), with
//! gaps (a lagging subscriber, a late subscription, a resume from a cursor) filled
//! from the store. A subscriber never silently skips an event: every sequence
//! number after the starting point is delivered once, in order.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use super::driver::command::EventGroup;
use crate::error::A2aError;
use crate::scope::Scope;
use crate::store::{StoreError, StoredEvent, TaskStore};

/// Events read from the store per refill, at most.
const REFILL_BATCH: usize = 512;
/// The JSON bytes of the events of one refill, at most (1 MiB; one event larger than
/// this comes alone): what a subscriber catching up from the store holds at once, so
/// that many resumes of a reply of large chunks do not each hold 512 of them.
const REFILL_BYTES: u64 = 1024 * 1024;

/// The events to ask for in the refill after one that read `n` events of `bytes` bytes
/// of JSON (as the SQL stores read it; 0 when not known): about twice what fits
/// [`REFILL_BYTES`] at their average size, at most [`REFILL_BATCH`]. A SQL store looks
/// at up to that many rows to find where the byte bound falls, and on SQLite each large
/// row it looks at is a page read (a task of 200 KB chunks: 60 reads of a 60 MB replay
/// took twice as long as one read when each looked 512 rows ahead).
fn next_refill_limit(n: usize, bytes: u64) -> usize {
    if n == 0 || bytes == 0 {
        return REFILL_BATCH;
    }
    let fit = REFILL_BYTES / (bytes / n as u64).max(1);
    usize::try_from(fit.saturating_mul(2).saturating_add(1))
        .unwrap_or(REFILL_BATCH)
        .min(REFILL_BATCH)
}
/// How long a subscriber in a cluster retries a failing read before its stream ends
/// with the error.
const REFILL_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// A cursor over one task's events with `seq > last_seq`.
pub(crate) struct Follow {
    store: Arc<dyn TaskStore>,
    scope: Scope,
    task_id: String,
    last_seq: u64,
    live: Option<broadcast::Receiver<EventGroup>>,
    /// The live group being delivered and the index of its next event.
    group: Option<(EventGroup, usize)>,
    backlog: VecDeque<Arc<StoredEvent>>,
    needs_fill: bool,
    more_in_store: bool,
    /// The events the next refill asks for ([`next_refill_limit`]).
    refill_limit: usize,
    /// Several instances: wake-ups for events other instances write (see
    /// [`crate::cluster`]); they come from the store, not the bus.
    wake: Option<crate::cluster::Wake>,
}

impl Follow {
    /// Follows events after `after`. `live` is the task's bus (subscribed before
    /// `after` was read, so nothing falls between), or `None` to replay the store only.
    /// `fill_first`: read the store before waiting on live events (a resume).
    pub(crate) fn new(
        store: Arc<dyn TaskStore>,
        scope: Scope,
        task_id: String,
        after: u64,
        live: Option<broadcast::Receiver<EventGroup>>,
        fill_first: bool,
    ) -> Self {
        Self {
            store,
            scope,
            task_id,
            last_seq: after,
            live,
            group: None,
            backlog: VecDeque::new(),
            needs_fill: fill_first,
            more_in_store: false,
            refill_limit: REFILL_BATCH,
            wake: None,
        }
    }

    /// Also re-reads the store on each of `wake`'s wake-ups (another instance may be
    /// the one writing the task).
    pub(crate) fn with_wake(mut self, wake: Option<crate::cluster::Wake>) -> Self {
        self.wake = wake;
        self
    }

    /// The followed task's id.
    pub(crate) fn task_id(&self) -> &str {
        &self.task_id
    }

    /// Reads the events after the cursor into the backlog. In a cluster (with a
    /// wake-up) a read failing in the database ([`StoreError::Backend`], as in the
    /// driver's write retries) is retried for up to [`REFILL_RETRY_FOR`]: a restart
    /// or fail-over of the shared database drops every connection at once, and the
    /// subscriber then only waits for it instead of ending its stream with the error.
    async fn refill(&mut self) -> Result<bool, A2aError> {
        if self.wake.is_none() {
            return self.refill_once().await.map_err(A2aError::internal);
        }
        // Boxed: the retries' timer would otherwise size every subscriber's future
        // (it is kept for the whole life of an open stream).
        Box::pin(self.refill_retrying()).await
    }

    async fn refill_retrying(&mut self) -> Result<bool, A2aError> {
        let started = tokio::time::Instant::now();
        let mut delay = std::time::Duration::from_millis(100);
        loop {
            match self.refill_once().await {
                Err(e @ StoreError::Backend(_)) if started.elapsed() + delay < REFILL_RETRY_FOR => {
                    tracing::warn!(task.id = %self.task_id, error = %e, retry_in_ms = delay.as_millis() as u64, "reading the task's events failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(std::time::Duration::from_secs(2));
                }
                r => return r.map_err(A2aError::internal),
            }
        }
    }

    async fn refill_once(&mut self) -> Result<bool, StoreError> {
        let events = self
            .store
            .events_after(
                &self.scope,
                &self.task_id,
                self.last_seq,
                self.refill_limit,
                REFILL_BYTES,
            )
            .await?;
        let got = !events.is_empty();
        let bytes = events
            .iter()
            .filter_map(StoredEvent::cached_json)
            .map(|j| j.len() as u64)
            .sum();
        self.refill_limit = next_refill_limit(events.len(), bytes);
        // A read may end at the byte bound before the log's end: read on until one
        // comes back empty (the live bus does not resend what was published before).
        self.more_in_store = got;
        self.backlog.extend(events.into_iter().map(Arc::new));
        Ok(got)
    }

    /// The next event, `None` when the task's bus closed (the task finished or went
    /// idle) and the store holds nothing newer. A live event is the one the driver
    /// published, shared (not copied) with the other subscribers.
    pub(crate) async fn next(&mut self) -> Option<Result<Arc<StoredEvent>, A2aError>> {
        loop {
            if self.needs_fill {
                self.needs_fill = false;
                if let Err(e) = self.refill().await {
                    return Some(Err(e));
                }
            }
            if let Some(e) = self.backlog.pop_front() {
                if e.seq <= self.last_seq {
                    continue;
                }
                if e.seq != self.last_seq + 1 {
                    // The store is the source of truth; a hole here would be a bug.
                    tracing::warn!(task.id = %self.task_id, expected = self.last_seq + 1, got = e.seq, "event log gap");
                }
                if self.backlog.is_empty() && self.more_in_store {
                    self.needs_fill = true;
                }
                self.last_seq = e.seq;
                return Some(Ok(e));
            }
            if let Some((group, next)) = &mut self.group {
                let Some(e) = group.get(*next).cloned() else {
                    self.group = None;
                    continue;
                };
                *next += 1;
                if e.seq <= self.last_seq {
                    continue;
                }
                if e.seq == self.last_seq + 1 {
                    self.last_seq = e.seq;
                    return Some(Ok(e));
                }
                // Missed events (late subscription): read them from the store.
                self.group = None;
                self.needs_fill = true;
                continue;
            }
            let Some(live) = self.live.as_mut() else {
                match self.refill().await {
                    Ok(true) => continue,
                    Ok(false) => return None,
                    Err(e) => return Some(Err(e)),
                }
            };
            let received = match self.wake.as_mut() {
                None => live.recv().await,
                Some(wake) => {
                    // Boxed (several instances only): its timers would size every
                    // subscriber's future, on one instance too.
                    let changed = Box::pin(wake.changed());
                    tokio::select! {
                        r = live.recv() => r,
                        _ = changed => {
                            self.needs_fill = true;
                            continue;
                        }
                    }
                }
            };
            match received {
                Ok(group) => self.group = Some((group, 0)),
                Err(RecvError::Lagged(n)) => {
                    tracing::debug!(task.id = %self.task_id, skipped = n, "subscriber lagged; catching up from the store");
                    self.needs_fill = true;
                }
                Err(RecvError::Closed) => {
                    // Everything published was persisted first; drain what is left.
                    self.live = None;
                    self.needs_fill = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{StreamResponse, TaskState, TaskStatus, TaskStatusUpdateEvent, time};
    use crate::store::MemoryTaskStore;
    use crate::store::conformance::task_at;

    fn working(id: &str) -> StreamResponse {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: id.into(),
            context_id: "ctx".into(),
            status: TaskStatus {
                state: TaskState::Working,
                message: None,
                timestamp: Some(time::now()),
            },
            metadata: None,
        })
    }

    /// The next refill asks for about twice what fits the byte bound at the last
    /// read's average event size, within 1..=REFILL_BATCH.
    #[test]
    fn the_next_refill_limit_follows_the_event_size() {
        assert_eq!(next_refill_limit(0, 0), REFILL_BATCH);
        assert_eq!(next_refill_limit(5, 0), REFILL_BATCH);
        assert_eq!(next_refill_limit(512, 512 * 300), REFILL_BATCH);
        // 200 KB events: 5 fit 1 MiB.
        assert_eq!(next_refill_limit(5, 5 * 200_000), 11);
        assert_eq!(next_refill_limit(1, 4 * REFILL_BYTES), 1);
    }

    /// A resume over a log larger than one refill's byte bound reads on until the
    /// store is exhausted while the task's bus stays open and quiet: no event is left
    /// waiting for a live one that may never come (a task waiting for input).
    #[tokio::test(start_paused = true)]
    async fn a_resume_reads_past_the_refill_byte_bound_with_the_bus_quiet() {
        let store: Arc<dyn TaskStore> = Arc::new(MemoryTaskStore::new());
        let scope = Scope::new("t", "alice");
        let id = "task-1";
        let mut events = vec![Arc::new(StoredEvent::new(
            1,
            StreamResponse::Task(task_at(id, "ctx", time::now())),
        ))];
        let big = "z".repeat(REFILL_BYTES as usize / 2);
        events.extend((2..=6).map(|seq| {
            let chunk = crate::store::conformance::chunk(id, "ctx", &big, seq > 2, false);
            Arc::new(StoredEvent::new(seq, chunk))
        }));
        store.append_all(&scope, id, &events).await.unwrap();
        let (bus, live) = broadcast::channel::<EventGroup>(4);
        let mut follow = Follow::new(store, scope, id.into(), 0, Some(live), true);
        let mut seqs = Vec::new();
        while seqs.len() < events.len() {
            let next = tokio::time::timeout(std::time::Duration::from_secs(5), follow.next());
            let e = next.await.expect("an event, not a wait on the quiet bus");
            seqs.push(e.expect("open").unwrap().seq);
        }
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
        // Then it waits on the bus, which is still open.
        let next = tokio::time::timeout(std::time::Duration::from_secs(5), follow.next());
        assert!(next.await.is_err());
        drop(bus);
    }

    /// A live group is delivered from the cursor on: events of a group at or before
    /// the cursor are skipped, and a group that starts after a gap sends the follower
    /// to the store for the missing events, then on in order, each event once.
    #[tokio::test]
    async fn groups_straddling_the_cursor_or_after_a_gap_deliver_each_event_once_in_order() {
        let store: Arc<dyn TaskStore> = Arc::new(MemoryTaskStore::new());
        let scope = Scope::new("t", "alice");
        let id = "task-1";
        let mut events = vec![Arc::new(StoredEvent::new(
            1,
            StreamResponse::Task(task_at(id, "ctx", time::now())),
        ))];
        events.extend((2..=8).map(|seq| Arc::new(StoredEvent::new(seq, working(id)))));
        store.append_all(&scope, id, &events).await.unwrap();
        let (bus, live) = broadcast::channel::<EventGroup>(4);
        let mut follow = Follow::new(store, scope, id.into(), 3, Some(live), false);
        // Written before the cursor was read (2..=5), then one after a missed write (7, 8).
        bus.send(Arc::new(events[1..5].to_vec())).unwrap();
        bus.send(Arc::new(events[6..8].to_vec())).unwrap();
        drop(bus);
        let mut seen = Vec::new();
        while let Some(e) = follow.next().await {
            seen.push(e.unwrap());
        }
        let seqs: Vec<u64> = seen.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [4, 5, 6, 7, 8]);
        // 4 and 5 are the published events themselves (the store's are other copies):
        // they came from the group, not from a read of the store.
        assert!(Arc::ptr_eq(&seen[0], &events[3]) && Arc::ptr_eq(&seen[1], &events[4]));
    }
}
