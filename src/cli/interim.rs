//! TEMPORARY (delete when the `upstream` branch lands): a minimal forwarder that
//! speaks the AgentCore invocation contract, so `serve` and `demo` work end to end
//! before the real `upstream::AgentCoreExecutor` exists. No retries, no per-session
//! ordering, no stop-session; the token is cached and refreshed
//! `refresh_before_expiry_secs` early, without single flight.

use std::time::Duration;

use async_trait::async_trait;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::Url;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::config::{AuthKind, HttpVersion, UpstreamConfig};
use crate::executor::{AgentExecutor, EventQueue, ExecutorError, RequestContext, TaskUpdater};
use crate::protocol::Part;

const SESSION_HEADER: &str = "x-amzn-bedrock-agentcore-runtime-session-id";

struct OAuth {
    token_url: Url,
    client_id: String,
    client_secret: SecretString,
    scope: Option<String>,
    refresh_before: Duration,
    cached: Mutex<Option<(SecretString, Instant)>>,
}

enum Auth {
    None,
    Bearer(SecretString),
    Client(Box<OAuth>),
}

/// See the module docs.
pub(crate) struct InterimForwarder {
    http: reqwest::Client,
    url: Url,
    auth: Auth,
}

impl InterimForwarder {
    pub(crate) fn new(config: &UpstreamConfig, url: Url) -> Result<Self, ExecutorError> {
        let mut builder = reqwest::Client::builder().connect_timeout(config.connect_timeout());
        if config.http_version == HttpVersion::Http2 {
            builder = builder.http2_prior_knowledge();
        }
        let auth = match config.auth.kind {
            AuthKind::None => Auth::None,
            AuthKind::Bearer => Auth::Bearer(config.auth.token.clone().ok_or("no token")?),
            AuthKind::OAuth2 => Auth::Client(Box::new(OAuth {
                token_url: config
                    .auth
                    .token_url
                    .clone()
                    .ok_or("the interim forwarder needs upstream.auth.token_url")?,
                client_id: config.auth.client_id.clone().unwrap_or_default(),
                client_secret: config
                    .auth
                    .client_secret
                    .clone()
                    .ok_or("no client secret")?,
                scope: config.auth.scope.clone(),
                refresh_before: config.auth.refresh_before_expiry(),
                cached: Mutex::new(None),
            })),
        };
        Ok(Self {
            http: builder.build()?,
            url,
            auth,
        })
    }

    async fn token(&self) -> Result<Option<SecretString>, ExecutorError> {
        let o = match &self.auth {
            Auth::None => return Ok(None),
            Auth::Bearer(t) => return Ok(Some(t.clone())),
            Auth::Client(o) => o,
        };
        let mut cached = o.cached.lock().await;
        if let Some((token, refresh_at)) = &*cached
            && Instant::now() < *refresh_at
        {
            return Ok(Some(token.clone()));
        }
        let mut form = vec![("grant_type", "client_credentials".to_owned())];
        if let Some(scope) = &o.scope {
            form.push(("scope", scope.clone()));
        }
        // A token endpoint on plain http is a local stand-in; HTTP/1.1 is fine there.
        let resp = reqwest::Client::new()
            .post(o.token_url.clone())
            .basic_auth(&o.client_id, Some(o.client_secret.expose_secret()))
            .form(&form)
            .send()
            .await
            .map_err(|e| format!("token endpoint {}: {e}", o.token_url))?;
        if !resp.status().is_success() {
            return Err(
                format!("token endpoint {} answered {}", o.token_url, resp.status()).into(),
            );
        }
        let body: Value = resp.json().await?;
        let token = body["access_token"]
            .as_str()
            .ok_or("token endpoint reply has no access_token")?;
        let lifetime = Duration::from_secs(body["expires_in"].as_u64().unwrap_or(300));
        let refresh_at = Instant::now() + lifetime.saturating_sub(o.refresh_before);
        tracing::info!(
            expires_in_secs = lifetime.as_secs(),
            "fetched an upstream access token"
        );
        let token = SecretString::from(token);
        *cached = Some((token.clone(), refresh_at));
        Ok(Some(token))
    }

    async fn forward(&self, ctx: &RequestContext, up: &TaskUpdater) -> Result<(), ExecutorError> {
        let session = {
            let c = &ctx.call_context;
            let digest = Sha256::digest(format!("{}\n{}\n{}", c.tenant, c.owner, ctx.context_id));
            format!("a2a-{}", hex(&digest))
        };
        let mut req = self
            .http
            .post(self.url.clone())
            .header(SESSION_HEADER, session)
            .header("accept", "text/event-stream, application/json")
            .json(&json!({"prompt": ctx.user_input(), "actor_id": format!("user-{}", ctx.context_id)}));
        if let Some(token) = self.token().await? {
            req = req.bearer_auth(token.expose_secret());
        }
        let resp = req.send().await?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            let msg = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_owned))
                .unwrap_or(body);
            return Err(format!("upstream answered {status}: {msg}").into());
        }
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            let v: Value = resp.json().await?;
            let text = v
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| v.to_string());
            up.add_artifact(
                vec![Part::text(text)],
                None,
                Some("response".into()),
                false,
                true,
            )
            .await?;
            return Ok(up.complete(None).await?);
        }
        let mut events = resp.bytes_stream().eventsource();
        let mut artifact: Option<String> = None;
        while let Some(ev) = events.next().await {
            let ev = ev.map_err(|e| format!("upstream stream broke: {e}"))?;
            if ev.data == "[DONE]" {
                break;
            }
            let v: Value = serde_json::from_str(&ev.data).unwrap_or(Value::String(ev.data));
            if let Some(text) = v.as_str() {
                let id = up
                    .add_artifact(
                        vec![Part::text(text)],
                        artifact.clone(),
                        Some("response".into()),
                        artifact.is_some(),
                        false,
                    )
                    .await?;
                artifact = Some(id);
            } else if v.get("a2a_control").and_then(Value::as_str) == Some("input_required") {
                let q = v["text"].as_str().unwrap_or("more input is needed");
                return Ok(up.requires_input(Some(up.new_agent_text(q))).await?);
            } else if let Some(err) = v.get("error") {
                let err = err.as_str().map_or_else(|| err.to_string(), str::to_owned);
                return Err(format!("upstream agent failed: {err}").into());
            }
        }
        if let Some(id) = artifact {
            up.add_artifact(
                vec![Part::text("")],
                Some(id),
                Some("response".into()),
                true,
                true,
            )
            .await?;
        }
        Ok(up.complete(None).await?)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[async_trait]
impl AgentExecutor for InterimForwarder {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let up = TaskUpdater::from_context(&ctx, queue);
        if ctx.current_task.is_none() {
            up.submit().await?;
        }
        up.start_work(None).await?;
        tokio::select! {
            r = self.forward(&ctx, &up) => r,
            () = ctx.cancellation().cancelled() => Ok(()),
        }
    }
}
