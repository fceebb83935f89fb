//! `a2a-gateway keys new --caller NAME`: a fresh API key for `[server.auth] kind =
//! "api_key"`, printed once, with the config lines that hold only its SHA-256 (the
//! format `[[server.auth.keys]] sha256` takes, see [`crate::config::server_auth`]).
//! The key is 32 random bytes from the operating system's generator, URL-safe
//! base64 without padding, prefixed `a2a_`; it is never written anywhere else.

use std::process::ExitCode;

use base64::Engine;
use clap::{Args, Subcommand};
use rand::TryRngCore;
use sha2::{Digest, Sha256};

use super::CliError;

/// `keys` subcommands.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make a new API key for a caller and print the config lines for it.
    New(NewKeyArgs),
}

/// Arguments of `keys new`.
#[derive(Debug, Args)]
pub struct NewKeyArgs {
    /// The caller the key stands for: the owner of the tasks it creates.
    #[arg(long, value_name = "NAME")]
    pub caller: String,
}

/// A new key and its hex SHA-256.
///
/// # Errors
/// The operating system's random generator failed.
pub fn new_key() -> Result<(String, String), CliError> {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng
        .try_fill_bytes(&mut bytes)
        .map_err(|e| format!("the system random generator failed: {e}"))?;
    let key = format!(
        "a2a_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let digest = Sha256::digest(key.as_bytes());
    let hex = digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok((key, hex))
}

/// Runs a `keys` subcommand.
pub(super) fn run(command: KeysCommand) -> Result<ExitCode, CliError> {
    let KeysCommand::New(args) = command;
    let caller = args.caller.as_str();
    // `serve` refuses such a caller in its config ([server.auth.keys]): say so now,
    // before a key is made for it.
    if let Some(problem) = crate::config::key_caller_problem(caller) {
        return Err(format!("--caller {problem}").into());
    }
    let (key, hash) = new_key()?;
    let quoted = toml::Value::String(caller.to_owned()).to_string();
    outln!("# API key for caller {quoted}: shown once, give it to the caller; it is not stored.");
    outln!("{key}");
    outln!();
    outln!("# Config lines (only the hash of the key):");
    outln!("[server.auth]");
    outln!("kind = \"api_key\"");
    outln!();
    outln!("[[server.auth.keys]]");
    outln!("caller = {quoted}");
    outln!("sha256 = \"{hash}\"");
    outln!();
    outln!("# Or in the environment (the whole list in one variable), as shell lines; in an");
    outln!("# env file or a manifest the value is the TOML list itself, without the quoting:");
    outln!("# export A2A_GATEWAY_SERVER__AUTH__KIND=api_key");
    let env_value = format!("[{{caller = {quoted}, sha256 = \"{hash}\"}}]");
    outln!(
        "# export A2A_GATEWAY_SERVER__AUTH__KEYS={}",
        super::shell::single_quoted(&env_value)
    );
    Ok(ExitCode::SUCCESS)
}
