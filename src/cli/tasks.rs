//! The task commands of the client: `get`, `list`, `cancel`, `subscribe`, and `card`,
//! on the binding the agent card offers (see [`super::client`]). Each prints for
//! people by default and the protocol object as JSON with `--json` (decoded and
//! re-encoded, so only an A2A answer is printed).

use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use super::CliError;
use super::client::{Connection, Streaming, printable};
use super::progress::{Progress, conn_flags, state_name};
use crate::protocol::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, SubscribeToTaskRequest, TaskState,
};

/// Arguments of `get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// Where the agent is, how to reach it.
    #[command(flatten)]
    pub conn: Connection,
    /// At most this many recent history messages (with `--json`).
    #[arg(long, value_name = "N")]
    pub history_length: Option<u32>,
    /// Print the Task as JSON.
    #[arg(long)]
    pub json: bool,
    /// The task id.
    pub task_id: String,
}

/// Arguments of `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Where the agent is, how to reach it.
    #[command(flatten)]
    pub conn: Connection,
    /// Only tasks of this context.
    #[arg(long, value_name = "ID")]
    pub context_id: Option<String>,
    /// Only tasks in this state (`working`, `input-required`, `completed`, …).
    #[arg(long, value_name = "STATE", value_parser = parse_state)]
    pub state: Option<TaskState>,
    /// Tasks per page (1 to 100; the server's default is 50).
    #[arg(long, value_name = "N")]
    pub page_size: Option<u32>,
    /// The page after a previous answer (its `next page` token).
    #[arg(long, value_name = "TOKEN")]
    pub page_token: Option<String>,
    /// Only tasks whose status changed at or after this RFC 3339 time.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub since: Option<crate::protocol::time::Timestamp>,
    /// Print the ListTasks answer as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `cancel`.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Where the agent is, how to reach it.
    #[command(flatten)]
    pub conn: Connection,
    /// Print the Task as JSON.
    #[arg(long)]
    pub json: bool,
    /// The task id.
    pub task_id: String,
}

/// Arguments of `subscribe`.
#[derive(Debug, Args)]
pub struct SubscribeArgs {
    /// Where the agent is, how to reach it.
    #[command(flatten)]
    pub conn: Connection,
    /// Resume after this event (the SSE id a broken stream printed): only later
    /// events are sent.
    #[arg(long, value_name = "ID")]
    pub last_event_id: Option<String>,
    /// The task id.
    pub task_id: String,
}

/// Arguments of `card`.
#[derive(Debug, Args)]
pub struct CardArgs {
    /// Where the agent is, how to reach it (`--binding` is not used: the card is read
    /// from `/.well-known/agent-card.json` at `--url`).
    #[command(flatten)]
    pub conn: Connection,
    /// Print the card as JSON, as the agent published it.
    #[arg(long)]
    pub json: bool,
}

fn parse_state(s: &str) -> Result<TaskState, String> {
    let proto = format!(
        "TASK_STATE_{}",
        s.trim().to_ascii_uppercase().replace('-', "_")
    );
    TaskState::parse(s)
        .or_else(|| TaskState::parse(&proto))
        .filter(|s| *s != TaskState::Unspecified)
        .ok_or_else(|| {
            "expected one of: submitted, working, input-required, auth-required, completed, \
             failed, canceled, rejected"
                .to_owned()
        })
}

fn parse_time(s: &str) -> Result<crate::protocol::time::Timestamp, String> {
    crate::protocol::time::parse(s)
        .map_err(|e| format!("expected an RFC 3339 time such as 2026-01-31T12:00:00Z: {e}"))
}

fn print_json<T: Serialize>(v: &T) {
    outln!(
        "{}",
        serde_json::to_string_pretty(v).expect("protocol types serialize")
    );
}

/// Runs `get`.
pub(super) async fn get(args: GetArgs) -> Result<ExitCode, CliError> {
    let client = args.conn.connect().await?;
    let task = client
        .get(&GetTaskRequest {
            tenant: None,
            id: args.task_id,
            history_length: args
                .history_length
                .map(|n| i32::try_from(n).unwrap_or(i32::MAX)),
        })
        .await?;
    if args.json {
        print_json(&task);
        return Ok(ExitCode::SUCCESS);
    }
    let mut progress = Progress::default();
    progress.task(&task);
    progress.finish(&args.conn);
    Ok(ExitCode::SUCCESS)
}

/// Runs `list`.
pub(super) async fn list(args: ListArgs) -> Result<ExitCode, CliError> {
    let client = args.conn.connect().await?;
    let page = client
        .list(&ListTasksRequest {
            context_id: args.context_id.clone(),
            status: args.state,
            page_size: args.page_size.map(|n| i32::try_from(n).unwrap_or(i32::MAX)),
            page_token: args.page_token.clone(),
            status_timestamp_after: args.since,
            ..Default::default()
        })
        .await?;
    if args.json {
        print_json(&page);
        return Ok(ExitCode::SUCCESS);
    }
    for t in &page.tasks {
        let when = t
            .status
            .timestamp
            .as_ref()
            .map(crate::protocol::time::format)
            .unwrap_or_default();
        outln!(
            "{}  {}  {:<14}  {when}",
            printable(&t.id),
            printable(&t.context_id),
            state_name(t.status.state)
        );
    }
    outln!("{} of {} task(s)", page.tasks.len(), page.total_size.max(0));
    if !page.next_page_token.is_empty() {
        let mut filters = String::new();
        if let Some(c) = &args.context_id {
            filters.push_str(&format!("--context-id {c} "));
        }
        if let Some(s) = args.state {
            filters.push_str(&format!("--state {} ", state_name(s)));
        }
        if let Some(n) = args.page_size {
            filters.push_str(&format!("--page-size {n} "));
        }
        if let Some(t) = &args.since {
            filters.push_str(&format!("--since {} ", crate::protocol::time::format(t)));
        }
        outln!(
            "next page: a2a-gateway list {}{filters}--page-token {}",
            conn_flags(&args.conn),
            printable(&page.next_page_token)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `cancel`: exit 0 once the task is CANCELED.
pub(super) async fn cancel(args: CancelArgs) -> Result<ExitCode, CliError> {
    let client = args.conn.connect().await?;
    let task = client
        .cancel(&CancelTaskRequest {
            tenant: None,
            id: args.task_id,
            metadata: None,
        })
        .await?;
    if args.json {
        print_json(&task);
    } else {
        let mut progress = Progress::default();
        progress.known(&task);
        progress.task(&task);
        progress.finish(&args.conn);
    }
    Ok(if task.status.state == TaskState::Canceled {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs `subscribe`: follows the task until it settles.
pub(super) async fn subscribe(args: SubscribeArgs) -> Result<ExitCode, CliError> {
    let client = args.conn.connect().await?;
    let req = SubscribeToTaskRequest {
        tenant: None,
        id: args.task_id,
    };
    let events = client
        .stream(Streaming::Subscribe(&req), args.last_event_id.as_deref())
        .await?;
    Ok(Progress::default().follow(events, &args.conn).await)
}

/// Runs `card`.
pub(super) async fn card(args: CardArgs) -> Result<ExitCode, CliError> {
    let http = args.conn.http()?;
    let (card, raw) = args.conn.card(&http).await?;
    if args.json {
        print_json(&raw);
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{} {}", printable(&card.name), printable(&card.version));
    outln!("{}", printable(&card.description));
    for i in &card.supported_interfaces {
        outln!(
            "interface: {} {} (A2A {})",
            printable(&i.protocol_binding),
            printable(&i.url),
            printable(&i.protocol_version)
        );
    }
    outln!(
        "streaming: {}",
        if card.capabilities.streaming == Some(true) {
            "yes"
        } else {
            "no"
        }
    );
    for s in &card.skills {
        outln!(
            "skill: {} ({}): {}",
            printable(&s.name),
            printable(&s.id),
            printable(&s.description)
        );
    }
    if !card.security_schemes.is_empty() {
        let names: Vec<&str> = card.security_schemes.keys().map(String::as_str).collect();
        outln!("security schemes: {}", printable(&names.join(", ")));
    }
    match super::client::pick(&card) {
        Ok(e) => outln!("the client commands use: {e}"),
        Err(e) => outln!("the client commands cannot use this agent: {e}"),
    }
    Ok(ExitCode::SUCCESS)
}
