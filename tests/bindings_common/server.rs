//! A gateway on 127.0.0.1:0 serving every binding (gRPC beside HTTP on the same port),
//! in front of [`Scripted`].

use std::sync::Arc;

use a2a_gateway::executor::{
    AgentExecutor, EventQueue, ExecutorError, RequestContext, TaskUpdater,
};
use a2a_gateway::protocol::{AgentCard, Part};
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
///   COMPLETED.
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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let gate = Arc::new(Notify::new());
    let config = HandlerConfig {
        extended_agent_card: Some(extended_card(&url)),
        extended_agent_card_enabled: true,
        ..HandlerConfig::default()
    };
    let handler = RequestHandler::new(Arc::new(Scripted { gate: gate.clone() }), store, config);
    let mut card = server::simple_card("scripted", "scripted agent", &url, vec![]);
    card.supported_interfaces =
        a2a_gateway::transport::interfaces::supported_interfaces(&url, &transport.bindings, None);
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
    }
}

impl Server {
    /// A client for every interface the card declares, in the card's order (gRPC at the
    /// card's `host:port`, h2c on the HTTP port).
    pub fn bindings(&self) -> Vec<Box<dyn Binding>> {
        self.card
            .supported_interfaces
            .iter()
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
