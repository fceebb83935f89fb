//! Configuration: typed, defaulted, layered and validated.
//!
//! Layers, later ones winning:
//!
//! 1. built-in defaults (the gateway runs with no file at all);
//! 2. one TOML file (see `config.example.toml` at the repository root for every key);
//! 3. environment variables `A2A_GATEWAY_<SECTION>__<KEY>`, `__` between levels, e.g.
//!    `A2A_GATEWAY_SERVER__LISTEN=0.0.0.0:8080` or
//!    `A2A_GATEWAY_UPSTREAM__AUTH__CLIENT_SECRET=...`. Names are case-insensitive. Values are
//!    taken as text and read as numbers or booleans (`true`/`false`, `1`/`0`, `yes`/`no`,
//!    `on`/`off`) where the key expects one; `[..]` and `{..}` values are arrays and tables.
//!    Variables with the prefix but no `__` (such as `A2A_GATEWAY_CONFIG`, the config path)
//!    are not config keys and are ignored here;
//! 4. command-line overrides of dotted keys (`server.listen`).
//!
//! Loading refuses unknown keys, wrong types, bad URLs and ARNs, zero timeouts and
//! inconsistent combinations with one [`ConfigError`] that names the key and the layer that
//! set it (file and line, or variable name). Secrets are [`secrecy::SecretString`]s: `Debug`
//! and [`Config::redacted_toml`] never show them.
//!
//! Loading never reads the process environment by itself: [`ConfigSources`] carries it, so
//! tests pass maps instead of mutating the environment.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod agent;
mod agents;
mod arn;
mod auth;
mod caller_name;
mod cidr;
mod error;
mod log;
mod media_range;
mod owner;
mod push;
mod serde_util;
mod server;
mod server_auth;
mod server_jwt;
mod sources;
mod store;
mod telemetry;
mod upstream;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_sigv4;

pub use crate::log_url::{LogUrl, masked};
pub use agent::{
    AgentConfig, AgentProviderConfig, ExtendedCardConfig, ExtensionConfig, SkillConfig,
};
pub use agents::{AgentEntryConfig, MAX_AGENT_ID_BYTES, agent_id_problem};
pub use arn::{AgentRuntimeArn, ArnError};
pub use auth::{
    AuthKind, DEFAULT_CREDENTIALS_REFRESH_SECS, DEFAULT_SESSION_NAME, UpstreamAuthConfig,
};
pub use caller_name::{MAX_CALLER_BYTES, caller_name_problem};
pub use cidr::Cidr;
pub use error::{ConfigError, ConfigOrigin};
pub use log::{LogConfig, LogFormat};
pub use media_range::parse_media_range;
pub use owner::{JWT_OWNER_PREFIX, OwnerForm, jwt_owner, jwt_owner_prefix, key_caller_problem};
pub use push::{PushConfig, SignatureScheme};
pub use server::{Binding, DEFAULT_LIST_PAGE_BYTES, ServerConfig, default_share};
pub use server_auth::{ApiKeyConfig, SHA256_LEN, ServerAuthConfig, ServerAuthKind, sha256_hex};
pub use server_jwt::{DEFAULT_ALGORITHMS, HmacSecret, JwtConfig, KNOWN_ALGORITHMS};
pub use sources::ENV_PREFIX;
pub use store::{SqliteLocation, SqliteSynchronous, StoreConfig, StoreUrl, StoreUrlError};
pub use telemetry::TelemetryConfig;
pub use upstream::{
    A2aProtocolBinding, A2aProtocolVersion, A2aUpstreamConfig, AgentCoreUpstreamConfig,
    DEFAULT_CALLER_HEADER, DEFAULT_TENANT_HEADER, HttpVersion, USER_ID_HEADER, UpstreamConfig,
    UpstreamKind, UserId,
};

use error::Invalid;
use sources::Layers;

/// Environment variable naming the config file when no `--config` is given.
pub const CONFIG_PATH_ENV: &str = "A2A_GATEWAY_CONFIG";

/// Environment variable holding the API key `a2a-gateway send` presents (a client setting,
/// not a config key).
pub const API_KEY_ENV: &str = "A2A_GATEWAY_API_KEY";

/// Config file used when neither `--config` nor `A2A_GATEWAY_CONFIG` names one and it exists
/// in the working directory.
pub const DEFAULT_CONFIG_FILE: &str = "a2a-gateway.toml";

/// The whole gateway configuration. Plain data: building live resources from it is the job
/// of the modules that use it.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[server]`: listener, limits, TLS.
    pub server: ServerConfig,
    /// `[agent]`: the agent card.
    pub agent: AgentConfig,
    /// `[store]`: task store backend and retention.
    pub store: StoreConfig,
    /// `[upstream]`: the hosted runtime and its credentials.
    pub upstream: UpstreamConfig,
    /// `[log]`: log format and level.
    pub log: LogConfig,
    /// `[telemetry]`: OTLP trace export.
    pub telemetry: TelemetryConfig,
    /// `[push]`: push notifications (webhooks).
    pub push: PushConfig,
    /// `[agents.<id>]`: further agents, each served under its own path prefix
    /// (`docs/agents.md`). Default none.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub agents: std::collections::BTreeMap<String, AgentEntryConfig>,
    /// Set by [`Config::load`] when the sources configure `[agents.*]` but neither
    /// `[agent]` nor `[upstream]`: then no agent is served at `/` (see
    /// [`Config::serves_root_agent`]).
    #[serde(skip)]
    pub no_root_agent: bool,
}

/// Where a [`Config`] is loaded from. Build it explicitly in tests; use
/// [`ConfigSources::from_process`] or [`ConfigSources::discover`] in the binary.
#[derive(Clone, Default)]
pub struct ConfigSources {
    /// The TOML file, if any. A file that is named but missing is an error.
    pub file: Option<PathBuf>,
    /// Environment variables as `(name, value)`; only `A2A_GATEWAY_*` names with `__` are
    /// used.
    pub env: Vec<(String, String)>,
    /// Command-line overrides as `(dotted key, value)`, e.g. `("server.listen", "0.0.0.0:80")`.
    /// Strings are read as numbers or booleans where the key expects one. Later entries win.
    pub overrides: Vec<(String, toml::Value)>,
}

impl fmt::Debug for ConfigSources {
    /// Names only: environment and override values may be secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigSources")
            .field("file", &self.file)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field(
                "overrides",
                &self.overrides.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl ConfigSources {
    /// `file` plus the `A2A_GATEWAY_*` variables of this process (non-UTF-8 ones skipped).
    pub fn from_process(file: Option<PathBuf>) -> Self {
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .filter(|(k, _)| {
                k.get(..ENV_PREFIX.len())
                    .is_some_and(|p| p.eq_ignore_ascii_case(ENV_PREFIX))
            })
            .collect();
        ConfigSources {
            file,
            env,
            overrides: Vec::new(),
        }
    }

    /// Like [`ConfigSources::from_process`], choosing the file the way `serve` does: `cli_file`
    /// (from `--config`), else `A2A_GATEWAY_CONFIG`, else `./a2a-gateway.toml` if it exists,
    /// else none (defaults plus environment).
    pub fn discover(cli_file: Option<PathBuf>) -> Self {
        let mut sources = Self::from_process(None);
        sources.file = resolve_config_path(cli_file, &sources.env, Path::new("."));
        sources
    }

    /// `A2A_GATEWAY_*` variables that set no config key (no `__` after the prefix) and are
    /// not otherwise known (`A2A_GATEWAY_CONFIG`, `A2A_GATEWAY_API_KEY`, `A2A_GATEWAY_TEST_*`):
    /// probably typos,
    /// worth a warning at start-up.
    pub fn unused_env_vars(&self) -> Vec<&str> {
        self.env
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| {
                let Some(rest) = name
                    .get(..ENV_PREFIX.len())
                    .filter(|p| p.eq_ignore_ascii_case(ENV_PREFIX))
                    .map(|_| &name[ENV_PREFIX.len()..])
                else {
                    return false;
                };
                let rest = rest.to_ascii_uppercase();
                !rest.contains("__")
                    && !name.eq_ignore_ascii_case(CONFIG_PATH_ENV)
                    && !name.eq_ignore_ascii_case(API_KEY_ENV)
                    && !rest.starts_with("TEST_")
            })
            .collect()
    }

    /// Adds a command-line override of a dotted key (later overrides win).
    pub fn with_override(mut self, key: impl Into<String>, value: impl Into<toml::Value>) -> Self {
        self.overrides.push((key.into(), value.into()));
        self
    }
}

/// The config file `serve` uses: `cli_file`, else the `A2A_GATEWAY_CONFIG` entry of `env`,
/// else `dir/a2a-gateway.toml` if it exists.
pub fn resolve_config_path(
    cli_file: Option<PathBuf>,
    env: &[(String, String)],
    dir: &Path,
) -> Option<PathBuf> {
    cli_file
        .or_else(|| {
            env.iter()
                .find(|(k, v)| k.eq_ignore_ascii_case(CONFIG_PATH_ENV) && !v.is_empty())
                .map(|(_, v)| PathBuf::from(v))
        })
        .or_else(|| {
            let default = dir.join(DEFAULT_CONFIG_FILE);
            default.is_file().then_some(default)
        })
}

/// Longest duration any `*_secs` key takes: 10 years, in seconds (a larger one would
/// overflow the clock arithmetic of timeouts).
pub const MAX_SECS: u64 = 10 * 365 * 24 * 3600;

/// Refuses, naming the key, a number above `i64::MAX` (TOML cannot hold it, so
/// `check-config` could not print it) and a `*_secs` / `*_ms` value above [`MAX_SECS`]
/// seconds.
fn check_number_bounds(value: &serde_json::Value, path: &mut Vec<String>) -> Result<(), Invalid> {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                path.push(k.clone());
                check_number_bounds(v, path)?;
                path.pop();
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(i.to_string());
                check_number_bounds(v, path)?;
                path.pop();
            }
        }
        serde_json::Value::Number(n) => {
            let key = path.join(".");
            let last = path.last().map(String::as_str).unwrap_or("");
            let Some(n) = n.as_u64() else {
                return Ok(());
            };
            if n > i64::MAX as u64 {
                return Err(Invalid::new(key, format!("must be at most {}", i64::MAX)));
            }
            if last.ends_with("_secs") && n > MAX_SECS {
                return Err(Invalid::new(
                    key,
                    format!("must be at most {MAX_SECS} (10 years)"),
                ));
            }
            if last.ends_with("_ms") && n > MAX_SECS * 1000 {
                return Err(Invalid::new(
                    key,
                    format!("must be at most {} (10 years)", MAX_SECS * 1000),
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

impl Config {
    /// Loads, merges and validates the configuration, and reads `*_file` secrets.
    pub fn load(sources: ConfigSources) -> Result<Config, ConfigError> {
        let layers = Layers::new(&sources)?;
        if let Some(file) = layers.file_figment() {
            // Strict types for the file: `max_retries = "3"` there is a mistake.
            file.extract::<Config>()
                .map_err(|e| layers.figment_error(e))?;
        }
        let mut config: Config = layers
            .figment()
            .extract_lossy()
            .map_err(|e| layers.figment_error(e))?;
        config.no_root_agent = !config.agents.is_empty()
            && !layers.figment().contains("agent")
            && !layers.figment().contains("upstream");
        config.validate().map_err(|e| layers.invalid(e))?;
        config
            .upstream
            .auth_mut()
            .load_secret_files()
            .map_err(|e| layers.invalid(e))?;
        for (id, agent) in &mut config.agents {
            agent
                .upstream
                .auth_mut()
                .load_secret_files()
                .map_err(|e| layers.invalid(agents::rebase(e, &format!("agents.{id}"))))?;
        }
        config
            .server
            .auth
            .load_keys()
            .map_err(|e| layers.invalid(e))?;
        config
            .store
            .load_password_file()
            .map_err(|e| layers.invalid(e))?;
        Ok(config)
    }

    /// Whether an agent is served at `/`: the top-level `[agent]` + `[upstream]`. True
    /// unless the configuration has `[agents.*]` and sets neither of those two sections.
    pub fn serves_root_agent(&self) -> bool {
        !self.no_root_agent
    }

    /// The `[agents.<id>] callers` entries that name no possible caller, as (agent id,
    /// entry): neither an API key's `caller` nor, with the jwt scheme, an owner of the
    /// configured issuer's tokens (`jwt:<issuer>#<claim>`, see [`jwt_owner`]). Most likely
    /// typos, or a token's bare claim written before owner namespaces, which would refuse
    /// every call of that caller with 403. Empty with `[server.auth.jwt] owner =
    /// "claim"` (any name may be a token's claim). Not refused at load (keys reload on
    /// `SIGHUP` and may come later): `serve` logs them and `check-config` prints them.
    pub fn unknown_callers(&self) -> Vec<(String, String)> {
        let auth = &self.server.auth;
        let jwt = auth.jwt.as_ref().filter(|_| auth.uses(ServerAuthKind::Jwt));
        if jwt.is_some_and(|j| j.owner == OwnerForm::Claim) {
            return Vec::new();
        }
        let keys = auth.uses(ServerAuthKind::ApiKey);
        if !keys && jwt.is_none() {
            return Vec::new();
        }
        let prefix = jwt.map(|j| jwt_owner_prefix(&j.issuer));
        let known = |c: &String| {
            (keys && auth.keys.iter().any(|k| &k.caller == c))
                || prefix.as_ref().is_some_and(|p| c.starts_with(p.as_str()))
        };
        self.agents
            .iter()
            .flat_map(|(id, entry)| {
                entry
                    .callers
                    .iter()
                    .flatten()
                    .filter(|c| !known(c))
                    .map(move |c| (id.clone(), c.clone()))
            })
            .collect()
    }

    /// The effective configuration as TOML, every secret (and a PostgreSQL password) shown
    /// as `***`. For `check-config`.
    pub fn redacted_toml(&self) -> String {
        // A secret read from a `*_file` is shown as its file only (the printed
        // configuration loads back: a secret and its file together are refused).
        let mut shown = self.clone();
        shown.upstream.auth_mut().forget_file_secrets();
        for entry in shown.agents.values_mut() {
            entry.upstream.auth_mut().forget_file_secrets();
        }
        toml::to_string_pretty(&shown).expect("every config value has a TOML form")
    }

    fn validate(&self) -> Result<(), Invalid> {
        let tree = serde_json::to_value(self)
            .map_err(|e| Invalid::new("", format!("cannot be represented: {e}")))?;
        check_number_bounds(&tree, &mut Vec::new())?;
        self.server.validate()?;
        self.agent.validate()?;
        if self.agent.extended.is_some() && !self.server.auth.required() {
            return Err(Invalid::because_of(
                "agent.extended",
                "server.auth.kind",
                "the extended card is for authenticated callers: configure [server.auth] (api_key or jwt)",
            ));
        }
        self.store.validate()?;
        self.upstream.validate()?;
        if self.upstream.auth().kind == AuthKind::Forward
            && !self.server.auth.uses(ServerAuthKind::Jwt)
        {
            return Err(Invalid::because_of(
                "upstream.auth.kind",
                "server.auth",
                "\"forward\" passes the caller's verified JWT to the runtime: configure \
                 [server.auth] with the jwt scheme",
            ));
        }
        if let UpstreamConfig::AgentCore(c) = &self.upstream
            && c.user_id == UserId::Caller
            && !self.server.auth.required()
        {
            return Err(Invalid::because_of(
                "upstream.user_id",
                "server.auth.kind",
                "\"caller\" sends the verified caller as the runtime's user, and without \
                 [server.auth] every caller is the same anonymous user: configure \
                 [server.auth] (api_key or jwt)",
            ));
        }
        agents::validate_all(&self.agents)?;
        for (id, agent) in &self.agents {
            let needs_auth = if agent.card.extended.is_some() {
                Some(("extended", "the extended card is for authenticated callers"))
            } else if agent.callers.is_some() {
                Some(("callers", "callers are told apart by their credentials"))
            } else {
                None
            };
            if let Some((key, why)) = needs_auth
                && !self.server.auth.required()
            {
                return Err(Invalid::because_of(
                    format!("agents.{id}.{key}"),
                    "server.auth.kind",
                    format!("{why}: configure [server.auth] (api_key or jwt)"),
                ));
            }
            if agent.grpc_listen.is_some() && !self.server.serves(Binding::Grpc) {
                return Err(Invalid::because_of(
                    format!("agents.{id}.grpc_listen"),
                    "server.bindings",
                    "gRPC is not among server.bindings",
                ));
            }
            // A port of its own: not the listener's, not gRPC's, not another agent's
            // (port 0 is picked apart by the system).
            if let Some(addr) = agent.grpc_listen.filter(|a| a.port() != 0) {
                let taken = [
                    ("server.listen".to_owned(), Some(self.server.listen)),
                    ("server.grpc_listen".to_owned(), self.server.grpc_listen),
                ]
                .into_iter()
                .chain(
                    self.agents
                        .iter()
                        .take_while(|(other, _)| *other != id)
                        .map(|(other, a)| (format!("agents.{other}.grpc_listen"), a.grpc_listen)),
                )
                .find(|(_, other)| *other == Some(addr));
                if let Some((key, _)) = taken {
                    return Err(Invalid::because_of(
                        format!("agents.{id}.grpc_listen"),
                        key,
                        format!("{addr} is taken: each agent's gRPC port is its own"),
                    ));
                }
            }
            if let UpstreamConfig::AgentCore(c) = &agent.upstream
                && c.user_id == UserId::Caller
                && !self.server.auth.required()
            {
                return Err(Invalid::because_of(
                    format!("agents.{id}.upstream.user_id"),
                    "server.auth.kind",
                    "\"caller\" sends the verified caller as the runtime's user, and without \
                     [server.auth] every caller is the same anonymous user: configure \
                     [server.auth] (api_key or jwt)",
                ));
            }
            if agent.upstream.auth().kind == AuthKind::Forward
                && !self.server.auth.uses(ServerAuthKind::Jwt)
            {
                return Err(Invalid::because_of(
                    format!("agents.{id}.upstream.auth.kind"),
                    "server.auth",
                    "\"forward\" passes the caller's verified JWT to the runtime: configure \
                     [server.auth] with the jwt scheme",
                ));
            }
        }
        self.push.validate()?;
        self.telemetry.validate()?;
        self.log.validate()
    }
}

/// Refuses a path that is not a readable file.
fn check_readable_file(key: &str, path: &Path) -> Result<(), Invalid> {
    match std::fs::File::open(path).and_then(|f| f.metadata()) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(Invalid::new(
            key,
            format!("{} is not a file", path.display()),
        )),
        Err(e) => Err(Invalid::new(
            key,
            format!("cannot read {}: {e}", path.display()),
        )),
    }
}
