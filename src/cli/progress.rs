//! How the client commands print a task as it changes: status changes on their own
//! lines prefixed `»`, artifact text as it arrives (each piece once: a follow-up
//! prints only what the new turn added), then the task and context ids, and the
//! command to go on with. Everything the agent wrote is printed through
//! [`printable`](super::client::printable).

use std::collections::HashMap;
use std::process::ExitCode;

use super::client::{BindingChoice, Connection, Event, Events, printable};
use super::shell::word;
use crate::executor::{get_artifact_text, get_message_text};
use crate::protocol::{StreamResponse, Task, TaskState, TaskStatus};
use futures::StreamExt;

/// What a command has seen of the task so far.
#[derive(Default)]
pub struct Progress {
    /// The task's id, once known.
    pub task_id: Option<String>,
    context_id: Option<String>,
    state: Option<TaskState>,
    /// Artifact text is being written on the current line.
    mid_line: bool,
    /// The next Task snapshot of a stream is the task as an earlier turn left it:
    /// it is not printed again.
    pub skip_snapshot: bool,
    /// The SSE id of the last event seen (the resume cursor).
    last_event_id: Option<String>,
    /// The last status update ended this message's turn while another waits.
    turn_ended: bool,
    /// A Message reply (no task) was printed.
    message_only: bool,
    /// The text already printed (or already known) of each artifact, by id.
    printed: HashMap<String, String>,
}

impl Progress {
    /// Remembers the artifacts of `task` as already shown (a follow-up prints only
    /// what its turn adds).
    pub fn known(&mut self, task: &Task) {
        for a in task.artifacts() {
            self.printed
                .insert(a.artifact_id.clone(), get_artifact_text(a, ""));
        }
    }

    /// Ends a line of artifact text.
    pub fn end_line(&mut self) {
        if self.mid_line {
            outln!();
            self.mid_line = false;
        }
    }

    fn status(&mut self, status: &TaskStatus) {
        if self.state == Some(status.state) && status.message.is_none() {
            return;
        }
        self.state = Some(status.state);
        self.end_line();
        let text = status
            .message
            .as_ref()
            .map(|m| get_message_text(m, " "))
            .filter(|t| !t.is_empty())
            .map(|t| format!(": {}", printable(&t)))
            .unwrap_or_default();
        outln!("» {}{text}", state_name(status.state));
    }

    /// Prints a task snapshot: the artifact text not printed yet, and its status.
    pub fn task(&mut self, task: &Task) {
        self.task_id = Some(task.id.clone());
        self.context_id = Some(task.context_id.clone());
        for artifact in task.artifacts() {
            let text = get_artifact_text(artifact, "");
            let before = self
                .printed
                .insert(artifact.artifact_id.clone(), text.clone());
            match before {
                Some(b) if b == text => {}
                Some(b) if text.starts_with(&b) => self.text(&text[b.len()..]),
                _ => self.text(&text),
            }
        }
        self.status(&task.status);
    }

    fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        out!("{}", printable(text));
        self.mid_line = !text.ends_with('\n');
    }

    /// Prints one stream event.
    pub fn event(&mut self, event: Event) {
        if event.id.is_some() {
            self.last_event_id = event.id;
        }
        self.response(event.response);
    }

    /// Prints one result or stream item.
    pub fn response(&mut self, response: StreamResponse) {
        match response {
            StreamResponse::Task(t) if self.skip_snapshot => {
                self.skip_snapshot = false;
                self.known(&t);
                self.task_id = Some(t.id);
                self.context_id = Some(t.context_id);
                self.state = Some(t.status.state);
            }
            StreamResponse::Task(t) => self.task(&t),
            StreamResponse::Message(m) => {
                self.end_line();
                self.message_only = self.task_id.is_none();
                outln!("{}", printable(&get_message_text(&m, "\n")));
            }
            StreamResponse::StatusUpdate(u) => {
                self.task_id = Some(u.task_id);
                self.context_id = Some(u.context_id);
                self.turn_ended = u
                    .metadata
                    .as_ref()
                    .is_some_and(|m| m.contains_key(crate::handler::TURN_ENDED_METADATA));
                self.status(&u.status);
            }
            StreamResponse::ArtifactUpdate(u) => {
                let text = get_artifact_text(&u.artifact, "");
                let entry = self.printed.entry(u.artifact.artifact_id).or_default();
                if u.append {
                    entry.push_str(&text);
                } else {
                    *entry = text.clone();
                }
                self.text(&text);
            }
        }
    }

    /// Follows `events` to their end. A stream that breaks, or ends before the task
    /// settles, is a failure: the task id and the command that resumes it are printed.
    ///
    /// # Errors
    /// None of its own: failures are printed and give a non-zero exit code.
    pub async fn follow(mut self, mut events: Events, conn: &Connection) -> ExitCode {
        while let Some(item) = events.next().await {
            match item {
                Ok(ev) => self.event(ev),
                Err(e) => {
                    self.end_line();
                    eprintln!("a2a-gateway: {e}");
                    self.resume_hint(conn);
                    return ExitCode::FAILURE;
                }
            }
        }
        let settled =
            self.message_only || self.turn_ended || self.state.is_some_and(TaskState::is_settled);
        if !settled {
            self.end_line();
            eprintln!("a2a-gateway: the stream ended before the task settled");
            self.resume_hint(conn);
            return ExitCode::FAILURE;
        }
        self.finish(conn)
    }

    fn resume_hint(&self, conn: &Connection) {
        let Some(task) = &self.task_id else { return };
        let cursor = self
            .last_event_id
            .as_ref()
            .map(|id| format!(" --last-event-id {}", word(id)))
            .unwrap_or_default();
        eprintln!("task id: {}", printable(task));
        eprintln!(
            "resume with: a2a-gateway subscribe {}{}{cursor}",
            conn_flags(conn),
            word(task)
        );
    }

    /// Prints the ids and what to do next; the exit code: 1 when the task ended
    /// FAILED, REJECTED or CANCELED.
    pub fn finish(mut self, conn: &Connection) -> ExitCode {
        self.end_line();
        let Some(task_id) = self.task_id else {
            return ExitCode::SUCCESS;
        };
        let context = self.context_id.unwrap_or_default();
        outln!(
            "task id: {}  context id: {}",
            printable(&task_id),
            printable(&context)
        );
        match self.state {
            Some(TaskState::InputRequired | TaskState::AuthRequired) => {
                outln!(
                    "reply with: a2a-gateway send {}--task-id {} --context-id {} \"...\"",
                    conn_flags(conn),
                    word(&task_id),
                    word(&context)
                );
                ExitCode::SUCCESS
            }
            Some(TaskState::Failed | TaskState::Rejected | TaskState::Canceled) => {
                ExitCode::FAILURE
            }
            _ => ExitCode::SUCCESS,
        }
    }
}

/// `--url URL ` (and `--binding B ` when one was forced) for a printed command.
pub fn conn_flags(conn: &Connection) -> String {
    let binding = match conn.binding {
        BindingChoice::Auto => "",
        BindingChoice::Jsonrpc => "--binding jsonrpc ",
        BindingChoice::Rest => "--binding rest ",
    };
    format!("--url {} {binding}", word(conn.url.as_str()))
}

/// `working`, `input-required`, …
pub fn state_name(s: TaskState) -> String {
    s.as_str()
        .trim_start_matches("TASK_STATE_")
        .to_ascii_lowercase()
        .replace('_', "-")
}
