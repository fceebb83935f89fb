//! The `a2a-gateway` binary: parses the command line and hands over to
//! [`a2a_gateway::cli`], where every command lives.

use clap::Parser;

fn main() -> std::process::ExitCode {
    a2a_gateway::cli::run(a2a_gateway::cli::Cli::parse())
}
