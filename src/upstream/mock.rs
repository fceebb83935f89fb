//! [`MockRuntime`]: a scripted HTTP runtime on `127.0.0.1:0` (feature `test-util`), the
//! peer of the [`conformance`](super::conformance) checks.
//!
//! It answers `POST /invocations` with the next scripted [`MockReply`] (a JSON reply, an
//! SSE stream, a status, a stall, a reply that breaks or stalls after its first
//! bytes, a raw body) and `POST /stopruntimesession` with 200, and records every request it saw
//! ([`MockRequest`]). With no reply scripted an invocation gets the answer set by
//! [`MockRuntime::answer_with`] (a reply chosen from the request, say by its prompt), or
//! else the JSON string `"ok"`. [`MockRuntime::hold`] keeps invocations waiting, after
//! they are recorded and before their reply is chosen, until [`MockRuntime::release`].
//! The server stops when the value is dropped.
//!
//! Benchmarks, which send it hundreds of thousands of requests, start it with
//! [`MockRuntime::start_unrecorded`]: requests are then only counted
//! ([`MockRuntime::invocation_count`]), never kept, and a reply of many frames can be
//! rendered once and shared ([`MockReply::SseFrames`]).
//!
//! The same script also answers as an A2A 1.0 agent (the `a2a` kind's conformance run),
//! at [`MockRuntime::a2a_url`]: a card (JSON-RPC, streaming), and JSON-RPC at `/a2a/`.
//! SendMessage and SendStreamingMessage are invocations, answered with the next reply
//! in A2A shapes (see [`MockRuntime::a2a_url`]); CancelTask is a stop call, answered
//! CANCELED; any other method gets -32001 (task not found).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use futures::stream::{self, BoxStream};
use serde_json::Value;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;

/// What the mock answers to one invocation.
#[derive(Debug, Clone)]
pub enum MockReply {
    /// 200 `application/json` with this body.
    Json(Value),
    /// 200 `text/event-stream`: one `data:` frame per value, in order, then the end.
    Sse(Vec<Value>),
    /// 200 `text/event-stream`: these frames, then the connection breaks (no clean end
    /// of the body).
    SseThenBreak(Vec<Value>),
    /// 200 `text/event-stream`: these frames, then silence (the body never ends).
    SseThenStall(Vec<Value>),
    /// 200 `application/json`: these first bytes of a body, then silence.
    JsonThenStall(String),
    /// This status, with `Retry-After: N` seconds when given, and a JSON error body
    /// `{"message": text}`.
    Status {
        /// The HTTP status code.
        status: u16,
        /// `Retry-After` in seconds.
        retry_after: Option<u64>,
        /// The error message in the body.
        message: String,
    },
    /// 200 with this `Content-Type` and exactly these body bytes, then the end: a body
    /// the typed replies cannot write (an event stream cut mid-line, garbage declared as
    /// JSON).
    Raw {
        /// The `Content-Type` header.
        content_type: &'static str,
        /// The whole body.
        body: Bytes,
    },
    /// No answer at all: the headers never come.
    Stall,
    /// 200 `text/event-stream`: these bytes, each sent as one body chunk as they are
    /// (rendered frames, e.g. by [`MockReply::frames`]), then the end. Shared, not
    /// copied, by every reply that uses them; sent as they are on the A2A URL too.
    SseFrames(Arc<[Bytes]>),
}

impl MockReply {
    /// The `data:` frames of `values` rendered once (`data: <JSON>\n\n` each), for
    /// [`MockReply::SseFrames`]: the bytes [`MockReply::Sse`] sends for the same values.
    pub fn frames(values: impl IntoIterator<Item = Value>) -> Arc<[Bytes]> {
        values.into_iter().map(frame).collect()
    }

    /// A status without `Retry-After`, with a short message.
    pub fn status(status: u16) -> Self {
        Self::Status {
            status,
            retry_after: None,
            message: format!("mock status {status}"),
        }
    }
}

/// One request the mock saw.
#[derive(Debug, Clone)]
pub struct MockRequest {
    /// `/invocations` or `/stopruntimesession`.
    pub path: String,
    /// The HTTP version it came in (`HTTP/2` by ALPN or h2c prior knowledge, else
    /// `HTTP/1.1`).
    pub version: axum::http::Version,
    /// The request headers.
    pub headers: HeaderMap,
    /// The request body.
    pub body: Bytes,
}

impl MockRequest {
    /// A header's value as text (`None` when absent or not visible ASCII).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `prompt` string of a JSON invocation body (`None` when the body is not JSON or
    /// has no string `prompt`).
    pub fn prompt(&self) -> Option<String> {
        let body: Value = serde_json::from_slice(&self.body).ok()?;
        body.get("prompt")?.as_str().map(str::to_owned)
    }
}

/// The answer to an invocation the script does not cover.
type Answer = Arc<dyn Fn(&MockRequest) -> MockReply + Send + Sync>;

struct Shared {
    script: Mutex<VecDeque<MockReply>>,
    answer: Mutex<Option<Answer>>,
    /// Set by `hold`: each invocation takes a permit before it answers.
    gate: Mutex<Option<Arc<Semaphore>>>,
    seen: Mutex<Vec<MockRequest>>,
    /// `false` for [`MockRuntime::start_unrecorded`]: `seen` stays empty.
    recording: bool,
    /// The invocations so far, recorded or not.
    invocations: AtomicUsize,
    /// Woken at every request.
    arrived: Notify,
    /// Invocations in flight per runtime session (the session header's value).
    in_flight: Mutex<HashMap<String, usize>>,
    /// The most invocations of one session in flight at once.
    most: AtomicUsize,
    /// When each invocation's reply body was dropped by the server.
    dropped: Mutex<Vec<tokio::time::Instant>>,
}

/// One invocation in flight, from its arrival until its handler ends (the reply's head is
/// sent, or the client hung up).
struct InFlight {
    shared: Arc<Shared>,
    session: String,
}

impl InFlight {
    fn enter(shared: &Arc<Shared>, session: String) -> Self {
        let mut map = shared.in_flight.lock().expect("in-flight lock");
        let n = map.entry(session.clone()).or_default();
        *n += 1;
        shared.most.fetch_max(*n, Ordering::SeqCst);
        InFlight {
            shared: shared.clone(),
            session,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut map = self.shared.in_flight.lock().expect("in-flight lock");
        if let Some(n) = map.get_mut(&self.session) {
            *n -= 1;
        }
    }
}

/// A scripted runtime listening on `127.0.0.1:0`. See the module docs.
pub struct MockRuntime {
    addr: SocketAddr,
    /// `http` or `https`.
    scheme: &'static str,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl std::fmt::Debug for MockRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockRuntime")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl MockRuntime {
    /// Binds `127.0.0.1:0` and serves until dropped.
    ///
    /// # Panics
    /// When no loopback port can be bound (a broken test machine).
    pub async fn start() -> Self {
        Self::serve(true, None).await
    }

    /// As [`MockRuntime::start`], over TLS with `certificate` (its chain, leaf first) and
    /// its private `key`, offering HTTP/2 and HTTP/1.1 by ALPN: [`MockRuntime::url`] is
    /// then `https://127.0.0.1:PORT/invocations` (the certificate should name
    /// `127.0.0.1`; a client trusts it through its CA, e.g. `upstream.ca_file`).
    ///
    /// # Panics
    /// As [`MockRuntime::start`], and when rustls refuses the certificate or key.
    pub async fn start_tls(
        certificate: Vec<rustls::pki_types::CertificateDer<'static>>,
        key: rustls::pki_types::PrivateKeyDer<'static>,
    ) -> Self {
        let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("rustls protocol versions")
        .with_no_client_auth()
        .with_single_cert(certificate, key)
        .expect("a certificate and key rustls accepts");
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Self::serve(true, Some(Arc::new(tls))).await
    }

    /// As [`MockRuntime::start`], but no request is kept: [`MockRuntime::requests`],
    /// [`MockRuntime::invocations`] and [`MockRuntime::stops`] stay empty and
    /// [`MockRuntime::invocation_count`] counts. For benchmarks, whose requests would
    /// otherwise pile up in memory.
    ///
    /// # Panics
    /// As [`MockRuntime::start`].
    pub async fn start_unrecorded() -> Self {
        Self::serve(false, None).await
    }

    async fn serve(recording: bool, tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        let shared = Arc::new(Shared {
            script: Mutex::default(),
            answer: Mutex::default(),
            gate: Mutex::default(),
            seen: Mutex::default(),
            recording,
            invocations: AtomicUsize::new(0),
            arrived: Notify::new(),
            in_flight: Mutex::default(),
            most: AtomicUsize::new(0),
            dropped: Mutex::default(),
        });
        let app = Router::new()
            .route("/invocations", post(invoke))
            .route("/stopruntimesession", post(stop))
            .route("/a2a/", post(a2a))
            .route(
                "/a2a/.well-known/agent-card.json",
                axum::routing::get(a2a_card),
            )
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let scheme = if tls.is_some() { "https" } else { "http" };
        let server = match tls {
            None => tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            }),
            Some(tls) => tokio::spawn(serve_tls(listener, app, tls)),
        };
        Self {
            addr,
            scheme,
            shared,
            server,
        }
    }

    /// The invocation URL, `http://127.0.0.1:PORT/invocations` (`https` when started
    /// with [`MockRuntime::start_tls`]).
    pub fn url(&self) -> String {
        format!("{}://{}/invocations", self.scheme, self.addr)
    }

    /// When the reply body of each invocation was dropped by the server, in order: sent
    /// whole, or given up because the client reset its HTTP/2 stream or closed the
    /// connection (a reply that never ends is only dropped then).
    pub fn replies_dropped(&self) -> Vec<tokio::time::Instant> {
        self.shared.dropped.lock().expect("dropped lock").clone()
    }

    /// The base URL of the mock as an A2A 1.0 agent, `http://127.0.0.1:PORT/a2a/` (its
    /// card below it). A reply is sent in A2A shapes, for the task `mock-task` in
    /// `mock-ctx`: [`MockReply::Json`] as a whole JSON-RPC result (a text: the COMPLETED
    /// task with an artifact `reply` holding it; an `input_required` control object: the
    /// task INPUT_REQUIRED asking its `text`; a `message` control object: a direct
    /// Message), the SSE replies as a stream of the task (SUBMITTED), one artifact chunk
    /// per frame (`append` after the first) and, for [`MockReply::Sse`], COMPLETED; the
    /// others as for `/invocations`.
    pub fn a2a_url(&self) -> String {
        format!("{}://{}/a2a/", self.scheme, self.addr)
    }

    /// Scripts the answers of the next invocations, in order.
    pub fn script(&self, replies: impl IntoIterator<Item = MockReply>) {
        self.shared
            .script
            .lock()
            .expect("script lock")
            .extend(replies);
    }

    /// Answers every invocation the script does not cover with `answer(request)` instead
    /// of the JSON string `"ok"`: a runtime whose reply depends on what it is asked.
    pub fn answer_with(&self, answer: impl Fn(&MockRequest) -> MockReply + Send + Sync + 'static) {
        *self.shared.answer.lock().expect("answer lock") = Some(Arc::new(answer));
    }

    /// From now on each invocation waits, once recorded and before its reply is chosen
    /// (so a reply may still be scripted meanwhile), until [`MockRuntime::release`] lets
    /// it go: a runtime that has not answered yet.
    pub fn hold(&self) {
        let mut gate = self.shared.gate.lock().expect("gate lock");
        if gate.is_none() {
            *gate = Some(Arc::new(Semaphore::new(0)));
        }
    }

    /// Lets `n` held invocations (present or future) answer. No effect without
    /// [`MockRuntime::hold`].
    pub fn release(&self, n: usize) {
        if let Some(gate) = &*self.shared.gate.lock().expect("gate lock") {
            gate.add_permits(n);
        }
    }

    /// Every request seen so far (invocations and StopRuntimeSession calls), in order.
    pub fn requests(&self) -> Vec<MockRequest> {
        self.shared.seen.lock().expect("seen lock").clone()
    }

    /// The most invocations of one runtime session (same session header) that were in
    /// flight at once, each counted from its arrival until its reply's head is sent or the
    /// client hangs up (a held invocation counts while it waits).
    pub fn most_at_once(&self) -> usize {
        self.shared.most.load(Ordering::SeqCst)
    }

    /// The invocations seen so far.
    pub fn invocations(&self) -> Vec<MockRequest> {
        self.seen("/invocations")
    }

    /// The StopRuntimeSession calls seen so far.
    pub fn stops(&self) -> Vec<MockRequest> {
        self.seen("/stopruntimesession")
    }

    /// How many invocations arrived so far (also when unrecorded).
    pub fn invocation_count(&self) -> usize {
        self.shared.invocations.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` invocations arrived.
    pub async fn wait_invocations(&self, n: usize) {
        loop {
            let arrived = self.shared.arrived.notified();
            if self.invocation_count() >= n {
                return;
            }
            arrived.await;
        }
    }

    fn seen(&self, path: &str) -> Vec<MockRequest> {
        self.shared
            .seen
            .lock()
            .expect("seen lock")
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }
}

impl Drop for MockRuntime {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn record(
    shared: &Shared,
    path: &str,
    version: axum::http::Version,
    headers: HeaderMap,
    body: Bytes,
) -> MockRequest {
    let request = MockRequest {
        path: path.to_owned(),
        version,
        headers,
        body,
    };
    if path == "/invocations" {
        shared.invocations.fetch_add(1, Ordering::SeqCst);
    }
    if shared.recording {
        shared.seen.lock().expect("seen lock").push(request.clone());
    }
    shared.arrived.notify_waiters();
    request
}

async fn stop(
    State(shared): State<Arc<Shared>>,
    version: axum::http::Version,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    record(&shared, "/stopruntimesession", version, headers, body);
    StatusCode::OK
}

/// Records an invocation, waits at the gate, and takes its reply (the script's next,
/// else the `answer_with` one, else `"ok"`). The guard counts it in flight.
async fn next_reply(
    shared: &Arc<Shared>,
    version: axum::http::Version,
    headers: HeaderMap,
    body: Bytes,
) -> (MockReply, InFlight) {
    // In flight before it is recorded, so that a test seeing it arrive sees it counted.
    let session = headers
        .get(super::SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let in_flight = InFlight::enter(shared, session.to_owned());
    let request = record(shared, "/invocations", version, headers, body);
    let gate = shared.gate.lock().expect("gate lock").clone();
    if let Some(gate) = gate {
        gate.acquire()
            .await
            .expect("the gate is never closed")
            .forget();
    }
    let scripted = shared.script.lock().expect("script lock").pop_front();
    let reply = scripted.unwrap_or_else(|| {
        let answer = shared.answer.lock().expect("answer lock").clone();
        answer.map_or(MockReply::Json(Value::from("ok")), |answer| {
            answer(&request)
        })
    });
    (reply, in_flight)
}

async fn invoke(
    State(shared): State<Arc<Shared>>,
    version: axum::http::Version,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (reply, _in_flight) = next_reply(&shared, version, headers, body).await;
    noting_drop(&shared, render(reply).await)
}

/// `resp` with a body that notes, when the server drops it, the instant in
/// [`MockRuntime::replies_dropped`].
fn noting_drop(shared: &Arc<Shared>, resp: Response) -> Response {
    struct Dropped(Arc<Shared>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            let now = tokio::time::Instant::now();
            self.0.dropped.lock().expect("dropped lock").push(now);
        }
    }
    let note = Dropped(shared.clone());
    resp.map(|body| {
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            let _note = &note;
            chunk
        }))
    })
}

/// Serves `app` over TLS (`tls`, ALPN h2 and http/1.1) on `listener`, one task per
/// connection, HTTP/1.1 or HTTP/2 as negotiated.
async fn serve_tls(listener: tokio::net::TcpListener, app: Router, tls: Arc<rustls::ServerConfig>) {
    use tower::ServiceExt as _;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    app.clone().oneshot(req.map(Body::new))
                });
            let _ =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
        });
    }
}

/// The mock's card as an A2A 1.0 agent (JSON-RPC at `/a2a/`, streaming).
async fn a2a_card(headers: HeaderMap) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1");
    axum::Json(serde_json::json!({
        "name": "mock", "description": "the scripted mock runtime as an A2A agent",
        "version": "1", "skills": [],
        "supportedInterfaces": [{"url": format!("http://{host}/a2a/"),
            "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
    }))
    .into_response()
}

const MOCK_TASK: &str = "mock-task";
const MOCK_CONTEXT: &str = "mock-ctx";

fn rpc_result(id: &Value, result: Value) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn agent_message(text: &str) -> Value {
    serde_json::json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_AGENT",
        "taskId": MOCK_TASK, "contextId": MOCK_CONTEXT, "parts": [{"text": text}]})
}

fn mock_task(state: &str, message: Option<Value>, artifact: Option<&str>) -> Value {
    let mut task = serde_json::json!({"id": MOCK_TASK, "contextId": MOCK_CONTEXT,
        "status": {"state": state}});
    if let Some(m) = message {
        task["status"]["message"] = m;
    }
    if let Some(text) = artifact {
        task["artifacts"] = serde_json::json!([{"artifactId": "reply", "parts": [{"text": text}]}]);
    }
    serde_json::json!({ "task": task })
}

/// The mock as an A2A 1.0 agent (see [`MockRuntime::a2a_url`]).
async fn a2a(
    State(shared): State<Arc<Shared>>,
    version: axum::http::Version,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or_default();
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let method = req["method"].as_str().unwrap_or_default().to_owned();
    let json =
        |v: Value| ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response();
    match method.as_str() {
        "SendMessage" | "SendStreamingMessage" => {}
        "CancelTask" => {
            record(&shared, "/stopruntimesession", version, headers, body);
            return json(rpc_result(
                &id,
                mock_task("TASK_STATE_CANCELED", None, None)["task"].clone(),
            ));
        }
        _ => {
            record(&shared, "/a2a", version, headers, body);
            return json(serde_json::json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32001, "message": "Task not found"}}));
        }
    }
    let (reply, _in_flight) = next_reply(&shared, version, headers, body).await;
    let chunks = |frames: Vec<Value>, done: bool| {
        let mut out = vec![rpc_result(
            &id,
            mock_task("TASK_STATE_SUBMITTED", None, None),
        )];
        for (i, f) in frames.iter().enumerate() {
            let text = f.as_str().map_or_else(|| f.to_string(), str::to_owned);
            out.push(rpc_result(
                &id,
                serde_json::json!({"artifactUpdate": {
                "taskId": MOCK_TASK, "contextId": MOCK_CONTEXT, "append": i > 0,
                "artifact": {"artifactId": "reply", "parts": [{"text": text}]}}}),
            ));
        }
        if done {
            out.push(rpc_result(
                &id,
                serde_json::json!({"statusUpdate": {
                "taskId": MOCK_TASK, "contextId": MOCK_CONTEXT,
                "status": {"state": "TASK_STATE_COMPLETED"}}}),
            ));
        }
        out
    };
    match reply {
        MockReply::Json(v) => {
            let control = v.get("a2a_control").and_then(Value::as_str);
            let text = v
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| v.to_string());
            let result = match control {
                Some("message") => serde_json::json!({ "message": agent_message(&text) }),
                Some("input_required") => mock_task(
                    "TASK_STATE_INPUT_REQUIRED",
                    Some(agent_message(&text)),
                    None,
                ),
                _ => mock_task("TASK_STATE_COMPLETED", None, Some(&text)),
            };
            json(rpc_result(&id, result))
        }
        MockReply::Sse(frames) => render(MockReply::Sse(chunks(frames, true))).await,
        MockReply::SseThenBreak(frames) => {
            render(MockReply::SseThenBreak(chunks(frames, false))).await
        }
        MockReply::SseThenStall(frames) => {
            render(MockReply::SseThenStall(chunks(frames, false))).await
        }
        other => render(other).await,
    }
}

/// A reply as `/invocations` sends it.
async fn render(reply: MockReply) -> Response {
    match reply {
        MockReply::Json(v) => {
            ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
        }
        MockReply::Sse(frames) => sse(frames, stream::empty().boxed()),
        MockReply::SseThenBreak(frames) => sse(
            frames,
            // Pending once first, so that the server flushes the frames before the break.
            stream::once(async {
                tokio::task::yield_now().await;
                Err(std::io::Error::other("the mock breaks the stream"))
            })
            .boxed(),
        ),
        MockReply::SseThenStall(frames) => sse(frames, stream::pending().boxed()),
        MockReply::JsonThenStall(head) => (
            [(header::CONTENT_TYPE, "application/json")],
            Body::from_stream(
                stream::once(async move { Ok::<_, std::io::Error>(Bytes::from(head)) })
                    .chain(stream::pending()),
            ),
        )
            .into_response(),
        MockReply::Status {
            status,
            retry_after,
            message,
        } => {
            let mut resp = (
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                [(header::CONTENT_TYPE, "application/json")],
                serde_json::json!({ "message": message }).to_string(),
            )
                .into_response();
            if let Some(secs) = retry_after {
                resp.headers_mut().insert(
                    header::RETRY_AFTER,
                    secs.to_string().parse().expect("digits"),
                );
            }
            resp
        }
        MockReply::Raw { content_type, body } => {
            ([(header::CONTENT_TYPE, content_type)], body).into_response()
        }
        MockReply::Stall => std::future::pending().await,
        MockReply::SseFrames(frames) => {
            let body = stream::iter(0..frames.len())
                .map(move |i| Ok::<_, std::io::Error>(frames[i].clone()));
            (
                [(header::CONTENT_TYPE, "text/event-stream")],
                Body::from_stream(body),
            )
                .into_response()
        }
    }
}

/// One `data:` frame of `value`.
fn frame(value: Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

/// An event-stream response: one `data:` frame per value, then `tail`.
fn sse(frames: Vec<Value>, tail: BoxStream<'static, Result<Bytes, std::io::Error>>) -> Response {
    let head = stream::iter(
        frames
            .into_iter()
            .map(|v| Ok::<_, std::io::Error>(frame(v))),
    );
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(head.chain(tail)),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    async fn invoke(mock: &MockRuntime, prompt: &str) -> String {
        reqwest::Client::new()
            .post(mock.url())
            .json(&json!({ "prompt": prompt }))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// The script goes first; then `answer_with` chooses from the request.
    #[tokio::test]
    async fn answer_with_replies_by_prompt_after_the_script() {
        let mock = MockRuntime::start().await;
        assert_eq!(invoke(&mock, "a").await, r#""ok""#);
        mock.answer_with(|r| MockReply::Json(Value::from(r.prompt().unwrap_or_default())));
        mock.script([MockReply::Json(json!("scripted"))]);
        assert_eq!(invoke(&mock, "a").await, r#""scripted""#);
        assert_eq!(invoke(&mock, "echo me").await, r#""echo me""#);
        assert_eq!(mock.invocations()[2].prompt().as_deref(), Some("echo me"));
    }

    /// `SseThenBreak` delivers its frames, then the body fails; `Raw` is sent as given.
    #[tokio::test]
    async fn a_broken_stream_delivers_its_frames_first_and_raw_is_verbatim() {
        let mock = MockRuntime::start().await;
        mock.script([
            MockReply::SseThenBreak(vec![json!("part")]),
            MockReply::Raw {
                content_type: "application/json",
                body: Bytes::from_static(b"\x01{not json"),
            },
        ]);
        let mut resp = reqwest::Client::new()
            .post(mock.url())
            .send()
            .await
            .unwrap();
        let mut got = Vec::new();
        let end = loop {
            match resp.chunk().await {
                Ok(Some(c)) => got.extend_from_slice(&c),
                other => break other,
            }
        };
        assert_eq!(got, b"data: \"part\"\n\n");
        assert!(end.is_err(), "{end:?}");
        let resp = reqwest::Client::new()
            .post(mock.url())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.headers()["content-type"], "application/json");
        assert_eq!(resp.bytes().await.unwrap().as_ref(), b"\x01{not json");
        assert_eq!(mock.requests().len(), 2);
    }

    /// Unrecorded, requests are counted and not kept; shared frames are the bytes `Sse`
    /// sends for the same values.
    #[tokio::test]
    async fn unrecorded_counts_and_shared_frames_match_sse() {
        let mock = MockRuntime::start_unrecorded().await;
        let values = [json!("a"), json!({"b": 1})];
        mock.script([
            MockReply::Sse(values.to_vec()),
            MockReply::SseFrames(MockReply::frames(values.clone())),
        ]);
        let first = invoke(&mock, "x").await;
        let second = invoke(&mock, "y").await;
        assert_eq!(first, "data: \"a\"\n\ndata: {\"b\":1}\n\n");
        assert_eq!(first, second);
        assert_eq!(mock.invocation_count(), 2);
        assert!(mock.requests().is_empty());
        mock.wait_invocations(2).await;
    }

    /// A held invocation is recorded but unanswered until released, and takes the reply
    /// scripted meanwhile.
    #[tokio::test]
    async fn a_held_invocation_answers_once_released() {
        let mock = Arc::new(MockRuntime::start().await);
        mock.hold();
        let call = tokio::spawn({
            let mock = mock.clone();
            async move { invoke(&mock, "a").await }
        });
        mock.wait_invocations(1).await;
        tokio::task::yield_now().await;
        assert!(!call.is_finished());
        mock.script([MockReply::Json(json!("late"))]);
        mock.release(1);
        assert_eq!(call.await.unwrap(), r#""late""#);
        // One session at a time so far; two held calls of one session make two.
        assert_eq!(mock.most_at_once(), 1);
        let calls: Vec<_> = (0..2)
            .map(|_| {
                let mock = mock.clone();
                tokio::spawn(async move { invoke(&mock, "b").await })
            })
            .collect();
        mock.wait_invocations(3).await;
        assert_eq!(mock.most_at_once(), 2);
        mock.release(2);
        for call in calls {
            call.await.unwrap();
        }
    }
}
