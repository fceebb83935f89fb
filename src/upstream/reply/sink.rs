//! [`ReplySink`]: turns [`UpstreamEvent`]s into A2A task events through a
//! [`TaskUpdater`] (runtime contract §4 rule 3).
//!
//! Text and data arrive in the main artifact `response` as they come: the first
//! chunk with `append: false`, later ones with `append: true`; at a clean end a final
//! empty text chunk carries `lastChunk: true` (a reply that is one piece of text, like
//! a JSON reply's text, is a single chunk with `lastChunk: true`; a JSON reply kept as
//! a `data` part is that part, then the empty closing chunk), then COMPLETED.
//!
//! [`TaskStart`] decides when the Task itself is published, so that an upstream can
//! still answer a new message with a direct Message instead of a task.

use std::sync::atomic::{AtomicBool, Ordering};

use futures::{Stream, StreamExt};

use crate::executor::{QueueClosed, RequestContext, TaskUpdater};
use crate::protocol::Part;

use super::UpstreamEvent;
use super::control::Control;
use crate::upstream::errors::UpstreamError;

/// The name of the artifact that carries the agent's reply.
pub const REPLY_ARTIFACT_NAME: &str = "response";

/// Why translating stopped early.
#[derive(Debug)]
pub enum SinkError {
    /// The upstream failed (the task must end FAILED with this reason).
    Upstream(UpstreamError),
    /// The handler stopped accepting events.
    Closed,
}

impl From<QueueClosed> for SinkError {
    fn from(_: QueueClosed) -> Self {
        Self::Closed
    }
}

impl From<UpstreamError> for SinkError {
    fn from(e: UpstreamError) -> Self {
        Self::Upstream(e)
    }
}

/// When the Task is published (SUBMITTED for a new task, then WORKING).
///
/// A2A lets an agent answer a message with a Message instead of a task, but only as
/// its first and only event: once the Task exists the answer is a task. So for a new
/// task the executor publishes nothing until the upstream's reply yields its first
/// output (text, data, any control object, or its end or failure):
/// - a `message` control object as that first output is the whole answer: a direct
///   Message, no task is stored, the rest of the reply is not read;
/// - anything else publishes SUBMITTED and WORKING first, then itself.
///
/// The Task is published at once, so that no Message reply is possible any more,
/// for a follow-up to an existing task (it exists already) and when the client asked
/// for `returnImmediately` (it wants a task to poll, now). A `message` control
/// object after that ends the reply with its parts and COMPLETES the task.
#[derive(Debug)]
pub struct TaskStart {
    updater: TaskUpdater,
    new_task: bool,
    eager: bool,
    started: AtomicBool,
}

impl TaskStart {
    /// The start of `ctx`'s task, published through `updater`.
    pub fn new(ctx: &RequestContext, updater: &TaskUpdater) -> Self {
        let new_task = ctx.current_task.is_none();
        let immediate = ctx
            .configuration
            .as_ref()
            .is_some_and(|c| c.returns_immediately());
        Self {
            updater: updater.clone(),
            new_task,
            eager: !new_task || immediate,
            started: AtomicBool::new(false),
        }
    }

    /// Whether the Task must be published before the upstream is invoked.
    pub fn eager(&self) -> bool {
        self.eager
    }

    /// Publishes SUBMITTED (new task) and WORKING, once; later calls do nothing.
    ///
    /// # Errors
    /// [`QueueClosed`] when the handler no longer accepts events.
    pub async fn ensure(&self) -> Result<(), QueueClosed> {
        if self.started.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // Boxed: this runs once per task, but inline its future (888 bytes)
        // would size every chunk's future, and so every open stream's task.
        Box::pin(self.publish_start()).await
    }

    async fn publish_start(&self) -> Result<(), QueueClosed> {
        if self.new_task {
            self.updater.submit().await?;
        }
        self.updater.start_work(None).await
    }

    /// Publishes `parts` as a direct Message reply if nothing was published yet for
    /// a new task (and it was not eager); `false` when the Task exists already.
    ///
    /// # Errors
    /// [`QueueClosed`] when the handler no longer accepts events.
    pub async fn reply_message(&self, parts: Vec<Part>) -> Result<bool, QueueClosed> {
        if !self.new_task || self.eager || self.started.swap(true, Ordering::AcqRel) {
            return Ok(false);
        }
        self.updater.reply_message(parts).await?;
        Ok(true)
    }
}

/// Publishes one task's reply.
#[derive(Debug)]
pub struct ReplySink<'a> {
    updater: &'a TaskUpdater,
    start: &'a TaskStart,
    reply_id: Option<String>,
    text_seen: bool,
    pending_final: Option<String>,
    chunks: u64,
}

impl<'a> ReplySink<'a> {
    /// A sink publishing through `updater`, publishing the Task through `start`
    /// before its first event.
    pub fn new(updater: &'a TaskUpdater, start: &'a TaskStart) -> Self {
        Self {
            updater,
            start,
            reply_id: None,
            text_seen: false,
            pending_final: None,
            chunks: 0,
        }
    }

    /// Number of reply chunks published so far.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// Consumes `events` to its end and publishes the final state: COMPLETED at a
    /// clean end (or `[DONE]`), or the state a control object asked for.
    ///
    /// # Errors
    /// [`SinkError::Upstream`] for an upstream error or a `fail` control (the caller
    /// publishes FAILED); [`SinkError::Closed`] when the queue closed.
    pub async fn consume<S>(&mut self, mut events: S) -> Result<(), SinkError>
    where
        S: Stream<Item = Result<UpstreamEvent, UpstreamError>> + Unpin,
    {
        while let Some(ev) = events.next().await {
            match ev? {
                UpstreamEvent::Text(t) => {
                    self.text_seen = true;
                    self.pending_final = None;
                    if !t.is_empty() {
                        self.chunk(Part::text(t)).await?;
                    }
                }
                UpstreamEvent::FinalText(t) => {
                    if !self.text_seen {
                        self.pending_final = Some(t);
                    }
                }
                UpstreamEvent::Data(v) => self.chunk(Part::data(v)).await?,
                UpstreamEvent::Usage(u) => tracing::debug!(usage = %u, "upstream token usage"),
                UpstreamEvent::Done => break,
                // Boxed, as the end below: rare or once-per-reply steps, whose futures
                // would otherwise size this one (held while the task streams).
                UpstreamEvent::Control(c) => {
                    if Box::pin(self.control(c)).await? {
                        return Ok(());
                    }
                }
            }
        }
        Box::pin(self.finish()).await
    }

    /// The end of a reply that ended without a control object: closes the open
    /// artifact, makes sure the task exists and completes it.
    async fn finish(&mut self) -> Result<(), SinkError> {
        self.close_reply().await?;
        self.start.ensure().await?;
        self.updater.complete(None).await?;
        Ok(())
    }

    /// Handles a control object; `true` when it ended the task's turn.
    async fn control(&mut self, c: Control) -> Result<bool, SinkError> {
        let u = self.updater;
        if let Control::Message { parts } = &c
            && self.start.reply_message(parts.clone()).await?
        {
            return Ok(true);
        }
        self.start.ensure().await?;
        match c {
            Control::Message { parts } => {
                // The task exists: the message is the end of its reply.
                for part in parts {
                    self.chunk(part).await?;
                }
                self.close_reply().await?;
                u.complete(None).await?;
                return Ok(true);
            }
            Control::Status { text } => u.start_work(Some(u.new_agent_text(text))).await?,
            Control::Artifact {
                name,
                artifact_id,
                parts,
                append,
                last_chunk,
            } => {
                u.add_artifact(parts, artifact_id, name, append, last_chunk)
                    .await?;
            }
            Control::InputRequired { text } => {
                self.close_reply().await?;
                u.requires_input(Some(u.new_agent_text(text))).await?;
                return Ok(true);
            }
            Control::AuthRequired { text } => {
                self.close_reply().await?;
                u.requires_auth(Some(u.new_agent_text(text))).await?;
                return Ok(true);
            }
            Control::Reject { text } => {
                self.close_reply().await?;
                u.reject(text.map(|t| u.new_agent_text(t))).await?;
                return Ok(true);
            }
            Control::Fail { text } => {
                return Err(SinkError::Upstream(UpstreamError::Agent {
                    message: text
                        .unwrap_or_else(|| "the agent reported a failure without a reason".into()),
                }));
            }
        }
        Ok(false)
    }

    async fn chunk(&mut self, part: Part) -> Result<(), SinkError> {
        self.start.ensure().await?;
        self.flush_final(false).await?;
        let first = self.reply_id.is_none();
        let name = first.then(|| REPLY_ARTIFACT_NAME.to_owned());
        let id = self
            .updater
            .add_artifact(vec![part], self.reply_id.clone(), name, !first, false)
            .await?;
        self.reply_id = Some(id);
        self.chunks += 1;
        Ok(())
    }

    /// Publishes a buffered final answer (when no text was streamed).
    async fn flush_final(&mut self, last: bool) -> Result<bool, SinkError> {
        let Some(t) = self.pending_final.take() else {
            return Ok(false);
        };
        // Boxed, as in `TaskStart::ensure`: rare, and would size every chunk's future.
        Box::pin(self.publish_final(t, last)).await
    }

    async fn publish_final(&mut self, t: String, last: bool) -> Result<bool, SinkError> {
        self.start.ensure().await?;
        let first = self.reply_id.is_none();
        let name = first.then(|| REPLY_ARTIFACT_NAME.to_owned());
        let id = self
            .updater
            .add_artifact(
                vec![Part::text(t)],
                self.reply_id.clone(),
                name,
                !first,
                last,
            )
            .await?;
        self.reply_id = Some(id);
        self.chunks += 1;
        Ok(true)
    }

    /// Marks the reply artifact complete (`lastChunk: true`).
    async fn close_reply(&mut self) -> Result<(), SinkError> {
        if self.reply_id.is_none() {
            // One piece: the final answer alone, in a single last chunk.
            self.flush_final(true).await?;
            return Ok(());
        }
        if self.flush_final(true).await? {
            return Ok(());
        }
        self.start.ensure().await?;
        self.updater
            .add_artifact(
                vec![Part::text("")],
                self.reply_id.clone(),
                None,
                true,
                true,
            )
            .await?;
        Ok(())
    }
}
