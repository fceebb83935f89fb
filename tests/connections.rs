//! Connection-level limits over real sockets, in paused time: connections that never complete
//! a request head (silent, a partial HTTP/2 preface, a partial HTTP/1.1 head, a bare HTTP/2
//! preface) are closed after the header timeout; idle keep-alive HTTP/1.1 and HTTP/2
//! connections after the idle timeout, while a long SSE response is never cut; beyond
//! `max_connections` new connections get `503` + `Retry-After` (probes still answer) or are
//! closed, and are served again once slots free.

use std::sync::Arc;
use std::time::Duration;

use a2a_gateway::executor::{
    AgentExecutor, EventQueue, ExecutorError, RequestContext, TaskUpdater,
};
use a2a_gateway::server::{self, ConnectionLimits};
use a2a_gateway::store::MemoryTaskStore;
use a2a_gateway::transport::{AppState, TransportConfig};
use a2a_gateway::{HandlerConfig, RequestHandler};
use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Starts work and then never finishes (a stream on it stays open).
struct Forever;

#[async_trait]
impl AgentExecutor for Forever {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let u = TaskUpdater::from_context(&ctx, queue);
        u.submit().await?;
        u.start_work(None).await?;
        futures::future::pending::<()>().await;
        Ok(())
    }
}

const HEADER: Duration = Duration::from_secs(2);
const IDLE: Duration = Duration::from_secs(5);

/// The gateway router served under `max_connections` and the short timeouts above.
async fn start(max_connections: usize) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handler = RequestHandler::new(
        Arc::new(Forever),
        Arc::new(MemoryTaskStore::new()),
        HandlerConfig::default(),
    );
    let card = server::simple_card("forever", "never ends", &format!("http://{addr}/"), vec![]);
    let state = AppState::new(handler, card, TransportConfig::default());
    let limits = ConnectionLimits {
        header_timeout: HEADER,
        idle_timeout: IDLE,
        max_connections,
        ..ConnectionLimits::default()
    };
    tokio::spawn(server::serve_with_limits(
        listener,
        server::router(state, None),
        limits,
        futures::future::pending(),
    ));
    addr
}

/// Reads until the server closes; `None` when it has not within `within`.
async fn closed_within(sock: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    match tokio::time::timeout(within, sock.read_to_end(&mut out)).await {
        Ok(_) => Some(out),
        Err(_) => None,
    }
}

/// Reads one HTTP/1.1 response with a `content-length` body: (head, body).
async fn read_response(sock: &mut TcpStream) -> (String, String) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().unwrap())
                })
                .expect("a content-length");
            while buf.len() < end + 4 + len {
                let n = sock.read(&mut chunk).await.unwrap();
                assert!(n > 0, "closed mid-body: {head}");
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned();
            return (head, body);
        }
        let n = sock.read(&mut chunk).await.unwrap();
        assert!(
            n > 0,
            "closed before a response: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn get_healthz(sock: &mut TcpStream) -> (String, String) {
    sock.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    read_response(sock).await
}

fn rpc_post(body: &Value) -> Vec<u8> {
    let body = body.to_string();
    format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[tokio::test(start_paused = true)]
async fn connections_without_a_request_head_are_closed_after_the_header_timeout() {
    let addr = start(1000).await;
    // 5 kinds x 40 sockets, all open at once.
    let kinds: [&[u8]; 5] = [
        b"",
        b"P",
        b"PRI * HTTP/2.0",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\n",
    ];
    let started = Instant::now();
    let mut socks = Vec::new();
    for kind in kinds {
        for _ in 0..40 {
            let mut s = TcpStream::connect(&addr).await.unwrap();
            s.write_all(kind).await.unwrap();
            socks.push((kind, s));
        }
    }
    let results = futures::future::join_all(socks.iter_mut().map(|(kind, s)| async move {
        let got = closed_within(s, HEADER * 5).await;
        (*kind, got, started.elapsed())
    }))
    .await;
    let mut closed = 0;
    for (kind, got, at) in results {
        let kind = String::from_utf8_lossy(kind);
        assert!(got.is_some(), "{kind:?}: still open after {:?}", HEADER * 5);
        assert!(
            at >= HEADER && at < HEADER * 2,
            "{kind:?}: closed after {at:?}"
        );
        closed += 1;
    }
    assert_eq!(closed, 200);
    // The server still answers.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let (head, body) = get_healthz(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "ok\n");
}

#[tokio::test(start_paused = true)]
async fn idle_keep_alive_connections_are_closed_after_the_idle_timeout() {
    let addr = start(1000).await;
    let mut s = TcpStream::connect(&addr).await.unwrap();
    // Requests on the same connection keep it open past the header timeout.
    for _ in 0..3 {
        let (head, _) = get_healthz(&mut s).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        tokio::time::sleep(HEADER + Duration::from_secs(1)).await;
    }
    let idle_from = Instant::now();
    let got = closed_within(&mut s, IDLE * 4).await;
    let idle = idle_from.elapsed() + HEADER + Duration::from_secs(1);
    assert!(got.is_some(), "idle keep-alive connection still open");
    assert!(
        idle >= IDLE && idle < IDLE * 2,
        "closed after {idle:?} idle"
    );
    // A later head that starts but never ends is cut at the header timeout.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    get_healthz(&mut s).await;
    s.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
    let from = Instant::now();
    assert!(closed_within(&mut s, IDLE * 4).await.is_some());
    let took = from.elapsed();
    assert!(
        took >= HEADER && took < IDLE,
        "partial second head cut after {took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn idle_http2_connections_get_goaway_after_the_idle_timeout() {
    let addr = start(1000).await;
    let tcp = TcpStream::connect(&addr).await.unwrap();
    let (client, conn) = h2::client::handshake(tcp).await.unwrap();
    let conn = tokio::spawn(conn);
    let mut client = client.ready().await.unwrap();
    let req = http::Request::get(format!("http://{addr}/healthz"))
        .body(())
        .unwrap();
    let (resp, _) = client.send_request(req, true).unwrap();
    let resp = resp.await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    while let Some(chunk) = body.data().await {
        chunk.unwrap();
    }
    let idle_from = Instant::now();
    drop(client);
    let ended = tokio::time::timeout(IDLE * 4, conn).await;
    let idle = idle_from.elapsed();
    assert!(ended.is_ok(), "idle HTTP/2 connection still open");
    assert!(
        idle >= IDLE && idle < IDLE * 2,
        "closed after {idle:?} idle"
    );
}

#[tokio::test(start_paused = true)]
async fn a_long_stream_is_not_idle() {
    let addr = start(1000).await;
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}});
    s.write_all(&rpc_post(&body)).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).await.unwrap();
    assert!(
        String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    // Well past the idle and header timeouts, the stream still delivers (keep-alives).
    tokio::time::sleep(IDLE * 6).await;
    let n = tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf))
        .await
        .expect("the stream keeps sending")
        .unwrap();
    assert!(n > 0, "stream closed while in flight");
}

#[tokio::test(start_paused = true)]
async fn beyond_max_connections_callers_get_503_and_probes_still_answer() {
    const MAX: usize = 8; // refusal lane: 1
    let addr = start(MAX).await;
    let mut held = Vec::new();
    for _ in 0..MAX {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let (head, _) = get_healthz(&mut s).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        held.push(s);
    }
    let get_task =
        json!({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "nope"}});

    // Over the limit: a JSON-RPC call is refused with 503, Retry-After and a JSON-RPC error.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(&rpc_post(&get_task)).await.unwrap();
    let (head, body) = read_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("\r\nretry-after: 1"), "{head}");
    assert!(lower.contains("\r\nconnection: close"), "{head}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["jsonrpc"], "2.0");
    assert_eq!(v["id"], Value::Null);
    assert_eq!(v["error"]["code"], -32000, "{v}");
    assert!(
        closed_within(&mut s, Duration::from_secs(1))
            .await
            .is_some(),
        "a refused connection is closed"
    );
    drop(s);
    // ... while the probes still answer there.
    for probe in ["/healthz", "/readyz"] {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(format!("GET {probe} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let (head, _) = read_response(&mut s).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{probe}: {head}");
        assert!(
            closed_within(&mut s, Duration::from_secs(1))
                .await
                .is_some(),
            "a connection in the refusal lane is closed after one answer"
        );
    }
    // With the refusal lane taken too, a new connection is closed at once, unanswered.
    let mut lane = TcpStream::connect(&addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut shed = TcpStream::connect(&addr).await.unwrap();
    let got = closed_within(&mut shed, Duration::from_secs(1)).await;
    assert_eq!(
        got.as_deref(),
        Some(&b""[..]),
        "shed connection not closed at once"
    );
    // The held connections are still served.
    let (head, _) = get_healthz(&mut held[0]).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    // Slots free: new connections are served as usual again.
    held.truncate(MAX - 2);
    lane.shutdown().await.unwrap();
    drop(lane);
    let mut served = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&rpc_post(&get_task)).await.unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(1), s.read_to_end(&mut out)).await;
        let text = String::from_utf8_lossy(&out).into_owned();
        if text.starts_with("HTTP/1.1 200") {
            served = Some(text);
            break;
        }
    }
    let text = served.expect("no connection served after slots freed");
    assert!(text.contains("-32001"), "{text}");
}

/// Sends 160 artifact chunks of 64 KiB (10 MiB, more than the kernel buffers on loopback
/// hold) at once, and 2 s later one more and COMPLETED.
struct Burst;

/// The text of the chunk that ends [`Burst`]'s reply.
const BURST_END: &str = "the last chunk of the burst";

#[async_trait]
impl AgentExecutor for Burst {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let u = TaskUpdater::from_context(&ctx, queue);
        u.submit().await?;
        u.start_work(None).await?;
        let id = Some("out".to_owned());
        let text = "b".repeat(64 * 1024);
        for i in 0..160 {
            let part = a2a_gateway::protocol::Part::text(text.clone());
            u.add_artifact(vec![part], id.clone(), None, i > 0, false)
                .await?;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let part = a2a_gateway::protocol::Part::text(BURST_END);
        u.add_artifact(vec![part], id, None, true, true).await?;
        u.complete(None).await?;
        Ok(())
    }
}

/// A server of [`Burst`] under the default limits, stopped by the returned sender, and a
/// client with a small receive buffer (so that what it has not read stays in the
/// server's buffers) that sent a `SendStreamingMessage` and read the response head: the
/// socket, what it read, the server's task and the sender that stops it.
async fn burst_stream() -> (
    TcpStream,
    Vec<u8>,
    tokio::task::JoinHandle<std::io::Result<()>>,
    tokio::sync::oneshot::Sender<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handler = RequestHandler::new(
        Arc::new(Burst),
        Arc::new(MemoryTaskStore::new()),
        HandlerConfig::default(),
    );
    let card = server::simple_card("burst", "bursts", &format!("http://{addr}/"), vec![]);
    let state = AppState::new(handler, card, TransportConfig::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(server::serve_with_limits(
        listener,
        server::router(state, None),
        ConnectionLimits::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    let mut s = socket.connect(addr).await.unwrap();
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
        "params": {"message": {"messageId": "m1", "role": "ROLE_USER",
            "parts": [{"text": "burst"}]}}});
    s.write_all(&rpc_post(&msg)).await.unwrap();
    let mut first = [0u8; 1024];
    let n = s.read(&mut first).await.unwrap();
    assert!(
        first[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&first[..n])
    );
    (s, first[..n].to_vec(), served, stop)
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_ends_after_the_close_grace_still_reaches_a_slow_client_whole() {
    let (mut s, first, _served, stop) = burst_stream().await;
    let started = Instant::now();
    // The server is asked to stop while the burst waits in its buffers: the connection
    // is asked to close, and its response is still in flight until the task ends (2 s).
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.send(()).unwrap();
    // The client reads again only after the task ended (2 s), 2 s after the stop
    // (the 1 s grace before `84ba60b` would have cut it at 1.5 s), within the 5 s
    // close limit; then it reads as fast as it can.
    tokio::time::sleep_until(started + Duration::from_millis(2500)).await;
    let mut rest = first;
    let read = tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the connection stayed open");
    let text = String::from_utf8_lossy(&rest);
    assert!(
        text.contains(BURST_END) && text.contains("TASK_STATE_COMPLETED"),
        "the stream lost its end: {} bytes, ending {:?}",
        rest.len(),
        &text[text.len().saturating_sub(200)..]
    );
    // The chunked body ended properly, not cut.
    assert!(
        text.ends_with("\r\n0\r\n\r\n"),
        "ends {:?}",
        &text[text.len().saturating_sub(80)..]
    );
}

#[tokio::test(start_paused = true)]
async fn a_client_that_stops_reading_does_not_hold_the_shutdown() {
    let (mut s, _, served, stop) = burst_stream().await;
    // The client reads nothing more; the server is asked to stop while its stream is in
    // flight, and the task ends 2 s later with the stream's last events unread.
    let started = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.send(()).unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(60), served).await;
    assert!(
        ended.is_ok(),
        "the server still waits for the client after 60 s"
    );
    // Dropped 5 s after it was asked to close, not at once.
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(5500) && took < Duration::from_secs(7),
        "the server ended {took:?} after the stream began"
    );
    // What the client gets then is cut: the connection was dropped, not ended cleanly.
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut rest)).await;
    assert!(!String::from_utf8_lossy(&rest).ends_with("\r\n0\r\n\r\n"));
}
