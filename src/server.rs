//! HTTP server assembly: the A2A routes plus operations endpoints, the tower layers,
//! and serving with graceful shutdown.

mod connection;
pub mod limits;
mod spell;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use connection::{GuardedBody, Lane, TrackedIo, Tracker};
pub use limits::ConnectionLimits;
use spell::Spell;

use crate::config::Binding;
use crate::handler::RequestHandler;
use crate::protocol::{AgentCapabilities, AgentCard, AgentSkill};
use crate::telemetry::metrics::{
    ACCEPT_ERRORS, CONNECTIONS_OVER_LIMIT, CONNECTIONS_TIMED_OUT, OPEN_CONNECTIONS,
};
use crate::transport::agent_card::{CardDocument, LiveCard};
use crate::transport::{AppState, TransportConfig, a2a_routes};

/// A readiness probe: `Ok(())` when the gateway can serve, `Err(reason)` otherwise.
pub type ReadinessCheck =
    Arc<dyn Fn() -> futures::future::BoxFuture<'static, Result<(), String>> + Send + Sync>;

impl AppState {
    /// State for `handler` serving `card`.
    pub fn new(handler: RequestHandler, card: AgentCard, config: TransportConfig) -> Self {
        Self {
            handler,
            card: Arc::new(LiveCard::new(CardDocument::render(
                card,
                std::time::SystemTime::now(),
                config.card_v03_fields,
            ))),
            config: Arc::new(config),
            shutdown: CancellationToken::new(),
        }
    }
}

/// A minimal valid card for an agent reachable over JSON-RPC at `url`, over HTTP+JSON
/// at `url` + [`REST_PATH`](crate::transport::rest::REST_PATH) and over gRPC at `url`'s
/// `host:port` (the bindings [`router`] serves by default).
pub fn simple_card(name: &str, description: &str, url: &str, skills: Vec<AgentSkill>) -> AgentCard {
    AgentCard {
        name: name.into(),
        description: description.into(),
        supported_interfaces: crate::transport::interfaces::supported_interfaces(
            url,
            &Binding::ALL,
            None,
        ),
        provider: None,
        version: env!("CARGO_PKG_VERSION").into(),
        documentation_url: None,
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extensions: vec![],
            extended_agent_card: Some(false),
        },
        security_schemes: Default::default(),
        security_requirements: vec![],
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        skills,
        icon_url: None,
    }
}

/// The whole router: A2A routes, `GET /healthz` (process alive), `GET /readyz`
/// (the handler is not shutting down, the store answers and `ready` passes; 503 with
/// the reason otherwise), with a
/// panic guard that answers 500 without internals; and, when the `grpc` binding is
/// served without a listener of its own, gRPC calls routed by their content type
/// ([`grpc::alongside`](crate::transport::grpc::alongside)).
pub fn router(state: AppState, ready: Option<ReadinessCheck>) -> Router {
    router_with_agents(state, ready, AgentReadiness::default())
}

/// The agents of `[agents.<id>]` whose readiness `GET /readyz` reports: it names each
/// one whose check fails without failing itself (see [`router_with_agents`]).
pub type AgentReadiness = crate::transport::agents::AgentRoutes;

/// [`router`] for a gateway that also serves `agents` under their prefixes: `GET
/// /readyz` stays 200 while only some of them are not ready, and names each of those
/// on a line `agent <id> not ready: <reason>` (each agent's own `<prefix>readyz`
/// answers 503 then; see `docs/agents.md`).
pub fn router_with_agents(
    state: AppState,
    ready: Option<ReadinessCheck>,
    agents: AgentReadiness,
) -> Router {
    let grpc = (state.config.serves(crate::config::Binding::Grpc)
        && !state.config.grpc_own_listener)
        .then(|| crate::transport::grpc::router(state.clone()));
    let http = http_router(state, ready, agents);
    match grpc {
        Some(grpc) => crate::transport::grpc::alongside(http, grpc),
        None => http,
    }
}

fn http_router(state: AppState, ready: Option<ReadinessCheck>, agents: AgentReadiness) -> Router {
    let ops = ops_routes(&state, ready, agents);
    guarded(a2a_routes(state).merge(ops))
}

/// `GET /healthz` and `GET /readyz` over `state`'s handler and `ready`.
fn ops_routes(state: &AppState, ready: Option<ReadinessCheck>, agents: AgentReadiness) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move |s| {
                let agents = agents.clone();
                async move { readyz_naming(s, &agents).await }
            }),
        )
        .with_state((state.handler.clone(), ready, state.config.auth.clone()))
}

/// [`readyz`], and when it is 200, each of `agents` whose check fails named on a line of
/// its own (the status stays 200: the others are served).
async fn readyz_naming(state: State<ReadyState>, agents: &AgentReadiness) -> Response {
    let response = readyz(state).await;
    let agents = agents.agents();
    if agents.is_empty() || response.status() != StatusCode::OK {
        return response;
    }
    let results = futures::future::join_all(agents.iter().filter_map(|a| {
        let check = a.ready.clone()?;
        Some(async move { (&a.id, check().await) })
    }))
    .await;
    let failing: Vec<String> = results
        .into_iter()
        .filter_map(|(id, r)| r.err().map(|why| format!("agent {id} not ready: {why}")))
        .collect();
    if failing.is_empty() {
        return response;
    }
    let body = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let mut text = String::from_utf8_lossy(&body).into_owned();
    for line in failing {
        text.push_str(&line);
        text.push('\n');
    }
    (StatusCode::OK, text).into_response()
}

/// What `GET /readyz` reads.
type ReadyState = (
    RequestHandler,
    Option<ReadinessCheck>,
    crate::identity::Authenticator,
);

/// `router` behind the panic guard: a panicking handler answers 500 without internals.
fn guarded(router: Router) -> Router {
    router.layer(tower_http::catch_panic::CatchPanicLayer::custom(
        |_: Box<dyn std::any::Any + Send>| {
            tracing::error!("request handler panicked");
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error\n").into_response()
        },
    ))
}

/// The routes of one agent of several, relative to its path prefix (see
/// [`crate::transport::agents`]): its A2A routes (HTTP bindings; gRPC is routed by
/// the gateway's own router) and its own `GET readyz` (this agent's handler and
/// `ready`, e.g. its upstream's credentials), behind the panic guard.
pub fn agent_router(state: AppState, ready: Option<ReadinessCheck>) -> Router {
    let ready_route = Router::new().route("/readyz", get(readyz)).with_state((
        state.handler.clone(),
        ready,
        state.config.auth.clone(),
    ));
    guarded(a2a_routes(state).merge(ready_route))
}

/// The gateway's own routes when no agent is served at `/` (only `[agents.*]`):
/// `GET /healthz`, `GET /readyz` (over `state`'s handler, store and `ready`), and 404
/// for anything else.
pub fn ops_router(
    state: AppState,
    ready: Option<ReadinessCheck>,
    agents: AgentReadiness,
) -> Router {
    guarded(ops_routes(&state, ready, agents).fallback(|| async {
        (
            StatusCode::NOT_FOUND,
            "no agent is served at this path; GET /agents lists the agents\n",
        )
    }))
}

async fn readyz(State((handler, ready, auth)): State<ReadyState>) -> Response {
    if handler.is_closing() {
        // Shutdown has begun: new messages are refused while running tasks finish, so
        // a load balancer should send them to another instance now.
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting down: no new messages; running tasks finish within the shutdown grace\n",
        )
            .into_response();
    }
    if let Err(e) = handler.store().ping().await {
        tracing::warn!(error = %e, "readiness: the task store is unreachable or takes no writes");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "task store unavailable: unreachable or not taking writes (the log says why)\n",
        )
            .into_response();
    }
    if let Some(check) = ready
        && let Err(reason) = check().await
    {
        return (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")).into_response();
    }
    match auth.readiness() {
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")).into_response(),
        Ok(Some(note)) => (StatusCode::OK, format!("ready\n{note}\n")).into_response(),
        Ok(None) => (StatusCode::OK, "ready\n").into_response(),
    }
}

/// Default longest time a client may take to send a request's head (see
/// [`ConnectionLimits::header_timeout`]); slower connections are closed, so a
/// "slowloris" client cannot hold them forever.
pub const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Serves `app` on `listener` (HTTP/1.1 and h2c) under the default [`ConnectionLimits`]
/// until `shutdown` resolves; see [`serve_with_limits`].
///
/// # Errors
/// None today: accept errors are logged and the loop goes on.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with_limits(listener, app, ConnectionLimits::default(), shutdown).await
}

/// Serves `app` on `listener` (HTTP/1.1 and h2c) under `limits` until `shutdown`
/// resolves, then stops accepting, asks open connections to close and waits for
/// in-flight requests to finish.
///
/// # Errors
/// None today: accept errors are logged and the loop goes on.
pub async fn serve_with_limits(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_connections(listener, app, limits, shutdown, |tcp, _peer| async move {
        Some(tcp)
    })
    .await
}

/// One open connection slot; frees it when dropped.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(open: &Arc<AtomicUsize>) -> Self {
        let n = open.fetch_add(1, Ordering::Relaxed) + 1;
        metrics::gauge!(OPEN_CONNECTIONS).set(n as f64);
        Self(open.clone())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let n = self.0.fetch_sub(1, Ordering::Relaxed) - 1;
        metrics::gauge!(OPEN_CONNECTIONS).set(n as f64);
    }
}

/// The accept loop shared by plain HTTP and TLS: accepts TCP connections (with
/// `TCP_NODELAY`), turns each into a byte stream with `handshake` (`None` drops it;
/// it must finish within the header timeout), and serves HTTP/1.1 or HTTP/2 on it
/// with `app` under `limits`, the peer address available to handlers as
/// `ConnectInfo`. Failed accepts back off (5 ms doubling to 1 s) and are logged once
/// per spell. On `shutdown` it stops accepting, asks connections to close and waits
/// for them.
pub(crate) async fn serve_connections<H, Fut, Io>(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
    handshake: H,
) -> std::io::Result<()>
where
    H: Fn(tokio::net::TcpStream, std::net::SocketAddr) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Option<Io>> + Send + 'static,
    Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    // Head deadlines are enforced per connection (see `connection`), for every
    // protocol; hyper's own HTTP/1.1 timer would also close idle keep-alive
    // connections at the header timeout.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.http2_keepalive_interval)
        .keep_alive_timeout(limits.http2_keepalive_timeout);
    let limits = Arc::new(limits);
    let lane = limits.refusal_lane();
    if let Some(soft) = limits::open_file_limit()
        && (limits.max_connections + lane) as u64 > soft
    {
        tracing::warn!(
            max_connections = limits.max_connections,
            open_file_limit = soft,
            "server.max_connections (plus its refusal lane of {lane}) exceeds the open-file \
             limit: accepts will fail before the cap is reached (raise the limit, e.g. \
             LimitNOFILE=, or lower server.max_connections)"
        );
    }
    let open = Arc::new(AtomicUsize::new(0));
    let stop = CancellationToken::new();
    let tasks = tokio_util::task::TaskTracker::new();
    let mut accept_errors = Spell::default();
    let mut over_limit = Spell::default();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    metrics::counter!(ACCEPT_ERRORS).increment(1);
                    if accept_errors.hit() {
                        tracing::warn!(
                            error = %e,
                            "accept failed; backing off (logged once until accepting works again)"
                        );
                    }
                    let wait = accept_errors.backoff();
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(wait) => continue,
                    }
                }
            },
        };
        if let Some((errors, took)) = accept_errors.end() {
            tracing::info!(
                errors,
                duration_ms = took.as_millis() as u64,
                "accepting connections again"
            );
        }
        let accepted_at = tokio::time::Instant::now();
        let open_now = open.load(Ordering::Relaxed);
        let conn_lane = if open_now < limits.max_connections {
            if let Some((connections, took)) = over_limit.end() {
                tracing::info!(
                    connections,
                    duration_ms = took.as_millis() as u64,
                    "back under server.max_connections"
                );
            }
            Lane::Normal
        } else {
            if over_limit.hit() {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "server.max_connections reached: {lane} more connections get 503 \
                     (probes still answer), the rest are closed at once (logged once until \
                     back under the limit)"
                );
            }
            if open_now >= limits.max_connections + lane {
                metrics::counter!(CONNECTIONS_OVER_LIMIT, "outcome" => "closed").increment(1);
                drop(tcp);
                continue;
            }
            metrics::counter!(CONNECTIONS_OVER_LIMIT, "outcome" => "refusal_lane").increment(1);
            Lane::Refusal
        };
        let slot = Slot::take(&open);
        // Small JSON replies and SSE frames must not wait for Nagle's algorithm.
        let _ = tcp.set_nodelay(true);
        let (app, builder, handshake) = (app.clone(), builder.clone(), handshake.clone());
        let (limits, stop) = (limits.clone(), stop.clone());
        tasks.spawn(async move {
            let _slot = slot;
            let deadline = accepted_at + limits.header_timeout;
            let io = tokio::select! {
                io = tokio::time::timeout_at(deadline, handshake(tcp, peer)) => match io {
                    Ok(Some(io)) => io,
                    Ok(None) => return,
                    Err(_) => {
                        metrics::counter!(CONNECTIONS_TIMED_OUT, "reason" => "header")
                            .increment(1);
                        return;
                    }
                },
                () = stop.cancelled() => return,
            };
            let tracker = Tracker::new();
            let service_tracker = tracker.clone();
            let service_stop = stop.clone();
            let service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let guard = service_tracker.start(req.version());
                    let refused = connection::refusal(&req, conn_lane, service_stop.is_cancelled());
                    let app = app.clone();
                    // Boxed: hyper keeps each HTTP/2 stream's future in its task, sized
                    // for its largest state, and this one (the router and middleware
                    // futures, the request) is the largest. Boxed, it is freed once the
                    // response head is sent, so an open stream (SSE) keeps only the
                    // body's state: about 0.8 KiB less per open stream (BENCHMARKS.md).
                    Box::pin(async move {
                        let resp = match refused {
                            Some(why) => connection::refusal_response(why, &req),
                            None => {
                                let mut req = req.map(axum::body::Body::new);
                                req.extensions_mut()
                                    .insert(axum::extract::ConnectInfo(peer));
                                match app.oneshot(req).await {
                                    Ok(resp) => resp,
                                    Err(never) => match never {},
                                }
                            }
                        };
                        Ok::<_, std::convert::Infallible>(
                            resp.map(|body| GuardedBody::new(body, guard)),
                        )
                    })
                });
            let conn = builder.serve_connection_with_upgrades(
                TokioIo::new(TrackedIo::new(io, tracker.clone())),
                service,
            );
            connection::supervise(conn, &tracker, &limits, accepted_at, conn_lane, &stop, peer)
                .await;
        });
    }
    drop(listener);
    stop.cancel();
    tasks.close();
    tasks.wait().await;
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    signal_received().await;
}

/// Resolves on the first SIGINT or SIGTERM, as [`shutdown_signal`]; from then on a
/// second one ends the process at once (exit status 130 when that second signal is
/// SIGINT, 143 when it is SIGTERM, after a warning in the log), without waiting for
/// the graceful shutdown the first one began: for an operator who does not want to
/// wait for its grace. What it cuts off is what a crash cuts off: the store's commits
/// are atomic, and tasks left running are closed FAILED by the next start's recovery
/// or another instance's stale-task sweep. Used by `serve` and `demo`.
pub async fn shutdown_signals() {
    signal_received().await;
    tokio::spawn(async {
        let code = signal_received().await;
        tracing::warn!(
            "a second shutdown signal: exiting now, without waiting for in-flight requests \
             (tasks still running are closed FAILED as after a crash)"
        );
        crate::telemetry::flush_log();
        std::process::exit(code);
    });
}

/// Waits for SIGINT or SIGTERM: 130 or 143 (128 + the signal's number, a shell's exit
/// status for a process it ended).
async fn signal_received() -> i32 {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => futures::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = futures::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => 130,
        _ = term => 143,
    }
}

/// Serves `executor` on `listen` with an in-memory store and a card naming that
/// address, until SIGINT or SIGTERM. Used by the examples.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve_example(
    executor: Arc<dyn crate::executor::AgentExecutor>,
    name: &str,
    description: &str,
    skills: Vec<AgentSkill>,
    listen: std::net::SocketAddr,
) -> std::io::Result<()> {
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let url = format!("http://{addr}/");
    let store = Arc::new(crate::store::MemoryTaskStore::new());
    let handler = RequestHandler::new(executor, store, crate::handler::HandlerConfig::default());
    let state = AppState::new(
        handler,
        simple_card(name, description, &url, skills),
        TransportConfig::default(),
    );
    let app = router(state.clone(), None);
    tracing::info!(%url, "serving {name}");
    println!("{name} listening on {url}");
    serve(listener, app, async move {
        shutdown_signal().await;
        state
            .handler
            .shutdown(std::time::Duration::from_secs(5))
            .await;
        state.shutdown.cancel();
    })
    .await
}
