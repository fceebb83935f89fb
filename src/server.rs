//! HTTP server assembly: the A2A routes plus operations endpoints, the tower layers,
//! and serving with graceful shutdown.

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::Binding;
use crate::handler::RequestHandler;
use crate::protocol::{AgentCapabilities, AgentCard, AgentSkill};
use crate::transport::agent_card::CardDocument;
use crate::transport::{AppState, TransportConfig, a2a_routes};

/// A readiness probe: `Ok(())` when the gateway can serve, `Err(reason)` otherwise.
pub type ReadinessCheck =
    Arc<dyn Fn() -> futures::future::BoxFuture<'static, Result<(), String>> + Send + Sync>;

impl AppState {
    /// State for `handler` serving `card`.
    pub fn new(handler: RequestHandler, card: AgentCard, config: TransportConfig) -> Self {
        Self {
            handler,
            card: Arc::new(CardDocument::new(card)),
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
/// (the store answers and `ready` passes; 503 with the reason otherwise), with a
/// panic guard that answers 500 without internals; and, when the `grpc` binding is
/// served without a listener of its own, gRPC calls routed by their content type
/// ([`grpc::alongside`](crate::transport::grpc::alongside)).
pub fn router(state: AppState, ready: Option<ReadinessCheck>) -> Router {
    let grpc = (state.config.serves(crate::config::Binding::Grpc)
        && !state.config.grpc_own_listener)
        .then(|| crate::transport::grpc::router(state.clone()));
    let http = http_router(state, ready);
    match grpc {
        Some(grpc) => crate::transport::grpc::alongside(http, grpc),
        None => http,
    }
}

fn http_router(state: AppState, ready: Option<ReadinessCheck>) -> Router {
    let ops = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state((state.handler.clone(), ready));
    a2a_routes(state)
        .merge(ops)
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                tracing::error!("request handler panicked");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal error\n").into_response()
            },
        ))
}

async fn readyz(
    State((handler, ready)): State<(RequestHandler, Option<ReadinessCheck>)>,
) -> Response {
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
    (StatusCode::OK, "ready\n").into_response()
}

/// Longest time a client may take to send a request's headers (HTTP/1.1); slower
/// connections are closed (a "slowloris" client cannot hold them forever).
pub const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Serves `app` on `listener` (HTTP/1.1 and h2c) until `shutdown` resolves, then
/// stops accepting and lets in-flight requests finish. Request headers must arrive
/// within [`HEADER_READ_TIMEOUT`].
///
/// # Errors
/// None today: accept errors are logged and the loop goes on.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_connections(
        listener,
        app,
        shutdown,
        |tcp, _peer| async move { Some(tcp) },
    )
    .await
}

/// The accept loop shared by plain HTTP and TLS: accepts TCP connections (with
/// `TCP_NODELAY`), turns each into a byte stream with `handshake` (`None` drops it),
/// and serves HTTP/1.1 or HTTP/2 on it with `app`, the peer address available to
/// handlers as `ConnectInfo`. On `shutdown` it stops accepting and waits for open
/// connections to finish.
pub(crate) async fn serve_connections<H, Fut, Io>(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    handshake: H,
) -> std::io::Result<()>
where
    H: Fn(tokio::net::TcpStream, std::net::SocketAddr) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Option<Io>> + Send + 'static,
    Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use tower::ServiceExt;
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder.http2().timer(TokioTimer::new());
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Small JSON replies and SSE frames must not wait for Nagle's algorithm.
        let _ = tcp.set_nodelay(true);
        let (app, builder, handshake) = (app.clone(), builder.clone(), handshake.clone());
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let Some(io) = handshake(tcp, peer).await else {
                return;
            };
            let service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let mut req = req.map(axum::body::Body::new);
                    req.extensions_mut()
                        .insert(axum::extract::ConnectInfo(peer));
                    app.clone().oneshot(req)
                });
            let conn = builder
                .serve_connection_with_upgrades(TokioIo::new(io), service)
                .into_owned();
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
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
        _ = ctrl_c => {}
        _ = term => {}
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
