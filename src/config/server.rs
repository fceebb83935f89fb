//! `[server]`: the inbound listener, limits and TLS.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::error::{Invalid, nonzero};
use super::serde_util::http_url_opt;
use super::server_auth::ServerAuthConfig;

/// The default ListTasks page bound, 4 MiB: the message limit that gRPC clients apply
/// by default (gRPC applies the bound to its own encoding too), so their pages arrive
/// unless one task is larger.
pub const DEFAULT_LIST_PAGE_BYTES: u64 = 4 * 1024 * 1024;

/// `[server]`: where the gateway listens and how much it accepts.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Socket address to listen on. Default `127.0.0.1:8080` (local only; use `0.0.0.0:8080`
    /// in a container).
    pub listen: SocketAddr,
    /// Base URL that clients use to reach the gateway, published in the agent card. When
    /// unset, see [`ServerConfig::public_url`].
    #[serde(
        default,
        with = "http_url_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub public_url: Option<Url>,
    /// Largest accepted request body, in bytes. Default 10 MiB; larger bodies get 413.
    pub max_body_bytes: u64,
    /// Most tasks running at once; a new task beyond it is refused with a retryable error.
    /// Default 1024.
    pub max_concurrent_tasks: usize,
    /// Most tasks one caller (an owner within a tenant) runs at once, a message queued
    /// behind a running turn counting as one; beyond it its new messages are refused
    /// with a retryable error naming this key (HTTP 503 with `Retry-After`, gRPC
    /// `UNAVAILABLE`), while other callers still start theirs. Unset:
    /// [`default_share`] of `max_concurrent_tasks` (768 of the default 1024).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tasks_per_caller: Option<usize>,
    /// Most tasks the callers of one tenant run at once, counted and refused as for
    /// `max_tasks_per_caller`. The default tenant (calls that name none) is not bounded
    /// as one: its callers are, one by one. Unset: [`default_share`] of
    /// `max_concurrent_tasks`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tasks_per_tenant: Option<usize>,
    /// Most values (JSON values, counted as the per-request limit counts them) a task's
    /// stored JSON (history, artifacts, metadata) may hold and still take a message; a
    /// message to a task over it is refused with InvalidParams (-32602, HTTP 400, gRPC
    /// `INVALID_ARGUMENT`) naming this key: the caller goes on in a new task of the
    /// same context. Every read of a task builds it whole, so this bounds what reading
    /// one back costs. Default 200000.
    pub max_task_values: usize,
    /// Bytes of messages (their JSON) one caller (an owner within a tenant) may store per
    /// minute, per agent: a token bucket refilled at that rate. A message that finds its
    /// caller's bucket short is refused with the retryable error naming this key
    /// (HTTP 503 with `Retry-After`, gRPC `UNAVAILABLE`) before anything is stored; a
    /// message larger than the whole budget passes on a full bucket. Default 268435456
    /// (256 MiB a minute).
    pub max_message_bytes_per_caller_per_minute: u64,
    /// Most bytes of stored JSON a task may hold and still take a message, refused as
    /// for `max_task_values`. Default 33554432 (32 MiB).
    pub max_task_bytes: u64,
    /// Largest ListTasks page, in bytes of the listed tasks' stored JSON (a task
    /// without its artifacts, its whole history counted whatever `historyLength`
    /// keeps, plus its artifacts when the call sets `includeArtifacts`). A page ends
    /// early, with a `nextPageToken`, before the task that would take it past this, so
    /// a caller paging on still gets every task; a page always holds at least one
    /// task. gRPC also keeps the page's protobuf encoding within it (a data part takes
    /// several times its JSON size there; see [`crate::transport::grpc::page`]).
    /// Default 4194304 (4 MiB, the message limit gRPC clients apply by default).
    pub max_list_page_bytes: u64,
    /// Interval between SSE keep-alive comments on open streams, in seconds. Default 15.
    pub sse_keepalive_secs: u64,
    /// PEM certificate chain for HTTPS (rustls). Set together with `tls_key_file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key for HTTPS. Set together with `tls_cert_file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key_file: Option<PathBuf>,
    /// How long a shutdown waits for in-flight requests before ending them, in seconds.
    /// Default 30.
    pub shutdown_grace_secs: u64,
    /// Longest time from accepting a connection to a complete first request head, in
    /// seconds: the TLS handshake and the HTTP/2 preface count too; a connection that has
    /// sent nothing or a partial head by then is closed. Also bounds each later HTTP/1.1
    /// head once its first byte arrived. Default 30.
    pub header_timeout_secs: u64,
    /// How long a keep-alive HTTP/1.1 or HTTP/2 connection with no request in flight stays
    /// open, in seconds (HTTP/2 gets a GOAWAY). Default 75 (above the 60 s idle timeout of
    /// common load balancers, so they close first).
    pub idle_timeout_secs: u64,
    /// Most connections served at once. Beyond it a few more (an eighth of it, at most 64)
    /// are answered `503` with `Retry-After` (`/healthz` and `/readyz` still answer there),
    /// the rest are closed at once. Unset: half the soft open-file limit
    /// (`RLIMIT_NOFILE`), at most 65,536 (see [`crate::server::ConnectionLimits`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<usize>,
    /// `[server.auth]`: inbound authentication of A2A requests. Default `none`.
    pub auth: ServerAuthConfig,
    /// The A2A protocol bindings served and declared in the agent card's
    /// `supportedInterfaces`, in the card's order of preference. Default all three:
    /// `["jsonrpc", "rest", "grpc"]`.
    pub bindings: Vec<Binding>,
    /// A listener of its own for gRPC (same TLS as `listen`). Default unset: gRPC calls
    /// share `listen`, told apart by `content-type: application/grpc`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grpc_listen: Option<SocketAddr>,
    /// Web origins (`https://app.example.com`) whose pages may call the A2A routes from
    /// a browser. A request with an `Origin` not listed here gets `403`; programs send
    /// no `Origin`. Default none (see `docs/operations.md`, "Browsers").
    pub allowed_origins: Vec<String>,
    /// Host names (no port) besides `public_url`'s host that a request's `Host` may
    /// give; on a loopback listener loopback names are always allowed. Another `Host`
    /// gets `403` (DNS rebinding). Default none. Without `public_url` and with a
    /// listener on a non-loopback address and none listed, `Host` is not checked.
    pub allowed_hosts: Vec<String>,
}

/// The default per-caller and per-tenant bound on running tasks for `max` run slots
/// (`max_concurrent_tasks`): `max` less a quarter of it (rounded down), so one caller
/// or tenant holding all it may leaves at least a quarter of the slots to the others
/// once `max` is 4 or more, while a lone caller is barely limited (768 of 1024).
pub fn default_share(max: usize) -> usize {
    (max - max / 4).max(1)
}

/// One A2A protocol binding (spec §5), as named in `server.bindings`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Binding {
    /// JSON-RPC 2.0 (spec §9) at `POST /` of the public URL.
    Jsonrpc,
    /// HTTP+JSON (spec §11) under `/a2a/rest` of the public URL.
    Rest,
    /// gRPC (spec §10), service `lf.a2a.v1.A2AService`.
    Grpc,
}

impl Binding {
    /// Every binding, in the default order.
    pub const ALL: [Binding; 3] = [Binding::Jsonrpc, Binding::Rest, Binding::Grpc];

    /// The name used in `server.bindings`: `jsonrpc`, `rest` or `grpc`.
    pub fn name(self) -> &'static str {
        match self {
            Binding::Jsonrpc => "jsonrpc",
            Binding::Rest => "rest",
            Binding::Grpc => "grpc",
        }
    }

    /// The card's `protocolBinding` value: `JSONRPC`, `HTTP+JSON` or `GRPC`.
    pub fn protocol_binding(self) -> &'static str {
        match self {
            Binding::Jsonrpc => "JSONRPC",
            Binding::Rest => "HTTP+JSON",
            Binding::Grpc => "GRPC",
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            public_url: None,
            max_body_bytes: 10 * 1024 * 1024,
            max_concurrent_tasks: 1024,
            max_tasks_per_caller: None,
            max_tasks_per_tenant: None,
            max_task_values: 200_000,
            max_message_bytes_per_caller_per_minute: 256 * 1024 * 1024,
            max_task_bytes: 32 * 1024 * 1024,
            max_list_page_bytes: DEFAULT_LIST_PAGE_BYTES,
            sse_keepalive_secs: 15,
            tls_cert_file: None,
            tls_key_file: None,
            shutdown_grace_secs: 30,
            header_timeout_secs: 30,
            idle_timeout_secs: 75,
            max_connections: None,
            auth: ServerAuthConfig::default(),
            bindings: Binding::ALL.to_vec(),
            grpc_listen: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
        }
    }
}

/// Whether listeners on `a` and `b` would take the same port (serve could not bind the
/// second): the same port, not 0, and the same address, or an unspecified one of the
/// same family, or `::` (which takes IPv4 too on Linux by default).
fn overlaps(a: SocketAddr, b: SocketAddr) -> bool {
    if a.port() != b.port() || a.port() == 0 {
        return false;
    }
    let wildcard = |x: SocketAddr, y: SocketAddr| {
        x.ip().is_unspecified() && (x.is_ipv6() || x.is_ipv4() == y.is_ipv4())
    };
    a.ip() == b.ip() || wildcard(a, b) || wildcard(b, a)
}

/// `addr` with an unspecified IP (`0.0.0.0`, `::`) replaced by loopback of its family:
/// the address a client on this machine reaches a listener on `addr` at.
fn loopback_if_unspecified(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

/// `public_url` is published in the unauthenticated agent card and the binding paths
/// are appended to it: no user name, password, query or fragment (the scheme is
/// checked when the URL is read).
fn validate_public_url(url: &Url) -> Result<(), Invalid> {
    const KEY: &str = "server.public_url";
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Invalid::new(
            KEY,
            "must not hold a user name or password: it is published in the public agent card",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(Invalid::new(
            KEY,
            "must not have a query (?...) or fragment (#...): the binding paths are appended to it",
        ));
    }
    Ok(())
}

impl ServerConfig {
    /// The URL published in the agent card: `public_url` when set, else derived from `listen`
    /// (`https` when TLS is configured). An unspecified listen address (`0.0.0.0`, `::`) is
    /// replaced by loopback, which is only right for local use: set `public_url` in production.
    pub fn public_url(&self) -> Url {
        if let Some(url) = &self.public_url {
            return url.clone();
        }
        let scheme = if self.tls_enabled() { "https" } else { "http" };
        let addr = loopback_if_unspecified(self.listen);
        Url::parse(&format!("{scheme}://{addr}/")).expect("a socket address is a valid URL host")
    }

    /// Whether HTTPS is configured (both TLS files set; validation refuses just one).
    pub fn tls_enabled(&self) -> bool {
        self.tls_cert_file.is_some() && self.tls_key_file.is_some()
    }

    /// Whether `binding` is served (listed in `bindings`).
    pub fn serves(&self, binding: Binding) -> bool {
        self.bindings.contains(&binding)
    }

    /// The gRPC address published in the agent card, `host:port` (spec §10): the host
    /// of [`public_url`](Self::public_url), and the port of `grpc_listen` when set,
    /// else the public URL's port (443 or 80 when it names none). Without `public_url`,
    /// `grpc_listen` itself when it names an address; for `0.0.0.0` or `::`, `listen`'s
    /// address when it is of the same family and not unspecified, else loopback.
    pub fn grpc_address(&self) -> String {
        if let (None, Some(addr)) = (&self.public_url, self.grpc_listen) {
            if !addr.ip().is_unspecified() {
                return addr.to_string();
            }
            // Any address of its family: the HTTP interfaces' host when it is one of
            // them, else loopback of that family.
            let http = self.listen.ip();
            if http.is_ipv4() == addr.is_ipv4() && !http.is_unspecified() {
                return SocketAddr::new(http, addr.port()).to_string();
            }
            return loopback_if_unspecified(addr).to_string();
        }
        let url = self.public_url();
        let host = url.host_str().unwrap_or("localhost").to_owned();
        let port = match self.grpc_listen {
            Some(addr) => addr.port(),
            None => url.port_or_known_default().unwrap_or(443),
        };
        format!("{host}:{port}")
    }

    /// The names a request's `Host` may give besides loopback ones (see
    /// `allowed_hosts`): `public_url`'s host when it is set, then `allowed_hosts`.
    /// `None` (no check) when the gateway cannot know its names: no `public_url`, no
    /// `allowed_hosts` and a listener not on loopback.
    pub fn host_names(&self) -> Option<Vec<String>> {
        let mut names: Vec<String> = self
            .public_url
            .as_ref()
            .and_then(|u| u.host_str().map(str::to_owned))
            .into_iter()
            .collect();
        names.extend(self.allowed_hosts.iter().cloned());
        (!names.is_empty() || self.listen.ip().is_loopback()).then_some(names)
    }

    /// `sse_keepalive_secs` as a [`Duration`].
    pub fn sse_keepalive(&self) -> Duration {
        Duration::from_secs(self.sse_keepalive_secs)
    }

    /// `shutdown_grace_secs` as a [`Duration`].
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.shutdown_grace_secs)
    }

    /// `header_timeout_secs` as a [`Duration`].
    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.header_timeout_secs)
    }

    /// `idle_timeout_secs` as a [`Duration`].
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.idle_timeout_secs)
    }

    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        nonzero("server.max_body_bytes", self.max_body_bytes)?;
        nonzero(
            "server.max_concurrent_tasks",
            self.max_concurrent_tasks as u64,
        )?;
        if let Some(n) = self.max_tasks_per_caller {
            nonzero("server.max_tasks_per_caller", n as u64)?;
        }
        if let Some(n) = self.max_tasks_per_tenant {
            nonzero("server.max_tasks_per_tenant", n as u64)?;
        }
        nonzero("server.max_task_values", self.max_task_values as u64)?;
        nonzero(
            "server.max_message_bytes_per_caller_per_minute",
            self.max_message_bytes_per_caller_per_minute,
        )?;
        nonzero("server.max_task_bytes", self.max_task_bytes)?;
        nonzero("server.max_list_page_bytes", self.max_list_page_bytes)?;
        nonzero("server.sse_keepalive_secs", self.sse_keepalive_secs)?;
        nonzero("server.shutdown_grace_secs", self.shutdown_grace_secs)?;
        nonzero("server.header_timeout_secs", self.header_timeout_secs)?;
        nonzero("server.idle_timeout_secs", self.idle_timeout_secs)?;
        if let Some(max) = self.max_connections {
            nonzero("server.max_connections", max as u64)?;
        }
        self.auth.validate()?;
        for (i, origin) in self.allowed_origins.iter().enumerate() {
            let ok = Url::parse(origin).is_ok_and(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host_str().is_some()
                    && u.path() == "/"
                    && u.query().is_none()
                    && u.username().is_empty()
            });
            if !ok {
                return Err(Invalid::new(
                    format!("server.allowed_origins[{i}]"),
                    "must be an origin: http(s)://host[:port], no path",
                ));
            }
        }
        for (i, host) in self.allowed_hosts.iter().enumerate() {
            let bracketed = host.starts_with('[') && host.ends_with(']');
            let ok = !host.is_empty()
                && !host.contains(['/', ' ', '@'])
                && (bracketed || !host.contains(':'));
            if !ok {
                return Err(Invalid::new(
                    format!("server.allowed_hosts[{i}]"),
                    "must be a host name or address without scheme or port",
                ));
            }
        }
        if let Some(url) = &self.public_url {
            validate_public_url(url)?;
        }
        if self.bindings.is_empty() {
            return Err(Invalid::new(
                "server.bindings",
                "must name at least one of \"jsonrpc\", \"rest\", \"grpc\"",
            ));
        }
        if let Some(dup) = self
            .bindings
            .iter()
            .enumerate()
            .find_map(|(i, b)| self.bindings[..i].contains(b).then_some(b))
        {
            return Err(Invalid::new(
                "server.bindings",
                format!("names {:?} more than once", dup.name()),
            ));
        }
        if let Some(addr) = self.grpc_listen {
            if !self.serves(Binding::Grpc) {
                return Err(Invalid::because_of(
                    "server.grpc_listen",
                    "server.bindings",
                    "is set but server.bindings does not include \"grpc\"",
                ));
            }
            if overlaps(addr, self.listen) {
                return Err(Invalid::because_of(
                    "server.grpc_listen",
                    "server.listen",
                    "must differ from server.listen (leave it unset to share that listener)",
                ));
            }
        }
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(_), None) => {
                return Err(Invalid::because_of(
                    "server.tls_key_file",
                    "server.tls_cert_file",
                    "is required when server.tls_cert_file is set (set both or neither)",
                ));
            }
            (None, Some(_)) => {
                return Err(Invalid::because_of(
                    "server.tls_cert_file",
                    "server.tls_key_file",
                    "is required when server.tls_key_file is set (set both or neither)",
                ));
            }
            _ => {}
        }
        for (key, path) in [
            ("server.tls_cert_file", &self.tls_cert_file),
            ("server.tls_key_file", &self.tls_key_file),
        ] {
            if let Some(path) = path {
                super::check_readable_file(key, path)?;
            }
        }
        Ok(())
    }
}
