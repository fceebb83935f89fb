//! What the SQL backends ([`super::sqlite`], [`super::postgres`]) share: event
//! classification, the lazily materialized artifact fold, JSON and error mapping.
//!
//! # Layout (both backends)
//!
//! Every table keyed by a caller's scope starts its key with `agent, tenant, owner`
//! (the agent column since migration 0007, see [`crate::scope`]).
//!
//! - `a2a_tasks` (key agent, tenant, owner, id): the small, hot row of a task: context id,
//!   state, status timestamp in milliseconds, created/updated times, `last_seq`, and
//!   `snapshot`: the projection of the log **without artifacts**. Artifact events do
//!   not touch `snapshot`; they only bump `last_seq`, `updated_ms` and `pending_bytes`.
//! - `a2a_task_artifacts` (same key): the task's artifacts folded up to `art_seq`
//!   (a checkpoint), rewritten only when it is compacted.
//! - `a2a_task_events` (key agent, tenant, owner, task_id, seq): the append-only log. Each
//!   row says whether it changes artifacts (`folds_artifacts`). A row holds one event,
//!   or a run of consecutive events of one append (see [Folded rows](#folded-rows)).
//!
//! `get` reads the task row and the checkpoint and folds the artifact events in
//! `(art_seq, last_seq]` on top with [`projection::apply`], so it returns exactly what
//! the memory store's fold returns. The checkpoint is compacted inside `append` when
//! the artifact bytes written since it exceed `max(checkpoint size, 64 KiB)`, and
//! when the task settles (terminal or interrupted state). Each compaction costs at
//! most about twice the bytes appended since the previous one, so appending stays
//! O(event) amortized (a 10,000-chunk reply never rewrites a growing snapshot per
//! chunk), while `get` never folds more than the checkpoint size (or 64 KiB) of
//! pending events.
//!
//! The non-artifact part of the snapshot (status, history, metadata) is rewritten for
//! `task`, `statusUpdate` and `message` events; those are few and small.
//!
//! JSON is stored as text (not `jsonb`): it is never queried inside the database, the
//! text round-trips exactly, and text accepts every string serde_json writes
//! (`jsonb` rejects `\u0000`).
//!
//! # Folded rows
//!
//! SQLite writes a run of consecutive artifact-update events of one append (the chunks
//! of a streamed reply that one store write takes together) as one row, or as a few
//! rows sized to SQLite's pages (`sqlite::fold`). A row's `seq` is the number of its
//! **last** event and its `event` text is the events' JSON texts joined by commas
//! (`{...},{...}`), so a row of one event is that event's text as before. Every event
//! keeps its own number, text and order: a row of `n` events
//! numbered up to `s` holds events `s - n + 1 ..= s` ([`row_events`] splits it), so
//! reading after any number, replaying, compacting and pushing see exactly the events
//! that were appended. Keying a row by its last number keeps "the events after `k`"
//! one range scan (`seq > k`, then the events of the first row at or before `k` are
//! skipped), and the commas make a `group_concat` of rows one flat JSON array when
//! wrapped in brackets. A row never spans two appends, and `last_seq` and `art_seq`
//! are always the last numbers of appends, so ranges bounded by them never cut a row.
//! What folding saves is per row, not per byte: a B-tree cell with its key (the task
//! key is most of a chunk row), the page splits and the statement work for each
//! (BENCHMARKS.md, "Issue 14, twelfth pass"). PostgreSQL writes one row per event;
//! the reads shared by both accept either.
//!
//! # Bound limits
//!
//! Every statement shared with SQLite writes a bound row limit as `LIMIT $n + 0`,
//! never as a bare `LIMIT $n`: SQLite (3.51, the bundled build) lets the planner look
//! at a bare bound limit, marks the statement as depending on it, and then prepares
//! the statement again on every execution whose limit is bound anew, even to the same
//! value. `+ 0` keeps the value out of planning; the plans are the same (`EXPLAIN
//! QUERY PLAN`). The reprepares were about 5% of the gateway's CPU while relaying
//! events on SQLite (BENCHMARKS.md, "Issue 14, fifth pass").

pub(crate) mod batch;
pub(crate) mod links;
pub(crate) mod purge;
pub(crate) mod push;
pub(crate) mod reads;

use sqlx::migrate::MigrateError;

use super::{StoreError, projection};
use crate::protocol::{Artifact, StreamResponse, Task, TaskState, TaskStatus};

/// The checkpoint is compacted once pending artifact bytes exceed the larger of its
/// size and this.
pub(crate) const COMPACT_MIN_BYTES: i64 = 64 * 1024;

/// The log kind stored in `a2a_task_events.kind`.
pub(crate) fn kind(event: &StreamResponse) -> &'static str {
    match event {
        StreamResponse::Task(_) => "task",
        StreamResponse::Message(_) => "message",
        StreamResponse::StatusUpdate(_) => "status",
        StreamResponse::ArtifactUpdate(_) => "artifact",
    }
}

/// Whether folding `event` can change the artifacts.
pub(crate) fn folds_artifacts(event: &StreamResponse) -> bool {
    match event {
        StreamResponse::ArtifactUpdate(_) => true,
        StreamResponse::Task(t) => t.artifacts.as_ref().is_some_and(|a| !a.is_empty()),
        _ => false,
    }
}

/// Whether folding `event` can change anything but the artifacts.
pub(crate) fn touches_base(event: &StreamResponse) -> bool {
    !matches!(event, StreamResponse::ArtifactUpdate(_))
}

/// Whether the checkpoint should be compacted after this append.
pub(crate) fn should_compact(pending_bytes: i64, art_bytes: i64, state: TaskState) -> bool {
    pending_bytes > 0 && (state.is_settled() || pending_bytes > art_bytes.max(COMPACT_MIN_BYTES))
}

/// Folds artifact events on top of a checkpoint with the shared projection.
pub(crate) fn fold_artifacts(
    checkpoint: Option<Vec<Artifact>>,
    events: impl IntoIterator<Item = StreamResponse>,
) -> Option<Vec<Artifact>> {
    let mut scratch = Task {
        id: String::new(),
        context_id: String::new(),
        status: TaskStatus {
            state: TaskState::Unspecified,
            message: None,
            timestamp: None,
        },
        artifacts: checkpoint,
        history: None,
        metadata: None,
    };
    for e in events {
        projection::apply_to(&mut scratch, &e);
    }
    scratch.artifacts
}

/// Serializes a value stored as JSON text.
pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(encode_error)
}

/// The store error for a value that cannot be encoded as JSON.
pub(crate) fn encode_error(e: serde_json::Error) -> StoreError {
    StoreError::Backend(format!("cannot encode JSON: {e}"))
}

/// Parses JSON text read from the database.
pub(crate) fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Backend(format!("corrupt stored JSON: {e}")))
}

/// The events of one `a2a_task_events` row whose `seq` is `last_seq`: the JSON text of
/// each with its number, in order (see [Folded rows](self#folded-rows)). The texts are
/// slices of `text`, checked to be JSON values but not parsed further.
///
/// # Errors
/// [`StoreError::Backend`] when `text` is not one or more JSON values joined by
/// commas, or holds more events than numbers up to `last_seq`.
pub(crate) fn row_events(last_seq: u64, text: &str) -> Result<Vec<(u64, &str)>, StoreError> {
    use serde_json::value::RawValue;
    let corrupt = |why: String| StoreError::Backend(format!("corrupt stored event row: {why}"));
    let mut texts = Vec::new();
    let mut rest = text;
    loop {
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<&RawValue>();
        let value = match values.next() {
            Some(Ok(v)) => v.get(),
            Some(Err(e)) => return Err(corrupt(e.to_string())),
            None => return Err(corrupt("no event".into())),
        };
        texts.push(value);
        rest = rest[values.byte_offset()..].trim_start();
        match rest.strip_prefix(',') {
            Some(r) => rest = r,
            None if rest.is_empty() => break,
            None => return Err(corrupt("events not separated by commas".into())),
        }
    }
    let n = texts.len() as u64;
    if n > last_seq {
        return Err(corrupt(format!("{n} events up to number {last_seq}")));
    }
    let first = last_seq + 1 - n;
    Ok((first..).zip(texts).collect())
}

/// Maps a driver error.
pub(crate) fn db(e: sqlx::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

/// The text of a driver error for a message of our own: the database's own message
/// without the driver's "error returned from database" prefix.
pub(crate) fn db_message(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(d) => d.message().to_owned(),
        other => other.to_string(),
    }
}

/// Whether the driver error is a primary key / unique violation.
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.is_unique_violation())
}

/// Converts a stored non-negative integer.
pub(crate) fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// Converts a sequence number or limit for binding.
pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Maps a migration failure, spelling out a database newer than this binary.
pub(crate) fn migrate_error(backend: &str, known: i64, e: MigrateError) -> StoreError {
    match e {
        MigrateError::VersionMissing(v) => StoreError::Backend(format!(
            "the {backend} task store has schema migration {v} applied, which this a2a-gateway \
             build does not know (it knows migrations up to {known}): the database was used by a \
             newer a2a-gateway. Refusing to start; upgrade a2a-gateway or point [store] url at \
             another database"
        )),
        MigrateError::VersionMismatch(v) => StoreError::Backend(format!(
            "the {backend} task store's schema migration {v} differs from this build's migration \
             {v} (edited after it was applied?); refusing to start"
        )),
        other => StoreError::Backend(format!("{backend} migration failed: {other}")),
    }
}

/// The columns of a task row needed to build its snapshot.
pub(crate) struct StoredRow<'r> {
    /// The snapshot without artifacts.
    pub snapshot: &'r str,
    /// The artifact checkpoint, when artifacts are wanted.
    pub artifacts: Option<&'r str>,
    /// The sequence number the checkpoint covers.
    pub art_seq: i64,
    /// The task's last sequence number.
    pub last_seq: i64,
    /// Artifact bytes appended since the checkpoint.
    pub pending_bytes: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_rule() {
        assert!(!should_compact(0, 0, TaskState::Completed));
        assert!(should_compact(1, 1 << 20, TaskState::Completed));
        assert!(should_compact(1, 1 << 20, TaskState::InputRequired));
        assert!(!should_compact(COMPACT_MIN_BYTES, 0, TaskState::Working));
        assert!(should_compact(COMPACT_MIN_BYTES + 1, 0, TaskState::Working));
        assert!(!should_compact(200_000, 300_000, TaskState::Working));
        assert!(should_compact(300_001, 300_000, TaskState::Working));
    }

    /// A row's events are numbered up to its `seq`; one event, several, and rows that
    /// are not events joined by commas.
    #[test]
    fn row_events_split_folded_rows() {
        assert_eq!(
            row_events(7, r#"{"a":1}"#).unwrap(),
            vec![(7, r#"{"a":1}"#)]
        );
        assert_eq!(
            row_events(12, r#"{"a":"x,y"},{"b":[1,2]},{"c":{}}"#).unwrap(),
            vec![
                (10, r#"{"a":"x,y"}"#),
                (11, r#"{"b":[1,2]}"#),
                (12, r#"{"c":{}}"#)
            ]
        );
        for bad in [
            "",
            "{",
            r#"{"a":1} {"b":2}"#,
            r#"{"a":1},"#,
            r#"{"a":1};{"b":2}"#,
        ] {
            assert!(row_events(5, bad).is_err(), "{bad:?} was accepted");
        }
        assert!(
            row_events(1, r#"{},{}"#).is_err(),
            "two events cannot end at number 1"
        );
    }

    /// The statements SQLite runs write bound limits as `LIMIT $n + 0` (see the module
    /// docs): a bare `LIMIT $n` would be prepared again on every execution.
    #[test]
    fn sqlite_statements_keep_bound_limits_out_of_planning() {
        let sources = [
            ("store/sqlite/open.rs", include_str!("sqlite/open.rs")),
            ("store/sqlite/write.rs", include_str!("sqlite/write.rs")),
            (
                "store/sqlite/task_store.rs",
                include_str!("sqlite/task_store.rs"),
            ),
            ("store/sql/reads.rs", include_str!("sql/reads.rs")),
            ("store/sql/push.rs", include_str!("sql/push.rs")),
            ("store/sqlite/push.rs", include_str!("sqlite/push.rs")),
        ];
        let mut checked = 0;
        for (file, text) in sources {
            for (at, _) in text.match_indices("LIMIT $") {
                let rest = &text[at + "LIMIT $".len()..];
                let digits = rest.chars().take_while(char::is_ascii_digit).count();
                assert!(digits > 0, "{file}: LIMIT $ without a parameter number");
                assert!(
                    rest[digits..].starts_with(" + 0"),
                    "{file}: a bare bound LIMIT: {}",
                    &text[at..(at + 20).min(text.len())]
                );
                checked += 1;
            }
        }
        assert!(checked >= 8, "the statements with bound limits were found");
    }
}
