//! A gateway on 127.0.0.1:0 serving every binding (gRPC beside HTTP on the same port),
//! in front of [`Scripted`].

use std::sync::Arc;

use a2a_gateway::config::PushConfig;
use a2a_gateway::executor::{
    AgentExecutor, EventQueue, ExecutorError, RequestContext, TaskUpdater,
};
use a2a_gateway::protocol::{AgentCard, Part};
use a2a_gateway::push::PushService;
use a2a_gateway::server;
use a2a_gateway::store::{MemoryTaskStore, TaskStore};
use a2a_gateway::transport::{AppState, TransportConfig};
use a2a_gateway::{HandlerConfig, RequestHandler};
use async_trait::async_trait;
use tokio::sync::Notify;

use super::client::Binding;
use super::grpc::Grpc;
use super::jsonrpc::JsonRpc;
use super::rest::Rest;

/// An agent steered by the first word of the user's text:
/// - `echo <text>`: one artifact `echo: <text>`, then COMPLETED;
/// - `ask`: INPUT_REQUIRED ("which one?"); the follow-up gets an artifact
///   `got <text>` and COMPLETED;
/// - `hold`: WORKING until canceled;
/// - `gated`: artifact `part 1`, waits for [`Scripted::gate`], artifact `part 2`,
///   COMPLETED;
/// - `data N`: one artifact of one data part `{"v": [0, 0, ...]}` (N zeros), then
///   COMPLETED;
/// - `big N M`: N chunks of one artifact, each a text of M `x`s, then INPUT_REQUIRED.
/// - `chunks N`: N chunks of one artifact, chunk i the text `i;`, then COMPLETED.
pub struct Scripted {
    /// Released once per `gated` task (a permit is kept when nobody waits yet).
    pub gate: Arc<Notify>,
}

async fn artifact(u: &TaskUpdater, text: String) -> Result<(), ExecutorError> {
    u.add_artifact(
        vec![Part::text(text)],
        None,
        Some("result".into()),
        false,
        true,
    )
    .await?;
    Ok(())
}

#[async_trait]
impl AgentExecutor for Scripted {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let u = TaskUpdater::from_context(&ctx, queue);
        let text = ctx.user_input();
        if ctx.current_task.is_some() {
            u.start_work(None).await?;
            artifact(&u, format!("got {text}")).await?;
            u.complete(None).await?;
            return Ok(());
        }
        u.submit().await?;
        u.start_work(None).await?;
        let (word, rest) = text.split_once(' ').unwrap_or((text.as_str(), ""));
        match word {
            "echo" => {
                artifact(&u, format!("echo: {rest}")).await?;
                u.complete(None).await?;
            }
            "data" => {
                let zeros = vec![0; rest.parse().unwrap_or(0)];
                let part = Part::data(serde_json::json!({ "v": zeros }));
                u.add_artifact(vec![part], None, Some("data".into()), false, true)
                    .await?;
                u.complete(None).await?;
            }
            "big" => {
                let (n, m) = rest.split_once(' ').unwrap_or((rest, "0"));
                let (n, m): (usize, usize) = (n.parse().unwrap_or(0), m.parse().unwrap_or(0));
                for i in 0..n {
                    let part = Part::text("x".repeat(m));
                    u.add_artifact(vec![part], Some("big".into()), None, i > 0, i + 1 == n)
                        .await?;
                }
                u.requires_input(Some(u.new_agent_text("more?"))).await?
            }
            "chunks" => {
                let n: usize = rest.parse().unwrap_or(0);
                for i in 0..n {
                    let part = Part::text(format!("{i};"));
                    u.add_artifact(vec![part], Some("chunks".into()), None, i > 0, i + 1 == n)
                        .await?;
                }
                u.complete(None).await?;
            }
            "ask" => {
                u.requires_input(Some(u.new_agent_text("which one?")))
                    .await?
            }
            "hold" => ctx.cancellation().cancelled().await,
            "gated" => {
                artifact(&u, "part 1".into()).await?;
                self.gate.notified().await;
                artifact(&u, "part 2".into()).await?;
                u.complete(None).await?;
            }
            other => {
                u.failed(Some(u.new_agent_text(format!("unknown script {other:?}"))))
                    .await?
            }
        }
        Ok(())
    }
}

/// A running gateway.
pub struct Server {
    /// Its base URL (`http://127.0.0.1:port/`).
    pub url: String,
    /// Its public agent card.
    pub card: AgentCard,
    /// Releases `gated` tasks.
    pub gate: Arc<Notify>,
    /// Shared HTTP client.
    pub http: reqwest::Client,
    /// A webhook receiver on 127.0.0.1 (which the gateway's `allow_cidrs` opens).
    pub hooks: Receiver,
    /// The push service (`None` for a gateway built elsewhere without one).
    pub push: Option<Arc<PushService>>,
    /// Stops the push sender (`None` without a push service).
    pub stop_push: Option<tokio_util::sync::CancellationToken>,
}

/// One webhook call the receiver got.
#[derive(Debug, Clone)]
pub struct Hook {
    /// The request path (`/hook/...`).
    pub path: String,
    /// Its headers.
    pub headers: http::HeaderMap,
    /// Its body.
    pub body: axum::body::Bytes,
    /// The status the receiver answered.
    pub answered: u16,
}

/// How the receiver answers one call.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    /// The status (0: 200).
    pub status: u16,
    /// Extra headers.
    pub headers: Vec<(&'static str, String)>,
    /// Wait this long before answering.
    pub delay: std::time::Duration,
}

/// A webhook receiver on 127.0.0.1:0: records every call and answers from `replies`
/// (then 200).
#[derive(Clone)]
pub struct Receiver {
    /// Its base URL (`http://127.0.0.1:port`).
    pub url: String,
    /// Every call, in arrival order.
    pub calls: Arc<std::sync::Mutex<Vec<Hook>>>,
    /// The next answers, in order.
    pub replies: Arc<std::sync::Mutex<std::collections::VecDeque<Reply>>>,
}

impl Receiver {
    /// Starts a receiver on a fresh port.
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::start_on(listener).await
    }

    /// Starts a receiver on `listener`.
    pub async fn start_on(listener: tokio::net::TcpListener) -> Receiver {
        let url = format!("http://{}", listener.local_addr().unwrap());
        let r = Receiver {
            url,
            calls: Arc::default(),
            replies: Arc::default(),
        };
        let state = r.clone();
        let app = axum::Router::new().fallback(
            move |uri: http::Uri, headers: http::HeaderMap, body: axum::body::Bytes| {
                let state = state.clone();
                async move {
                    let reply = state
                        .replies
                        .lock()
                        .unwrap()
                        .pop_front()
                        .unwrap_or_default();
                    tokio::time::sleep(reply.delay).await;
                    let status = if reply.status == 0 { 200 } else { reply.status };
                    state.calls.lock().unwrap().push(Hook {
                        path: uri.path().to_owned(),
                        headers,
                        body,
                        answered: status,
                    });
                    let mut resp = axum::response::Response::builder().status(status);
                    for (k, v) in reply.headers {
                        resp = resp.header(k, v);
                    }
                    resp.body(axum::body::Body::empty()).unwrap()
                }
            },
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        r
    }

    /// The calls to `path`.
    pub fn calls_to(&self, path: &str) -> Vec<Hook> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|h| h.path == path)
            .cloned()
            .collect()
    }

    /// Waits (up to 20 s) until `done` holds for the calls to `path`.
    pub async fn wait_for(&self, path: &str, done: impl Fn(&[Hook]) -> bool) -> Vec<Hook> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let calls = self.calls_to(path);
            if done(&calls) {
                return calls;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the receiver did not get what was expected at {path}: {calls:#?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// The `[push]` settings of the test gateways: http allowed, 127.0.0.1 opened, short
/// backoff.
pub fn test_push_config() -> PushConfig {
    PushConfig {
        allow_http: true,
        allow_cidrs: vec!["127.0.0.1/32".into()],
        initial_backoff_ms: 50,
        poll_interval_ms: 50,
        ..PushConfig::default()
    }
}

/// The extended card the test gateway serves.
pub fn extended_card(url: &str) -> AgentCard {
    server::simple_card("scripted+", "the extended card", url, vec![])
}

/// Starts a gateway with an in-memory store (all HTTP bindings, default limits, the
/// extended card enabled).
pub async fn start() -> Server {
    start_with(TransportConfig::default()).await
}

/// [`start`] with these limits, authentication and bindings.
pub async fn start_with(transport: TransportConfig) -> Server {
    start_on(Arc::new(MemoryTaskStore::new()), transport).await
}

/// [`start_with`] over `store`.
pub async fn start_on(store: Arc<dyn TaskStore>, transport: TransportConfig) -> Server {
    start_push(store, transport, test_push_config()).await
}

/// [`start_on`] with push notifications configured by `push`.
pub async fn start_push(
    store: Arc<dyn TaskStore>,
    transport: TransportConfig,
    push: PushConfig,
) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let gate = Arc::new(Notify::new());
    let hosts = [(
        "resolves-to-loopback.test".to_owned(),
        vec!["127.0.0.1".parse().unwrap()],
    )]
    .into();
    let push = PushService::open_with_hosts(&push, store.clone(), hosts)
        .await
        .unwrap();
    let stop_push = tokio_util::sync::CancellationToken::new();
    push.spawn(stop_push.clone());
    let config = HandlerConfig {
        extended_agent_card: Some(extended_card(&url)),
        extended_agent_card_enabled: true,
        push: Some(push.clone()),
        ..HandlerConfig::default()
    };
    let handler = RequestHandler::new(Arc::new(Scripted { gate: gate.clone() }), store, config);
    let mut card = server::simple_card("scripted", "scripted agent", &url, vec![]);
    card.supported_interfaces =
        a2a_gateway::transport::interfaces::supported_interfaces(&url, &transport.bindings, None);
    card.capabilities.push_notifications = Some(true);
    let state = AppState::new(handler, card.clone(), transport);
    tokio::spawn(server::serve(
        listener,
        server::router(state, None),
        futures::future::pending(),
    ));
    Server {
        url,
        card,
        gate,
        http: reqwest::Client::new(),
        hooks: Receiver::start().await,
        push: Some(push),
        stop_push: Some(stop_push),
    }
}

impl Server {
    /// A client for every A2A 1.0 interface the card declares, in the card's order (gRPC
    /// at the card's `host:port`, h2c on the HTTP port); the 0.3 JSON-RPC entry is left
    /// to `tests/compat03.rs`.
    pub fn bindings(&self) -> Vec<Box<dyn Binding>> {
        self.card
            .supported_interfaces
            .iter()
            .filter(|i| i.protocol_version == "1.0")
            .map(|i| -> Box<dyn Binding> {
                match i.protocol_binding.as_str() {
                    "JSONRPC" => Box::new(JsonRpc {
                        url: i.url.clone(),
                        http: self.http.clone(),
                    }),
                    "HTTP+JSON" => Box::new(Rest {
                        url: i.url.clone(),
                        http: self.http.clone(),
                        subscribe_with_get: false,
                    }),
                    "GRPC" => Box::new(Grpc::new(&i.url)),
                    other => panic!("no test client for {other}"),
                }
            })
            .collect()
    }

    /// The card's HTTP+JSON interface URL.
    pub fn rest_url(&self) -> String {
        self.card
            .supported_interfaces
            .iter()
            .find(|i| i.protocol_binding == "HTTP+JSON")
            .expect("the card declares HTTP+JSON")
            .url
            .clone()
    }
}
