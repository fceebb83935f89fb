//! The task snapshot as a fold over the event log. Shared by every backend so that
//! all of them project identically.

use crate::protocol::{Artifact, Part, PartContent, StreamResponse, Task, TaskArtifactUpdateEvent};

/// Folds one log event into the snapshot. `task` is `None` before the first event.
///
/// - `Task`: replaces status and metadata; its history and artifacts replace the
///   snapshot's when present (the first event creates the snapshot).
/// - `statusUpdate`: sets the status; the status message is appended to history.
/// - `artifactUpdate`: adds the artifact, replaces one with the same id
///   (`append: false`), or appends its parts (`append: true`). Appended text parts
///   are merged into the previous text part when both carry nothing but text, so a
///   reply streamed in many chunks reads as one text in the snapshot.
/// - `message`: appended to history.
///
/// Returns `None` only when the first event is not a `Task`.
pub fn apply(task: Option<Task>, event: &StreamResponse) -> Option<Task> {
    match (task, event) {
        (None, StreamResponse::Task(t)) => Some(t.clone()),
        (None, _) => None,
        (Some(mut cur), _) => {
            apply_to(&mut cur, event);
            Some(cur)
        }
    }
}

/// Folds one log event into an existing snapshot in place, as [`apply`] does (without
/// moving the snapshot, about 330 bytes, in and out for every event).
pub fn apply_to(cur: &mut Task, event: &StreamResponse) {
    match event {
        StreamResponse::Task(t) => {
            cur.status = t.status.clone();
            if t.metadata.is_some() {
                cur.metadata = t.metadata.clone();
            }
            if let Some(h) = &t.history
                && !h.is_empty()
            {
                let known: Vec<String> =
                    cur.history().iter().map(|m| m.message_id.clone()).collect();
                let hist = cur.history.get_or_insert_with(Vec::new);
                hist.extend(h.iter().filter(|m| !known.contains(&m.message_id)).cloned());
            }
            if let Some(a) = &t.artifacts {
                for art in a {
                    upsert_artifact(cur, art.clone());
                }
            }
        }
        StreamResponse::StatusUpdate(e) => {
            cur.status = e.status.clone();
            if let Some(m) = &e.status.message {
                cur.history.get_or_insert_with(Vec::new).push(m.clone());
            }
        }
        StreamResponse::ArtifactUpdate(e) => apply_artifact(cur, e),
        StreamResponse::Message(m) => cur.history.get_or_insert_with(Vec::new).push(m.clone()),
    }
}

fn upsert_artifact(task: &mut Task, artifact: Artifact) {
    let arts = task.artifacts.get_or_insert_with(Vec::new);
    match arts
        .iter_mut()
        .find(|a| a.artifact_id == artifact.artifact_id)
    {
        Some(existing) => *existing = artifact,
        None => arts.push(artifact),
    }
}

fn apply_artifact(task: &mut Task, e: &TaskArtifactUpdateEvent) {
    if !e.append {
        upsert_artifact(task, e.artifact.clone());
        return;
    }
    let arts = task.artifacts.get_or_insert_with(Vec::new);
    let Some(existing) = arts
        .iter_mut()
        .find(|a| a.artifact_id == e.artifact.artifact_id)
    else {
        // Appending to an unknown artifact: keep the chunk as a new artifact rather
        // than lose it.
        arts.push(e.artifact.clone());
        return;
    };
    for part in &e.artifact.parts {
        append_part(&mut existing.parts, part);
    }
    if e.artifact.name.is_some() {
        existing.name = e.artifact.name.clone();
    }
    if e.artifact.metadata.is_some() {
        existing.metadata = e.artifact.metadata.clone();
    }
}

fn plain_text(p: &Part) -> bool {
    matches!(p.content, PartContent::Text(_)) && p.metadata.is_none() && p.filename.is_none()
}

fn append_part(parts: &mut Vec<Part>, part: &Part) {
    if let (Some(last), PartContent::Text(add)) = (parts.last_mut(), &part.content)
        && plain_text(last)
        && plain_text(part)
        && last.media_type == part.media_type
        && let PartContent::Text(t) = &mut last.content
    {
        t.push_str(add);
        return;
    }
    parts.push(part.clone());
}
