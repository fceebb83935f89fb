//! `[agents.<id>]`: the further agents one gateway serves, each a whole A2A agent under
//! its own path prefix (`docs/agents.md`), with its own card keys (every key of
//! `[agent]`), upstream (`[agents.<id>.upstream]`, the keys of `[upstream]`), callers and
//! concurrency limit. The top-level `[agent]` + `[upstream]` stay the agent at `/`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::agent::AgentConfig;
use super::error::Invalid;
use super::upstream::UpstreamConfig;

/// Longest agent id, in bytes.
pub const MAX_AGENT_ID_BYTES: usize = 64;

/// One `[agents.<id>]` table.
///
/// The card keys are those of [`AgentConfig`] (read flattened, so `name`, `skills`,
/// `extended`... sit directly in the table); a key neither they nor this struct know is
/// refused at load ([`AgentEntryConfig::validate`]).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct AgentEntryConfig {
    /// Every key of `[agent]`: what this agent's card says.
    #[serde(flatten)]
    pub card: AgentConfig,
    /// The path prefix the agent is served under: starts and ends with `/`, path-safe
    /// segments only. Default `/agents/<id>/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Callers allowed to use this agent, by owner (docs/authentication.md#owner-namespaces):
    /// the `caller` of a `[[server.auth.keys]]` entry, or `jwt:<issuer>#<claim>` for a
    /// token (its bare claim with `[server.auth.jwt] owner = "claim"`); any other gets 403 / PERMISSION_DENIED before a task is created.
    /// Default: every authenticated caller. Needs `[server.auth]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callers: Option<Vec<String>>,
    /// Most executor runs of this agent at once (beyond them: a retryable error), so a
    /// slow upstream never takes the runs of another agent. Default
    /// `server.max_concurrent_tasks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_tasks: Option<usize>,
    /// Most runs of this agent one caller has at once (see
    /// `server.max_tasks_per_caller`). Default `server.max_tasks_per_caller` when set,
    /// else the default share of this agent's `max_concurrent_tasks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tasks_per_caller: Option<usize>,
    /// Most runs of this agent one tenant has at once (see
    /// `server.max_tasks_per_tenant`); defaults as `max_tasks_per_caller`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tasks_per_tenant: Option<usize>,
    /// The agent's own gRPC listener (`lf.a2a.v1.A2AService` for this agent only; port
    /// 0: any free port, named in its card). gRPC clients dial a `host:port` and send no
    /// path prefix, so each agent served over gRPC needs a port of its own (see
    /// `docs/agents.md`). Needs `grpc` in `server.bindings`. Default none: the agent is
    /// served over JSON-RPC and HTTP+JSON only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_listen: Option<std::net::SocketAddr>,
    /// `[agents.<id>.upstream]` (+ `.auth`): the keys of `[upstream]`.
    #[serde(default)]
    pub upstream: UpstreamConfig,
    /// Keys neither [`AgentConfig`] nor this struct knows; refused by `validate`.
    #[serde(flatten, skip_serializing)]
    pub(crate) unknown: BTreeMap<String, serde::de::IgnoredAny>,
}

/// Why `id` cannot name an agent (it becomes a path segment, a metric label and a
/// log field): `None` when it can. Ids are 1 to [`MAX_AGENT_ID_BYTES`] bytes of
/// `a-z`, `0-9`, `-` and `_`, starting with a letter or digit.
pub fn agent_id_problem(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("must not be empty".into());
    }
    if id.len() > MAX_AGENT_ID_BYTES {
        return Some(format!("must be at most {MAX_AGENT_ID_BYTES} bytes long"));
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    {
        return Some("may hold only a-z, 0-9, - and _ (it is a path segment)".into());
    }
    if !id.as_bytes()[0].is_ascii_alphanumeric() {
        return Some("must start with a letter or a digit".into());
    }
    None
}

/// Why `path` cannot be an agent's path prefix: `None` when it can. A prefix starts and
/// ends with `/`, has at least one segment, and each segment is `a-z`, `A-Z`, `0-9`,
/// `-`, `_` or `.` (not `.` or `..` alone).
fn path_problem(path: &str) -> Option<String> {
    if !path.starts_with('/') || !path.ends_with('/') || path.len() < 3 {
        return Some("must start and end with `/` and name at least one segment".into());
    }
    for segment in path[1..path.len() - 1].split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Some(format!("has an empty, `.` or `..` segment: {path:?}"));
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Some(format!(
                "segment {segment:?} may hold only A-Z, a-z, 0-9, -, _ and ."
            ));
        }
    }
    if path == "/agents/" {
        return Some(
            "must name a segment after /agents/ (`GET /agents` is the agent index)".into(),
        );
    }
    // The gateway's own routes at `/` must stay reachable.
    let first = path[1..].split('/').next().unwrap_or("");
    if [".well-known", "healthz", "readyz", "metrics", "a2a", "v1"].contains(&first) {
        return Some(format!(
            "must not start with /{first}/ (a route of the gateway itself)"
        ));
    }
    None
}

impl AgentEntryConfig {
    /// The path prefix: `path`, or `/agents/<id>/`.
    pub fn path_for(&self, id: &str) -> String {
        self.path
            .clone()
            .unwrap_or_else(|| format!("/agents/{id}/"))
    }

    /// Whether the caller whose owner is `caller` may use this agent (`callers` unset:
    /// everyone).
    pub fn allows(&self, caller: &str) -> bool {
        self.callers
            .as_ref()
            .is_none_or(|c| c.iter().any(|name| name == caller))
    }

    /// Checks one agent: its id, unknown keys, its path, its card keys (errors name
    /// `agents.<id>.<key>`), its upstream, `callers` and `max_concurrent_tasks`.
    pub(crate) fn validate(&self, id: &str) -> Result<(), Invalid> {
        let base = format!("agents.{}", key_segment(id));
        if let Some(why) = agent_id_problem(id) {
            return Err(Invalid::new(base, format!("agent id {id:?} {why}")));
        }
        if let Some(key) = self.unknown.keys().next() {
            return Err(Invalid::new(format!("{base}.{key}"), "unknown key"));
        }
        if let Some(path) = &self.path
            && let Some(why) = path_problem(path)
        {
            return Err(Invalid::new(format!("{base}.path"), why));
        }
        self.card.validate().map_err(|e| rebase(e, &base))?;
        self.upstream.validate().map_err(|e| rebase(e, &base))?;
        // The agent at `/` may start without an upstream (`check-config` says so); an
        // agent of the table is there to be served by one.
        if let super::UpstreamConfig::AgentCore(c) = &self.upstream
            && c.url.is_none()
            && c.agent_runtime_arn.is_none()
        {
            return Err(Invalid::new(
                base,
                format!(
                    "no upstream: add [agents.{id}.upstream] with `agent_runtime_arn` \
                     (AgentCore) or `url` (an invocation URL; `kind = \"a2a\"` takes an A2A \
                     agent's base URL)"
                ),
            ));
        }
        if let Some(callers) = &self.callers {
            if callers.is_empty() {
                return Err(Invalid::new(
                    format!("{base}.callers"),
                    "must name at least one caller (leave it out to allow every caller)",
                ));
            }
            for (i, c) in callers.iter().enumerate() {
                if let Some(why) = super::caller_name_problem(c) {
                    return Err(Invalid::new(format!("{base}.callers.{i}"), why));
                }
            }
        }
        for (key, value) in [
            ("max_concurrent_tasks", self.max_concurrent_tasks),
            ("max_tasks_per_caller", self.max_tasks_per_caller),
            ("max_tasks_per_tenant", self.max_tasks_per_tenant),
        ] {
            if value == Some(0) {
                return Err(Invalid::new(
                    format!("{base}.{key}"),
                    "must be greater than 0",
                ));
            }
        }
        Ok(())
    }
}

/// `id` as one segment of a dotted key: bare when TOML allows it bare (letters, digits,
/// `_` and `-`), else quoted (`"a.b"`), so that `agents."a.b".path` names the key a file
/// sets with `[agents."a.b"]` and its line is found ([`split_dotted`]).
pub(crate) fn key_segment(id: &str) -> String {
    let bare = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        id.to_owned()
    } else {
        let escaped = id.replace('\\', "\\\\").replace('"', "\\\"");
        format!("\"{escaped}\"")
    }
}

/// The segments of a dotted key as errors name them: split at the dots outside quotes,
/// a quoted segment unquoted (`agents."a.b".path` is `agents`, `a.b`, `path`).
pub(crate) fn split_dotted(key: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = key.chars();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' if quoted => current.extend(chars.next()),
            '.' if !quoted => parts.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    parts.push(current);
    parts
}

/// `e` with its `agent.` / `upstream.` key moved under `base` (`agents.<id>.`).
pub(crate) fn rebase(mut e: Invalid, base: &str) -> Invalid {
    let move_key = |key: &str| {
        if key.starts_with("upstream") {
            format!("{base}.{key}")
        } else if let Some(rest) = key.strip_prefix("agent.") {
            format!("{base}.{rest}")
        } else {
            format!("{base}.{key}")
        }
    };
    e.key = move_key(&e.key);
    e.origin_key = move_key(&e.origin_key);
    e
}

/// Checks every agent, then that no two prefixes are equal or one inside another (a
/// request path must name one agent), and that none is `/` (the top-level agent's).
pub(crate) fn validate_all(agents: &BTreeMap<String, AgentEntryConfig>) -> Result<(), Invalid> {
    let mut seen: Vec<(String, &str)> = Vec::new();
    for (id, agent) in agents {
        agent.validate(id)?;
        let path = agent.path_for(id);
        for (other, other_id) in &seen {
            if path.starts_with(other.as_str()) || other.starts_with(path.as_str()) {
                return Err(Invalid::new(
                    format!("agents.{}.path", key_segment(id)),
                    format!(
                        "{path:?} overlaps {other:?} of agent {other_id:?}: each request path must name one agent"
                    ),
                ));
            }
        }
        seen.push((path, id));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        for ok in ["reviewer", "a", "r2-d2", "x_y", "0abc"] {
            assert_eq!(agent_id_problem(ok), None, "{ok}");
        }
        for bad in [
            "",
            "Reviewer",
            "a/b",
            "a b",
            "-x",
            "_x",
            "é",
            "a.b",
            &"a".repeat(65),
        ] {
            assert!(agent_id_problem(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn paths() {
        for ok in ["/agents/x/", "/x/", "/team-a/reviewer.v2/"] {
            assert_eq!(path_problem(ok), None, "{ok}");
        }
        for bad in [
            "/",
            "x/",
            "/x",
            "//",
            "/a//b/",
            "/../x/",
            "/a b/",
            "/.well-known/x/",
            "/a2a/",
            "/healthz/",
            "/a?b/",
        ] {
            assert!(path_problem(bad).is_some(), "{bad:?}");
        }
    }

    fn load(toml: &str) -> Result<crate::config::Config, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.toml");
        std::fs::write(&path, toml).unwrap();
        crate::config::Config::load(crate::config::ConfigSources {
            file: Some(path),
            ..Default::default()
        })
        .map_err(|e| e.to_string())
    }

    const AUTH: &str = "[server.auth]\nkind = \"api_key\"\n[[server.auth.keys]]\ncaller = \"team-a\"\nsha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n";

    #[test]
    fn defaults_and_root_agent() {
        let c = load(
            "[agents.reviewer]\nname = \"Release reviewer\"\ndescription = \"Reviews.\"\n\
             [agents.reviewer.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n\
             [agents.helper]\n[agents.helper.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n",
        )
        .unwrap();
        assert!(!c.serves_root_agent(), "only [agents.*]: no agent at /");
        let r = &c.agents["reviewer"];
        assert_eq!(r.path_for("reviewer"), "/agents/reviewer/");
        assert_eq!(r.card.name, "Release reviewer");
        assert_eq!(r.callers, None);
        assert!(r.allows("anyone"));
        assert_eq!(r.max_concurrent_tasks, None);
        // Card keys default as [agent]'s do.
        assert_eq!(c.agents["helper"].card.name, "a2a-gateway");
        assert_eq!(c.agents["helper"].card.skills.len(), 1);
        // check-config prints them back, and what it prints loads again.
        let printed = c.redacted_toml();
        assert!(printed.contains("[agents.reviewer]"), "{printed}");
        let again = load(&printed).unwrap();
        assert_eq!(again.agents["reviewer"].card, r.card);

        // With [agent] or [upstream] too, the top-level agent stays at `/`.
        let c = load(
            "[agent]\nname = \"root\"\n[agents.x]\n[agents.x.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n",
        )
        .unwrap();
        assert!(c.serves_root_agent());
        let c = load("").unwrap();
        assert!(c.serves_root_agent());
        assert!(c.agents.is_empty());
    }

    #[test]
    fn every_key_of_agent_and_upstream() {
        let c = load(&format!(
            "{AUTH}[agents.r]\npath = \"/team/r/\"\ncallers = [\"team-a\"]\nmax_concurrent_tasks = 3\n\
             streaming = false\n[[agents.r.skills]]\nid = \"s\"\nname = \"S\"\ndescription = \"d\"\n\
             [agents.r.extended]\ndescription = \"more\"\n\
             [agents.r.upstream]\nagent_runtime_arn = \"arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/reviewer-AbC123\"\n\
             [agents.r.upstream.auth]\nkind = \"bearer\"\ntoken = \"secret-token-value\"\n"
        ))
        .unwrap();
        let r = &c.agents["r"];
        assert_eq!(r.path_for("r"), "/team/r/");
        assert!(r.allows("team-a") && !r.allows("team-b"));
        assert_eq!(r.max_concurrent_tasks, Some(3));
        assert!(!r.card.streaming);
        assert_eq!(r.card.skills[0].id, "s");
        assert_eq!(r.upstream.auth().kind, crate::config::AuthKind::Bearer);
        let printed = c.redacted_toml();
        assert!(!printed.contains("secret-token-value"), "{printed}");
        assert!(!format!("{c:?}").contains("secret-token-value"));
    }

    /// `callers` lists owners: with the jwt scheme, a bare name no key has (a token's
    /// claim written before owner namespaces) is reported; the owner form of the
    /// configured issuer is not; with `owner = "claim"` nothing is.
    #[test]
    fn unknown_callers_know_the_jwt_owner_form() {
        let toml = |extra: &str| {
            format!(
                "[server.auth]\nschemes = [\"api_key\", \"jwt\"]\n[[server.auth.keys]]\ncaller = \"team-a\"\n\
                 sha256 = \"{}\"\n[server.auth.jwt]\nissuer = \"https://idp/\"\naudience = \"a\"\n\
                 jwks_url = \"https://idp/jwks\"\n{extra}\
                 [agents.r]\ncallers = [\"team-a\", \"alice\", \"jwt:https://idp/#bob\"]\n\
                 [agents.r.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n",
                "0".repeat(64)
            )
        };
        let c = load(&toml("")).unwrap();
        assert_eq!(c.unknown_callers(), [("r".to_owned(), "alice".to_owned())]);
        let c = load(&toml("owner = \"claim\"\n")).unwrap();
        assert!(c.unknown_callers().is_empty());
    }

    /// An agent id TOML must quote (`[agents."a.b"]`) is named quoted, with its line.
    #[test]
    fn an_id_with_a_dot_names_its_line() {
        let toml = "[server]\n\n[agents.\"a.b\"]\nname = \"x\"\n\
                    [agents.\"a.b\".upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n";
        let e = load(toml).expect_err(toml);
        assert!(e.contains("`agents.\"a.b\"`"), "{e}");
        assert!(e.contains("line 3"), "{e}");
        assert_eq!(
            split_dotted("agents.\"a.b\".path"),
            ["agents", "a.b", "path"]
        );
        assert_eq!(
            split_dotted(&format!("agents.{}", key_segment("q\"x"))),
            ["agents", "q\"x"]
        );
        assert_eq!(key_segment("reviewer-2_b"), "reviewer-2_b");
    }

    #[test]
    fn refusals_name_the_key() {
        let up = "[agents.a.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n";
        for (toml, key) in [
            (format!("[agents.A]\n{}", up.replace("agents.a", "agents.A")), "agents.A"),
            (format!("[agents.\"a/b\"]\n{}", up.replace("agents.a", "agents.\"a/b\"")), "agents.\"a/b\""),
            (format!("[agents.a]\nnmae = \"x\"\n{up}"), "agents.a.nmae"),
            (format!("[agents.a]\npath = \"/x\"\n{up}"), "agents.a.path"),
            (format!("[agents.a]\npath = \"/healthz/\"\n{up}"), "agents.a.path"),
            (format!("[agents.a]\nname = \" \"\n{up}"), "agents.a.name"),
            (format!("[agents.a]\nmax_concurrent_tasks = 0\n{up}"), "agents.a.max_concurrent_tasks"),
            (format!("[agents.a]\ncallers = [\"team-a\"]\n{up}"), "agents.a.callers"),
            (format!("{AUTH}[agents.a]\ncallers = []\n{up}"), "agents.a.callers"),
            (format!("[agents.a]\n[agents.a.extended]\n{up}"), "agents.a.extended"),
            (
                "[agents.a]\n[agents.a.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\nqualifier = \"\"\n".into(),
                "agents.a.upstream.qualifier",
            ),
            (
                "[agents.a]\n[agents.a.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n[agents.a.upstream.auth]\nkind = \"forward\"\n".into(),
                "agents.a.upstream.auth.kind",
            ),
        ] {
            let e = load(&toml).expect_err(&toml);
            assert!(e.contains(&format!("`{key}`")), "{key}: {e}");
        }
    }

    #[test]
    fn duplicate_and_overlapping_paths() {
        let agent = |id: &str, path: Option<&str>| {
            let path = path
                .map(|p| format!("path = \"{p}\"\n"))
                .unwrap_or_default();
            format!(
                "[agents.{id}]\n{path}[agents.{id}.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n"
            )
        };
        for toml in [
            agent("a", Some("/same/")) + &agent("b", Some("/same/")),
            agent("a", Some("/team/")) + &agent("b", Some("/team/b/")),
            agent("a", None) + &agent("b", Some("/agents/a/")),
            agent("a", Some("/agents/b/x/")) + &agent("b", None),
        ] {
            let e = load(&toml).expect_err(&toml);
            assert!(e.contains("overlaps"), "{e}");
        }
        // Prefixes that only share leading characters do not overlap.
        let c = load(&(agent("a", Some("/team/")) + &agent("b", Some("/teams/")))).unwrap();
        assert_eq!(c.agents.len(), 2);
    }

    #[test]
    fn an_agents_grpc_port_is_its_own() {
        let agent = |id: &str, grpc: &str| {
            format!(
                "[agents.{id}]\ngrpc_listen = \"{grpc}\"\n\
                 [agents.{id}.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n"
            )
        };
        for (toml, taken) in [
            (
                agent("a", "127.0.0.1:47001") + &agent("b", "127.0.0.1:47001"),
                "agents.a.grpc_listen",
            ),
            (
                "[server]\nlisten = \"127.0.0.1:47002\"\n".to_owned()
                    + &agent("a", "127.0.0.1:47002"),
                "server.listen",
            ),
            (
                "[server]\ngrpc_listen = \"127.0.0.1:47003\"\n".to_owned()
                    + &agent("a", "127.0.0.1:47003"),
                "server.grpc_listen",
            ),
        ] {
            let e = load(&toml).expect_err(&toml);
            assert!(e.contains("is taken") && e.contains(taken), "{e}");
        }
        // Port 0: each gets its own from the system.
        let c = load(&(agent("a", "127.0.0.1:0") + &agent("b", "127.0.0.1:0"))).unwrap();
        assert_eq!(c.agents.len(), 2);
    }

    #[test]
    fn an_agent_without_an_upstream_is_refused_naming_its_table() {
        let e = load("[agents.a]\nname = \"A\"\n").unwrap_err();
        assert!(
            e.contains("agents.a") && e.contains("[agents.a.upstream]"),
            "{e}"
        );
        assert!(e.contains("line"), "{e}");
    }

    /// `load` with environment variables besides the file.
    fn load_env(toml: &str, env: &[(&str, &str)]) -> Result<crate::config::Config, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.toml");
        std::fs::write(&path, toml).unwrap();
        crate::config::Config::load(crate::config::ConfigSources {
            file: Some(path),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        })
        .map_err(|e| e.to_string())
    }

    #[test]
    fn numeric_agent_keys_come_from_the_environment() {
        let c = load_env(
            "[agents.helper]\n[agents.helper.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n\
             [agents.peer]\n[agents.peer.upstream]\nkind = \"a2a\"\nurl = \"http://127.0.0.1:9/\"\n",
            &[
                ("A2A_GATEWAY_AGENTS__HELPER__MAX_CONCURRENT_TASKS", "4"),
                ("A2A_GATEWAY_AGENTS__HELPER__MAX_TASKS_PER_CALLER", "2"),
                ("A2A_GATEWAY_AGENTS__HELPER__UPSTREAM__READ_TIMEOUT_SECS", "60"),
                ("A2A_GATEWAY_AGENTS__HELPER__UPSTREAM__MAX_RETRIES", "1"),
                ("A2A_GATEWAY_AGENTS__HELPER__UPSTREAM__INCLUDE_MESSAGE", "true"),
                ("A2A_GATEWAY_AGENTS__PEER__UPSTREAM__RESUME_SECS", "90"),
                ("A2A_GATEWAY_AGENTS__PEER__UPSTREAM__MAX_REPLY_BYTES", "1024"),
            ],
        )
        .unwrap();
        let h = &c.agents["helper"];
        assert_eq!(h.max_concurrent_tasks, Some(4));
        assert_eq!(h.max_tasks_per_caller, Some(2));
        let UpstreamConfig::AgentCore(u) = &h.upstream else {
            panic!("{:?}", h.upstream)
        };
        assert_eq!(u.read_timeout_secs, 60);
        assert_eq!(u.max_retries, 1);
        assert!(u.include_message);
        let UpstreamConfig::A2a(u) = &c.agents["peer"].upstream else {
            panic!("{:?}", c.agents["peer"].upstream)
        };
        assert_eq!(u.resume_secs, 90);
        assert_eq!(u.connection.max_reply_bytes, 1024);
        // A value that is no number is refused naming the variable.
        let e = load_env(
            "[agents.helper]\n[agents.helper.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n",
            &[("A2A_GATEWAY_AGENTS__HELPER__MAX_CONCURRENT_TASKS", "four")],
        )
        .unwrap_err();
        assert!(
            e.contains("A2A_GATEWAY_AGENTS__HELPER__MAX_CONCURRENT_TASKS"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_key_under_an_a2a_agents_upstream_lists_the_a2a_keys() {
        let e = load(
            "[agents.peer]\n[agents.peer.upstream]\nkind = \"a2a\"\n\
             url = \"http://127.0.0.1:9/\"\nresume_sec = 5\n",
        )
        .unwrap_err();
        assert!(e.contains("agents.peer.upstream.resume_sec"), "{e}");
        assert!(e.contains("gateway.toml") && e.contains("line 5"), "{e}");
        assert!(e.contains("resume_secs"), "the a2a kind's keys: {e}");
        assert!(
            !e.contains("include_message") && !e.contains("user_id"),
            "not agentcore's keys: {e}"
        );
    }
}
