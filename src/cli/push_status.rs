//! `a2a-gateway push-status [--task ID] [--config FILE]`: the operator's view of push
//! delivery, read from the task store ([`PushStore::status`]): the pending deliveries
//! (oldest event first, with their attempts and last error) and the webhook configs
//! that are disabled or whose last delivery failed.
//!
//! A SQLite file is opened read-only, without its lock and without migrating it
//! ([`SqliteTaskStore::open_read_only`]): the command works while `serve` runs.
//!
//! Never prints a secret: no token, no credentials, and webhook URLs without user info
//! or query (`?…` marks a query that was there).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::config::{Config, ConfigSources, StoreUrl};
use crate::store::push::{PushStatus, StoredPushConfig};

use super::CliError;

/// At most this many pending deliveries are listed (the total is always shown).
const LIMIT: usize = 200;

/// `push-status` arguments.
#[derive(Debug, Args)]
pub struct PushStatusArgs {
    /// Only this task's deliveries and configs.
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// Only the deliveries and configs of this agent (`[agents.<id>]`; `-` for the
    /// agent at `/`), among the oldest pending deliveries read.
    #[arg(long, value_name = "ID")]
    pub agent: Option<String>,
    /// TOML config file (same discovery as `serve`); its `[store] url` is read.
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
}

/// Runs `push-status`.
///
/// # Errors
/// The config does not load, the store is the in-process memory store (nothing to
/// read from another process), or the store cannot be opened or read.
pub async fn run(args: PushStatusArgs) -> Result<ExitCode, CliError> {
    let config = Config::load(ConfigSources::discover(args.config))?;
    if matches!(config.store.url, StoreUrl::Memory) {
        return Err(
            "push-status reads the task store, and store.url = \"memory:\" lives \
                    only inside the serving process: configure a SQLite or PostgreSQL store"
                .into(),
        );
    }
    // A SQLite file is read beside the `serve` that holds its lock.
    let store = crate::app::read_store(&config).await?;
    let result = match store.push_store() {
        Some(push) => push.status(args.task.as_deref(), LIMIT).await,
        None => {
            store.close().await;
            return Err("this task store keeps no push state".into());
        }
    };
    store.close().await;
    let mut status = result?;
    if let Some(agent) = &args.agent {
        only_agent(&mut status, agent);
    }
    let now_ms = crate::protocol::time::now().timestamp_millis();
    out!("{}", render(&status, now_ms));
    Ok(ExitCode::SUCCESS)
}

/// Keeps the deliveries and configs of `agent` (`-`: the agent at `/`) in `status`;
/// `pending_total` becomes the number kept, and the oldest time theirs.
fn only_agent(status: &mut PushStatus, agent: &str) {
    let agent = if agent == "-" { "" } else { agent };
    status.pending.retain(|p| p.key.scope.agent == agent);
    status.troubled.retain(|(scope, _)| scope.agent == agent);
    status.pending_total = status.pending.len() as u64;
    status.oldest_pending_ms = status.pending.iter().map(|p| p.created_ms).min();
}

/// The report `push-status` prints for `status` at `now_ms` (ms since the epoch).
fn render(status: &PushStatus, now_ms: i64) -> String {
    let mut out = String::new();
    let _ = write!(out, "pending deliveries: {}", status.pending_total);
    if let Some(oldest) = status.oldest_pending_ms {
        let _ = write!(out, " (oldest event stored {} ago)", ago(now_ms - oldest));
    }
    out.push('\n');
    for p in &status.pending {
        let due = if p.next_ms <= now_ms {
            "now".to_owned()
        } else {
            format!("in {}", ago(p.next_ms - now_ms))
        };
        let _ = writeln!(
            out,
            "  task {} config {} event {}{}: attempts {}, next {}, stored {} ago, last error: {}",
            p.key.task_id,
            p.key.config_id,
            p.key.seq,
            where_(&p.key.scope),
            p.attempts,
            due,
            ago(now_ms - p.created_ms),
            p.last_error.as_deref().unwrap_or("-"),
        );
    }
    if status.pending.len() < status.pending_total as usize {
        let _ = writeln!(
            out,
            "  ... {} more",
            status.pending_total as usize - status.pending.len()
        );
    }
    let _ = writeln!(
        out,
        "webhook configs disabled or failing: {}",
        status.troubled.len()
    );
    for (scope, c) in &status.troubled {
        let _ = writeln!(
            out,
            "  task {} config {}{}: {}, {} failed in a row, url {}, last error: {}",
            c.task_id,
            c.id,
            where_(scope),
            if c.enabled { "failing" } else { "disabled" },
            c.failures,
            shown_url(c),
            c.last_error.as_deref().unwrap_or("-"),
        );
    }
    out
}

/// ` (tenant T)`, ` (agent A)` or ` (agent A, tenant T)` for a scope off the defaults.
fn where_(scope: &crate::scope::Scope) -> String {
    match (scope.agent.as_str(), scope.tenant.as_str()) {
        ("", "") => String::new(),
        ("", t) => format!(" (tenant {t})"),
        (a, "") => format!(" (agent {a})"),
        (a, t) => format!(" (agent {a}, tenant {t})"),
    }
}

/// `ms` as a short duration: `850ms`, `42s`, `17m`, `3h`, `2d`.
fn ago(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{}s", ms / 1_000),
        60_000..3_600_000 => format!("{}m", ms / 60_000),
        3_600_000..86_400_000 => format!("{}h", ms / 3_600_000),
        _ => format!("{}d", ms / 86_400_000),
    }
}

/// The config's URL without user info or query (either may carry a secret).
fn shown_url(c: &StoredPushConfig) -> String {
    match url::Url::parse(&c.url) {
        Ok(mut u) => {
            let had_query = u.query().is_some();
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            let mut s = u.to_string();
            if had_query {
                s.push_str("?…");
            }
            s
        }
        Err(_) => "(unparsable)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::Scope;
    use crate::store::push::{DeliveryKey, PendingDelivery};

    fn config(url: &str, enabled: bool) -> StoredPushConfig {
        StoredPushConfig {
            task_id: "t1".into(),
            id: "c1".into(),
            url: url.into(),
            token: Some("tok-secret".into()),
            auth_scheme: Some("Bearer".into()),
            auth_credentials: Some("cred-secret".into()),
            enabled,
            failures: 5,
            last_error: Some("HTTP 500".into()),
            created_ms: 0,
        }
    }

    #[test]
    fn the_report_lists_pending_and_troubled_without_secrets() {
        let scope = Scope::new("acme", "alice");
        let status = PushStatus {
            pending: vec![PendingDelivery {
                key: DeliveryKey {
                    scope: scope.clone(),
                    task_id: "t1".into(),
                    config_id: "c1".into(),
                    seq: 3,
                },
                attempts: 2,
                created_ms: 1_000,
                next_ms: 91_000,
                last_error: Some("connection refused".into()),
            }],
            troubled: vec![(
                scope,
                config("https://user:pw-secret@hooks.example/a?sig=q-secret", false),
            )],
            pending_total: 3,
            oldest_pending_ms: Some(1_000),
        };
        let out = render(&status, 61_000);
        assert!(
            out.starts_with("pending deliveries: 3 (oldest event stored 1m ago)\n"),
            "{out}"
        );
        assert!(
            out.contains("task t1 config c1 event 3 (tenant acme): attempts 2, next in 30s, stored 1m ago, last error: connection refused"),
            "{out}"
        );
        assert!(out.contains("  ... 2 more\n"), "{out}");
        assert!(
            out.contains(
                "disabled, 5 failed in a row, url https://hooks.example/a?…, last error: HTTP 500"
            ),
            "{out}"
        );
        for secret in ["tok-secret", "cred-secret", "pw-secret", "q-secret", "user"] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
    }

    #[test]
    fn the_agent_filter_keeps_its_deliveries_and_names_the_agent() {
        let delivery = |scope: Scope, seq| PendingDelivery {
            key: DeliveryKey {
                scope,
                task_id: "t1".into(),
                config_id: "c1".into(),
                seq,
            },
            attempts: 1,
            created_ms: seq as i64 * 1_000,
            next_ms: 0,
            last_error: None,
        };
        let reviewer = Scope::new("", "alice").with_agent("reviewer");
        let mut status = PushStatus {
            pending: vec![
                delivery(Scope::new("", "alice"), 1),
                delivery(reviewer.clone(), 2),
                delivery(Scope::new("acme", "bob").with_agent("helper"), 3),
            ],
            troubled: vec![(reviewer, config("https://hooks.example/a", false))],
            pending_total: 3,
            oldest_pending_ms: Some(1_000),
        };
        let mut root = PushStatus {
            pending: status.pending.clone(),
            troubled: status.troubled.clone(),
            ..status.clone()
        };
        only_agent(&mut status, "reviewer");
        assert_eq!(status.pending_total, 1);
        assert_eq!(status.oldest_pending_ms, Some(2_000));
        let out = render(&status, 61_000);
        assert!(
            out.contains("task t1 config c1 event 2 (agent reviewer):"),
            "{out}"
        );
        assert!(
            out.contains("task t1 config c1 (agent reviewer): disabled"),
            "{out}"
        );
        only_agent(&mut root, "-");
        assert_eq!(root.pending.len(), 1);
        assert!(root.troubled.is_empty());
        assert_eq!(root.pending[0].key.seq, 1);
    }

    #[test]
    fn durations_are_short() {
        assert_eq!(ago(-5), "0ms");
        assert_eq!(ago(999), "999ms");
        assert_eq!(ago(59_999), "59s");
        assert_eq!(ago(7_200_000), "2h");
        assert_eq!(ago(3 * 86_400_000), "3d");
    }
}
