//! A byte-level runtime for the upstream tests (feature `test-util`): a raw HTTP/1.1
//! server on `127.0.0.1:0` whose answer to each request is a script of [`Step`]s (bytes
//! written whole or one at a time, pauses, a TCP reset, a close, waiting for the client to
//! hang up), with builders of the usual responses ([`json_response`], [`sse_response`],
//! chunked encoding). It answers what no HTTP server library would send (a body cut short,
//! a chunk split mid-frame, a reset after the head), where [`MockRuntime`] speaks correct
//! HTTP with scripted content; both are the peers of the executor's fault tests.
//!
//! [`MockRuntime`]: super::mock::MockRuntime
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// A request as the raw fake saw it.
#[derive(Debug, Clone)]
pub struct RawRequest {
    /// Request line, e.g. `POST /invocations HTTP/1.1`.
    pub line: String,
    /// Header names lowercased, values as sent.
    pub headers: Vec<(String, String)>,
    /// The body (`content-length` bytes).
    pub body: Vec<u8>,
    /// When its body was read whole.
    pub at: Instant,
}

impl RawRequest {
    /// The value of header `name` (lowercase), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    ///
    /// # Panics
    /// When the body is not JSON (a test's assertion).
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
    /// Pause this long.
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
    /// `http://127.0.0.1:PORT/invocations`.
    pub url: String,
    /// Every request so far, in order of arrival.
    pub requests: Arc<Mutex<Vec<RawRequest>>>,
    /// When the client closed a connection during `AwaitClientClose`.
    pub client_closed: Arc<Mutex<Vec<Instant>>>,
}

impl RawServer {
    /// Every request so far, in order of arrival.
    pub fn requests(&self) -> Vec<RawRequest> {
        self.requests.lock().unwrap().clone()
    }

    /// How many requests arrived so far.
    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

type Script = dyn Fn(usize, &RawRequest) -> Vec<Step> + Send + Sync;

/// Starts a raw upstream on `127.0.0.1:0` whose reply to the n-th request (0-based, over
/// all connections) is `script(n, &request)`. It serves until the test's runtime ends.
///
/// # Panics
/// When no loopback port can be bound.
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
