//! The A2A client behind `send`, `get`, `list`, `cancel`, `subscribe` and `card`: one
//! [`Connection`] (flags shared by every client command), the binding chosen from the
//! agent card (JSON-RPC or HTTP+JSON, the card's order; or forced with `--binding`),
//! and every answer checked to be an A2A answer before it is used.
//!
//! Requests and results are the protocol types of [`crate::protocol`], never ad-hoc
//! JSON: a result that does not decode as what the operation returns (`{}`, `null`, an
//! HTML page, a 404) is an error with a message, so the command exits non-zero.
//! Transport failures say why (connection refused, unknown certificate issuer,
//! timeout). Streams are decoded with `sse-stream`, the parser the upstream uses.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::CliError;
use crate::config::LogUrl;
use crate::protocol::{
    AgentCard, CancelTaskRequest, GetTaskRequest, ListTasksRequest, SendMessageRequest,
    StreamResponse, SubscribeToTaskRequest,
};

/// Where the agent card is, relative to the URL given.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// Which binding to speak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum BindingChoice {
    /// The first JSON-RPC or HTTP+JSON interface the agent card lists.
    #[default]
    Auto,
    /// JSON-RPC 2.0, POSTed to `--url` itself (no card is read).
    Jsonrpc,
    /// HTTP+JSON with `--url` as the interface URL (e.g. `http://host/a2a/rest`; no
    /// card is read).
    Rest,
}

/// The flags every client command takes.
#[derive(Clone, Debug, Args)]
pub struct Connection {
    /// The agent: its base URL (the card is read from `.well-known/agent-card.json`
    /// under it: `http://host/agents/reviewer/` reads
    /// `http://host/agents/reviewer/.well-known/agent-card.json`), its card URL itself,
    /// or with `--binding` the interface URL itself.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080/")]
    pub url: Url,
    /// The binding: `auto` reads the agent card and takes its first JSON-RPC or
    /// HTTP+JSON interface.
    #[arg(long, value_enum, default_value_t = BindingChoice::Auto)]
    pub binding: BindingChoice,
    /// API key sent as `Authorization: Bearer KEY`, for a gateway with
    /// `[server.auth] kind = "api_key"`. Prefer the environment variable: a flag is
    /// visible to other local users in the process list.
    #[arg(
        long,
        value_name = "KEY",
        env = crate::config::API_KEY_ENV,
        hide_env_values = true,
        value_parser = |s: &str| Ok::<_, std::convert::Infallible>(SecretString::from(s))
    )]
    pub api_key: Option<SecretString>,
    /// PEM file of CA certificates to trust besides the built-in roots (a private CA).
    #[arg(long, value_name = "PATH", env = "SSL_CERT_FILE")]
    pub ca_file: Option<PathBuf>,
    /// Connect timeout, and the whole-request timeout of calls that are not streams.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub timeout_secs: u64,
}

/// The endpoint chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A JSON-RPC URL.
    JsonRpc(Url),
    /// An HTTP+JSON interface URL (the routes are relative to it).
    Rest(Url),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::JsonRpc(u) => write!(f, "JSON-RPC {u}"),
            Endpoint::Rest(u) => write!(f, "HTTP+JSON {u}"),
        }
    }
}

/// A connected client: the HTTP client, the chosen endpoint and the credentials.
pub struct Client {
    http: reqwest::Client,
    /// The endpoint every call goes to.
    pub endpoint: Endpoint,
    api_key: Option<SecretString>,
    timeout: Duration,
}

/// One decoded event of a stream, with its SSE `id` (the resume cursor).
#[derive(Debug)]
pub struct Event {
    /// The SSE `id:` of the event, to resume after it with `--last-event-id`.
    pub id: Option<String>,
    /// The event.
    pub response: StreamResponse,
}

/// A stream of events; an item is an error when the stream breaks or carries
/// something that is not an A2A event (the stream ends after it).
pub type Events = BoxStream<'static, Result<Event, CliError>>;

/// A unary operation and its request.
enum Unary<'a> {
    Send(&'a SendMessageRequest),
    Get(&'a GetTaskRequest),
    List(&'a ListTasksRequest),
    Cancel(&'a CancelTaskRequest),
}

/// A streaming operation and its request.
pub enum Streaming<'a> {
    /// SendStreamingMessage.
    Send(&'a SendMessageRequest),
    /// SubscribeToTask.
    Subscribe(&'a SubscribeToTaskRequest),
}

impl Connection {
    /// The HTTP client: the built-in roots plus `--ca-file`, the connect timeout.
    ///
    /// # Errors
    /// The CA file cannot be read or holds no PEM certificate.
    pub fn http(&self) -> Result<reqwest::Client, CliError> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(self.timeout_secs.max(1)))
            .user_agent(concat!("a2a-gateway-cli/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = &self.ca_file {
            let pem = std::fs::read(path)
                .map_err(|e| format!("--ca-file {}: cannot read: {e}", path.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .ok()
                .filter(|c| !c.is_empty())
                .ok_or_else(|| format!("--ca-file {}: no PEM certificate in it", path.display()))?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        Ok(builder.build()?)
    }

    /// The agent card URL for `--url`: `--url` itself when it names a card
    /// (`.../.well-known/agent-card.json` or `.../agent.json`), else [`CARD_PATH`] under
    /// its path (an agent served under a prefix, `docs/agents.md`, has its card there).
    pub fn card_url(&self) -> Url {
        card_url_for(&self.url)
    }

    /// Reads the agent card at [`card_url`](Self::card_url).
    ///
    /// # Errors
    /// Transport failures, a non-200 answer, or a body that is not an agent card.
    pub async fn card(&self, http: &reqwest::Client) -> Result<(AgentCard, Value), CliError> {
        let url = self.card_url();
        let url_shown = LogUrl(url.as_str());
        let resp = http
            .get(url.clone())
            .header("accept", "application/json")
            .timeout(Duration::from_secs(self.timeout_secs.max(1)))
            .send()
            .await
            .map_err(|e| transport(&url, &e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| transport(&url, &e))?;
        if !status.is_success() {
            return Err(format!(
                "{url_shown}: no A2A agent card here (HTTP {}{}); with --binding jsonrpc or \
                 --binding rest, --url is used as the endpoint without a card",
                status.as_u16(),
                excerpt(&text)
            )
            .into());
        }
        let raw: Value = serde_json::from_str(&text).map_err(|_| {
            format!(
                "{url_shown}: not an A2A agent card (not JSON{})",
                excerpt(&text)
            )
        })?;
        let card = serde_json::from_value(card_1_0(raw.clone()))
            .map_err(|e| format!("{url_shown}: not an A2A agent card: {e}"))?;
        Ok((card, raw))
    }

    /// Connects: reads the card (with `--binding auto`) and picks the endpoint.
    ///
    /// # Errors
    /// See [`card`](Self::card); a card with neither a JSON-RPC nor an HTTP+JSON
    /// interface.
    pub async fn connect(&self) -> Result<Client, CliError> {
        let http = self.http()?;
        let endpoint = match self.binding {
            BindingChoice::Jsonrpc => Endpoint::JsonRpc(self.url.clone()),
            BindingChoice::Rest => Endpoint::Rest(self.url.clone()),
            BindingChoice::Auto => {
                let (card, _) = self.card(&http).await?;
                pick(&card).map_err(|e| format!("{}: {e}", LogUrl(self.card_url().as_str())))?
            }
        };
        Ok(Client {
            http,
            endpoint,
            api_key: self
                .api_key
                .clone()
                .filter(|k| !k.expose_secret().is_empty()),
            timeout: Duration::from_secs(self.timeout_secs.max(1)),
        })
    }
}

/// The 1.0 shape of a card that also carries the A2A 0.3 fields: each security
/// scheme keeps only its 1.0 `{"<kind>SecurityScheme": {…}}` wrapper (a card served
/// for both versions, as this gateway's, puts the 0.3 `type`, `scheme`, … beside it).
fn card_1_0(mut card: Value) -> Value {
    if let Some(Value::Object(schemes)) = card.get_mut("securitySchemes") {
        for scheme in schemes.values_mut() {
            if let Value::Object(s) = scheme
                && s.keys().any(|k| k.ends_with("SecurityScheme"))
            {
                s.retain(|k, _| k.ends_with("SecurityScheme"));
            }
        }
    }
    card
}

/// The first JSON-RPC or HTTP+JSON interface of `card`, in the card's order, that is
/// not of an A2A 0.x version (the client speaks 1.0; the gateway's card also lists its
/// 0.3 interface).
///
/// # Errors
/// The card offers neither (the message names what it offers).
pub fn pick(card: &AgentCard) -> Result<Endpoint, String> {
    for i in &card.supported_interfaces {
        let Ok(url) = Url::parse(&i.url) else {
            continue;
        };
        if i.protocol_version.starts_with("0.") {
            continue;
        }
        match i.protocol_binding.as_str() {
            "JSONRPC" => return Ok(Endpoint::JsonRpc(url)),
            "HTTP+JSON" => return Ok(Endpoint::Rest(url)),
            _ => {}
        }
    }
    let offered: Vec<&str> = card
        .supported_interfaces
        .iter()
        .map(|i| i.protocol_binding.as_str())
        .collect();
    Err(format!(
        "the card offers no JSON-RPC or HTTP+JSON interface (it offers: {})",
        if offered.is_empty() {
            "none".to_owned()
        } else {
            offered.join(", ")
        }
    ))
}

impl Client {
    /// SendMessage.
    ///
    /// # Errors
    /// See [`Client`]'s module docs: transport, protocol errors, non-A2A answers.
    pub async fn send(
        &self,
        req: &SendMessageRequest,
    ) -> Result<crate::protocol::SendMessageResponse, CliError> {
        self.unary(Unary::Send(req), "a SendMessage result").await
    }

    /// GetTask.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub async fn get(&self, req: &GetTaskRequest) -> Result<crate::protocol::Task, CliError> {
        self.unary(Unary::Get(req), "a Task").await
    }

    /// ListTasks.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub async fn list(
        &self,
        req: &ListTasksRequest,
    ) -> Result<crate::protocol::ListTasksResponse, CliError> {
        self.unary(Unary::List(req), "a ListTasks result").await
    }

    /// CancelTask.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub async fn cancel(&self, req: &CancelTaskRequest) -> Result<crate::protocol::Task, CliError> {
        self.unary(Unary::Cancel(req), "a Task").await
    }

    fn authorize(&self, mut req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key.expose_secret());
        }
        req.header("A2A-Version", "1.0")
    }

    fn rest_url(base: &Url, segments: &[&str]) -> Url {
        let mut url = base.clone();
        {
            let mut path = url.path_segments_mut().expect("an http(s) URL has a path");
            path.pop_if_empty();
            for s in segments {
                path.push(s);
            }
        }
        url
    }

    async fn unary<T: DeserializeOwned>(&self, op: Unary<'_>, what: &str) -> Result<T, CliError> {
        let (url, req) = match (&self.endpoint, &op) {
            (Endpoint::JsonRpc(url), _) => {
                let (method, params) = match op {
                    Unary::Send(r) => ("SendMessage", to_value(r)),
                    Unary::Get(r) => ("GetTask", to_value(r)),
                    Unary::List(r) => ("ListTasks", to_value(r)),
                    Unary::Cancel(r) => ("CancelTask", to_value(r)),
                };
                let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
                (url.clone(), self.http.post(url.clone()).json(&body))
            }
            (Endpoint::Rest(base), Unary::Send(r)) => {
                let url = Self::rest_url(base, &["message:send"]);
                (url.clone(), self.http.post(url).json(r))
            }
            (Endpoint::Rest(base), Unary::Get(r)) => {
                let mut url = Self::rest_url(base, &["tasks", &r.id]);
                if let Some(n) = r.history_length {
                    url.query_pairs_mut()
                        .append_pair("historyLength", &n.to_string());
                }
                (url.clone(), self.http.get(url))
            }
            (Endpoint::Rest(base), Unary::List(r)) => {
                let mut url = Self::rest_url(base, &["tasks"]);
                list_query(&mut url, r);
                (url.clone(), self.http.get(url))
            }
            (Endpoint::Rest(base), Unary::Cancel(r)) => {
                let url = Self::rest_url(base, &["tasks", &format!("{}:cancel", r.id)]);
                let body = json!({"metadata": r.metadata});
                (url.clone(), self.http.post(url).json(&body))
            }
        };
        let resp = self
            .authorize(req)
            .header("accept", "application/json")
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| transport(&url, &e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| transport(&url, &e))?;
        refuse_401(&url, status, self.api_key.is_some())?;
        let result = match &self.endpoint {
            Endpoint::JsonRpc(_) => jsonrpc_result(&url, status, &text)?,
            Endpoint::Rest(_) => rest_result(&url, status, &text)?,
        };
        decode(&url, result, what)
    }

    /// Opens a stream: SendStreamingMessage or SubscribeToTask, resuming after
    /// `last_event_id` when given.
    ///
    /// # Errors
    /// Transport failures and non-A2A answers before the first event; later ones
    /// arrive as items of the stream.
    pub async fn stream(
        &self,
        op: Streaming<'_>,
        last_event_id: Option<&str>,
    ) -> Result<Events, CliError> {
        let (url, req) = match (&self.endpoint, &op) {
            (Endpoint::JsonRpc(url), _) => {
                let (method, params) = match op {
                    Streaming::Send(r) => ("SendStreamingMessage", to_value(r)),
                    Streaming::Subscribe(r) => ("SubscribeToTask", to_value(r)),
                };
                let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
                (url.clone(), self.http.post(url.clone()).json(&body))
            }
            (Endpoint::Rest(base), Streaming::Send(r)) => {
                let url = Self::rest_url(base, &["message:stream"]);
                (url.clone(), self.http.post(url).json(r))
            }
            (Endpoint::Rest(base), Streaming::Subscribe(r)) => {
                let url = Self::rest_url(base, &["tasks", &format!("{}:subscribe", r.id)]);
                (url.clone(), self.http.get(url))
            }
        };
        let mut req = self.authorize(req).header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.map_err(|e| transport(&url, &e))?;
        let status = resp.status();
        refuse_401(&url, status, self.api_key.is_some())?;
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let rest = matches!(self.endpoint, Endpoint::Rest(_));
        if !is_sse {
            // An error answer (or something that is not A2A at all).
            let text = resp.text().await.map_err(|e| transport(&url, &e))?;
            let result = if rest {
                rest_result(&url, status, &text)?
            } else {
                jsonrpc_result(&url, status, &text)?
            };
            // A JSON answer to a stream request: one event (some servers answer a
            // Message-only reply so).
            let response: StreamResponse = decode(&url, result, "a stream event")?;
            return Ok(futures::stream::iter([Ok(Event { id: None, response })]).boxed());
        }
        let where_ = url.clone();
        let body = resp.bytes_stream().map_err(std::io::Error::other);
        let events = sse_stream::SseByteStream::new(body)
            .filter_map(move |item| {
                let url = where_.clone();
                let url_shown = LogUrl(url.as_str()).to_string();
                futures::future::ready(match item {
                    Ok(sse) => sse.data.map(|data| {
                        let value: Value =
                            serde_json::from_str(&data).map_err(|_| -> CliError {
                                format!("{url_shown}: a stream event is not JSON{}", excerpt(&data))
                                    .into()
                            })?;
                        let result = if rest {
                            rest_event(&url, value)?
                        } else {
                            jsonrpc_value(&url, value)?
                        };
                        let response = decode(&url, result, "a stream event")?;
                        Ok(Event {
                            id: sse.id.filter(|i| !i.is_empty()),
                            response,
                        })
                    }),
                    Err(e) => Some(Err(format!("the stream broke: {}", chain(&e)).into())),
                })
            })
            .boxed();
        Ok(events)
    }
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("protocol types serialize")
}

/// The ListTasks query parameters of the HTTP+JSON binding (spec §11.3): the
/// request's fields by their JSON names (`contextId`, `pageSize`, …).
fn list_query(url: &mut Url, r: &ListTasksRequest) {
    let Value::Object(fields) = to_value(r) else {
        return;
    };
    let mut q = url.query_pairs_mut();
    for (name, value) in fields {
        match value {
            Value::String(s) => q.append_pair(&name, &s),
            Value::Null => continue,
            other => q.append_pair(&name, &other.to_string()),
        };
    }
}

fn refuse_401(url: &Url, status: StatusCode, had_key: bool) -> Result<(), CliError> {
    let url_shown = LogUrl(url.as_str());
    if status != StatusCode::UNAUTHORIZED {
        return Ok(());
    }
    let hint = if had_key {
        "the API key was not accepted"
    } else {
        "pass --api-key KEY or set A2A_GATEWAY_API_KEY"
    };
    Err(format!("{url_shown} answered HTTP 401 (authentication required): {hint}").into())
}

/// The `result` of a JSON-RPC response body, or why there is none.
fn jsonrpc_result(url: &Url, status: StatusCode, text: &str) -> Result<Value, CliError> {
    let url_shown = LogUrl(url.as_str());
    let value: Value = serde_json::from_str(text).map_err(|_| -> CliError {
        format!(
            "{url_shown} answered HTTP {} with something that is not a JSON-RPC response{}",
            status.as_u16(),
            excerpt(text)
        )
        .into()
    })?;
    jsonrpc_value(url, value)
}

/// The `result` of a decoded JSON-RPC response, or its error as a message.
fn jsonrpc_value(url: &Url, mut value: Value) -> Result<Value, CliError> {
    let url_shown = LogUrl(url.as_str());
    if let Some(err) = value.get("error").filter(|e| e.is_object()) {
        let code = err["code"].as_i64().unwrap_or_default();
        let msg = err["message"].as_str().unwrap_or("(no message)");
        return Err(format!("error {code}: {}", printable(msg)).into());
    }
    if value.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(format!(
            "{url_shown}: not a JSON-RPC 2.0 response{}",
            excerpt(&value.to_string())
        )
        .into());
    }
    match value.get_mut("result").map(Value::take) {
        None | Some(Value::Null) => Err(format!(
            "{url_shown}: the JSON-RPC response has no result (null or missing)"
        )
        .into()),
        Some(result) => Ok(result),
    }
}

/// An HTTP+JSON answer: the body on 2xx, the `google.rpc.Status` message otherwise.
fn rest_result(url: &Url, status: StatusCode, text: &str) -> Result<Value, CliError> {
    let url_shown = LogUrl(url.as_str());
    let value: Option<Value> = serde_json::from_str(text).ok();
    if !status.is_success() {
        let message = value
            .as_ref()
            .and_then(|v| v.get("error"))
            .and_then(|e| {
                let m = e.get("message")?.as_str()?;
                let s = e.get("status").and_then(Value::as_str).unwrap_or("");
                Some(format!("{s} {}", printable(m)).trim().to_owned())
            })
            .unwrap_or_else(|| excerpt(text).trim_start_matches(": ").to_owned());
        return Err(format!("{url_shown} answered HTTP {}: {message}", status.as_u16()).into());
    }
    match value {
        Some(Value::Null) | None => Err(format!(
            "{url_shown} answered HTTP {} with something that is not an A2A answer{}",
            status.as_u16(),
            excerpt(text)
        )
        .into()),
        Some(v) => Ok(v),
    }
}

/// An HTTP+JSON stream event: the StreamResponse itself, or an error object.
fn rest_event(url: &Url, value: Value) -> Result<Value, CliError> {
    let url_shown = LogUrl(url.as_str());
    if let Some(e) = value.get("error").filter(|e| e.is_object()) {
        let m = e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)");
        return Err(format!(
            "{url_shown}: the stream ended with an error: {}",
            printable(m)
        )
        .into());
    }
    Ok(value)
}

fn decode<T: DeserializeOwned>(url: &Url, value: Value, what: &str) -> Result<T, CliError> {
    let url_shown = LogUrl(url.as_str());
    if value.as_object().is_some_and(serde_json::Map::is_empty) {
        return Err(format!("{url_shown} answered {{}}, not {what}").into());
    }
    serde_json::from_value(value)
        .map_err(|e| format!("{url_shown}: the answer is not {what}: {e}").into())
}

/// `: <the first 200 characters>` of a body, made printable; empty for an empty body.
fn excerpt(text: &str) -> String {
    let t = text.trim();
    if t.is_empty() {
        return " and an empty body".to_owned();
    }
    let mut short: String = t.chars().take(200).collect();
    if short.len() < t.len() {
        short.push('…');
    }
    format!(": {}", printable(&short).replace('\n', " "))
}

/// Why a request failed, in words: connection refused, unknown certificate issuer,
/// timeout, or the error chain.
pub fn why(e: &reqwest::Error) -> String {
    let mut text = chain(e);
    // reqwest names the request's URL in its message: shown masked, like every URL
    // the CLI prints (a password or a secret-looking query value of `--url`).
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), &LogUrl(url.as_str()).to_string());
    }
    let lower = text.to_ascii_lowercase();
    if lower.contains("unknownissuer") || lower.contains("unknown issuer") {
        return "the server's certificate is signed by an unknown issuer (trust a private \
                CA with --ca-file PATH or SSL_CERT_FILE)"
            .to_owned();
    }
    if lower.contains("notvalidforname") || lower.contains("not valid for name") {
        return "the server's certificate is not valid for this host name".to_owned();
    }
    if lower.contains("expired") && lower.contains("certificate") {
        return "the server's certificate has expired".to_owned();
    }
    if e.is_timeout() {
        return "timed out (see --timeout-secs)".to_owned();
    }
    if lower.contains("connection refused") {
        return "connection refused (is the gateway running, on this port?)".to_owned();
    }
    if lower.contains("dns error") || lower.contains("failed to lookup address") {
        return format!("the host name does not resolve ({text})");
    }
    text
}

fn transport(url: &Url, e: &reqwest::Error) -> CliError {
    format!("{}: {}", LogUrl(url.as_str()), why(e)).into()
}

/// An error and its sources, `: `-joined, without repeats.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        source = s.source();
    }
    parts.join(": ")
}

/// `s` with terminal control characters made visible and harmless: C0 controls
/// other than newline and tab, DEL, C1 controls, and the bidirectional overrides
/// become `\u{..}` escapes, so agent text cannot move the cursor, recolour the
/// terminal, set its title or reorder what is shown.
pub fn printable(s: &str) -> String {
    let harmful = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !s.chars().any(harmful) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if harmful(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// See [`Connection::card_url`].
fn card_url_for(url: &Url) -> Url {
    let path = url.path();
    if path.ends_with(CARD_PATH) || path.ends_with("/.well-known/agent.json") {
        return url.clone();
    }
    let mut base = url.clone();
    base.set_query(None);
    if !path.ends_with('/') {
        base.set_path(&format!("{path}/"));
    }
    base.join(CARD_PATH.trim_start_matches('/'))
        .expect("a relative path joins")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_is_read_under_the_url_given() {
        for (url, card) in [
            ("http://h:1/", "http://h:1/.well-known/agent-card.json"),
            ("http://h:1", "http://h:1/.well-known/agent-card.json"),
            (
                "http://h/agents/reviewer/",
                "http://h/agents/reviewer/.well-known/agent-card.json",
            ),
            (
                "http://h/agents/reviewer",
                "http://h/agents/reviewer/.well-known/agent-card.json",
            ),
            (
                "http://h/agents/reviewer/.well-known/agent-card.json",
                "http://h/agents/reviewer/.well-known/agent-card.json",
            ),
        ] {
            assert_eq!(
                card_url_for(&Url::parse(url).unwrap()).as_str(),
                card,
                "{url}"
            );
        }
    }

    #[test]
    fn control_characters_are_made_visible() {
        assert_eq!(printable("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(printable("\u{1b}[2Jred"), "\\u{1b}[2Jred");
        assert_eq!(printable("a\rb\u{7f}\u{9b}c"), "a\\u{d}b\\u{7f}\\u{9b}c");
        assert_eq!(printable("\u{202e}abc"), "\\u{202e}abc");
        assert_eq!(printable("é✓"), "é✓");
    }

    #[test]
    fn non_a2a_answers_are_errors() {
        let url = Url::parse("http://h/").unwrap();
        let ok = StatusCode::OK;
        assert!(jsonrpc_result(&url, ok, "{}").is_err());
        assert!(jsonrpc_result(&url, ok, r#"{"jsonrpc":"2.0","id":1,"result":null}"#).is_err());
        assert!(jsonrpc_result(&url, StatusCode::NOT_FOUND, "Not Found").is_err());
        assert!(jsonrpc_result(&url, ok, "<html>").is_err());
        let e = jsonrpc_result(
            &url,
            ok,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"gone"}}"#,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "error -32001: gone");
        assert!(rest_result(&url, ok, "null").is_err());
        let e = rest_result(
            &url,
            StatusCode::NOT_FOUND,
            r#"{"error":{"code":404,"status":"NOT_FOUND","message":"Task not found: t"}}"#,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .ends_with("HTTP 404: NOT_FOUND Task not found: t"),
            "{e}"
        );
        let e = decode::<crate::protocol::Task>(&url, json!({}), "a Task").unwrap_err();
        assert!(e.to_string().contains("answered {}"), "{e}");
    }
}
