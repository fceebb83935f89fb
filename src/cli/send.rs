//! `a2a-gateway send`: send a message and print the reply as it arrives (see
//! [`super::progress`]), on the binding the agent card offers (see [`super::client`]).
//! Exits 1 when the task ends FAILED, REJECTED or CANCELED, on a protocol error, on
//! an answer that is not A2A, or when a stream breaks (the command to resume it with
//! `subscribe --last-event-id` is printed).

use std::process::ExitCode;

use clap::Args;

use super::CliError;
use super::client::{Connection, Streaming};
use super::progress::Progress;
use crate::executor::new_id;
use crate::protocol::{
    GetTaskRequest, Message, Part, Role, SendMessageConfiguration, SendMessageRequest,
    SendMessageResponse, StreamResponse,
};

/// Arguments of `send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// Where the agent is, how to reach it.
    #[command(flatten)]
    pub conn: Connection,
    /// Stream the reply (SendStreamingMessage) instead of waiting for it (SendMessage).
    #[arg(long)]
    pub stream: bool,
    /// Continue this task (e.g. one that asked for input).
    #[arg(long, value_name = "ID")]
    pub task_id: Option<String>,
    /// Send within this context (conversation).
    #[arg(long, value_name = "ID")]
    pub context_id: Option<String>,
    /// The message text.
    pub text: String,
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
    let client = args.conn.connect().await?;
    let mut progress = Progress::default();
    if args.stream {
        // A follow-up's stream opens with the task as the previous turn left it.
        progress.skip_snapshot = args.task_id.is_some();
        let events = client.stream(Streaming::Send(&params), None).await?;
        return Ok(progress.follow(events, &args.conn).await);
    }
    if let Some(id) = &args.task_id {
        // The reply holds the whole task: what earlier turns wrote is not printed again.
        let earlier = client
            .get(&GetTaskRequest {
                tenant: None,
                id: id.clone(),
                history_length: Some(0),
            })
            .await;
        if let Ok(task) = earlier {
            progress.known(&task);
        }
    }
    match client.send(&params).await? {
        SendMessageResponse::Task(t) => progress.task(&t),
        SendMessageResponse::Message(m) => progress.response(StreamResponse::Message(m)),
    }
    Ok(progress.finish(&args.conn))
}
