//! Shared helpers of the upstream executor tests: contexts, running `execute` and
//! reading its events. (The byte-level runtime these tests script is the crate's
//! `a2a_gateway::upstream::raw_mock`.)
#![allow(dead_code, missing_docs)]

use a2a_gateway::executor::{
    AgentExecutor, CallContext, EventQueue, RequestContext, new_user_text_message,
};
use a2a_gateway::protocol::{PartContent, StreamResponse, TaskState};
use a2a_gateway::upstream::AgentCoreExecutor;

/// A context for a new task with `text` in its own new context.
pub fn ctx(text: &str) -> RequestContext {
    ctx_in(&uuid::Uuid::new_v4().to_string(), "alice", text)
}

/// A context for a new task in `context_id` of `owner`.
pub fn ctx_in(context_id: &str, owner: &str, text: &str) -> RequestContext {
    let task_id = uuid::Uuid::new_v4().to_string();
    let mut m = new_user_text_message(text);
    m.task_id = Some(task_id.clone());
    m.context_id = Some(context_id.to_owned());
    RequestContext::new(
        m,
        task_id,
        context_id.to_owned(),
        CallContext::new("", owner),
    )
}

/// What `execute` published.
#[derive(Debug)]
pub struct Outcome {
    pub events: Vec<StreamResponse>,
}

/// Runs `execute` to its end and collects every event.
pub async fn run(exec: &AgentCoreExecutor, context: RequestContext) -> Outcome {
    let (queue, mut rx) = EventQueue::bounded(64);
    let collector = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            events.push(e);
        }
        events
    });
    exec.execute(context, queue)
        .await
        .expect("execute returns Ok");
    Outcome {
        events: collector.await.unwrap(),
    }
}

/// One artifact chunk, simplified.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub name: Option<String>,
    pub append: bool,
    pub last: bool,
    pub text: String,
}

impl Outcome {
    /// Task and status states in order.
    pub fn states(&self) -> Vec<TaskState> {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamResponse::Task(t) => Some(t.status.state),
                StreamResponse::StatusUpdate(s) => Some(s.status.state),
                _ => None,
            })
            .collect()
    }

    pub fn final_state(&self) -> TaskState {
        *self.states().last().expect("some state")
    }

    /// The text of the last status message without its ` [correlation id …]` suffix
    /// (see [`raw_reason`](Self::raw_reason)).
    pub fn reason(&self) -> String {
        let r = self.raw_reason();
        match r.rsplit_once(" [correlation id ") {
            Some((head, id)) if id.ends_with(']') => head.to_owned(),
            _ => r,
        }
    }

    /// The correlation id of the last status message, if it has one.
    pub fn correlation_id(&self) -> Option<String> {
        let r = self.raw_reason();
        let (_, id) = r.rsplit_once(" [correlation id ")?;
        id.strip_suffix(']').map(str::to_owned)
    }

    /// The text of the last status message, exactly as a caller sees it.
    pub fn raw_reason(&self) -> String {
        self.events
            .iter()
            .rev()
            .find_map(|e| match e {
                StreamResponse::StatusUpdate(s) => s.status.message.as_ref(),
                _ => None,
            })
            .map(|m| {
                m.parts
                    .iter()
                    .filter_map(|p| p.as_text())
                    .collect::<String>()
            })
            .unwrap_or_default()
    }

    pub fn chunks(&self) -> Vec<Chunk> {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamResponse::ArtifactUpdate(a) => Some(Chunk {
                    name: a.artifact.name.clone(),
                    append: a.append,
                    last: a.last_chunk,
                    text: a
                        .artifact
                        .parts
                        .iter()
                        .map(|p| match &p.content {
                            PartContent::Text(t) => t.clone(),
                            PartContent::Data(d) => format!("<data {d}>"),
                            _ => "<other>".into(),
                        })
                        .collect(),
                }),
                _ => None,
            })
            .collect()
    }

    /// The concatenated reply text.
    pub fn text(&self) -> String {
        self.chunks().into_iter().map(|c| c.text).collect()
    }

    /// All artifact ids used.
    pub fn artifact_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .events
            .iter()
            .filter_map(|e| match e {
                StreamResponse::ArtifactUpdate(a) => Some(a.artifact.artifact_id.clone()),
                _ => None,
            })
            .collect();
        ids.dedup();
        ids
    }
}
