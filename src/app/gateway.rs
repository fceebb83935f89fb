//! A [`Gateway`] from its parts: the request handler over an executor and a store, the
//! transport state and the router, as `[server]` and `[store]` set them; and serving it
//! (the retention job, the push sender, the shutdown sequence).

use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::card::handler_config;
use crate::config::{AgentEntryConfig, Config};
use crate::executor::AgentExecutor;
use crate::handler::{HandlerConfig, MaintenanceConfig, RequestHandler};
use crate::protocol::AgentCard;
use crate::push::PushService;
use crate::server::{self, ReadinessCheck};
use crate::store::TaskStore;
use crate::transport::agents::{AgentRoutes, MountedAgent, RootEntry};
use crate::transport::auth::Authenticator;
use crate::transport::browser_guard::BrowserGuard;
use crate::transport::{AgentAccess, AppState, TransportConfig};

/// A gateway ready to serve: its state (handler, card, limits) and router.
#[derive(Clone)]
pub struct Gateway {
    /// Shared by every route of the agent at `/`; without one (only `[agents.*]`),
    /// the first agent's (its handler runs the jobs every agent shares: see
    /// [`RequestHandler::sibling`]).
    pub state: AppState,
    /// The full router (A2A + operations).
    pub router: Router,
    /// The retention job [`serve`](Self::serve) runs (from `[store]`).
    pub maintenance: MaintenanceConfig,
    /// Header and idle timeouts and the connection cap of the listener (from `[server]`).
    pub connections: server::ConnectionLimits,
    /// The agents served under their path prefixes (`[agents.<id>]`), empty without.
    pub agents: AgentRoutes,
    /// Builds agents again on `SIGHUP` ([`AgentReload::apply`]).
    pub reload: AgentReload,
}

/// What adding or changing an agent while serving needs: the configuration the gateway
/// started with (its `[server]`, `[push]`...), the first handler (new agents' handlers
/// are its siblings), push, the authenticator, and the table of mounted agents with the
/// configuration each was built from. Cheap to clone.
#[derive(Clone)]
pub struct AgentReload {
    config: Arc<Config>,
    first: RequestHandler,
    push: Option<Arc<PushService>>,
    auth: Authenticator,
    routes: AgentRoutes,
    /// Each mounted agent's [`entry_fingerprint`], by id: an entry that reads the same
    /// (secrets included) is kept as it is (its executor, token cache and running tasks).
    built: Arc<std::sync::Mutex<std::collections::BTreeMap<String, String>>>,
    /// The credentials of the agents, one per distinct credential
    /// ([`CredentialPool`](crate::upstream::auth::CredentialPool)): a new or changed agent
    /// shares the cache of an agent with the same credential.
    credentials: crate::upstream::auth::CredentialPool,
    /// The card follower of each agent of kind `a2a` (`""`: the agent at `/`), by id:
    /// cancelled when a reload replaces or removes the agent.
    followers: Arc<std::sync::Mutex<std::collections::BTreeMap<String, CancellationToken>>>,
}

impl AgentReload {
    /// Makes the mounted agents those of `new.agents`: an agent whose entry is unchanged
    /// stays as it is; a new or changed one gets a new executor and handler (its running
    /// tasks finish on the old ones); a removed one is no longer routed to (404), its
    /// running tasks finish. Nothing else of `new` is applied (`[server]`, `[store]`,
    /// `[push]` and the agent at `/` need a restart; API keys reload on their own).
    /// Returns the number of agents now served.
    ///
    /// # Errors
    /// An agent's upstream that cannot be built, or a `grpc_listen` that differs from
    /// the one bound at start (a gRPC port is bound once; changing, adding or dropping
    /// one needs a restart): nothing changes then.
    pub fn apply(&self, new: &Config) -> Result<usize, String> {
        let agents = self.with_bound_grpc(new)?;
        let current = self.routes.agents();
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = Vec::new();
        let mut follows = Vec::new();
        let mut next_built = std::collections::BTreeMap::new();
        let new = &Config {
            agents,
            ..new.clone()
        };
        for (id, entry) in &new.agents {
            let text = entry_fingerprint(entry);
            if built.get(id) == Some(&text)
                && let Some(kept) = current.iter().find(|a| &a.id == id)
            {
                next.push(kept.clone());
                next_built.insert(id.clone(), text);
                continue;
            }
            let mut config = (*self.config).clone();
            config.agents = new.agents.clone();
            let agent = agent_config(&config, id, entry);
            let (executor, ready, a2a) =
                super::upstream::build_executor_parts(&agent, &self.credentials)
                    .map_err(|e| format!("[agents.{id}]: {e}"))?;
            let (hc, card) = handler_config(&agent, self.push.clone(), id);
            let handler = self.first.sibling(executor, hc);
            let mounted = mount(&config, id, entry, &agent, handler, card, &self.auth, ready);
            if let Some(executor) = a2a {
                follows.push((id.clone(), agent, mounted.state.clone(), executor));
            }
            next.push(mounted);
            next_built.insert(id.clone(), text);
        }
        let n = next.len();
        self.routes.replace(next);
        // The followers of agents replaced or removed stop; new `a2a` agents get theirs
        // (their card is `[agents.<id>]`'s until their agent's card is read).
        {
            let mut followers = self.followers.lock().unwrap_or_else(|p| p.into_inner());
            followers.retain(|id, stop| {
                let kept = id.is_empty()
                    || (next_built.contains_key(id) && built.get(id) == next_built.get(id));
                if !kept {
                    stop.cancel();
                }
                kept
            });
        }
        for (id, agent, state, executor) in follows {
            self.follow(id, agent, state, executor, None);
        }
        *built = next_built;
        // Credentials only removed or replaced agents used are forgotten once their
        // executors are gone (the running tasks of a removed agent keep theirs).
        drop(current);
        self.credentials.prune();
        Ok(n)
    }

    /// Starts the card follower of agent `id` (`""`: the agent at `/`), whose
    /// configuration without its upstream card is `base` and which `state` serves (see
    /// [`super::card_follow`]); `card`, when given, is published at once.
    fn follow(
        &self,
        id: String,
        base: Config,
        state: AppState,
        executor: crate::upstream::a2a::A2aExecutor,
        card: Option<Arc<crate::upstream::a2a::UpstreamCard>>,
    ) {
        let stop = state.shutdown.child_token();
        if let Some(old) = self
            .followers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), stop.clone())
        {
            old.cancel();
        }
        let publisher = super::card_follow::Publisher {
            base,
            agent: id,
            push: self.push.clone(),
            state,
        };
        super::card_follow::start(publisher, executor, card, stop);
    }

    /// `new`'s agents with each `grpc_listen` as bound at start (a port 0 in the file
    /// stands for the port bound then).
    ///
    /// # Errors
    /// An agent whose `grpc_listen` is not the one it started with (or a new agent with
    /// one): its port is bound at start only.
    fn with_bound_grpc(
        &self,
        new: &Config,
    ) -> Result<std::collections::BTreeMap<String, crate::config::AgentEntryConfig>, String> {
        let mut agents = new.agents.clone();
        for (id, entry) in agents.iter_mut() {
            let bound = self.config.agents.get(id).and_then(|e| e.grpc_listen);
            entry.grpc_listen = match (entry.grpc_listen, bound) {
                (None, None) => None,
                (Some(asked), Some(bound))
                    if asked == bound || (asked.port() == 0 && asked.ip() == bound.ip()) =>
                {
                    Some(bound)
                }
                (asked, bound) => {
                    let show = |a: Option<std::net::SocketAddr>| {
                        a.map_or_else(|| "none".to_owned(), |a| a.to_string())
                    };
                    return Err(format!(
                        "agents.{id}.grpc_listen is {} but {} is bound since start: a gRPC \
                         port is bound at start only; restart to change it",
                        show(asked),
                        show(bound)
                    ));
                }
            };
        }
        Ok(agents)
    }
}

/// The executor of one `[agents.<id>]` entry and its readiness check.
pub struct AgentParts {
    /// The agent id.
    pub id: String,
    /// Runs its tasks (built from `[agents.<id>.upstream]`).
    pub executor: Arc<dyn AgentExecutor>,
    /// Its upstream's readiness ("a token is obtainable"), if it has one.
    pub ready: Option<ReadinessCheck>,
}

impl Gateway {
    /// Builds a gateway running `executor` over `store` as `config` describes.
    /// `ready` adds a readiness condition (e.g. "a token is obtainable").
    pub fn new(
        config: &Config,
        executor: Arc<dyn AgentExecutor>,
        store: Arc<dyn TaskStore>,
        ready: Option<ReadinessCheck>,
    ) -> Self {
        Self::with_push(config, executor, store, ready, None)
    }

    /// [`Gateway::new`] with push notifications sent by `push` (see
    /// [`PushService::open`]): the card says `pushNotifications: true` (and names the
    /// signature scheme and JWKS), the push-config operations are served, and
    /// [`serve`](Self::serve) runs the sender. `None`: push is not offered.
    pub fn with_push(
        config: &Config,
        executor: Arc<dyn AgentExecutor>,
        store: Arc<dyn TaskStore>,
        ready: Option<ReadinessCheck>,
        push: Option<Arc<PushService>>,
    ) -> Self {
        Self::with_agents(config, Some((executor, ready)), Vec::new(), store, push)
    }

    /// A gateway serving `root` (the top-level `[agent]` + `[upstream]`) at `/` when
    /// given, and each of `agents` (`[agents.<id>]`, in `config.agents`) under its path
    /// prefix, all over `store` and `push` and one set of credentials
    /// (`[server.auth]`). Each agent has its own card (interface URLs under
    /// `server.public_url` + its prefix), handler (its own `max_concurrent_tasks`),
    /// callers and readiness.
    ///
    /// # Panics
    /// With neither `root` nor `agents` (loading refuses such a configuration), or an
    /// agent id `config.agents` lacks.
    pub fn with_agents(
        config: &Config,
        root: Option<(Arc<dyn AgentExecutor>, Option<ReadinessCheck>)>,
        agents: Vec<AgentParts>,
        store: Arc<dyn TaskStore>,
        push: Option<Arc<PushService>>,
    ) -> Self {
        let auth = Authenticator::from_config(&config.server.auth);
        auth.start();
        let mut first: Option<RequestHandler> = None;
        let mut new_handler = |executor: Arc<dyn AgentExecutor>, hc: HandlerConfig| match &first {
            Some(h) => h.sibling(executor, hc),
            None => {
                let h = RequestHandler::new(executor, store.clone(), hc);
                first = Some(h.clone());
                h
            }
        };
        let root_state = root.map(|(executor, ready)| {
            let (hc, card) = handler_config(config, push.clone(), "");
            let handler = new_handler(executor, hc);
            let transport = transport_config(config, config, auth.clone(), AgentAccess::default());
            (AppState::new(handler, card, transport), ready)
        });
        let mut mounted = Vec::new();
        let mut built = std::collections::BTreeMap::new();
        for parts in agents {
            let entry = &config.agents[&parts.id];
            let agent = agent_config(config, &parts.id, entry);
            let (hc, card) = handler_config(&agent, push.clone(), &parts.id);
            let handler = new_handler(parts.executor, hc);
            built.insert(parts.id.clone(), entry_fingerprint(entry));
            mounted.push(mount(
                config,
                &parts.id,
                entry,
                &agent,
                handler,
                card,
                &auth,
                parts.ready,
            ));
        }
        let root_entry = root_state.as_ref().map(|(s, _)| RootEntry {
            card: s.card.clone(),
            card_url: card_url(config),
        });
        let first_state = mounted.first().map(|a| a.state.clone());
        let routes = AgentRoutes::new(root_entry, mounted);
        let (state, router) = match root_state {
            Some((state, ready)) => {
                let router = server::router_with_agents(state.clone(), ready, routes.clone());
                (state, router)
            }
            None => {
                let state = first_state.expect("a configuration serves at least one agent");
                (
                    state.clone(),
                    server::ops_router(state, None, routes.clone()),
                )
            }
        };
        // Mounted even without agents: `SIGHUP` may add some.
        let router = crate::transport::agents::mount(router, routes.clone());
        let reload = AgentReload {
            config: Arc::new(config.clone()),
            first: state.handler.clone(),
            push,
            auth,
            routes: routes.clone(),
            built: Arc::new(std::sync::Mutex::new(built)),
            credentials: crate::upstream::auth::CredentialPool::new(),
            followers: Arc::default(),
        };
        Self {
            state,
            router,
            maintenance: MaintenanceConfig::from_store_config(&config.store),
            connections: server::ConnectionLimits::from_config(&config.server),
            agents: routes,
            reload,
        }
    }

    /// Makes `pool` the credentials a `SIGHUP` reload builds agents with: the pool
    /// `serve` built the agents of the start with, so that an agent added later with the
    /// same credential as a running one shares its cache.
    pub fn share_credentials(&mut self, pool: crate::upstream::auth::CredentialPool) {
        self.reload.credentials = pool;
    }

    /// Has the card of agent `id` (`""`: the agent at `/`; it must be served) follow its
    /// upstream A2A agent's card, `source`: the card read at start is published now
    /// (merged into what `[agent]` / `[agents.<id>]` leaves at its defaults, see
    /// [`super::card::with_upstream_card`]), and each card read later that differs is
    /// published when it is read (see `card_follow`). Until the gateway shuts down, or
    /// a reload replaces or removes the agent.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn follow_upstream_card(&self, id: &str, source: super::UpstreamCardSource) {
        let config = &self.reload.config;
        let (base, state) = if id.is_empty() {
            ((**config).clone(), self.state.clone())
        } else {
            let (Some(entry), Some(mounted)) = (
                config.agents.get(id),
                self.agents.agents().into_iter().find(|a| a.id == id),
            ) else {
                return;
            };
            (agent_config(config, id, entry), mounted.state)
        };
        self.reload
            .follow(id.to_owned(), base, state, source.executor, source.card);
    }

    /// Every handler this gateway runs: the one of [`Gateway::state`] first, then each
    /// mounted agent's (without repeating the first).
    pub fn handlers(&self) -> Vec<RequestHandler> {
        handlers_of(&self.state, &self.agents)
    }

    /// Serves on `listener` until `shutdown` resolves, running the retention job
    /// ([`RequestHandler::spawn_maintenance`]) meanwhile; then stops the job and accepting, gives
    /// running tasks `server.shutdown_grace_secs` to finish, marks the rest FAILED,
    /// and ends open streams.
    ///
    /// # Errors
    /// I/O errors of the listener.
    pub async fn serve(
        self,
        listener: TcpListener,
        grace: std::time::Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.serve_all(listener, None, None, grace, shutdown).await
    }

    /// Like [`Gateway::serve`], with HTTPS when `tls` is set, and gRPC also served on
    /// `grpc_listener` (`server.grpc_listen`, the same TLS) until the main listener
    /// stops.
    ///
    /// # Errors
    /// I/O errors of either listener.
    pub async fn serve_all(
        self,
        listener: TcpListener,
        grpc_listener: Option<TcpListener>,
        tls: Option<Arc<rustls::ServerConfig>>,
        grace: std::time::Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let stop = self.stop(grace, shutdown);
        let stopped = CancellationToken::new();
        let grpc = grpc_listener.map(|grpc_listener| {
            let app = crate::transport::grpc::router(self.state.clone());
            tokio::spawn(serve_one(
                grpc_listener,
                app,
                tls.clone(),
                self.connections.clone(),
                stopped.clone().cancelled_owned(),
            ))
        });
        let main_stop = {
            let stopped = stopped.clone();
            async move {
                stop.await;
                stopped.cancel();
            }
        };
        let result = serve_one(listener, self.router, tls, self.connections, main_stop).await;
        stopped.cancel();
        if let Some(grpc) = grpc {
            grpc.await.map_err(std::io::Error::other)??;
        }
        result
    }

    /// Like [`Gateway::serve`], over HTTPS with `tls` (see [`crate::tls::server_config`]).
    ///
    /// # Errors
    /// I/O errors of the listener.
    pub async fn serve_tls(
        self,
        listener: TcpListener,
        tls: Arc<rustls::ServerConfig>,
        grace: std::time::Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.serve_all(listener, None, Some(tls), grace, shutdown)
            .await
    }

    /// Starts the retention job, then returns the shutdown sequence: after
    /// `shutdown`, stop the job, refuse new messages, give running tasks `grace`, mark
    /// the rest FAILED, then end open streams.
    fn stop(
        &self,
        grace: std::time::Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let state = self.state.clone();
        let agents = self.agents.clone();
        let jobs = CancellationToken::new();
        let job = state
            .handler
            .spawn_maintenance(self.maintenance.clone(), jobs.clone());
        let sender = state.handler.push().map(|p| p.spawn(jobs.clone()));
        async move {
            shutdown.await;
            jobs.cancel();
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), job).await;
            if let Some(sender) = sender {
                let _ = tokio::time::timeout(std::time::Duration::from_secs(20), sender).await;
            }
            tracing::info!(
                grace_secs = grace.as_secs(),
                "shutting down: no new messages; waiting for running tasks"
            );
            // Every agent's handler (also of agents a reload removed) refuses new
            // messages and gives its running tasks the same grace, at once.
            let handlers = handlers_of(&state, &agents);
            futures::future::join_all(handlers.iter().map(|h| h.shutdown(grace))).await;
            state.shutdown.cancel();
            for a in agents.all_ever() {
                a.state.shutdown.cancel();
            }
        }
    }
}

/// Serves `app` on `listener`, over HTTPS when `tls` is set, until `stop` resolves.
pub(super) async fn serve_one(
    listener: TcpListener,
    app: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: server::ConnectionLimits,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    match tls {
        Some(tls) => crate::tls::serve_tls_with_limits(listener, app, tls, limits, stop).await,
        None => server::serve_with_limits(listener, app, limits, stop).await,
    }
}

/// The handler of `state`, then those of every agent `agents` mounted now or before
/// (without repeating one).
fn handlers_of(state: &AppState, agents: &AgentRoutes) -> Vec<RequestHandler> {
    let mut all = vec![state.handler.clone()];
    for a in agents.all_ever() {
        if !Arc::ptr_eq(&a.state.config, &state.config) {
            all.push(a.state.handler.clone());
        }
    }
    all
}

/// Agent `id` (`entry`, seen as `agent` by [`agent_config`]) mounted over `handler`:
/// its transport settings (its id and callers, the shared `auth`), state and routes.
#[expect(
    clippy::too_many_arguments,
    reason = "the parts of one agent, built by two callers"
)]
fn mount(
    config: &Config,
    id: &str,
    entry: &AgentEntryConfig,
    agent: &Config,
    handler: RequestHandler,
    card: AgentCard,
    auth: &Authenticator,
    ready: Option<ReadinessCheck>,
) -> MountedAgent {
    let access = AgentAccess {
        id: id.to_owned(),
        callers: entry.callers.clone().map(Into::into),
        prefix: entry.path_for(id),
    };
    let transport = transport_config(config, agent, auth.clone(), access);
    let state = AppState::new(handler, card, transport);
    MountedAgent {
        router: server::agent_router(state.clone(), ready.clone()),
        prefix: entry.path_for(id),
        id: id.to_owned(),
        card_url: card_url(agent),
        state,
        ready,
    }
}

/// The transport settings of one agent: the listener's rules from `base` (the whole
/// configuration), the bindings and card options from `agent` (its own view, see
/// [`agent_config`]), one authenticator for all.
fn transport_config(
    base: &Config,
    agent: &Config,
    auth: Authenticator,
    access: AgentAccess,
) -> TransportConfig {
    TransportConfig {
        max_body_bytes: usize::try_from(base.server.max_body_bytes).unwrap_or(usize::MAX),
        sse_keepalive: base.server.sse_keepalive(),
        auth,
        bindings: agent.server.bindings.clone(),
        grpc_own_listener: base.server.grpc_listen.is_some(),
        card_v03_fields: agent.agent.v03_card_fields,
        request_message_timeout: base.server.header_timeout(),
        browser: BrowserGuard::new(
            &base.server.allowed_origins,
            base.server.host_names(),
            base.server.listen.ip().is_loopback(),
        ),
        agent: access,
    }
}

/// What tells whether a reload changed an agent: its `[agents.<id>]` as TOML (secrets as
/// `***`, as `check-config` prints it) and the SHA-256 of its upstream secrets
/// (`client_secret`, `token`, also when read from a `*_file`: a new secret in the same
/// file is a change). Kept in memory only, never logged.
fn entry_fingerprint(entry: &AgentEntryConfig) -> String {
    use secrecy::ExposeSecret as _;
    use sha2::Digest as _;
    let auth = entry.upstream.auth();
    let mut h = sha2::Sha256::new();
    for secret in [&auth.client_secret, &auth.token] {
        match secret {
            Some(s) => {
                h.update([1]);
                h.update((s.expose_secret().len() as u64).to_be_bytes());
                h.update(s.expose_secret().as_bytes());
            }
            None => h.update([0]),
        }
    }
    let digest: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}\n# secrets {digest}\n",
        toml::to_string(entry).unwrap_or_default()
    )
}

/// The configuration as agent `id` sees it: its `[agents.<id>]` card keys as
/// `[agent]`, its upstream as `[upstream]`, its `max_concurrent_tasks` and per-caller and
/// per-tenant task limits, and
/// `server.public_url` moved under its prefix (so every card URL, the JWKS one too, is
/// absolute and right behind the prefix and behind a `public_url` with a path of its
/// own). gRPC is served (and in its card, at `host:port`) only on the agent's own
/// `grpc_listen`: gRPC clients send no path prefix.
pub fn agent_config(config: &Config, id: &str, entry: &AgentEntryConfig) -> Config {
    let mut c = config.clone();
    c.agent = entry.card.clone();
    c.upstream = entry.upstream.clone();
    c.agents.clear();
    c.server.max_concurrent_tasks = entry
        .max_concurrent_tasks
        .unwrap_or(config.server.max_concurrent_tasks);
    c.server.max_tasks_per_caller = entry
        .max_tasks_per_caller
        .or(config.server.max_tasks_per_caller);
    c.server.max_tasks_per_tenant = entry
        .max_tasks_per_tenant
        .or(config.server.max_tasks_per_tenant);
    let prefix = entry.path_for(id);
    c.server.public_url = config
        .server
        .public_url()
        .join(prefix.trim_start_matches('/'))
        .ok();
    c.server.grpc_listen = entry.grpc_listen;
    if entry.grpc_listen.is_none() {
        c.server
            .bindings
            .retain(|b| *b != crate::config::Binding::Grpc);
    }
    c
}

/// The absolute URL of the public card of the agent `config` describes.
fn card_url(config: &Config) -> String {
    config
        .server
        .public_url()
        .join(".well-known/agent-card.json")
        .map(|u| u.to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::card::agent_card;

    fn load(toml: &str) -> Config {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.toml");
        std::fs::write(&path, toml).unwrap();
        Config::load(crate::config::ConfigSources {
            file: Some(path),
            ..Default::default()
        })
        .unwrap()
    }

    fn urls(config: &Config, id: &str) -> (Vec<String>, String, String) {
        let c = agent_config(config, id, &config.agents[id]);
        let card = agent_card(&c);
        let jwks = c
            .server
            .public_url()
            .join(crate::push::JWKS_PATH.trim_start_matches('/'))
            .unwrap()
            .to_string();
        (
            card.supported_interfaces
                .into_iter()
                .map(|i| i.url)
                .collect(),
            card_url(&c),
            jwks,
        )
    }

    const AGENTS: &str = "[agents.reviewer]\n[agents.reviewer.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n\
                          [agents.helper]\npath = \"/team/helper/\"\n[agents.helper.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n";

    #[test]
    fn card_urls_are_absolute_behind_the_prefix() {
        let c = load(&format!("[server]\nlisten = \"127.0.0.1:8080\"\n{AGENTS}"));
        let (interfaces, card, jwks) = urls(&c, "reviewer");
        assert_eq!(
            interfaces,
            [
                "http://127.0.0.1:8080/agents/reviewer/",
                "http://127.0.0.1:8080/agents/reviewer/a2a/rest",
                "http://127.0.0.1:8080/agents/reviewer/",
            ]
        );
        assert_eq!(
            card,
            "http://127.0.0.1:8080/agents/reviewer/.well-known/agent-card.json"
        );
        assert_eq!(
            jwks,
            "http://127.0.0.1:8080/agents/reviewer/.well-known/jwks.json"
        );
        let (interfaces, ..) = urls(&c, "helper");
        assert_eq!(interfaces[1], "http://127.0.0.1:8080/team/helper/a2a/rest");
    }

    #[test]
    fn card_urls_are_absolute_behind_a_public_url_with_a_path() {
        let c = load(&format!(
            "[server]\npublic_url = \"https://gw.example.com/a2a/\"\n{AGENTS}"
        ));
        let (interfaces, card, jwks) = urls(&c, "reviewer");
        assert_eq!(
            interfaces,
            [
                "https://gw.example.com/a2a/agents/reviewer/",
                "https://gw.example.com/a2a/agents/reviewer/a2a/rest",
                "https://gw.example.com/a2a/agents/reviewer/",
            ]
        );
        assert_eq!(
            card,
            "https://gw.example.com/a2a/agents/reviewer/.well-known/agent-card.json"
        );
        assert_eq!(
            jwks,
            "https://gw.example.com/a2a/agents/reviewer/.well-known/jwks.json"
        );
        let (interfaces, card, _) = urls(&c, "helper");
        assert_eq!(interfaces[0], "https://gw.example.com/a2a/team/helper/");
        assert_eq!(
            card,
            "https://gw.example.com/a2a/team/helper/.well-known/agent-card.json"
        );
    }
}
