//! The `a2a-gateway` command line: `serve`, `demo`, `check-config`, `migrate`,
//! `health`, `keys new`, `push-status`, and the client commands `send`, `get`, `list`, `cancel`,
//! `subscribe` and `card`.
//!
//! `main.rs` only parses [`Cli`] and calls [`run`]; each command lives in its own
//! file here. Exit codes: 0 success, 1 failure (bad config, failed task, I/O error),
//! 2 usage errors (from clap).

#[macro_use]
mod output;

mod check_config;
pub mod client;
mod demo;
mod health;
mod keys;
mod progress;
mod push_status;
mod send;
mod serve;
mod shell;
mod tasks;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use health::{HealthArgs, health_url};
pub use keys::{KeysCommand, NewKeyArgs, new_key};
pub use push_status::PushStatusArgs;
pub use send::SendArgs;
pub use tasks::{CancelArgs, CardArgs, GetArgs, ListArgs, SubscribeArgs};

/// An A2A 1.0 gateway in front of a hosted agent runtime (Amazon Bedrock AgentCore).
#[derive(Debug, Parser)]
#[command(name = "a2a-gateway", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway.
    ///
    /// Config: --config, else $A2A_GATEWAY_CONFIG, else ./a2a-gateway.toml if present,
    /// else built-in defaults; A2A_GATEWAY_<SECTION>__<KEY> variables override the file.
    Serve {
        /// TOML config file.
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
        /// Listen address (overrides server.listen).
        #[arg(long, value_name = "ADDR")]
        listen: Option<SocketAddr>,
    },
    /// Try the whole path on this machine: a LOCAL STAND-IN for the AgentCore runtime,
    /// a local OAuth token issuer, and the gateway in front of them.
    Demo {
        /// Gateway listen address.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Directory for the demo's task store.
        #[arg(long, value_name = "PATH", default_value = "a2a-gateway-demo")]
        dir: PathBuf,
    },
    /// Validate the configuration as `serve` would, print it with secrets shown as
    /// `***`, then what the gateway derives from it (invocation URL, token endpoint,
    /// the interfaces the card declares).
    CheckConfig {
        /// TOML config file (same discovery as `serve`).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
        /// Also ask the services who the gateway is to them: with
        /// `upstream.auth.kind = "sigv4"`, `sts:GetCallerIdentity` with the chain's
        /// credentials (the role and account they resolve to).
        #[arg(long)]
        probe: bool,
    },
    /// Send a message to an A2A agent and print the reply as it arrives.
    Send(SendArgs),
    /// Print a task (GetTask).
    Get(GetArgs),
    /// List tasks, newest first, with filters and paging (ListTasks).
    List(ListArgs),
    /// Cancel a task (CancelTask); exit 0 once it is CANCELED.
    Cancel(CancelArgs),
    /// Follow a task's events until it settles (SubscribeToTask), or resume after an
    /// event with --last-event-id.
    Subscribe(SubscribeArgs),
    /// Print the agent card.
    Card(CardArgs),
    /// Ask the running gateway's /healthz on the configured port (the container
    /// health check).
    Health(HealthArgs),
    /// API keys for `[server.auth] kind = "api_key"`.
    Keys {
        /// What to do.
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// List the push deliveries still pending and the webhook configs that are disabled
    /// or failing, each with its last error, from the task store (never a secret).
    PushStatus(PushStatusArgs),
    /// Create or upgrade the task store's schema (`serve` also does this at start).
    Migrate {
        /// TOML config file (same discovery as `serve`).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("a2a-gateway: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve { config, listen } => serve::run(config, listen).await,
            Command::Demo { listen, dir } => demo::run(listen, dir).await,
            Command::CheckConfig { config, probe } => check_config::run(config, probe).await,
            Command::Send(args) => send::run(args).await,
            Command::Get(args) => tasks::get(args).await,
            Command::List(args) => tasks::list(args).await,
            Command::Cancel(args) => tasks::cancel(args).await,
            Command::Subscribe(args) => tasks::subscribe(args).await,
            Command::Card(args) => tasks::card(args).await,
            Command::Health(args) => health::run(args).await,
            Command::Keys { command } => keys::run(command),
            Command::PushStatus(args) => push_status::run(args).await,
            Command::Migrate { config } => migrate(config).await,
        }
    });
    // Do not wait for stray blocking tasks (stdin readers, DNS) at exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    // The log's last lines before the error line below, and before the exit.
    crate::telemetry::flush_log();
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("a2a-gateway: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A command's failure: one line for stderr. Never holds a secret.
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

async fn migrate(file: Option<PathBuf>) -> Result<ExitCode, CliError> {
    let config = crate::config::Config::load(crate::config::ConfigSources::discover(file))?;
    let store = crate::app::build_store(&config).await?;
    let stepped = crate::app::owners::namespace_owners(&config, store.as_ref()).await;
    store.close().await;
    if let Some(line) = stepped? {
        outln!("{line}");
    }
    outln!("store {} is at the current schema", config.store.url);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        super::Cli::command().debug_assert();
    }
}
