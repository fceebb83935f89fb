//! Several agents on one listener (`[agents.<id>]`, `docs/agents.md`): each agent is a
//! whole set of A2A routes ([`super::a2a_routes`] over its own [`AppState`]) mounted
//! under its path prefix, and `GET /agents` lists them.
//!
//! A request whose path starts with an agent's prefix (`/agents/reviewer/...`, or the
//! prefix without its trailing `/`) goes to that agent's routes with the prefix taken
//! off: `/agents/reviewer/` is its JSON-RPC endpoint, `/agents/reviewer/a2a/rest/...`
//! its HTTP+JSON binding, `/agents/reviewer/.well-known/agent-card.json` its card.
//! Every other request goes to the gateway's own routes (the agent at `/`, `/healthz`,
//! `/readyz`, `/metrics`). The table can be replaced while serving
//! ([`AgentRoutes::replace`], the `SIGHUP` reload): a request already routed finishes
//! on the routes it started with; a request to a removed agent gets 404.

use std::sync::{Arc, RwLock};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tower::ServiceExt;

use super::AppState;

/// The path of the agent index ([`index`]).
pub const INDEX_PATH: &str = "/agents";

/// An agent's readiness check (the same type as `server::ReadinessCheck`): `Ok(())`
/// when its upstream can be used, `Err(reason)` otherwise.
pub type AgentReady =
    Arc<dyn Fn() -> futures::future::BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// One agent served under a path prefix.
#[derive(Clone)]
pub struct MountedAgent {
    /// The agent id (`[agents.<id>]`).
    pub id: String,
    /// The path prefix on this listener, starting and ending with `/`.
    pub prefix: String,
    /// The absolute URL of its public card (behind `server.public_url`).
    pub card_url: String,
    /// Its state: handler, card, transport settings (with its id and callers).
    pub state: AppState,
    /// Its routes, relative to the prefix.
    pub router: Router,
    /// Its upstream's readiness, if it has a check (`GET /readyz` names it when failing).
    pub ready: Option<AgentReady>,
}

impl std::fmt::Debug for MountedAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MountedAgent")
            .field("id", &self.id)
            .field("prefix", &self.prefix)
            .field("card_url", &self.card_url)
            .finish_non_exhaustive()
    }
}

/// An entry of the index for the agent at `/` (it has no prefix).
#[derive(Clone, Debug)]
pub struct RootEntry {
    /// Its public card (the index shows the name it has now).
    pub card: Arc<super::agent_card::LiveCard>,
    /// The absolute URL of its public card.
    pub card_url: String,
}

/// The table of mounted agents. Cheap to clone; every clone sees
/// [`replace`](Self::replace).
#[derive(Clone, Debug, Default)]
pub struct AgentRoutes {
    table: Arc<RwLock<Arc<Table>>>,
}

#[derive(Debug, Default)]
struct Table {
    root: Option<RootEntry>,
    agents: Vec<MountedAgent>,
    /// Agents replaced or removed by [`AgentRoutes::replace`]: no longer routed to, kept
    /// so that shutdown still gives their running tasks the grace.
    retired: Vec<MountedAgent>,
    /// Each agent's prefix without its trailing `/`, to its place in `agents`: a request
    /// path is looked up once per `/` in it, whatever the number of agents.
    by_prefix: std::collections::HashMap<String, usize>,
}

impl Table {
    fn new(root: Option<RootEntry>, agents: Vec<MountedAgent>, retired: Vec<MountedAgent>) -> Self {
        let by_prefix = agents
            .iter()
            .enumerate()
            .map(|(i, a)| (a.prefix[..a.prefix.len() - 1].to_owned(), i))
            .collect();
        Self {
            root,
            agents,
            retired,
            by_prefix,
        }
    }
}

impl AgentRoutes {
    /// A table of `agents`, with `root` listed first in the index when an agent is
    /// served at `/`.
    pub fn new(root: Option<RootEntry>, agents: Vec<MountedAgent>) -> Self {
        Self {
            table: Arc::new(RwLock::new(Arc::new(Table::new(root, agents, Vec::new())))),
        }
    }

    fn snapshot(&self) -> Arc<Table> {
        self.table.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The agents mounted now.
    pub fn agents(&self) -> Vec<MountedAgent> {
        self.snapshot().agents.clone()
    }

    /// Every agent mounted now or before a [`replace`](Self::replace): whose handlers
    /// shutdown waits for.
    pub fn all_ever(&self) -> Vec<MountedAgent> {
        let table = self.snapshot();
        table.agents.iter().chain(&table.retired).cloned().collect()
    }

    /// Replaces the mounted agents (the entry for `/` stays). Requests routed before
    /// keep the routes they were given; an agent no longer listed is retired (see
    /// [`all_ever`](Self::all_ever)).
    pub fn replace(&self, agents: Vec<MountedAgent>) {
        let mut table = self.table.write().unwrap_or_else(|p| p.into_inner());
        let mut retired = table.retired.clone();
        for old in &table.agents {
            if !agents
                .iter()
                .any(|a| Arc::ptr_eq(&a.state.config, &old.state.config))
            {
                retired.push(old.clone());
            }
        }
        *table = Arc::new(Table::new(table.root.clone(), agents, retired));
    }

    /// The routes of the agent whose prefix `path` is under, and the path within
    /// them (`/` for the prefix itself, with or without its trailing `/`).
    fn route(&self, path: &str) -> Option<(Router, String)> {
        let table = self.snapshot();
        if table.by_prefix.is_empty() {
            return None;
        }
        // Prefixes never overlap: at most one of the path's leading parts is one.
        let ends = path
            .match_indices('/')
            .map(|(i, _)| i)
            .filter(|&i| i > 0)
            .chain(std::iter::once(path.len()));
        for end in ends {
            if let Some(&i) = table.by_prefix.get(&path[..end]) {
                let rest = if end == path.len() { "/" } else { &path[end..] };
                return Some((table.agents[i].router.clone(), rest.to_owned()));
            }
        }
        None
    }
}

/// `router` with the agents of `routes` mounted before it and [`INDEX_PATH`] answered
/// by [`index`].
pub fn mount(router: Router, routes: AgentRoutes) -> Router {
    router
        .route(
            INDEX_PATH,
            axum::routing::get(index).with_state(routes.clone()),
        )
        .layer(axum::middleware::from_fn_with_state(routes, dispatch))
}

/// Sends a request under an agent's prefix to that agent's routes, the prefix taken
/// off; any other request to `next`.
async fn dispatch(State(routes): State<AgentRoutes>, req: Request, next: Next) -> Response {
    let Some((router, rest)) = routes.route(req.uri().path()) else {
        return next.run(req).await;
    };
    let (mut parts, body) = req.into_parts();
    let path_and_query = match parts.uri.query() {
        Some(q) => format!("{rest}?{q}"),
        None => rest,
    };
    let mut uri = parts.uri.clone().into_parts();
    uri.path_and_query = path_and_query.parse().ok();
    match Uri::from_parts(uri) {
        Ok(u) => parts.uri = u,
        Err(_) => return StatusCode::BAD_REQUEST.into_response(),
    }
    match router.oneshot(Request::from_parts(parts, body)).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// One entry of `GET /agents`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct IndexEntry<'a> {
    /// The agent id (`""` for the agent at `/`).
    id: &'a str,
    /// The card's `name`.
    name: String,
    /// Where its public card is.
    card_url: &'a str,
}

/// `GET /agents`: `{"agents": [{"id", "name", "cardUrl"}]}`, the agent at `/` first
/// (id `""`), then the others by id. Public, like the cards it points to; a client
/// resolves an agent from its `cardUrl` as from any agent card URL.
async fn index(State(routes): State<AgentRoutes>) -> Response {
    let table = routes.snapshot();
    let mut entries: Vec<IndexEntry<'_>> = Vec::new();
    if let Some(root) = &table.root {
        entries.push(IndexEntry {
            id: "",
            name: root.card.get().card.name.clone(),
            card_url: &root.card_url,
        });
    }
    for a in &table.agents {
        entries.push(IndexEntry {
            id: &a.id,
            name: a.state.card.get().card.name.clone(),
            card_url: &a.card_url,
        });
    }
    let body = serde_json::json!({ "agents": entries }).to_string();
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The gRPC routes of agent `id` on its own port (`[agents.<id>] grpc_listen`), following
/// the table: each call is served by the gRPC service over the agent's state in
/// `routes` now (its callers, card and upstream as the last `SIGHUP` reload left them;
/// the service is built once per reload of the agent), and a call to an agent a reload
/// removed is refused with gRPC status NOT_FOUND (code 5), as its HTTP routes answer
/// 404. A call already running finishes where it started.
pub fn grpc_for(routes: AgentRoutes, id: String) -> Router {
    // The service over the agent's state as last seen (by its transport settings, which
    // a reload replaces whenever it changes the agent).
    type Built = Option<(Arc<super::TransportConfig>, Router)>;
    let built: Arc<std::sync::Mutex<Built>> = Arc::default();
    Router::new().fallback(move |req: Request| {
        let (routes, id, built) = (routes.clone(), id.clone(), built.clone());
        async move {
            let Some(agent) = routes.agents().into_iter().find(|a| a.id == id) else {
                return tonic::Status::not_found(format!(
                    "the agent {id} is no longer served by this gateway (removed by a reload)"
                ))
                .into_http::<axum::body::Body>();
            };
            let router = {
                let mut b = built.lock().unwrap_or_else(|p| p.into_inner());
                match &*b {
                    Some((config, router)) if Arc::ptr_eq(config, &agent.state.config) => {
                        router.clone()
                    }
                    _ => {
                        let router = super::grpc::router(agent.state.clone());
                        *b = Some((agent.state.config.clone(), router.clone()));
                        router
                    }
                }
            };
            match router.oneshot(req).await {
                Ok(resp) => resp,
                Err(never) => match never {},
            }
        }
    })
}
