//! The `a2a-gateway` command line: `serve`, `demo`, `check-config`, `send`.
//!
//! `main.rs` only parses [`Cli`] and calls [`run`]; each command lives in its own
//! file here. Exit codes: 0 success, 1 failure (bad config, failed task, I/O error),
//! 2 usage errors (from clap).

mod build;
mod demo;
mod send;
mod serve;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use build::{build_executor, build_store, build_store_for_cluster};
pub use send::SendArgs;

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
    /// Validate the configuration and print it with secrets shown as `***`.
    CheckConfig {
        /// TOML config file (same discovery as `serve`).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Send a message to an A2A agent and print the reply as it arrives.
    Send(SendArgs),
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
            Command::CheckConfig { config } => check_config(config),
            Command::Send(args) => send::run(args).await,
            Command::Migrate { config } => migrate(config).await,
        }
    });
    // Do not wait for stray blocking tasks (stdin readers, DNS) at exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
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
    let store = build::build_store(&config).await?;
    store.close().await;
    println!("store {} is at the current schema", config.store.url);
    Ok(ExitCode::SUCCESS)
}

fn check_config(file: Option<PathBuf>) -> Result<ExitCode, CliError> {
    let sources = crate::config::ConfigSources::discover(file);
    let from = sources
        .file
        .as_ref()
        .map_or_else(|| "no file".to_owned(), |p| p.display().to_string());
    for var in sources.unused_env_vars() {
        eprintln!("warning: {var} sets no config key (expected A2A_GATEWAY_<SECTION>__<KEY>)");
    }
    let config = crate::Config::load(sources)?;
    println!("# effective configuration ({from}, defaults and environment); secrets shown as ***");
    print!("{}", config.redacted_toml());
    // What `serve` would refuse beyond the file itself: an upstream it cannot use.
    if let Err(e) = crate::upstream::AgentCoreSettings::try_from(&config.upstream) {
        eprintln!("a2a-gateway: `serve` would refuse this configuration: {e}");
        return Ok(ExitCode::FAILURE);
    }
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
