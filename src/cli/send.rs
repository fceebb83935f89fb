//! `a2a-gateway send`: a small A2A JSON-RPC client for people. Prints status
//! changes (on their own lines, prefixed `»`) and the artifact text as it arrives,
//! then the task and context ids for a follow-up. Exits 1 when the task ends
//! FAILED, REJECTED or CANCELED, or on a JSON-RPC error.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::Url;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::CliError;
use crate::executor::{get_artifact_text, new_id};
use crate::protocol::{
    Message, Part, Role, SendMessageConfiguration, SendMessageRequest, SendMessageResponse,
    StreamResponse, Task, TaskState, TaskStatus,
};

/// Arguments of `send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// The agent's JSON-RPC URL.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080/")]
    pub url: Url,
    /// Stream the reply (SendStreamingMessage) instead of waiting for it (SendMessage).
    #[arg(long)]
    pub stream: bool,
    /// Continue this task (e.g. one that asked for input).
    #[arg(long, value_name = "ID")]
    pub task_id: Option<String>,
    /// Send within this context (conversation).
    #[arg(long, value_name = "ID")]
    pub context_id: Option<String>,
    /// API key sent as `Authorization: Bearer KEY`, for a gateway with
    /// `[server.auth] kind = "api_key"`. Prefer the environment variable: a flag is
    /// visible to other local users in the process list.
    #[arg(
        long,
        value_name = "KEY",
        env = crate::config::API_KEY_ENV,
        hide_env_values = true,
        value_parser = |s: &str| Ok::<_, std::convert::Infallible>(SecretString::from(s))
    )]
    pub api_key: Option<SecretString>,
    /// The message text.
    pub text: String,
}

/// What `send` has seen of the task so far.
#[derive(Default)]
struct Progress {
    task_id: Option<String>,
    context_id: Option<String>,
    state: Option<TaskState>,
    /// Artifact text is being written on the current line.
    mid_line: bool,
    /// A follow-up's stream opens with the task as the previous turn left it: that
    /// snapshot is not printed again.
    skip_snapshot: bool,
}

impl Progress {
    fn end_line(&mut self) {
        if self.mid_line {
            println!();
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
            .map(|m| crate::executor::get_message_text(m, " "))
            .filter(|t| !t.is_empty())
            .map(|t| format!(": {t}"))
            .unwrap_or_default();
        println!("» {}{text}", state_name(status.state));
    }

    fn task(&mut self, task: &Task, print_artifacts: bool) {
        self.task_id = Some(task.id.clone());
        self.context_id = Some(task.context_id.clone());
        if print_artifacts {
            for artifact in task.artifacts() {
                self.text(&get_artifact_text(artifact, ""));
            }
        }
        self.status(&task.status);
    }

    fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        print!("{text}");
        let _ = std::io::stdout().flush();
        self.mid_line = !text.ends_with('\n');
    }

    fn event(&mut self, event: StreamResponse) {
        match event {
            StreamResponse::Task(t) if self.skip_snapshot => {
                self.skip_snapshot = false;
                self.task_id = Some(t.id);
                self.context_id = Some(t.context_id);
            }
            StreamResponse::Task(t) => self.task(&t, true),
            StreamResponse::Message(m) => {
                self.end_line();
                println!("{}", crate::executor::get_message_text(&m, "\n"));
            }
            StreamResponse::StatusUpdate(u) => {
                self.task_id = Some(u.task_id);
                self.context_id = Some(u.context_id);
                self.status(&u.status);
            }
            StreamResponse::ArtifactUpdate(u) => {
                self.text(&get_artifact_text(&u.artifact, ""));
            }
        }
    }

    fn finish(mut self, url: &Url) -> ExitCode {
        self.end_line();
        let Some(task_id) = self.task_id else {
            return ExitCode::SUCCESS;
        };
        let context = self.context_id.unwrap_or_default();
        println!("task id: {task_id}  context id: {context}");
        match self.state {
            Some(TaskState::InputRequired | TaskState::AuthRequired) => {
                println!(
                    "reply with: a2a-gateway send --url {url} --task-id {task_id} --context-id {context} \"...\""
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

fn state_name(s: TaskState) -> String {
    s.as_str()
        .trim_start_matches("TASK_STATE_")
        .to_ascii_lowercase()
        .replace('_', "-")
}

/// Runs `send`.
pub(super) async fn run(args: SendArgs) -> Result<ExitCode, CliError> {
    let message = Message {
        message_id: new_id(),
        context_id: args.context_id.clone(),
        task_id: args.task_id.clone(),
        role: Role::User,
        parts: vec![Part::text(args.text.clone())],
        metadata: None,
        extensions: vec![],
        reference_task_ids: vec![],
    };
    let params = SendMessageRequest {
        tenant: None,
        message,
        configuration: Some(SendMessageConfiguration {
            accepted_output_modes: vec!["text/plain".into()],
            ..Default::default()
        }),
        metadata: None,
    };
    let method = if args.stream {
        "SendStreamingMessage"
    } else {
        "SendMessage"
    };
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut request = reqwest::Client::new()
        .post(args.url.clone())
        .header("A2A-Version", "1.0");
    if let Some(key) = args
        .api_key
        .as_ref()
        .map(ExposeSecret::expose_secret)
        .filter(|k| !k.is_empty())
    {
        request = request.bearer_auth(key);
    }
    let resp = request
        .header(
            "accept",
            if args.stream {
                "text/event-stream"
            } else {
                "application/json"
            },
        )
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("{}: {e}", args.url))?;
    let status = resp.status();
    let is_sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if status == reqwest::StatusCode::UNAUTHORIZED {
        let hint = if args.api_key.is_some() {
            "the API key was not accepted"
        } else {
            "pass --api-key KEY or set A2A_GATEWAY_API_KEY"
        };
        return Err(format!(
            "{} answered HTTP 401 (authentication required): {hint}",
            args.url
        )
        .into());
    }
    let mut progress = Progress::default();
    if !is_sse {
        let text = resp.text().await?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|_| format!("{} answered HTTP {status}: {}", args.url, text.trim()))?;
        match result_of(v)? {
            Value::Null => {}
            result if args.stream => progress.event(serde_json::from_value(result)?),
            result => match serde_json::from_value::<SendMessageResponse>(result)? {
                SendMessageResponse::Task(t) => progress.task(&t, true),
                SendMessageResponse::Message(m) => progress.event(StreamResponse::Message(m)),
            },
        }
        return Ok(progress.finish(&args.url));
    }
    progress.skip_snapshot = args.task_id.is_some();
    let mut events = resp.bytes_stream().eventsource();
    while let Some(ev) = events.next().await {
        let ev = ev.map_err(|e| format!("the stream broke: {e}"))?;
        let v: Value = serde_json::from_str(&ev.data)?;
        match result_of(v) {
            Ok(result) => progress.event(serde_json::from_value(result)?),
            Err(e) => {
                progress.end_line();
                return Err(e);
            }
        }
    }
    Ok(progress.finish(&args.url))
}

/// The `result` of a JSON-RPC response, or its `error` as a readable failure.
fn result_of(mut v: Value) -> Result<Value, CliError> {
    if let Some(err) = v.get("error") {
        let code = err["code"].as_i64().unwrap_or_default();
        let msg = err["message"].as_str().unwrap_or("(no message)");
        return Err(format!("error {code}: {msg}").into());
    }
    Ok(v.get_mut("result").map(Value::take).unwrap_or(Value::Null))
}
