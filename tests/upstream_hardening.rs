//! Hostile upstream replies against the AgentCore executor, on 127.0.0.1:0 fakes that
//! send the exact bytes (issue 15): oversized and unterminated SSE events, CR-only
//! line endings, a final event without its blank line, oversized JSON bodies,
//! declared content types, token endpoint answers, and what a remote caller is told.

mod upstream_common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_gateway::protocol::TaskState;
use a2a_gateway::upstream::raw_mock::*;
use a2a_gateway::upstream::{
    AgentCoreExecutor, AgentCoreSettings, AuthSettings, OAuth2Settings, TokenEndpoint,
};
use secrecy::SecretString;
use upstream_common::*;

fn settings(url: &str) -> AgentCoreSettings {
    let mut s = AgentCoreSettings::for_url(url);
    s.connection.retry_base_delay = Duration::from_millis(10);
    s.connection.read_timeout = Duration::from_secs(10);
    s.connection.max_retries = 0;
    s.stop_session_on_cancel = false;
    s
}

fn exec(s: AgentCoreSettings) -> AgentCoreExecutor {
    AgentCoreExecutor::new(s).expect("executor")
}

/// Peak resident set of this process, in MiB (Linux `VmHWM`).
fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

/// Measures one unterminated `data:` line of `A2A_MEASURE_MB` MiB (default 100): time
/// and peak RSS. Run by hand: `cargo test --test upstream_hardening measure -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "measurement, run by hand"]
async fn measure_unterminated_data_line() {
    let mb: usize = std::env::var("A2A_MEASURE_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let up = raw_server(move |_, _| {
        let mut out = sse_head();
        out.extend(chunk(b"data: "));
        let piece = vec![b'x'; 64 * 1024];
        for _ in 0..(mb * 16) {
            out.extend(chunk(&piece));
        }
        out.extend(end_chunks());
        vec![Step::Write(out)]
    })
    .await;
    let mut s = settings(&up.url);
    s.connection.read_timeout = Duration::from_secs(600);
    if let Some(max) = std::env::var("A2A_MEASURE_MAX_EVENT")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        s.connection.max_event_bytes = max;
    }
    let before = peak_rss_mib();
    let t = std::time::Instant::now();
    let out = run(&exec(s), ctx("x")).await;
    println!(
        "{mb} MiB unterminated data line: {:?}, peak RSS {} MiB (before the run {} MiB), final {:?}: {}",
        t.elapsed(),
        peak_rss_mib(),
        before,
        out.final_state(),
        out.reason()
    );
}

/// A chunked SSE response whose body is exactly `body`, sent in the given pieces.
fn sse_pieces(pieces: &[&[u8]]) -> Vec<u8> {
    let mut out = sse_head();
    for p in pieces {
        out.extend(chunk(p));
    }
    out.extend(end_chunks());
    out
}

async fn run_sse(pieces: &'static [&'static [u8]]) -> Outcome {
    let up = raw_server(move |_, _| vec![Step::Write(sse_pieces(pieces))]).await;
    run(&exec(settings(&up.url)), ctx("x")).await
}

// ------------------------------------------------------------ SSE bounds and ends

#[tokio::test]
async fn an_endless_data_line_fails_at_the_event_bound_at_once() {
    // 1 MiB of one `data:` line, then the upstream keeps the stream open.
    let up = raw_server(|_, _| {
        let mut out = sse_head();
        out.extend(chunk(b"data: \"Hel"));
        let piece = vec![b'x'; 64 * 1024];
        for _ in 0..16 {
            out.extend(chunk(&piece));
        }
        vec![Step::Write(out), Step::AwaitClientClose]
    })
    .await;
    let mut s = settings(&up.url);
    s.connection.max_event_bytes = 256 * 1024;
    let started = std::time::Instant::now();
    let out = run(&exec(s), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert_eq!(
        out.reason(),
        "an event in the AgentCore runtime's stream exceeded 262144 bytes (setting `max_event_bytes`); the partial output is not a complete answer"
    );
    // Not after the 10 s read timeout: when the bound is crossed.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(out.correlation_id().is_some());
}

#[tokio::test]
async fn events_within_the_bound_pass_and_the_default_is_4_mib() {
    assert_eq!(
        AgentCoreSettings::for_url("http://x/invocations")
            .connection
            .max_event_bytes,
        4 * 1024 * 1024
    );
    let up = raw_server(|_, _| {
        let ev = format!("data: \"{}\"\n\n", "y".repeat(200 * 1024));
        let mut out = sse_head();
        for _ in 0..10 {
            out.extend(chunk(ev.as_bytes()));
        }
        out.extend(end_chunks());
        vec![Step::Write(out)]
    })
    .await;
    let mut s = settings(&up.url);
    s.connection.max_event_bytes = 256 * 1024;
    let out = run(&exec(s), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(out.text().len(), 10 * 200 * 1024);
}

/// A reply of `events` SSE events of `kib` KiB of text each, in HTTP chunks of
/// `per_chunk` events, then the end of the body; and the body's length in bytes.
fn kib_events(events: usize, kib: usize, per_chunk: usize) -> (Vec<u8>, u64) {
    let ev = format!("data: \"{}\"\n\n", "z".repeat(kib * 1024));
    let mut out = sse_head();
    for n in (0..events).step_by(per_chunk) {
        out.extend(chunk(ev.repeat(per_chunk.min(events - n)).as_bytes()));
    }
    out.extend(end_chunks());
    (out, (events * ev.len()) as u64)
}

#[tokio::test]
async fn an_endless_stream_fails_at_the_stream_bound_and_keeps_what_it_relayed() {
    // 10 KiB events, 1 MiB of them, and the upstream keeps the stream open after.
    let up = raw_server(|_, _| {
        let (mut out, _) = kib_events(100, 10, 1);
        out.truncate(out.len() - end_chunks().len());
        vec![Step::Write(out), Step::AwaitClientClose]
    })
    .await;
    let mut s = settings(&up.url);
    s.connection.max_stream_bytes = 256 * 1024;
    let started = std::time::Instant::now();
    let out = run(&exec(s), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert_eq!(
        out.reason(),
        "the AgentCore runtime's streamed reply exceeded 262144 bytes (setting `max_stream_bytes`); the partial output is not a complete answer"
    );
    // When the bound is crossed, not after the 10 s read timeout.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // The events before the bound were relayed as chunks and stay in the task.
    let relayed = out.text().len();
    assert!(
        (20 * 10 * 1024..=256 * 1024).contains(&relayed),
        "{relayed} bytes relayed"
    );
}

#[tokio::test]
async fn a_stream_of_exactly_the_bound_completes_one_byte_less_keeps_every_whole_event_and_the_default_is_100_mib()
 {
    assert_eq!(
        AgentCoreSettings::for_url("http://x/invocations")
            .connection
            .max_stream_bytes,
        100 * 1024 * 1024
    );
    // 300 events of 1 KiB in one HTTP chunk: the bound one byte short of the body falls
    // inside the last event, and every event before it is still relayed (the parser is
    // fed 8 KiB at a time: the bytes up to the bound of the slice that crosses it too).
    let (_, len) = kib_events(300, 1, 300);
    for (limit, want, kept) in [
        (len, TaskState::Completed, 300),
        (len - 1, TaskState::Failed, 299),
    ] {
        let up = raw_server(|_, _| vec![Step::Write(kib_events(300, 1, 300).0)]).await;
        let mut s = settings(&up.url);
        s.connection.max_stream_bytes = limit;
        let out = run(&exec(s), ctx("x")).await;
        assert_eq!(out.final_state(), want, "limit {limit}: {}", out.reason());
        assert_eq!(out.text().len(), kept * 1024, "limit {limit}");
    }
}

#[tokio::test]
async fn cr_only_line_endings_lose_no_text() {
    // The CR ending the last event's blank line is the last byte of a read.
    let out = run_sse(&[
        b"data: \"Hello\"\r\r",
        b"data: \", world\"\r",
        b"\rdata: \"!\"\r\r",
    ])
    .await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(out.text(), "Hello, world!");
}

#[tokio::test]
async fn crlf_split_between_reads_and_mixed_endings() {
    let out = run_sse(&[
        b"data: \"a\"\r",
        b"\n\r",
        b"\ndata: \"b\"\n\r\ndata: \"c\"\r\n\r",
        b"\n",
    ])
    .await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    assert_eq!(out.text(), "abc");
}

#[tokio::test]
async fn a_final_event_without_its_blank_line_is_delivered() {
    for pieces in [
        &[&b"data: \"Hello, \"\n\n"[..], b"data: \"world!\"\n"][..],
        &[&b"data: \"Hello, \"\r\r"[..], b"data: \"world!\"\r"][..],
        &[&b"data: \"Hello, \"\r\n\r\n"[..], b"data: \"world!\"\r\n"][..],
    ] {
        let pieces: Vec<Vec<u8>> = pieces.iter().map(|p| p.to_vec()).collect();
        let up = raw_server(move |_, _| {
            let refs: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
            vec![Step::Write(sse_pieces(&refs))]
        })
        .await;
        let out = run(&exec(settings(&up.url)), ctx("x")).await;
        assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
        assert_eq!(out.text(), "Hello, world!");
    }
}

#[tokio::test]
async fn a_body_ending_in_the_middle_of_a_line_fails_as_truncated() {
    let out = run_sse(&[b"data: \"Hello, \"\n\n", b"data: {\"text\": \"wor"]).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert_eq!(
        out.reason(),
        "the AgentCore runtime's event stream ended in the middle of an event line; the partial output is not a complete answer"
    );
    assert!(out.chunks().iter().all(|c| !c.last), "never a last chunk");
}

// ------------------------------------------------------------ JSON bound and types

#[tokio::test]
async fn a_json_reply_over_max_reply_bytes_fails_declared_or_chunked() {
    let big = format!("\"{}\"", "z".repeat(17 * 1024 * 1024));
    // Declared length over the default 16 MiB: refused before reading.
    let body = big.clone();
    let up = raw_server(move |_, _| vec![Step::Write(json_response(&body))]).await;
    let out = run(&exec(settings(&up.url)), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert_eq!(
        out.reason(),
        "the AgentCore runtime's reply exceeded 16777216 bytes (setting `max_reply_bytes`)"
    );
    // Chunked, no length.
    let up = raw_server(move |_, _| {
        let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        for piece in big.as_bytes().chunks(1024 * 1024) {
            out.extend(chunk(piece));
        }
        out.extend(end_chunks());
        vec![Step::Write(out)]
    })
    .await;
    let mut s = settings(&up.url);
    s.connection.max_reply_bytes = 4 * 1024 * 1024;
    let out = run(&exec(s), ctx("x")).await;
    assert_eq!(out.final_state(), TaskState::Failed);
    assert!(
        out.reason().contains("exceeded 4194304 bytes"),
        "{}",
        out.reason()
    );
}

async fn reply_with(content_type: Option<&str>, body: &str) -> Outcome {
    let mut headers = vec![];
    if let Some(ct) = content_type {
        headers.push(("content-type".to_owned(), ct.to_owned()));
    }
    let body = body.to_owned();
    let up = raw_server(move |_, _| {
        let h: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        vec![Step::Write(response(200, &h, body.as_bytes()))]
    })
    .await;
    run(&exec(settings(&up.url)), ctx("x")).await
}

#[tokio::test]
async fn the_declared_content_type_decides_and_nothing_is_guessed() {
    // Read as declared.
    for (ct, body, text) in [
        (Some("application/json"), r#"{"response": "r"}"#, "r"),
        (Some("Application/JSON; charset=utf-8"), r#""j""#, "j"),
        (Some("application/vnd.agent+json"), r#""v""#, "v"),
        (None, r#""none""#, "none"),
        (
            Some("text/plain; charset=utf-8"),
            "plain {words}",
            "plain {words}",
        ),
        (Some("TEXT/EVENT-STREAM"), "data: \"s\"\n\n", "s"),
    ] {
        let out = reply_with(ct, body).await;
        assert_eq!(
            out.final_state(),
            TaskState::Completed,
            "{ct:?}: {}",
            out.reason()
        );
        assert_eq!(out.text(), text, "{ct:?}");
    }
    // Refused with a clear reason.
    for (ct, body, want) in [
        (
            Some("application/json"),
            "data: \"s\"\n\n",
            "the AgentCore runtime's reply is malformed: the body is declared JSON (or undeclared) but is not JSON",
        ),
        (
            None,
            "just words",
            "the AgentCore runtime's reply is malformed: the body is declared JSON (or undeclared) but is not JSON",
        ),
        (
            Some("application/octet-stream"),
            "\"bytes\"",
            "the AgentCore runtime answered HTTP 200 with Content-Type `application/octet-stream` instead of an agent reply (text/event-stream, application/json or text/plain)",
        ),
        (
            Some("text/event-streamx"),
            "data: \"s\"\n\n",
            "the AgentCore runtime answered HTTP 200 with Content-Type `text/event-streamx` instead of an agent reply (text/event-stream, application/json or text/plain)",
        ),
        (
            Some("text/plain"),
            "<!DOCTYPE html><html></html>",
            "the AgentCore runtime answered HTTP 200 with an HTML page instead of an agent reply",
        ),
    ] {
        let out = reply_with(ct, body).await;
        assert_eq!(out.final_state(), TaskState::Failed, "{ct:?}");
        assert_eq!(out.reason(), want, "{ct:?}");
    }
}

// ------------------------------------------------------------ token endpoint answers

fn oauth_to(url: &str) -> AuthSettings {
    AuthSettings::OAuth2(OAuth2Settings {
        client_id: "cid".into(),
        client_secret: SecretString::from("s3cret-value"),
        scope: None,
        endpoint: TokenEndpoint::Url(url.to_owned()),
        refresh_before_expiry: Duration::from_secs(30),
    })
}

/// Runs one task against an upstream that answers `"ok"`, with a token endpoint
/// that answers exactly `token_answer`; returns the outcome and whether the
/// upstream was invoked.
async fn with_token_answer(token_answer: Vec<u8>) -> (Outcome, usize) {
    let up = raw_server(|_, _| vec![Step::Write(json_response(r#""ok""#))]).await;
    let tok = raw_server(move |_, _| vec![Step::Write(token_answer.clone())]).await;
    let mut s = settings(&up.url);
    s.connection.auth = oauth_to(&tok.url);
    let out = run(&exec(s), ctx("x")).await;
    (out, up.count())
}

fn token_json(status: u16, body: &str) -> Vec<u8> {
    response(
        status,
        &[("content-type", "application/json")],
        body.as_bytes(),
    )
}

#[tokio::test]
async fn token_answers_are_trusted_only_as_rfc_6749_describes() {
    // Accepted.
    for answer in [
        token_json(
            200,
            r#"{"access_token": "t1", "token_type": "Bearer", "expires_in": 3600}"#,
        ),
        token_json(200, r#"{"access_token": "t1", "token_type": "bearer"}"#),
        token_json(
            200,
            r#"{"access_token": "t1", "token_type": "BEARER", "expires_in": "3599"}"#,
        ),
        response(
            200,
            &[("content-type", "application/json;charset=UTF-8")],
            br#"{"access_token": "t1", "token_type": "Bearer", "expires_in": 60.5}"#,
        ),
        // Used for this one request, not cached.
        token_json(
            200,
            r#"{"access_token": "t1", "token_type": "Bearer", "expires_in": 0}"#,
        ),
    ] {
        let (out, invoked) = with_token_answer(answer).await;
        assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
        assert_eq!(invoked, 1);
    }
    // Refused, with what is wrong; the upstream is never invoked.
    let p = "the upstream token endpoint failed";
    for (answer, want) in [
        (
            token_json(200, r#"{"access_token": "t1", "expires_in": 3600}"#),
            format!("{p} (HTTP 200): the token response lacks `token_type`"),
        ),
        (
            token_json(200, r#"{"access_token": "t1", "token_type": "mac"}"#),
            format!("{p} (HTTP 200): the token response's `token_type` is not Bearer"),
        ),
        (
            token_json(200, r#"{"access_token": "", "token_type": "Bearer"}"#),
            format!("{p} (HTTP 200): the token response has an empty access_token"),
        ),
        (
            token_json(200, r#"{"access_token": "a b", "token_type": "Bearer"}"#),
            format!(
                "{p} (HTTP 200): the token response's access_token has characters a bearer token cannot have"
            ),
        ),
        (
            token_json(200, r#"{"access_token": 42, "token_type": "Bearer"}"#),
            format!("{p} (HTTP 200): the token response has an unexpected value at `access_token`"),
        ),
        (
            token_json(
                200,
                r#"{"access_token": "t1", "token_type": "Bearer", "expires_in": -5}"#,
            ),
            format!(
                "{p} (HTTP 200): the token response's `expires_in` is not a number of seconds of 0 or more"
            ),
        ),
        (
            token_json(
                200,
                r#"{"access_token": "t1", "token_type": "Bearer", "expires_in": "soon"}"#,
            ),
            format!(
                "{p} (HTTP 200): the token response's `expires_in` is not a number of seconds of 0 or more"
            ),
        ),
        (
            response(
                200,
                &[("content-type", "text/html")],
                br#"{"access_token": "t1", "token_type": "Bearer"}"#,
            ),
            format!("{p} (HTTP 200): the token response is not declared application/json"),
        ),
        (
            response(
                200,
                &[],
                br#"{"access_token": "t1", "token_type": "Bearer"}"#,
            ),
            format!("{p} (HTTP 200): the token response is not declared application/json"),
        ),
        (
            token_json(200, "not json"),
            format!("{p} (HTTP 200): the response is not JSON"),
        ),
        (
            token_json(201, r#"{"access_token": "t1", "token_type": "Bearer"}"#),
            format!("{p} (HTTP 201): the answer is not an OAuth error response"),
        ),
        (
            token_json(500, "<html>down</html>"),
            format!("{p} (HTTP 500): the answer is not an OAuth error response"),
        ),
        (
            token_json(
                200,
                &format!(
                    r#"{{"access_token": "t1", "token_type": "Bearer", "pad": "{}"}}"#,
                    "p".repeat(70 * 1024)
                ),
            ),
            format!("{p} (HTTP 200): the answer is larger than 64 KiB"),
        ),
    ] {
        let (out, invoked) = with_token_answer(answer).await;
        assert_eq!(out.final_state(), TaskState::Failed, "{want}");
        assert_eq!(out.reason(), want);
        assert_eq!(invoked, 0, "{want}");
    }
}

// ------------------------------------------------------------ what a caller is told

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn free_url(path: &str) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}{path}", l.local_addr().unwrap());
    drop(l);
    url
}

#[tokio::test(flavor = "current_thread")]
async fn callers_get_a_category_and_a_correlation_id_the_log_gets_the_details() {
    let capture = Capture::default();
    let w = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(move || w.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    // The token endpoint is down.
    let up = raw_server(|_, _| vec![Step::Write(json_response(r#""ok""#))]).await;
    let token_url = free_url("/oauth2/token");
    let mut s = settings(&up.url);
    s.connection.auth = oauth_to(&token_url);
    let token_down = run(&exec(s), ctx("x")).await;
    // The runtime is down.
    let runtime_url = free_url("/invocations");
    let runtime_down = run(&exec(settings(&runtime_url)), ctx("x")).await;

    let logs = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    for (out, want, url) in [
        (
            &token_down,
            "the upstream token endpoint is unreachable",
            &token_url,
        ),
        (
            &runtime_down,
            "could not connect to the AgentCore runtime",
            &runtime_url,
        ),
    ] {
        assert_eq!(out.final_state(), TaskState::Failed);
        let raw = out.raw_reason();
        let id = out.correlation_id().expect("a correlation id");
        assert_eq!(id.len(), 12);
        assert_eq!(raw, format!("{want} [correlation id {id}]"));
        for internal in ["127.0.0.1", "http://", "os error", "tcp connect", "refused"] {
            assert!(
                !raw.to_lowercase().contains(internal),
                "{internal} in {raw}"
            );
        }
        // The log line under that id has what the caller does not get.
        let line = logs
            .lines()
            .find(|l| l.contains(&id))
            .unwrap_or_else(|| panic!("no log line with {id}: {logs}"));
        assert!(
            line.contains(url.as_str()) || line.contains(&url.replace("/invocations", "")),
            "{line}"
        );
        assert!(
            line.contains("os error 111") || line.contains("Connection refused"),
            "{line}"
        );
    }
}
