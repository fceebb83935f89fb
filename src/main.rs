//! The `a2a-gateway` command line (placeholder until the CLI lands).

fn main() {
    eprintln!("a2a-gateway: the command line is not built yet");
    std::process::exit(2);
}
