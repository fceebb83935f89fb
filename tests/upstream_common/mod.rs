//! Shared helpers of the upstream executor tests: contexts, running `execute` and
//! reading its events, and a raw HTTP/1.1 fake upstream on 127.0.0.1:0 whose bytes,
//! pauses, resets and closes are scripted per request.
#![allow(dead_code, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_gateway::executor::{
    AgentExecutor, CallContext, EventQueue, RequestContext, new_user_text_message,
};
use a2a_gateway::protocol::{PartContent, StreamResponse, TaskState};
use a2a_gateway::upstream::AgentCoreExecutor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// A context for a new task with `text` in its own new context.
pub fn ctx(text: &str) -> RequestContext {
    ctx_in(&uuid::Uuid::new_v4().to_string(), "alice", text)
}

/// A context for a new task in `context_id` of `owner`.
pub fn ctx_in(context_id: &str, owner: &str, text: &str) -> RequestContext {
    let task_id = uuid::Uuid::new_v4().to_string();
    let mut m = new_user_text_message(text);
    m.task_id = Some(task_id.clone());
    m.context_id = Some(context_id.to_owned());
    RequestContext::new(
        m,
        task_id,
        context_id.to_owned(),
        CallContext::new("", owner),
    )
}

/// What `execute` published.
#[derive(Debug)]
pub struct Outcome {
    pub events: Vec<StreamResponse>,
}

/// Runs `execute` to its end and collects every event.
pub async fn run(exec: &AgentCoreExecutor, context: RequestContext) -> Outcome {
    let (queue, mut rx) = EventQueue::bounded(64);
    let collector = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            events.push(e);
        }
        events
    });
    exec.execute(context, queue)
        .await
        .expect("execute returns Ok");
    Outcome {
        events: collector.await.unwrap(),
    }
}

/// One artifact chunk, simplified.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub name: Option<String>,
    pub append: bool,
    pub last: bool,
    pub text: String,
}

impl Outcome {
    /// Task and status states in order.
    pub fn states(&self) -> Vec<TaskState> {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamResponse::Task(t) => Some(t.status.state),
                StreamResponse::StatusUpdate(s) => Some(s.status.state),
                _ => None,
            })
            .collect()
    }

    pub fn final_state(&self) -> TaskState {
        *self.states().last().expect("some state")
    }

    /// The text of the last status message without its ` [correlation id …]` suffix
    /// (see [`raw_reason`](Self::raw_reason)).
    pub fn reason(&self) -> String {
        let r = self.raw_reason();
        match r.rsplit_once(" [correlation id ") {
            Some((head, id)) if id.ends_with(']') => head.to_owned(),
            _ => r,
        }
    }

    /// The correlation id of the last status message, if it has one.
    pub fn correlation_id(&self) -> Option<String> {
        let r = self.raw_reason();
        let (_, id) = r.rsplit_once(" [correlation id ")?;
        id.strip_suffix(']').map(str::to_owned)
    }

    /// The text of the last status message, exactly as a caller sees it.
    pub fn raw_reason(&self) -> String {
        self.events
            .iter()
            .rev()
            .find_map(|e| match e {
                StreamResponse::StatusUpdate(s) => s.status.message.as_ref(),
                _ => None,
            })
            .map(|m| {
                m.parts
                    .iter()
                    .filter_map(|p| p.as_text())
                    .collect::<String>()
            })
            .unwrap_or_default()
    }

    pub fn chunks(&self) -> Vec<Chunk> {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamResponse::ArtifactUpdate(a) => Some(Chunk {
                    name: a.artifact.name.clone(),
                    append: a.append,
                    last: a.last_chunk,
                    text: a
                        .artifact
                        .parts
                        .iter()
                        .map(|p| match &p.content {
                            PartContent::Text(t) => t.clone(),
                            PartContent::Data(d) => format!("<data {d}>"),
                            _ => "<other>".into(),
                        })
                        .collect(),
                }),
                _ => None,
            })
            .collect()
    }

    /// The concatenated reply text.
    pub fn text(&self) -> String {
        self.chunks().into_iter().map(|c| c.text).collect()
    }

    /// All artifact ids used.
    pub fn artifact_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .events
            .iter()
            .filter_map(|e| match e {
                StreamResponse::ArtifactUpdate(a) => Some(a.artifact.artifact_id.clone()),
                _ => None,
            })
            .collect();
        ids.dedup();
        ids
    }
}

/// A request as the raw fake saw it.
#[derive(Debug, Clone)]
pub struct RawRequest {
    /// Request line, e.g. `POST /invocations HTTP/1.1`.
    pub line: String,
    /// Header names lowercased, values as sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl RawRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }
}

/// What the raw fake does for one request.
#[derive(Debug, Clone)]
pub enum Step {
    /// Write these bytes (and flush).
    Write(Vec<u8>),
    /// Write each byte separately, pausing 1 ms between them.
    WriteBytewise(Vec<u8>),
    Sleep(Duration),
    /// Abort the connection with a TCP RST.
    Reset,
    /// Close the connection (FIN).
    Close,
    /// Wait until the client closes the connection; record when.
    AwaitClientClose,
}

/// A scripted raw HTTP/1.1 upstream.
pub struct RawServer {
    pub url: String,
    pub requests: Arc<Mutex<Vec<RawRequest>>>,
    /// When the client closed a connection during `AwaitClientClose`.
    pub client_closed: Arc<Mutex<Vec<Instant>>>,
}

impl RawServer {
    pub fn requests(&self) -> Vec<RawRequest> {
        self.requests.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

type Script = dyn Fn(usize, &RawRequest) -> Vec<Step> + Send + Sync;

/// Starts a fake whose reply to the n-th request (0-based, over all connections) is
/// `script(n, &request)`.
pub async fn raw_server(
    script: impl Fn(usize, &RawRequest) -> Vec<Step> + Send + Sync + 'static,
) -> RawServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let closed = Arc::new(Mutex::new(Vec::new()));
    let script: Arc<Script> = Arc::new(script);
    let (reqs, cl) = (requests.clone(), closed.clone());
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            sock.set_nodelay(true).unwrap();
            tokio::spawn(serve_conn(sock, script.clone(), reqs.clone(), cl.clone()));
        }
    });
    RawServer {
        url: format!("http://{addr}/invocations"),
        requests,
        client_closed: closed,
    }
}

async fn serve_conn(
    mut sock: TcpStream,
    script: Arc<Script>,
    requests: Arc<Mutex<Vec<RawRequest>>>,
    closed: Arc<Mutex<Vec<Instant>>>,
) {
    let mut buf = Vec::new();
    loop {
        let Some(req) = read_request(&mut sock, &mut buf).await else {
            return;
        };
        let n = {
            let mut r = requests.lock().unwrap();
            r.push(req.clone());
            r.len() - 1
        };
        for step in script(n, &req) {
            match step {
                Step::Write(b) => {
                    if sock.write_all(&b).await.is_err() {
                        return;
                    }
                    let _ = sock.flush().await;
                }
                Step::WriteBytewise(b) => {
                    for byte in b {
                        if sock.write_all(&[byte]).await.is_err() {
                            return;
                        }
                        let _ = sock.flush().await;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
                Step::Sleep(d) => tokio::time::sleep(d).await,
                Step::Reset => {
                    // SO_LINGER 0: the close sends a TCP RST at once (no blocking with 0).
                    #[allow(deprecated)]
                    let _ = sock.set_linger(Some(Duration::ZERO));
                    drop(sock);
                    return;
                }
                Step::Close => {
                    let _ = sock.shutdown().await;
                    return;
                }
                Step::AwaitClientClose => {
                    let mut scratch = [0u8; 1024];
                    loop {
                        match sock.read(&mut scratch).await {
                            Ok(0) | Err(_) => {
                                closed.lock().unwrap().push(Instant::now());
                                return;
                            }
                            Ok(_) => {}
                        }
                    }
                }
            }
        }
    }
}

async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<RawRequest> {
    let mut scratch = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = sock.read(&mut scratch).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&scratch[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let line = lines.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    buf.drain(..head_end + 4);
    while buf.len() < len {
        let n = sock.read(&mut scratch).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&scratch[..n]);
    }
    let body: Vec<u8> = buf.drain(..len).collect();
    Some(RawRequest {
        line,
        headers,
        body,
        at: Instant::now(),
    })
}

/// A complete response with Content-Length.
pub fn response(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len()).into_bytes();
    for (k, v) in headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// A 200 JSON response.
pub fn json_response(body: &str) -> Vec<u8> {
    response(
        200,
        &[("content-type", "application/json")],
        body.as_bytes(),
    )
}

/// The head of a chunked SSE response.
pub fn sse_head() -> Vec<u8> {
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n".to_vec()
}

/// One HTTP/1.1 chunk.
pub fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// The terminating chunk.
pub fn end_chunks() -> Vec<u8> {
    b"0\r\n\r\n".to_vec()
}

/// A whole chunked SSE response with one chunk per frame.
pub fn sse_response(frames: &[&str]) -> Vec<u8> {
    let mut out = sse_head();
    for f in frames {
        out.extend(chunk(format!("data: {f}\n\n").as_bytes()));
    }
    out.extend(end_chunks());
    out
}

/// The same SSE body as one byte string (chunk-encoded one byte per chunk).
pub fn sse_bytewise_chunks(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for b in body {
        out.extend(chunk(&[*b]));
    }
    out.extend(end_chunks());
    out
}
