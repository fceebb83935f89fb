//! `a2a-gateway check-config`: loads the configuration as `serve` would, refuses what
//! `serve` would refuse (an upstream it cannot use, a store directory it cannot write,
//! TLS files it cannot read), prints the effective configuration with secrets as
//! `***`, then what the gateway derives from it as `# derived:` comment lines: the
//! invocation and stop-session URLs, the upstream token endpoint, the task store and
//! the `[store]` keys it ignores, the public URL and
//! the interfaces the agent card will declare (every URL with its password and
//! secret-looking query values as `***`, like the configuration above it).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::CliError;
use crate::config::{
    A2aUpstreamConfig, AgentCoreUpstreamConfig, Config, ConfigSources, SqliteSynchronous,
    UpstreamConfig,
};
use crate::config::{LogUrl, masked};
use crate::upstream::{AuthSettings, TokenEndpoint};

/// How long a discovery document fetch may take before check-config gives up on it.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `check-config`.
pub(super) async fn run(file: Option<PathBuf>, probe: bool) -> Result<ExitCode, CliError> {
    let sources = ConfigSources::discover(file);
    let from = sources
        .file
        .as_ref()
        .map_or_else(|| "no file".to_owned(), |p| p.display().to_string());
    for var in sources.unused_env_vars() {
        eprintln!("warning: {var} sets no config key (expected A2A_GATEWAY_<SECTION>__<KEY>)");
    }
    let config = Config::load(sources)?;
    outln!("# effective configuration ({from}, defaults and environment); secrets shown as ***");
    out!("{}", config.redacted_toml());
    match refusal(&config) {
        Some(e) => {
            eprintln!("a2a-gateway: `serve` would refuse this configuration: {e}");
            Ok(ExitCode::FAILURE)
        }
        None => {
            outln!();
            for line in derived(&config, probe).await {
                outln!("# derived: {line}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// What `serve` would refuse beyond the file itself, in the order it meets them.
fn refusal(config: &Config) -> Option<CliError> {
    if config.serves_root_agent()
        && let Err(e) = crate::app::build_executor(config)
    {
        return Some(e);
    }
    for (id, entry) in &config.agents {
        let agent = crate::app::gateway::agent_config(config, id, entry);
        if let Err(e) = crate::app::build_executor(&agent) {
            return Some(format!("[agents.{id}]: {e}").into());
        }
    }
    if let Err(e) = crate::app::check_store_location(config) {
        return Some(e);
    }
    if let (Some(cert), Some(key)) = (&config.server.tls_cert_file, &config.server.tls_key_file)
        && let Err(e) = crate::tls::server_config(cert, key)
    {
        return Some(e.into());
    }
    None
}

/// The lines an `agentcore` upstream derives: its invocation and stop-session URLs, and
/// how it authenticates (the token endpoint, looked up when given by discovery; for
/// SigV4 where the credentials come from and, with `probe`, who STS says they are).
async fn agentcore_derived(upstream: &AgentCoreUpstreamConfig, probe: bool, out: &mut Vec<String>) {
    if let Ok(url) = upstream.invocation_url() {
        out.push(format!("invocation URL: {}", masked(&url)));
    }
    if upstream.stop_session_on_cancel
        && let Ok(url) = upstream.stop_session_url()
    {
        out.push(format!("stop-session URL: {}", masked(&url)));
    }
    if let Ok(settings) = crate::app::agentcore_settings(upstream) {
        auth_derived(settings.connection.auth, probe, out).await;
    }
}

/// The lines `[upstream.auth]` derives, whatever the kind: the token endpoint (OAuth),
/// the SigV4 region and the credential chain's source (and with `probe` the identity
/// it resolves to), never a secret.
async fn auth_derived(auth: AuthSettings, probe: bool, out: &mut Vec<String>) {
    match auth {
        AuthSettings::OAuth2(o) => out.push(match &o.endpoint {
            TokenEndpoint::Url(url) => format!("token endpoint: {} (configured)", LogUrl(url)),
            TokenEndpoint::Discovery(doc) => match discover(doc).await {
                Ok(url) => format!(
                    "token endpoint: {} (from the discovery document {})",
                    LogUrl(&url),
                    LogUrl(doc)
                ),
                Err(why) => format!(
                    "token endpoint: unknown yet, the discovery document {} {why} \
                     (`serve` starts anyway and is not ready until a token is obtained)",
                    LogUrl(doc)
                ),
            },
        }),
        AuthSettings::None => out.push("upstream authentication: none".to_owned()),
        AuthSettings::Forward => {
            out.push("upstream authentication: the caller's own verified JWT (forward)".to_owned())
        }
        AuthSettings::SigV4(s) => {
            out.push(format!(
                "upstream authentication: AWS SigV4, service {}, region {}",
                crate::upstream::auth::sigv4::SERVICE,
                s.region
            ));
            out.push(
                match crate::upstream::auth::sigv4::describe_source(&s).await {
                    Ok(source) => format!("upstream credentials: {source}"),
                    Err(e) => format!(
                        "upstream credentials: none found yet: {} (`serve` starts anyway and is \
                     not ready until the chain answers)",
                        e.reason()
                    ),
                },
            );
            if probe {
                let who = crate::upstream::auth::sigv4::chain::caller_identity(&s).await;
                out.push(match who {
                    Ok(who) => format!("upstream identity (sts:GetCallerIdentity): {who}"),
                    Err(e) => format!("upstream identity: unknown, {}", e.reason()),
                });
            }
        }
        _ => out.push("upstream authentication: a static bearer token".to_owned()),
    }
}

/// The lines an `a2a` upstream derives: its card URL and, when the card can be read
/// now, the endpoint, version and streaming the gateway will use (else why not:
/// `serve` starts anyway and is not ready until it is read).
async fn a2a_derived(upstream: &A2aUpstreamConfig, probe: bool, out: &mut Vec<String>) {
    let Ok(settings) = crate::app::a2a_settings(upstream) else {
        return;
    };
    auth_derived(settings.connection.auth.clone(), probe, out).await;
    out.push(format!("agent card URL: {}", LogUrl(&settings.card_url)));
    out.push(format!(
        "agent resume: up to {} s after a broken stream; a task left SUBMITTED by a broken answer fails after {} s; card read at most every {} s",
        settings.resume_for.as_secs(),
        settings.stall_for.as_secs(),
        settings.card_min_refresh.as_secs()
    ));
    let Ok(executor) = crate::upstream::a2a::A2aExecutor::new(settings) else {
        return;
    };
    out.push(match executor.card().await {
        Ok(card) => format!(
            "agent: {:?}, {} at {} (A2A {}), streaming {}",
            card.name,
            card.binding.name(),
            LogUrl(&card.endpoint),
            card.wire.header(),
            if card.streaming { "yes" } else { "no" }
        ),
        Err(e) => format!(
            "agent card: not readable now: {} (`serve` starts anyway and is not ready until it is read)",
            crate::upstream::a2a::executor::public_reason(&e)
        ),
    });
}

/// The derived values, one line each.
async fn derived(config: &Config, probe: bool) -> Vec<String> {
    let mut out = Vec::new();
    if config.serves_root_agent() {
        upstream_derived(config, probe, &mut out).await;
        out.push(store_line(&config.store));
        urls_derived(config, &mut out);
    } else {
        out.push(store_line(&config.store));
        out.push("agent at /: none (only [agents.*] are configured)".to_owned());
    }
    for (id, caller) in config.unknown_callers() {
        out.push(format!(
            "agent {id}: warning: callers names {caller:?}, which no API key has as its caller and which is no JWT owner of the configured issuer (jwt:<issuer>#<claim>): its calls would get 403"
        ));
    }
    for (id, entry) in &config.agents {
        let agent = crate::app::gateway::agent_config(config, id, entry);
        out.push(format!(
            "agent {id}: card {}",
            LogUrl(
                agent
                    .server
                    .public_url()
                    .join(".well-known/agent-card.json")
                    .map(|u| u.to_string())
                    .as_deref()
                    .unwrap_or("-")
            )
        ));
        let mut lines = Vec::new();
        upstream_derived(&agent, probe, &mut lines).await;
        urls_derived(&agent, &mut lines);
        out.extend(lines.into_iter().map(|l| format!("agent {id}: {l}")));
    }
    out
}

/// The lines of the upstream of the agent `config` describes.
async fn upstream_derived(config: &Config, probe: bool, out: &mut Vec<String>) {
    // What each runtime kind derives; a new kind adds its arm.
    match &config.upstream {
        UpstreamConfig::AgentCore(c) => agentcore_derived(c, probe, out).await,
        UpstreamConfig::A2a(c) => a2a_derived(c, probe, out).await,
    }
}

/// The public URL of the agent `config` describes, and its card's interfaces.
fn urls_derived(config: &Config, out: &mut Vec<String>) {
    out.push(format!(
        "public URL: {}",
        masked(&config.server.public_url())
    ));
    let interfaces = crate::app::interfaces(&config.server);
    if interfaces.is_empty() {
        out.push("card interfaces: none".to_owned());
    }
    for i in interfaces {
        out.push(format!(
            "card interface: {} {} (A2A {})",
            i.protocol_binding,
            LogUrl(&i.url),
            i.protocol_version
        ));
    }
}

/// What the task store is, and which of the `[store]` keys printed above it ignores
/// (every key is printed, with its default, whatever the backend).
fn store_line(store: &crate::config::StoreConfig) -> String {
    use crate::config::{SqliteLocation, StoreUrl};
    let postgres_only =
        "`cluster`, `lease_secs`, `instance_name` and `listen_url` apply to PostgreSQL only";
    match &store.url {
        StoreUrl::Memory => format!(
            "task store: process memory, nothing survives a restart ({postgres_only}, \
             `sqlite_synchronous` to SQLite files)"
        ),
        StoreUrl::Sqlite(SqliteLocation::Memory) => format!(
            "task store: a private in-memory SQLite database, nothing survives a restart \
             ({postgres_only})"
        ),
        StoreUrl::Sqlite(SqliteLocation::File(path)) => format!(
            "task store: SQLite file {} for one instance, synchronous {} ({postgres_only})",
            path.display(),
            match store.sqlite_synchronous {
                SqliteSynchronous::Full => "full",
                SqliteSynchronous::Normal => "normal",
            }
        ),
        StoreUrl::Postgres(_) if store.clustered() => format!(
            "task store: PostgreSQL shared by a cluster of instances, lease {} s \
             (leases replace `recover_on_start` and `stale_task_secs`; \
             `sqlite_synchronous` applies to SQLite files only)",
            store.lease_secs
        ),
        StoreUrl::Postgres(_) => "task store: PostgreSQL for one instance (`cluster = false`; \
             `lease_secs` and `instance_name` unused, `sqlite_synchronous` applies to SQLite \
             files only)"
            .to_owned(),
    }
}

/// The `token_endpoint` of the discovery document at `url`, or why it is not known.
async fn discover(url: &str) -> Result<String, String> {
    let client = reqwest::Client::builder()
        .timeout(DISCOVERY_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot be fetched: {e}"))?;
    let resp = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("cannot be fetched: {}", super::client::why(&e)))?;
    if !resp.status().is_success() {
        return Err(format!("answered HTTP {}", resp.status().as_u16()));
    }
    let doc: serde_json::Value = resp
        .json()
        .await
        .map_err(|_| "is not a JSON document".to_owned())?;
    doc.get("token_endpoint")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| "has no token_endpoint".to_owned())
}
