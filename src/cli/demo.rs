//! `a2a-gateway demo`: the whole path on one machine. Starts a LOCAL STAND-IN for
//! the AgentCore runtime and a stand-in OAuth token issuer (see [`crate::demo`]),
//! then the gateway with its upstream executor pointed at both, and prints
//! commands to try.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use secrecy::SecretString;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::CliError;
use crate::config::{Config, ConfigSources};
use crate::demo::issuer::{TOKEN_PATH, TokenIssuer};
use crate::demo::runtime::{self, RuntimeOptions};

/// Lifetime of the stand-in issuer's tokens: short, so that refreshes (30 s before
/// expiry) show in the log within a minute.
const TOKEN_LIFETIME: Duration = Duration::from_secs(60);
const CLIENT_ID: &str = "a2a-gateway-demo";

/// The demo's store URL: a SQLite file under `dir`.
fn store_url(dir: &Path) -> String {
    format!("sqlite://{}", dir.join("tasks.db").display())
}

/// Runs `demo`.
pub(super) async fn run(listen: SocketAddr, dir: PathBuf) -> Result<ExitCode, CliError> {
    std::fs::create_dir_all(&dir).map_err(|e| format!("--dir {}: {e}", dir.display()))?;
    let stop = CancellationToken::new();
    let secret = format!("demo-secret-{}", uuid::Uuid::new_v4().simple());
    let issuer = TokenIssuer::new(
        CLIENT_ID,
        SecretString::from(secret.clone()),
        TOKEN_LIFETIME,
    );
    let issuer_addr = crate::demo::spawn_local(issuer.clone().router(), stop.clone()).await?;
    let runtime_addr = crate::demo::spawn_local(
        runtime::router(RuntimeOptions {
            issuer: Some(issuer),
            ..RuntimeOptions::default()
        }),
        stop.clone(),
    )
    .await?;
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| format!("--listen {listen}: cannot listen: {e} (try --listen 127.0.0.1:0)"))?;
    let local = listener.local_addr()?;
    let sources = ConfigSources::default()
        .with_override("server.listen", local.to_string())
        .with_override("server.shutdown_grace_secs", 5)
        .with_override("store.url", store_url(&dir))
        .with_override("agent.name", "a2a-gateway demo")
        .with_override(
            "agent.description",
            "The a2a-gateway demo: a LOCAL STAND-IN for an AgentCore-hosted agent, reached over A2A.",
        )
        .with_override("upstream.url", format!("http://{runtime_addr}/invocations"))
        .with_override("upstream.http_version", "http2")
        .with_override("upstream.auth.kind", "oauth2")
        .with_override("upstream.auth.client_id", CLIENT_ID)
        .with_override("upstream.auth.client_secret", secret)
        .with_override("upstream.auth.scope", "demo/invoke")
        .with_override("upstream.auth.token_url", format!("http://{issuer_addr}{TOKEN_PATH}"));
    let config = Config::load(sources)?;
    crate::app::init_log(&config);
    print_banner(local, runtime_addr, issuer_addr, &dir, &config);
    let shutdown = async move {
        crate::server::shutdown_signals().await;
    };
    let result = super::serve::serve_config(&config, listener, shutdown, None).await;
    stop.cancel();
    result.map(|()| ExitCode::SUCCESS)
}

fn print_banner(
    gateway: SocketAddr,
    runtime: SocketAddr,
    issuer: SocketAddr,
    dir: &Path,
    config: &Config,
) {
    let url = format!("http://{gateway}/");
    outln!(
        r#"
a2a-gateway demo: everything below runs on this machine.

  LOCAL STAND-IN runtime   http://{runtime}/invocations   (speaks the AgentCore invocation contract over h2c; not AWS)
  LOCAL STAND-IN issuer    http://{issuer}{TOKEN_PATH}    (OAuth client credentials; tokens live {life} s, so refreshes show in the log)
  gateway (A2A 1.0)        {url}
  task store               {store}   (directory {dir})

Try it (from the repository: replace `a2a-gateway` with `cargo run --release --`):

  a2a-gateway send --url {url} --stream "Hello there"
  a2a-gateway send --url {url} --stream "Please ask me something"   # ends INPUT_REQUIRED, prints the reply command
  a2a-gateway send --url {url} --task-id ID --context-id ID "v1.2"  # the follow-up, with the ids it printed
  a2a-gateway send --url {url} "Please fail"                        # ends FAILED (exit code 1)
  a2a-gateway list --url {url}                                      # the tasks so far; get, cancel, subscribe, card
  curl -s {url}.well-known/agent-card.json
  curl -s {url}metrics | grep ^a2a_

Stop with Ctrl-C.
gateway: {url}
"#,
        life = TOKEN_LIFETIME.as_secs(),
        store = config.store.url,
        dir = dir.display(),
    );
}
