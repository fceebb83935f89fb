//! Coalescing: consecutive artifact-update events of one artifact, pending for one
//! (task, config), sent as one POST (one `artifactUpdate` whose parts are theirs in
//! order, spec §3.1.7 append rule), so a slow receiver gets a few large POSTs instead of
//! a backlog of one per chunk.
//!
//! [`range_len`] picks how many of a queue's pending events, from its head, go in one
//! POST: the head alone unless it is an artifact update, then every following event
//! that is an artifact update of the same artifact of the same task with `append` set
//! and nothing else differing (name, metadata, ...), up to `[push]
//! max_coalesce_events` events and `max_coalesce_bytes` of stored event JSON (the head
//! is always taken, whatever its size). [`merge`] builds that POST's body: the head's
//! update with the parts of all, in order, and the `lastChunk` of the last.

use serde_json::Value;

/// The bounds of one coalesced POST.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Events at most (at least 1).
    pub max_events: usize,
    /// Bytes of stored event JSON at most (the first event is taken whatever its size).
    pub max_bytes: usize,
}

/// The artifact update of a stored `StreamResponse`, if it is one.
fn update(event: &str) -> Option<serde_json::Map<String, Value>> {
    match serde_json::from_str::<Value>(event).ok()? {
        Value::Object(mut top) if top.len() == 1 => match top.remove("artifactUpdate")? {
            Value::Object(u) => Some(u),
            _ => None,
        },
        _ => None,
    }
}

/// What must be equal for two updates to join: everything but the artifact's parts,
/// `append` and `lastChunk`.
fn rest(u: &serde_json::Map<String, Value>) -> Value {
    let mut u = u.clone();
    u.remove("append");
    u.remove("lastChunk");
    if let Some(Value::Object(a)) = u.get_mut("artifact") {
        a.remove("parts");
    }
    Value::Object(u)
}

/// Whether `event` may start a coalesced range (an artifact update that is not its
/// artifact's last chunk): a cheap look before the pending events are read.
pub(crate) fn may_lead(event: &str) -> bool {
    // The stored form is compact: anything else is not parsed at all.
    event.starts_with("{\"artifactUpdate\"")
        && update(event).is_some_and(|u| u.get("lastChunk").and_then(Value::as_bool) != Some(true))
}

/// How many of `events` (a queue's pending events from its head, in order; at least
/// one) go in one POST (see the module docs); at least 1.
pub(crate) fn range_len(events: &[&str], limits: Limits) -> usize {
    let Some(first) = events.first() else {
        return 0;
    };
    let Some(head) = update(first) else {
        return 1;
    };
    if head.get("lastChunk").and_then(Value::as_bool) == Some(true) {
        return 1;
    }
    let key = rest(&head);
    let mut bytes = first.len();
    let mut n = 1;
    for e in &events[1..] {
        if n >= limits.max_events.max(1) || bytes + e.len() > limits.max_bytes {
            break;
        }
        let Some(u) = update(e) else { break };
        if u.get("append").and_then(Value::as_bool) != Some(true) || rest(&u) != key {
            break;
        }
        bytes += e.len();
        n += 1;
        if u.get("lastChunk").and_then(Value::as_bool) == Some(true) {
            break;
        }
    }
    n
}

/// The body of one POST for `events` (as [`range_len`] chose them): the first event
/// itself when alone, else the first's update with the parts of all in order and the
/// last's `lastChunk`.
///
/// # Errors
/// A message when an event is not an artifact update (the range was fixed by another
/// version's rules, or the events are corrupt).
pub(crate) fn merge(events: &[&str]) -> Result<String, String> {
    let [first, more @ ..] = events else {
        return Err("no event to send".into());
    };
    if more.is_empty() {
        return Ok((*first).to_owned());
    }
    let mut head = update(first).ok_or("a coalesced range starts with a non-artifact event")?;
    let mut parts: Vec<Value> = Vec::new();
    let mut last_chunk = None;
    for e in events {
        let mut u = update(e).ok_or("a coalesced range holds a non-artifact event")?;
        if let Some(Value::Object(mut a)) = u.remove("artifact")
            && let Some(Value::Array(p)) = a.remove("parts")
        {
            parts.extend(p);
        }
        last_chunk = u.remove("lastChunk");
    }
    match last_chunk {
        Some(v) => head.insert("lastChunk".into(), v),
        None => head.remove("lastChunk"),
    };
    if let Some(Value::Object(a)) = head.get_mut("artifact") {
        a.insert("parts".into(), Value::Array(parts));
    }
    let mut top = serde_json::Map::new();
    top.insert("artifactUpdate".into(), Value::Object(head));
    serde_json::to_string(&Value::Object(top)).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(artifact: &str, text: &str, append: bool, last: bool) -> String {
        json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
            "artifact": {"artifactId": artifact, "parts": [{"text": text}]},
            "append": append, "lastChunk": last}})
        .to_string()
    }

    const WIDE: Limits = Limits {
        max_events: 256,
        max_bytes: 1 << 20,
    };

    #[test]
    fn a_run_of_one_artifact_is_one_body_with_every_part_in_order() {
        let events = [
            chunk("a", "1", false, false),
            chunk("a", "2", true, false),
            chunk("a", "3", true, true),
            chunk("a", "4", true, false),
        ];
        let refs: Vec<&str> = events.iter().map(String::as_str).collect();
        assert_eq!(range_len(&refs, WIDE), 3, "ends at the last chunk");
        let body: Value = serde_json::from_str(&merge(&refs[..3]).unwrap()).unwrap();
        let u = &body["artifactUpdate"];
        assert_eq!(
            u["artifact"]["parts"],
            json!([{"text": "1"}, {"text": "2"}, {"text": "3"}])
        );
        assert_eq!(u["append"], false, "the first's append");
        assert_eq!(u["lastChunk"], true, "the last's lastChunk");
        assert_eq!(merge(&refs[..1]).unwrap(), events[0], "alone: as stored");
    }

    #[test]
    fn never_across_artifacts_status_changes_replacements_or_bounds() {
        let a1 = chunk("a", "1", true, false);
        let status = json!({"statusUpdate": {"taskId": "t"}}).to_string();
        for (second, why) in [
            (chunk("b", "2", true, false), "another artifact"),
            (status.clone(), "a status change"),
            (chunk("a", "2", false, false), "a replacement"),
        ] {
            assert_eq!(range_len(&[&a1, &second], WIDE), 1, "{why}");
        }
        assert_eq!(range_len(&[&status, &a1], WIDE), 1, "a status is alone");
        assert!(may_lead(&a1));
        assert!(!may_lead(&status));
        assert!(
            !may_lead(&chunk("a", "9", true, true)),
            "a last chunk ends its run"
        );
        let run: Vec<String> = (0..10)
            .map(|i| chunk("a", &i.to_string(), true, false))
            .collect();
        let refs: Vec<&str> = run.iter().map(String::as_str).collect();
        let by_events = Limits {
            max_events: 4,
            max_bytes: 1 << 20,
        };
        assert_eq!(range_len(&refs, by_events), 4);
        let by_bytes = Limits {
            max_events: 256,
            max_bytes: run[0].len() * 3,
        };
        assert_eq!(range_len(&refs, by_bytes), 3);
        let tiny = Limits {
            max_events: 256,
            max_bytes: 1,
        };
        assert_eq!(range_len(&refs, tiny), 1, "the head always goes");
    }
}
