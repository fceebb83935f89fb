//! The bound on what one task holds (issue 43, item 4, the read path): every read of a
//! task (GetTask, ListTasks, SubscribeToTask, a follow-up's own load) builds it whole,
//! history and artifacts, so a task grown over many turns, each message under the
//! per-request limit, would cost what one oversized request costs. A task whose stored
//! JSON already holds more than
//! [`HandlerConfig::max_task_values`](super::HandlerConfig::max_task_values) values or
//! [`HandlerConfig::max_task_bytes`](super::HandlerConfig::max_task_bytes) bytes takes
//! no more messages: the caller goes on in a new task of the same context. So a task
//! stays within the bound plus one message (the per-request limits) and one turn's reply
//! (the upstream's reply limits), and reading it back costs a bounded amount.

use crate::error::A2aError;
use crate::protocol::Task;
use crate::protocol::value_count::JsonSize;

/// The default of `max_task_values`: two requests at the per-request limit
/// ([`MAX_REQUEST_VALUES`](crate::protocol::value_count::MAX_REQUEST_VALUES)), and a
/// conversation of thousands of text turns (a text message is about ten values).
pub const DEFAULT_MAX_TASK_VALUES: usize = 200_000;

/// The default of `max_task_bytes`: 32 MiB, three bodies at the default
/// `max_body_bytes`.
pub const DEFAULT_MAX_TASK_BYTES: u64 = 32 * 1024 * 1024;

/// Refuses a message to `task` when its stored JSON holds more than `max_values` values
/// or `max_bytes` bytes. Counted by serializing it into a counter (nothing is kept).
///
/// # Errors
/// InvalidParams (-32602, HTTP 400, gRPC `INVALID_ARGUMENT`) naming the limit reached
/// and saying to go on in a new task of the context.
pub(crate) fn check(task: &Task, max_values: usize, max_bytes: u64) -> Result<(), A2aError> {
    let size = JsonSize::of(task).map_err(A2aError::internal)?;
    let (what, limit) = if size.values > max_values {
        (
            format!("{} values", size.values),
            format!("max_task_values = {max_values}"),
        )
    } else if size.bytes > max_bytes {
        (
            format!("{} bytes", size.bytes),
            format!("max_task_bytes = {max_bytes}"),
        )
    } else {
        return Ok(());
    };
    Err(A2aError::InvalidParams(format!(
        "task {} holds {what}, over the limit of one task ({limit}) that keeps reading it \
         back bounded; it takes no more messages: send the next one without taskId, with \
         contextId {:?}, to go on in a new task of the same context",
        task.id, task.context_id
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_task_over_either_bound_is_refused_naming_it() {
        let task = |metadata| -> Task {
            serde_json::from_value(json!({"id": "t1", "contextId": "c1",
                "status": {"state": "TASK_STATE_INPUT_REQUIRED"}, "metadata": metadata}))
            .unwrap()
        };
        assert!(check(&task(json!({})), 100, 10_000).is_ok());
        let task = task(json!({"k": vec![0u8; 200]}));
        let Err(A2aError::InvalidParams(m)) = check(&task, 100, 10_000) else {
            panic!("not refused");
        };
        assert!(
            m.contains("max_task_values = 100") && m.contains("\"c1\""),
            "{m}"
        );
        let Err(A2aError::InvalidParams(m)) = check(&task, 1_000, 100) else {
            panic!("not refused");
        };
        assert!(m.contains("max_task_bytes = 100"), "{m}");
    }
}
