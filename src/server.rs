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

use crate::handler::RequestHandler;
use crate::protocol::{AgentCapabilities, AgentCard, AgentInterface, AgentSkill};
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

/// A minimal valid card for an agent reachable over JSON-RPC at `url`.
pub fn simple_card(name: &str, description: &str, url: &str, skills: Vec<AgentSkill>) -> AgentCard {
    AgentCard {
        name: name.into(),
        description: description.into(),
        supported_interfaces: vec![AgentInterface {
            url: url.into(),
            protocol_binding: "JSONRPC".into(),
            protocol_version: crate::transport::jsonrpc::PROTOCOL_VERSION.into(),
            tenant: None,
        }],
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
/// panic guard that answers 500 without internals.
pub fn router(state: AppState, ready: Option<ReadinessCheck>) -> Router {
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
        tracing::warn!(error = %e, "readiness: store unreachable");
        return (StatusCode::SERVICE_UNAVAILABLE, "store unreachable\n").into_response();
    }
    if let Some(check) = ready
        && let Err(reason) = check().await
    {
        return (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")).into_response();
    }
    (StatusCode::OK, "ready\n").into_response()
}

/// Serves `app` on `listener` (HTTP/1.1 and h2c) until `shutdown` resolves, then
/// stops accepting and lets in-flight requests finish.
///
/// # Errors
/// I/O errors of the listener.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    // Small JSON replies and SSE events must not wait for Nagle's algorithm.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    // The peer address reaches handlers (for logging authentication failures).
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
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
