//! Response streams: what a SendStreamingMessage or SubscribeToTask caller receives,
//! each event with its place in the task's log, and the event that ends the stream.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;

use super::follow::Follow;
use super::turns;
use crate::error::A2aError;
use crate::protocol::{StreamResponse, Task, TaskState};
use crate::store::StoredEvent;

/// One event of a response stream with its position in the task's event log
/// (`None` for a Message-only response). Transports send `seq` as the SSE `id:`.
///
/// The event is shared with the task's other subscribers and its store write
/// (see [`StoredEvent`]): reading it copies nothing, and the JSON text a SQL store
/// made for its write ([`SequencedEvent::cached_json`]) is sent as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct SequencedEvent {
    /// The task's event sequence number.
    pub seq: Option<u64>,
    stored: Arc<StoredEvent>,
}

impl SequencedEvent {
    /// `event` at `seq` (`None` for a Message-only response).
    pub fn new(seq: Option<u64>, event: StreamResponse) -> Self {
        Self {
            seq,
            stored: Arc::new(StoredEvent::new(seq.unwrap_or(0), event)),
        }
    }

    /// A stored event as a stream event.
    pub(crate) fn stored(stored: Arc<StoredEvent>) -> Self {
        Self {
            seq: Some(stored.seq),
            stored,
        }
    }

    /// The event.
    pub fn event(&self) -> &StreamResponse {
        &self.stored.event
    }

    /// The event as compact JSON text (its HTTP+JSON form) when the store already
    /// made it for its write (see [`StoredEvent::cached_json`]).
    pub fn cached_json(&self) -> Option<&str> {
        self.stored.cached_json()
    }

    /// The event by value (a copy when other subscribers still share it).
    pub fn into_event(self) -> StreamResponse {
        Arc::try_unwrap(self.stored)
            .map(|s| s.event)
            .unwrap_or_else(|shared| shared.event.clone())
    }
}

/// A response stream: ends after the last event it should carry (a Message, a
/// terminal state, or, for SendStreamingMessage only, INPUT_REQUIRED), or with one
/// final error.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<SequencedEvent, A2aError>> + Send>>;

/// Which state ends a task's response stream (spec §3.1.2, §3.1.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StreamEnd {
    /// SendStreamingMessage: a terminal state or INPUT_REQUIRED (the message's turn
    /// is over). AUTH_REQUIRED keeps it open (spec §7.6: the agent may resume on its
    /// own once the credential arrives out of band).
    Interrupted,
    /// SubscribeToTask (and every resume): only a terminal state.
    Terminal,
}

impl StreamEnd {
    fn ends(self, ev: &StreamResponse) -> bool {
        ev.state().is_some_and(|s| {
            s.is_terminal() || (self == StreamEnd::Interrupted && s == TaskState::InputRequired)
        })
    }
}

/// Builds a response stream: the optional snapshot, then followed events, ending
/// after the state `end` names, or after the update that ends the turn of
/// `own_message` (the id of the message this stream answers). `end_on_snapshot`: the
/// snapshot's own state may end the stream (it is not an older state of a task being
/// continued).
pub(super) fn task_stream(
    snapshot: Option<(Task, u64)>,
    end_on_snapshot: bool,
    own_message: Option<String>,
    end: StreamEnd,
    follow: Follow,
) -> EventStream {
    struct State {
        first: VecDeque<SequencedEvent>,
        follow: Follow,
        done: bool,
        end_on_first: bool,
        own_message: Option<String>,
    }
    let ends = move |ev: &StreamResponse| end.ends(ev);
    let first: VecDeque<SequencedEvent> = snapshot
        .into_iter()
        .map(|(t, seq)| SequencedEvent::new(Some(seq), StreamResponse::Task(t)))
        .collect();
    let state = State {
        first,
        follow,
        done: false,
        end_on_first: end_on_snapshot,
        own_message,
    };
    Box::pin(futures::stream::unfold(state, move |mut st| async move {
        if st.done {
            return None;
        }
        if let Some(ev) = st.first.pop_front() {
            if st.end_on_first && ends(ev.event()) {
                st.done = true;
            }
            return Some((Ok(ev), st));
        }
        loop {
            let Some(next) = st.follow.next().await else {
                // The task's driver is gone and the log holds no final state: only a
                // store failure that could not be recorded does this (a shutdown
                // records FAILED first). Say so rather than end as if complete.
                st.done = true;
                let e = A2aError::internal(format!(
                    "the stream of task {} ended before a final state: its events could not be stored",
                    st.follow.task_id()
                ));
                return Some((Err(e), st));
            };
            match next {
                Err(e) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
                Ok(stored) => {
                    // User messages recorded in the log are history, not stream events.
                    if matches!(stored.event, StreamResponse::Message(_)) {
                        continue;
                    }
                    if ends(&stored.event)
                        || st
                            .own_message
                            .as_deref()
                            .is_some_and(|m| turns::ends_turn_of(&stored.event, m))
                    {
                        st.done = true;
                    }
                    return Some((Ok(SequencedEvent::stored(stored)), st));
                }
            }
        }
    }))
}
