//! The `a2a-gateway` binary: parses the command line and hands over to
//! [`a2a_gateway::cli`], where every command lives.

use clap::Parser;

/// The process allocator: mimalloc (feature `mimalloc`, on by default; see the crate docs).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    a2a_gateway::cli::run(a2a_gateway::cli::Cli::parse())
}
