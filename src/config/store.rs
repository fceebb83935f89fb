//! `[store]`: where tasks are kept, and for how long.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use reqwest::Url;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::error::{Invalid, nonzero};

/// `[store]`: the task store backend and its housekeeping.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// Backend: `memory:`, `sqlite://PATH`, `sqlite::memory:` or `postgres://...`
    /// (`postgresql://` too). Default `sqlite://a2a-gateway.db` (a file in the working
    /// directory).
    pub url: StoreUrl,
    /// Days a task in a terminal state is kept before the purge deletes it. Default 30.
    pub retention_days: u32,
    /// Seconds an INPUT_REQUIRED task waits for the follow-up message before it is closed.
    /// Default 86400 (one day).
    pub input_required_ttl_secs: u64,
    /// Seconds between purge runs. Default 300.
    pub purge_interval_secs: u64,
    /// Largest number of pooled database connections. Default 10.
    pub max_connections: u32,
    /// At start, mark every SUBMITTED or WORKING task FAILED ("interrupted by a gateway
    /// restart"). Default true. Set false when several instances share one PostgreSQL
    /// store: the stale sweep (`stale_task_secs`) then closes the tasks of an instance
    /// that stopped.
    pub recover_on_start: bool,
    /// Seconds without a status change after which a SUBMITTED or WORKING task that no
    /// running instance is driving is closed FAILED by the retention job. Default 7200
    /// (twice the runtime's 60-minute streaming limit).
    pub stale_task_secs: u64,
    /// PostgreSQL only: where the notification listener connects (`LISTEN` needs a
    /// session connection of its own). Set it to a direct connection to the same
    /// database when `url` goes through PgBouncer in transaction mode. Default: the
    /// settings of `url`.
    pub listen_url: Option<StoreUrl>,
    /// PostgreSQL only: several instances may share the store (default true). Each
    /// instance then holds a lease on the tasks it processes, renewed by a heartbeat;
    /// any instance closes FAILED the tasks of an instance whose heartbeat stopped for
    /// `lease_secs`, and live events, resumes and cancels work on every instance.
    /// This replaces `recover_on_start` and the stale sweep (`stale_task_secs`) for
    /// PostgreSQL. False: one instance, as with SQLite.
    pub cluster: bool,
    /// PostgreSQL cluster only: seconds without a heartbeat after which an instance
    /// counts as gone and its tasks are closed FAILED. Default 30.
    pub lease_secs: u64,
    /// PostgreSQL cluster only: the start of this instance's id in leases and failure
    /// reasons (a random suffix is added per start). Default: the host name.
    pub instance_name: String,
    /// SQLite files only: `"full"` (default) syncs every commit to disk before any
    /// client sees its events, so they survive a power loss; `"normal"` syncs only at
    /// WAL checkpoints, so a power loss or OS crash can roll back the last commits
    /// (a process crash still loses nothing). Ignored by other backends.
    pub sqlite_synchronous: SqliteSynchronous,
    /// PostgreSQL only: a file holding the password (read at start, trailing newline
    /// removed), put into `url` and `listen_url` where they hold none. Refused beside a
    /// password already in `url` (user-info or `?password=`). Default unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
}

/// `store.sqlite_synchronous`: SQLite's `synchronous` setting for a database file, in
/// WAL mode. Written `"full"` or `"normal"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSynchronous {
    /// Every commit is synced to disk before any client sees its events: they survive
    /// a process crash, an OS crash and a power loss. The default.
    #[default]
    Full,
    /// The WAL is synced only at checkpoints: a power loss or OS crash can roll back
    /// the last commits (a process crash still loses nothing).
    Normal,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: StoreUrl::Sqlite(SqliteLocation::File(PathBuf::from("a2a-gateway.db"))),
            retention_days: 30,
            input_required_ttl_secs: 86_400,
            purge_interval_secs: 300,
            max_connections: 10,
            recover_on_start: true,
            stale_task_secs: 7_200,
            sqlite_synchronous: SqliteSynchronous::Full,
            listen_url: None,
            cluster: true,
            lease_secs: 30,
            instance_name: String::new(),
            password_file: None,
        }
    }
}

impl StoreConfig {
    /// `retention_days` as a [`Duration`].
    pub fn retention(&self) -> Duration {
        Duration::from_secs(u64::from(self.retention_days) * 86_400)
    }

    /// `input_required_ttl_secs` as a [`Duration`].
    pub fn input_required_ttl(&self) -> Duration {
        Duration::from_secs(self.input_required_ttl_secs)
    }

    /// `stale_task_secs` as a [`Duration`].
    pub fn stale_task(&self) -> Duration {
        Duration::from_secs(self.stale_task_secs)
    }

    /// Whether this instance joins a cluster on the store (PostgreSQL with `cluster`).
    pub fn clustered(&self) -> bool {
        self.cluster && matches!(self.url, StoreUrl::Postgres(_))
    }

    /// `lease_secs` as a [`Duration`].
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_secs)
    }

    /// `purge_interval_secs` as a [`Duration`].
    pub fn purge_interval(&self) -> Duration {
        Duration::from_secs(self.purge_interval_secs)
    }

    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        nonzero("store.retention_days", self.retention_days.into())?;
        nonzero(
            "store.input_required_ttl_secs",
            self.input_required_ttl_secs,
        )?;
        nonzero("store.purge_interval_secs", self.purge_interval_secs)?;
        nonzero("store.max_connections", self.max_connections.into())?;
        nonzero("store.stale_task_secs", self.stale_task_secs)?;
        if self.lease_secs < 2 {
            return Err(Invalid::new(
                "store.lease_secs",
                format!("must be at least 2, got {}", self.lease_secs),
            ));
        }
        if let Some(u) = &self.listen_url
            && !matches!(u, StoreUrl::Postgres(_))
        {
            return Err(Invalid::new(
                "store.listen_url",
                "must be a postgres:// URL (a direct connection to the store's database)",
            ));
        }
        if self.password_file.is_some() {
            let StoreUrl::Postgres(url) = &self.url else {
                return Err(Invalid::because_of(
                    "store.password_file",
                    "store.url",
                    "applies to a postgres:// store.url only",
                ));
            };
            if has_password(url) {
                return Err(Invalid::because_of(
                    "store.password_file",
                    "store.url",
                    "set either a password in store.url or store.password_file, not both",
                ));
            }
        }
        Ok(())
    }

    /// Reads `password_file` into `url` (and `listen_url`) where they hold no password.
    pub(crate) fn load_password_file(&mut self) -> Result<(), Invalid> {
        let Some(path) = &self.password_file else {
            return Ok(());
        };
        let password = super::auth::read_secret("store.password_file", path)?;
        let with_password = |u: &StoreUrl| -> Result<StoreUrl, Invalid> {
            let StoreUrl::Postgres(secret) = u else {
                return Ok(u.clone());
            };
            if has_password(secret) {
                return Ok(u.clone());
            }
            let mut url = Url::parse(secret.expose_secret())
                .map_err(|e| Invalid::new("store.url", format!("not a URL: {e}")))?;
            url.set_password(Some(password.expose_secret()))
                .map_err(|()| Invalid::new("store.url", "cannot hold a password"))?;
            Ok(StoreUrl::Postgres(SecretString::from(url.to_string())))
        };
        self.url = with_password(&self.url)?;
        if let Some(listen) = &self.listen_url {
            self.listen_url = Some(with_password(listen)?);
        }
        Ok(())
    }
}

/// Whether a PostgreSQL URL holds a password: in the user-info or as `?password=`.
fn has_password(url: &SecretString) -> bool {
    Url::parse(url.expose_secret())
        .is_ok_and(|u| u.password().is_some() || u.query_pairs().any(|(k, _)| k == "password"))
}

/// The parsed `store.url`.
///
/// `Display` (and therefore serialization) hides a PostgreSQL password as `***`; use
/// [`StoreUrl::Postgres`]'s secret to connect.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(try_from = "String", into = "String")]
pub enum StoreUrl {
    /// `memory:`: tasks live in process memory and are lost on exit (tests, demos).
    Memory,
    /// `sqlite://PATH` or `sqlite::memory:`.
    Sqlite(SqliteLocation),
    /// `postgres://...` or `postgresql://...`, the whole URL as given (it may hold a password).
    Postgres(SecretString),
}

/// Where a SQLite database lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqliteLocation {
    /// A private in-memory database (`sqlite::memory:`).
    Memory,
    /// A database file, created if missing; relative paths are relative to the working
    /// directory.
    File(PathBuf),
}

/// `store.url` is not one of the accepted forms. The URL itself is not repeated, since it
/// may hold a password.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreUrlError(String);

const STORE_URL_FORMS: &str =
    "expected `memory:`, `sqlite://PATH`, `sqlite::memory:` or `postgres://USER@HOST/DB`";

impl FromStr for StoreUrl {
    type Err = StoreUrlError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let raw = raw.trim();
        if raw == "memory:" || raw == "memory" {
            return Ok(StoreUrl::Memory);
        }
        if let Some(rest) = raw.strip_prefix("sqlite:") {
            if rest == ":memory:" || rest == "//:memory:" {
                return Ok(StoreUrl::Sqlite(SqliteLocation::Memory));
            }
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.contains('?') {
                return Err(StoreUrlError(
                    "query parameters in a sqlite URL are not supported; give only the path"
                        .to_owned(),
                ));
            }
            if path.is_empty() {
                return Err(StoreUrlError(format!(
                    "a sqlite URL needs a path; {STORE_URL_FORMS}"
                )));
            }
            return Ok(StoreUrl::Sqlite(SqliteLocation::File(PathBuf::from(path))));
        }
        if raw.starts_with("postgres://") || raw.starts_with("postgresql://") {
            Url::parse(raw)
                .map_err(|e| StoreUrlError(format!("not a valid PostgreSQL URL: {e}")))?;
            return Ok(StoreUrl::Postgres(SecretString::from(raw)));
        }
        Err(StoreUrlError(format!(
            "unsupported store URL; {STORE_URL_FORMS}"
        )))
    }
}

impl TryFrom<String> for StoreUrl {
    type Error = StoreUrlError;

    fn try_from(raw: String) -> Result<Self, Self::Error> {
        raw.parse()
    }
}

impl From<StoreUrl> for String {
    fn from(url: StoreUrl) -> String {
        url.to_string()
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Memory => f.write_str("memory:"),
            StoreUrl::Sqlite(SqliteLocation::Memory) => f.write_str("sqlite::memory:"),
            StoreUrl::Sqlite(SqliteLocation::File(path)) => {
                write!(f, "sqlite://{}", path.display())
            }
            StoreUrl::Postgres(secret) => {
                // The password hidden wherever it is given: in the user-info or as
                // `?password=` (both are libpq forms).
                let url = Url::parse(secret.expose_secret()).map_err(|_| fmt::Error)?;
                f.write_str(&crate::log_url::masked(&url))
            }
        }
    }
}
