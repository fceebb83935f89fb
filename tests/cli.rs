//! End-to-end tests of the real `a2a-gateway` binary: `demo` + `send`, `serve` with a
//! file and an environment override, `check-config` redaction and errors, SIGTERM
//! during a streaming task, and `/metrics`.
//!
//! Every child gets an explicit, cleared environment (the test process environment
//! is never changed), listens on `127.0.0.1:0`, runs in a temporary directory, and
//! is killed by its pid if a test fails. Every wait is bounded.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::demo::runtime::{self, RuntimeOptions};
use a2a_gateway::test_util::{
    GatewayBuilder, GatewayProcess, free_port, get_json, rpc, strip_ansi,
};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// `a2a-gateway ARGS` in `dir` with exactly `env` (plus PATH).
fn gateway(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> GatewayBuilder {
    GatewayProcess::init(BIN)
        .current_dir(dir)
        .args(args)
        .envs(env.iter().copied())
}

/// Starts `a2a-gateway ARGS` (`serve` or `demo`) and waits until it reports its URL
/// (`serve` logs "listening on URL"; `demo` prints "gateway: URL"); killed on drop.
fn start(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> GatewayProcess {
    gateway(dir, args, env).timeout(START_TIMEOUT).start()
}

/// Runs `a2a-gateway ARGS` to completion (bounded).
fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    gateway(dir, args, env)
        .timeout(Duration::from_secs(30))
        .run()
}

fn text(out: &[u8]) -> String {
    strip_ansi(&String::from_utf8_lossy(out))
}

/// A config file for `serve` with a memory store and `upstream_url`.
fn write_config(dir: &Path, extra: &str, upstream_url: &str) -> String {
    let path = dir.join("gateway.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[store]\nurl = \"memory:\"\n\n\
             [upstream]\nurl = \"{upstream_url}\"\nhttp_version = \"http2\"\n\n{extra}"
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// A local stand-in runtime in this process; stops when the token is dropped.
async fn stand_in(options: RuntimeOptions) -> (String, tokio_util::sync::DropGuard) {
    let stop = CancellationToken::new();
    let addr = a2a_gateway::demo::spawn_local(runtime::router(options), stop.clone())
        .await
        .unwrap();
    (format!("http://{addr}/invocations"), stop.drop_guard())
}

#[test]
fn demo_starts_and_send_gets_a_streamed_answer() {
    let dir = tempfile::tempdir().unwrap();
    let demo_dir = dir.path().join("demo-data");
    let demo = start(
        dir.path(),
        &[
            "demo",
            "--listen",
            "127.0.0.1:0",
            "--dir",
            demo_dir.to_str().unwrap(),
        ],
        &[],
    );
    assert!(demo_dir.is_dir(), "the demo creates its directory");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !demo.logs().contains("gateway: http") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(demo.logs().contains("LOCAL STAND-IN"), "{}", demo.logs());
    // The banner's commands are the README's example list, line for line.
    let words = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let readme: Vec<String> =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap()
            .lines()
            .map(words)
            .collect();
    let banner: Vec<String> = demo
        .logs()
        .lines()
        .filter(|l| l.starts_with("  a2a-gateway ") || l.starts_with("  curl "))
        .map(|l| words(&l.replace(&demo.url, "http://127.0.0.1:8080/")))
        .collect();
    assert!(banner.len() >= 5, "{}", demo.logs());
    let start = readme
        .iter()
        .position(|l| *l == banner[0])
        .unwrap_or_else(|| panic!("README lacks {:?}", banner[0]));
    assert_eq!(readme[start..start + banner.len()], banner[..]);

    let out = run(
        dir.path(),
        &["send", "--url", &demo.url, "--stream", "Hello there"],
        &[],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("» working"), "{stdout}");
    assert!(
        stdout.contains("Hello from the local stand-in runtime! You said: \"Hello there\"."),
        "{stdout}"
    );
    assert!(stdout.contains("» completed"), "{stdout}");
    assert!(stdout.contains("task id: "), "{stdout}");

    // Input required, then a follow-up on the same task.
    let out = run(
        dir.path(),
        &["send", "--url", &demo.url, "--stream", "Please ask me"],
        &[],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("» input-required: Which release"),
        "{stdout}"
    );
    let line = stdout.lines().find(|l| l.starts_with("task id: ")).unwrap();
    let mut ids = line.split_whitespace().filter(|w| w.len() > 20);
    let (task, context) = (ids.next().unwrap(), ids.next().unwrap());
    let out = run(
        dir.path(),
        &[
            "send",
            "--url",
            &demo.url,
            "--stream",
            "--task-id",
            task,
            "--context-id",
            context,
            "v1.2",
        ],
        &[],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("With \"v1.2\" I have everything"),
        "{stdout}"
    );
    // The stream opens with the task as the question left it; that is not repeated.
    assert!(!stdout.contains("input-required"), "{stdout}");
    assert!(stdout.contains(&format!("task id: {task}")), "{stdout}");

    // A failing task: non-zero exit, the reason shown.
    let out = run(
        dir.path(),
        &["send", "--url", &demo.url, "Please fail"],
        &[],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("» failed"), "{stdout}");
    assert!(stdout.contains("asked to fail"), "{stdout}");

    // The demo's upstream uses OAuth with the stand-in issuer, over HTTP/2.
    let logs = demo.logs_when(
        |l| l.contains("issued an access token") && l.contains("HTTP/2.0"),
        Duration::from_secs(10),
    );
    assert!(logs.contains("issued an access token"), "{logs}");
    assert!(logs.contains("HTTP/2.0"), "{logs}");
}

#[tokio::test]
async fn serve_uses_the_environment_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _guard) = stand_in(RuntimeOptions {
        word_delay: Duration::from_millis(1),
        ..RuntimeOptions::default()
    })
    .await;
    let file = write_config(
        dir.path(),
        "[agent]\nname = \"name-from-file\"\ndescription = \"description-from-file\"\n",
        &upstream,
    );
    let gw = start(
        dir.path(),
        &["serve", "--config", &file],
        &[("A2A_GATEWAY_AGENT__NAME", "name-from-env")],
    );
    let card: Value = get_json(
        &reqwest::Client::new(),
        &format!("{}.well-known/agent-card.json", gw.url),
    )
    .await;
    assert_eq!(card["name"], "name-from-env", "{card}");
    assert_eq!(card["description"], "description-from-file", "{card}");

    // A2A_GATEWAY_CONFIG names the file when --config is absent.
    let gw2 = start(dir.path(), &["serve"], &[("A2A_GATEWAY_CONFIG", &file)]);
    let card: Value = get_json(
        &reqwest::Client::new(),
        &format!("{}.well-known/agent-card.json", gw2.url),
    )
    .await;
    assert_eq!(card["name"], "name-from-file", "{card}");

    // gRPC on its own port 0: the card names the port bound, which takes connections.
    let gw3 = start(
        dir.path(),
        &["serve", "--config", &file],
        &[("A2A_GATEWAY_SERVER__GRPC_LISTEN", "127.0.0.1:0")],
    );
    let card: Value = get_json(
        &reqwest::Client::new(),
        &format!("{}.well-known/agent-card.json", gw3.url),
    )
    .await;
    let grpc = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["protocolBinding"] == "GRPC")
        .unwrap_or_else(|| panic!("{card}"))["url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        grpc.starts_with("127.0.0.1:") && !grpc.ends_with(":0"),
        "{card}"
    );
    tokio::net::TcpStream::connect(&grpc)
        .await
        .unwrap_or_else(|e| panic!("the card's gRPC address {grpc}: {e}"));

    // The gateway forwards to the upstream the file names.
    let reply = rpc(
        &reqwest::Client::new(),
        &gw.url,
        "SendMessage",
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
    )
    .await;
    assert_eq!(
        reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{reply}"
    );
}

#[test]
fn check_config_never_prints_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("secret.txt");
    std::fs::write(&secret_file, "secret-from-a-file-3\n").unwrap();
    let file = write_config(
        dir.path(),
        "[upstream.auth]\nkind = \"oauth2\"\nclient_id = \"client-1\"\n\
         client_secret = \"secret-in-the-file-1\"\n\
         token_url = \"https://auth.example.com/oauth2/token\"\n",
        "https://runtime.example.com/invocations",
    );
    let out = run(
        dir.path(),
        &["check-config", "--config", &file],
        &[
            (
                "A2A_GATEWAY_UPSTREAM__AUTH__CLIENT_SECRET",
                "secret-from-env-2",
            ),
            (
                "A2A_GATEWAY_STORE__URL",
                "postgres://gw:db-password-4@db.example.com/gw",
            ),
        ],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for secret in ["secret-in-the-file-1", "secret-from-env-2", "db-password-4"] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{stdout}\n{stderr}"
        );
    }
    assert!(stdout.contains("client_secret = \"***\""), "{stdout}");
    assert!(stdout.contains("client_id = \"client-1\""), "{stdout}");
    assert!(stdout.contains("gw:***@db.example.com"), "{stdout}");

    // The same with the secret in a file.
    let file = write_config(
        dir.path(),
        &format!(
            "[upstream.auth]\nkind = \"oauth2\"\nclient_id = \"client-1\"\n\
             client_secret_file = \"{}\"\ntoken_url = \"https://auth.example.com/t\"\n",
            secret_file.display()
        ),
        "https://runtime.example.com/invocations",
    );
    let out = run(dir.path(), &["check-config", "--config", &file], &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(!stdout.contains("secret-from-a-file-3"), "{stdout}");

    // Secrets inside URLs: user-info passwords and secret query values, in the
    // configuration and in the derived lines (invocation, stop-session, token URLs).
    let file = write_config(
        dir.path(),
        "[upstream.auth]\nkind = \"oauth2\"\nclient_id = \"client-1\"\n\
         client_secret = \"s\"\n\
         token_url = \"https://auth.example.com/t?client_secret=token-query-5\"\n\
         [telemetry]\notlp_endpoint = \"http://127.0.0.1:4318/?api_key=otlp-password-6\"\n",
        "https://user:url-password-7@runtime.example.com/invocations?sig=url-query-8",
    );
    let out = run(dir.path(), &["check-config", "--config", &file], &[]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("# derived: invocation URL: "), "{stdout}");
    for secret in [
        "token-query-5",
        "otlp-password-6",
        "url-password-7",
        "url-query-8",
    ] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret}: {stdout}\n{stderr}"
        );
    }

    // An OTLP endpoint with credentials: serve refuses it, so check-config does too
    // (issue 43, item 10), without printing them.
    let file = write_config(
        dir.path(),
        "[telemetry]\notlp_endpoint = \"http://u:otlp-password-9@127.0.0.1:4318\"\n",
        "https://runtime.example.com/invocations",
    );
    for command in ["check-config", "serve"] {
        let out = run(dir.path(), &[command, "--config", &file], &[]);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{command}: {stdout}\n{stderr}");
        assert!(
            stderr.contains("telemetry.otlp_endpoint"),
            "{command}: {stderr}"
        );
        assert!(
            !stdout.contains("otlp-password-9") && !stderr.contains("otlp-password-9"),
            "{command}: {stdout}\n{stderr}"
        );
    }
}

#[test]
fn a_bad_config_exits_non_zero_naming_the_key_and_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_config(dir.path(), "", "https://runtime.example.com/invocations");
    let bad_file = dir.path().join("bad.toml");
    std::fs::write(
        &bad_file,
        "[upstream]\nurl = \"https://x.example.com/invocations\"\nconnect_timeout_secs = 0\n",
    )
    .unwrap();
    let bad = bad_file.display().to_string();
    for command in ["check-config", "serve"] {
        // In the file.
        let out = run(dir.path(), &[command, "--config", &bad], &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {stderr}");
        assert!(
            stderr.contains("upstream.connect_timeout_secs"),
            "{command}: {stderr}"
        );
        assert!(stderr.contains("bad.toml line 3"), "{command}: {stderr}");

        // In the environment.
        let out = run(
            dir.path(),
            &[command, "--config", &file],
            &[("A2A_GATEWAY_SERVER__LISTEN", "not-an-address")],
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {stderr}");
        assert!(stderr.contains("server.listen"), "{command}: {stderr}");
        assert!(
            stderr.contains("A2A_GATEWAY_SERVER__LISTEN"),
            "{command}: {stderr}"
        );
    }
    // A named file that does not exist.
    let out = run(dir.path(), &["serve", "--config", "missing.toml"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("missing.toml"));
}

#[tokio::test]
async fn sigterm_during_a_streaming_task_fails_it_within_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let grace = Duration::from_secs(1);
    let (mut gw, _guard) = serving_a_slow_runtime(dir.path(), "1").await;
    let mut events = a_streaming_task(&gw.url).await;
    let mut seen: Vec<Value> = Vec::new();
    let sent = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &gw.pid().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    // From the start of the shutdown, while the task still has its grace, readiness
    // fails (a load balancer stops sending new messages here).
    let readyz = format!("{}readyz", gw.url);
    let mut answers = Vec::new();
    let not_ready = loop {
        let r = reqwest::get(&readyz).await;
        let answer = match r {
            Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
            Err(e) => (0, e.to_string()),
        };
        if answer.0 == 503 || sent.elapsed() > grace {
            break answer;
        }
        answers.push(answer);
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(not_ready.0, 503, "{answers:?} then {not_ready:?}");
    assert!(
        not_ready.1.contains("no new messages"),
        "the handler's answer during the grace, not the closing connection's: {not_ready:?}"
    );
    // The stream ends with the task FAILED by the shutdown.
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(15), events.next()).await {
        let Ok(ev) = ev else { break };
        seen.push(serde_json::from_str(&ev.data).unwrap());
    }
    let status = gw
        .wait_exit(grace + Duration::from_secs(5))
        .unwrap_or_else(|| panic!("the gateway did not exit:\n{}", gw.logs()));
    let took = sent.elapsed();
    assert!(status.success(), "exit status {status:?}\n{}", gw.logs());
    assert!(took < grace + Duration::from_secs(3), "took {took:?}");
    let last = seen.last().unwrap();
    let update = &last["result"]["statusUpdate"]["status"];
    assert_eq!(update["state"], "TASK_STATE_FAILED", "{seen:#?}");
    let reason = update["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("shut down"), "{reason}");
    assert!(gw.logs().contains("shutting down"), "{}", gw.logs());
}

/// `serve` in `dir` with `shutdown_grace_secs` = `grace_secs`, in front of a stand-in
/// runtime whose "slow" replies take 400 ms a word (kept while the guard lives).
async fn serving_a_slow_runtime(
    dir: &Path,
    grace_secs: &str,
) -> (GatewayProcess, tokio_util::sync::DropGuard) {
    let (upstream, guard) = stand_in(RuntimeOptions {
        word_delay: Duration::from_millis(1),
        slow_word_delay: Duration::from_millis(400),
        issuer: None,
    })
    .await;
    let file = write_config(dir, "", &upstream);
    let gw = start(
        dir,
        &["serve", "--config", &file],
        &[("A2A_GATEWAY_SERVER__SHUTDOWN_GRACE_SECS", grace_secs)],
    );
    (gw, guard)
}

/// Opens a slow streaming task on the gateway at `url` and waits for its first
/// artifact chunk; the rest of its events follow.
async fn a_streaming_task(
    url: &str,
) -> impl futures::Stream<
    Item = Result<eventsource_stream::Event, eventsource_stream::EventStreamError<reqwest::Error>>,
> + use<> {
    let resp = reqwest::Client::new()
        .post(url)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "a slow one please"}]}}}))
        .send()
        .await
        .unwrap();
    let mut events = resp.bytes_stream().eventsource();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an event in time")
    {
        let v: Value = serde_json::from_str(&ev.unwrap().data).unwrap();
        if v["result"].get("artifactUpdate").is_some() {
            break;
        }
    }
    events
}

#[tokio::test]
async fn a_second_sigint_during_the_grace_exits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (mut gw, _guard) = serving_a_slow_runtime(dir.path(), "60").await;
    let _events = a_streaming_task(&gw.url).await;
    let pid = gw.pid().to_string();
    let signal = |name: &str| {
        let kill = Command::new("kill").args([name, &pid]).status().unwrap();
        assert!(kill.success());
    };
    signal("-INT");
    // The graceful shutdown has begun (readiness fails) and waits for the task.
    let readyz = format!("{}readyz", gw.url);
    let deadline = Instant::now() + Duration::from_secs(10);
    while reqwest::get(&readyz)
        .await
        .map(|r| r.status().as_u16())
        .ok()
        != Some(503)
    {
        assert!(Instant::now() < deadline, "no shutdown:\n{}", gw.logs());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(gw.wait_exit(Duration::ZERO).is_none(), "still in its grace");
    let sent = Instant::now();
    signal("-INT");
    let status = gw
        .wait_exit(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("the gateway did not exit:\n{}", gw.logs()));
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "took {:?}",
        sent.elapsed()
    );
    assert_eq!(status.code(), Some(130), "{}", gw.logs());
    assert!(
        gw.logs().contains("a second shutdown signal"),
        "{}",
        gw.logs()
    );
}

#[tokio::test]
async fn metrics_count_the_requests_just_made() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _guard) = stand_in(RuntimeOptions {
        word_delay: Duration::from_millis(1),
        ..RuntimeOptions::default()
    })
    .await;
    let file = write_config(dir.path(), "", &upstream);
    let gw = start(dir.path(), &["serve", "--config", &file], &[]);
    for _ in 0..3 {
        let v = rpc(
            &reqwest::Client::new(),
            &gw.url,
            "GetTask",
            json!({"id": "no-such-task"}),
        )
        .await;
        assert!(v.get("error").is_some(), "{v}");
    }
    let v = rpc(&reqwest::Client::new(), &gw.url, "ListTasks", json!({})).await;
    assert!(v.get("result").is_some(), "{v}");
    let v = rpc(
        &reqwest::Client::new(),
        &gw.url,
        "SendMessage",
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
    let rest = reqwest::get(format!("{}a2a/rest/tasks/nope", gw.url))
        .await
        .unwrap();
    assert_eq!(rest.status(), 404);

    let resp = reqwest::get(format!("{}metrics", gw.url)).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let body = resp.text().await.unwrap();
    let sum = |prefix: &str| -> f64 {
        body.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert_eq!(
        sum("a2a_requests_total{binding=\"jsonrpc\",method=\"GetTask\""),
        3.0,
        "{body}"
    );
    assert_eq!(
        sum("a2a_requests_total{binding=\"jsonrpc\",method=\"ListTasks\",outcome=\"ok\"}"),
        1.0,
        "{body}"
    );
    assert_eq!(
        sum("a2a_requests_total{binding=\"jsonrpc\",method=\"SendMessage\",outcome=\"ok\"}"),
        1.0,
        "{body}"
    );
    assert_eq!(
        sum("a2a_request_duration_seconds_count{binding=\"jsonrpc\",method=\"GetTask\"}"),
        3.0,
        "{body}"
    );
    assert_eq!(
        sum("a2a_requests_total{binding=\"rest\",method=\"GetTask\",outcome=\"TASK_NOT_FOUND\"}"),
        1.0,
        "{body}"
    );
    assert!(body.contains("a2a_active_tasks 0"), "{body}");
    assert!(body.contains("a2a_open_streams"), "{body}");
    let health = reqwest::get(format!("{}healthz", gw.url)).await.unwrap();
    assert_eq!(health.status(), 200);
}

#[test]
fn without_an_upstream_check_config_and_serve_both_refuse_and_leave_no_database() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["check-config", "serve"] {
        // A free port: the refusal must be about the upstream, whatever holds :8080.
        let out = run(
            dir.path(),
            &[command],
            &[("A2A_GATEWAY_SERVER__LISTEN", "127.0.0.1:0")],
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {stderr}");
        assert!(stderr.contains("upstream"), "{command}: {stderr}");
    }
    assert!(
        !dir.path().join("a2a-gateway.db").exists(),
        "serve created the default SQLite file before refusing"
    );
}

#[tokio::test]
async fn send_presents_the_api_key_from_the_flag_or_the_environment() {
    const KEY: &str = "0d5c1e9a4b7f2c8e6a3d9b1f5e7c2a4d";
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _guard) = stand_in(RuntimeOptions {
        word_delay: Duration::from_millis(1),
        ..RuntimeOptions::default()
    })
    .await;
    let key_file = dir.path().join("team-a.key");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    let file = write_config(
        dir.path(),
        &format!(
            "[server.auth]\nkind = \"api_key\"\n\n[[server.auth.keys]]\ncaller = \"team-a\"\nkey_file = \"{}\"\n",
            key_file.display()
        ),
        &upstream,
    );
    // The client's variable in the server's environment is no config key, and no typo.
    let gw = start(
        dir.path(),
        &["serve", "--config", &file],
        &[("A2A_GATEWAY_API_KEY", "not-used-by-serve")],
    );
    let url = gw.url.clone();
    let send = move |args: Vec<String>, env: Vec<(&'static str, String)>| {
        let dir = dir.path().to_owned();
        async move {
            tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
                run(&dir, &args, &env)
            })
            .await
            .unwrap()
        }
    };
    let base = |extra: &[&str]| {
        let mut args: Vec<String> = vec!["send".into(), "--url".into(), url.clone()];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push("Hello there".into());
        args
    };

    let out = send(base(&[]), vec![]).await;
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("401"), "{stderr}");
    assert!(stderr.contains("--api-key"), "{stderr}");

    let out = send(base(&["--api-key", "wrong"]), vec![]).await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("not accepted"),
        "{}",
        text(&out.stderr)
    );

    let out = send(base(&["--api-key", KEY]), vec![]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("» completed"),
        "{}",
        text(&out.stdout)
    );

    let out = send(base(&[]), vec![("A2A_GATEWAY_API_KEY", KEY.to_owned())]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));

    let logs = gw.logs_when(
        |l| l.contains("authentication failed"),
        Duration::from_secs(10),
    );
    assert!(logs.contains("authentication failed"), "{logs}");
    assert!(!logs.contains(KEY), "{logs}");
    assert!(!logs.contains("A2A_GATEWAY_API_KEY"), "{logs}");
}

/// `migrate` creates the schema and leaves it in the database file itself (the
/// write-ahead log folded in), so copying the `.db` file alone keeps it.
#[test]
fn migrate_leaves_the_schema_in_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tasks.db");
    let url = format!("sqlite://{}", db.display());
    let out = run(
        dir.path(),
        &["migrate"],
        &[("A2A_GATEWAY_STORE__URL", url.as_str())],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("at the current schema"));
    let wal = dir.path().join("tasks.db-wal");
    let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert_eq!(wal_len, 0, "the WAL was folded into {}", db.display());
    assert!(
        std::fs::metadata(&db).unwrap().len() > 4096,
        "the schema is in the file"
    );
}

/// Runs `a2a-gateway ARGS` off the async runtime (the test's servers keep running).
async fn run_async(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    gateway(dir, args, env)
        .timeout(Duration::from_secs(30))
        .run_async()
        .await
}

/// The task and context ids of a `task id: T  context id: C` line.
fn ids_in(stdout: &str) -> (String, String) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("task id: "))
        .unwrap_or_else(|| panic!("no task id in {stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    (words[2].to_owned(), words[5].to_owned())
}

/// A gateway config serving only `bindings`, with a memory store.
fn write_binding_config(dir: &Path, bindings: &str, upstream_url: &str) -> String {
    let path = dir.join(format!(
        "gateway-{}.toml",
        bindings.replace(['"', ',', ' '], "")
    ));
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nbindings = [{bindings}]\n\n[store]\nurl = \"memory:\"\n\n\
             [upstream]\nurl = \"{upstream_url}\"\nhttp_version = \"http2\"\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// Starts a slow task without waiting for it; returns its id.
async fn start_slow_task(base: &str, rest: bool) -> String {
    let message = json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": "slow please"}]});
    let params = json!({"message": message, "configuration": {"returnImmediately": true}});
    let client = reqwest::Client::new();
    let v: Value = if rest {
        client
            .post(format!("{}a2a/rest/message:send", base))
            .header("A2A-Version", "1.0")
            .json(&params)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    } else {
        rpc(&reqwest::Client::new(), base, "SendMessage", params).await["result"].clone()
    };
    v["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_owned()
}

#[tokio::test]
async fn the_client_commands_work_on_each_binding_the_card_offers() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _guard) = stand_in(RuntimeOptions {
        word_delay: Duration::from_millis(1),
        slow_word_delay: Duration::from_millis(60),
        ..RuntimeOptions::default()
    })
    .await;
    for (bindings, name, rest) in [
        ("\"jsonrpc\"", "JSON-RPC", false),
        ("\"rest\"", "HTTP+JSON", true),
    ] {
        let file = write_binding_config(dir.path(), bindings, &upstream);
        let gw = start(dir.path(), &["serve", "--config", &file], &[]);
        let url = gw.url.clone();
        let cli = |args: Vec<&str>| {
            let mut all = vec![args[0], "--url", url.as_str()];
            all.extend(&args[1..]);
            all.iter().map(|s| s.to_string()).collect::<Vec<String>>()
        };
        let go = |args: Vec<String>| {
            let dir = dir.path().to_owned();
            async move {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let out = run_async(&dir, &args, &[]).await;
                (out.status.code(), text(&out.stdout), text(&out.stderr))
            }
        };

        // card: the binding the card offers is the one used.
        let (code, stdout, stderr) = go(cli(vec!["card"])).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            stdout.contains(&format!("the client commands use: {name}")),
            "{stdout}"
        );
        let (code, stdout, _) = go(cli(vec!["card", "--json"])).await;
        assert_eq!(code, Some(0));
        let card: Value = serde_json::from_str(&stdout).unwrap();
        assert!(card["supportedInterfaces"].is_array(), "{stdout}");

        // send: terminal control characters in the agent's text are neutralised.
        let (code, stdout, stderr) =
            go(cli(vec!["send", "Hello \u{1b}[31mred\u{1b}]0;title\u{7}"])).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
            "{stdout:?}"
        );
        assert!(stdout.contains("Hello \\u{1b}[31mred"), "{stdout}");
        assert!(stdout.contains("» completed"), "{stdout}");
        let (done, done_ctx) = ids_in(&stdout);

        // get, as text and as JSON.
        let (code, stdout, stderr) = go(cli(vec!["get", &done])).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            stdout.contains("You said") && stdout.contains("» completed"),
            "{stdout}"
        );
        let (code, stdout, _) = go(cli(vec!["get", "--json", &done])).await;
        assert_eq!(code, Some(0));
        let task: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(task["id"], done.as_str());
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
        let (code, _, stderr) = go(cli(vec!["get", "no-such-task"])).await;
        assert_eq!(code, Some(1));
        assert!(stderr.to_lowercase().contains("not found"), "{stderr}");

        // A follow-up without --stream prints only the new turn.
        let (code, stdout, stderr) = go(cli(vec!["send", "Please ask me"])).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            stdout.contains("» input-required: Which release"),
            "{stdout}"
        );
        let (asked, ctx) = ids_in(&stdout);
        let (code, stdout, stderr) = go(cli(vec![
            "send",
            "--task-id",
            &asked,
            "--context-id",
            &ctx,
            "v1.2",
        ]))
        .await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            stdout.contains("With \"v1.2\" I have everything"),
            "{stdout}"
        );
        assert!(
            !stdout.contains("one detail first"),
            "the earlier turn again: {stdout}"
        );

        // list: filters and paging.
        let (code, stdout, stderr) = go(cli(vec!["list", "--context-id", &done_ctx])).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            stdout.contains(&done) && !stdout.contains(&asked),
            "{stdout}"
        );
        assert!(stdout.contains("1 of 1 task(s)"), "{stdout}");
        let (code, stdout, _) = go(cli(vec!["list", "--page-size", "1"])).await;
        assert_eq!(code, Some(0));
        assert!(stdout.contains("1 of 2 task(s)"), "{stdout}");
        let next = stdout
            .lines()
            .find_map(|l| l.strip_prefix("next page: a2a-gateway "))
            .unwrap_or_else(|| panic!("no next page in {stdout}"));
        assert!(next.contains("--page-size 1 --page-token "), "{next}");
        let args: Vec<String> = next.split_whitespace().map(str::to_owned).collect();
        let (code, page2, _) = go(args).await;
        assert_eq!(code, Some(0));
        assert!(page2.contains("1 of 2 task(s)"), "{page2}");
        assert!(!page2.contains("next page"), "{page2}");
        let first_row = stdout.lines().next().unwrap();
        assert_ne!(first_row, page2.lines().next().unwrap());
        let (code, stdout, _) = go(cli(vec!["list", "--state", "input-required"])).await;
        assert_eq!(code, Some(0));
        assert!(stdout.contains("0 of 0 task(s)"), "{stdout}");
        let (code, _, stderr) = go(cli(vec!["list", "--state", "sleeping"])).await;
        assert_eq!(code, Some(2), "{stderr}");

        // subscribe follows a running task to its end; a resume names its cursor.
        let slow = start_slow_task(&url, rest).await;
        let (code, stdout, stderr) = go(cli(vec!["subscribe", &slow])).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stdout.contains("You said: \"slow please\""), "{stdout}");
        assert!(stdout.contains("» completed"), "{stdout}");
        let slow = start_slow_task(&url, rest).await;
        let (code, stdout, stderr) =
            go(cli(vec!["subscribe", &slow, "--last-event-id", "1"])).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stdout.contains("» completed"), "{stdout}");

        // cancel: an INPUT_REQUIRED task ends CANCELED; a finished one cannot be.
        let (_, stdout, _) = go(cli(vec!["send", "Please ask me again"])).await;
        let (asked, _) = ids_in(&stdout);
        let (code, stdout, stderr) = go(cli(vec!["cancel", &asked])).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stdout.contains("» canceled"), "{stdout}");
        let (code, _, stderr) = go(cli(vec!["cancel", &done])).await;
        assert_eq!(code, Some(1));
        assert!(stderr.contains("cannot be canceled"), "{stderr}");
    }
}

/// A server that is not an A2A agent: 404 everywhere but `POST /empty` (`{}`),
/// `POST /null` (a JSON-RPC `result: null`) and `POST /html`.
async fn not_an_agent() -> (String, tokio_util::sync::DropGuard) {
    use axum::routing::post;
    let app = axum::Router::new()
        .route("/empty", post(|| async { axum::Json(json!({})) }))
        .route(
            "/null",
            post(|| async { axum::Json(json!({"jsonrpc": "2.0", "id": 1, "result": null})) }),
        )
        .route(
            "/html",
            post(|| async { axum::response::Html("<html><body>Welcome</body></html>") }),
        );
    let stop = CancellationToken::new();
    let addr = a2a_gateway::demo::spawn_local(app, stop.clone())
        .await
        .unwrap();
    (format!("http://{addr}/"), stop.drop_guard())
}

#[tokio::test]
async fn answers_that_are_not_a2a_fail_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _guard) = not_an_agent().await;
    let cases: &[(&[&str], &str)] = &[
        (
            &["send", "--url", &base, "hi"],
            "no A2A agent card here (HTTP 404",
        ),
        (
            &["card", "--url", &base],
            "no A2A agent card here (HTTP 404",
        ),
        (
            &[
                "send",
                "--binding",
                "jsonrpc",
                "--url",
                &format!("{base}missing"),
                "hi",
            ],
            "HTTP 404",
        ),
        (
            &[
                "send",
                "--binding",
                "jsonrpc",
                "--url",
                &format!("{base}empty"),
                "hi",
            ],
            "not a JSON-RPC 2.0 response",
        ),
        (
            &[
                "send",
                "--binding",
                "jsonrpc",
                "--url",
                &format!("{base}null"),
                "hi",
            ],
            "no result",
        ),
        (
            &[
                "send",
                "--binding",
                "jsonrpc",
                "--url",
                &format!("{base}html"),
                "hi",
            ],
            "not a JSON-RPC response: <html>",
        ),
        (
            &[
                "send",
                "--binding",
                "jsonrpc",
                "--stream",
                "--url",
                &format!("{base}empty"),
                "hi",
            ],
            "not a JSON-RPC 2.0 response",
        ),
        (
            &["get", "--binding", "rest", "--url", &base, "t1"],
            "answered HTTP 404",
        ),
        (
            &["list", "--binding", "rest", "--url", &base],
            "answered HTTP 404",
        ),
    ];
    for (args, want) in cases {
        let out = run_async(dir.path(), args, &[]).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(text(&out.stdout).trim().is_empty(), "{args:?}");
    }
    // Transport failures say why.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://{}/", free.local_addr().unwrap());
    drop(free);
    let out = run_async(dir.path(), &["send", "--url", &closed, "hi"], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("connection refused"),
        "{}",
        text(&out.stderr)
    );
}

/// A fake agent whose stream stops after WORKING, without a final state.
async fn breaking_agent() -> (String, tokio_util::sync::DropGuard) {
    use axum::routing::{get, post};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let card = json!({
        "name": "breaks", "description": "d", "version": "1",
        "supportedInterfaces": [{"url": base, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"], "skills": []
    });
    let stream = || async {
        let task = json!({"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": "t-77", "contextId": "c-1",
            "status": {"state": "TASK_STATE_SUBMITTED"}}}});
        let working = json!({"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate": {"taskId": "t-77",
            "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}}});
        (
            [("content-type", "text/event-stream")],
            format!("id: 1\ndata: {task}\n\nid: 2\ndata: {working}\n\n"),
        )
    };
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move || async move { axum::Json(card) }),
        )
        .route("/", post(stream));
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { token.cancelled().await })
            .await
            .unwrap()
    });
    (base, stop.drop_guard())
}

#[tokio::test]
async fn a_stream_that_ends_early_prints_the_command_that_resumes_it() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _guard) = breaking_agent().await;
    let out = run_async(dir.path(), &["send", "--url", &base, "--stream", "hi"], &[]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the stream ended before the task settled"),
        "{stderr}"
    );
    assert!(stderr.contains("task id: t-77"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "resume with: a2a-gateway subscribe --url {base} t-77 --last-event-id 2"
        )),
        "{stderr}"
    );
}

/// A private CA and a server certificate for 127.0.0.1 it signed, as PEM files.
fn private_ca(dir: &Path) -> (String, String, String) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "a2a-gateway test CA");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &ca, &ca_key).unwrap();
    let write = |name: &str, pem: String| {
        let p = dir.join(name);
        std::fs::write(&p, pem).unwrap();
        p.display().to_string()
    };
    (
        write("ca.pem", ca.pem()),
        write("server.pem", leaf.pem()),
        write("server.key", leaf_key.serialize_pem()),
    )
}

#[tokio::test]
async fn ca_file_and_ssl_cert_file_trust_a_private_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _guard) = stand_in(RuntimeOptions {
        word_delay: Duration::from_millis(1),
        ..RuntimeOptions::default()
    })
    .await;
    let (ca, cert, key) = private_ca(dir.path());
    let file = write_config(dir.path(), "", &upstream);
    let gw = start(
        dir.path(),
        &["serve", "--config", &file],
        &[
            ("A2A_GATEWAY_SERVER__TLS_CERT_FILE", cert.as_str()),
            ("A2A_GATEWAY_SERVER__TLS_KEY_FILE", key.as_str()),
        ],
    );
    assert!(gw.url.starts_with("https://"), "{}", gw.url);
    let out = run_async(dir.path(), &["card", "--url", &gw.url], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("unknown issuer") && stderr.contains("--ca-file"),
        "{stderr}"
    );
    let out = run_async(
        dir.path(),
        &["send", "--url", &gw.url, "--ca-file", &ca, "hi"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("» completed"));
    let out = run_async(
        dir.path(),
        &["send", "--url", &gw.url, "--stream", "hi"],
        &[("SSL_CERT_FILE", ca.as_str())],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = run_async(
        dir.path(),
        &[
            "card",
            "--url",
            &gw.url,
            "--ca-file",
            &cert.replace("server.pem", "none.pem"),
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--ca-file"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn keys_new_prints_a_key_once_and_config_lines_with_only_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["keys", "new", "--caller", "team-a"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let key = stdout
        .lines()
        .find(|l| l.starts_with("a2a_"))
        .unwrap_or_else(|| panic!("{stdout}"))
        .to_owned();
    assert_eq!(
        stdout.matches(&key).count(),
        1,
        "the key is printed once: {stdout}"
    );
    let again = text(&run(dir.path(), &["keys", "new", "--caller", "team-a"], &[]).stdout);
    assert!(!again.contains(&key), "a fresh key each time");
    // A caller the gateway's config would refuse gets no key.
    for (bad, says) in [
        ("team\ta", "control characters"),
        ("team\na", "control characters"),
        ("team\u{7f}", "control characters"),
        (" team-a", "spaces before or after"),
        ("team\u{202e}a", "invisible formatting characters"),
        ("team\u{200b}a", "invisible formatting characters"),
        // The owners of JWT callers start with `jwt:` (owner namespaces).
        ("jwt:https://idp/#team-a", "must not start with \"jwt:\""),
    ] {
        let out = run(dir.path(), &["keys", "new", "--caller", bad], &[]);
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
        assert!(text(&out.stderr).contains(says), "{}", text(&out.stderr));
        assert!(!text(&out.stdout).contains("a2a_"), "{}", text(&out.stdout));
    }
    // The printed lines are a working config: the gateway accepts the key.
    let config: String = stdout
        .lines()
        .skip_while(|l| !l.starts_with("[server.auth]"))
        .take_while(|l| !l.starts_with("# Or"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        config.contains("sha256 = \"") && !config.contains(&key),
        "{config}"
    );
    let (upstream, _guard) = stand_in(RuntimeOptions {
        word_delay: Duration::from_millis(1),
        ..RuntimeOptions::default()
    })
    .await;
    let file = write_config(dir.path(), &config, &upstream);
    let gw = start(dir.path(), &["serve", "--config", &file], &[]);
    let out = run_async(dir.path(), &["send", "--url", &gw.url, "hi"], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    let out = run_async(
        dir.path(),
        &["send", "--url", &gw.url, "hi"],
        &[("A2A_GATEWAY_API_KEY", key.as_str())],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = run_async(
        dir.path(),
        &["list", "--url", &gw.url],
        &[("A2A_GATEWAY_API_KEY", key.as_str())],
    )
    .await;
    assert!(
        text(&out.stdout).contains("1 of 1 task(s)"),
        "{}",
        text(&out.stdout)
    );
    assert!(!gw.logs().contains(&key));
}

#[test]
fn check_config_refuses_a_store_serve_cannot_open_and_prints_what_it_derives() {
    let dir = tempfile::tempdir().unwrap();
    let arn = "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/my_agent-abc123";
    let config = format!(
        "[server]\nlisten = \"0.0.0.0:9000\"\npublic_url = \"https://agents.example.com/\"\n\n\
         [store]\nurl = \"sqlite://{}/no-such-dir/tasks.db\"\n\n[upstream]\nagent_runtime_arn = \"{arn}\"\n\n\
         [upstream.auth]\nkind = \"oauth2\"\nclient_id = \"cid\"\nclient_secret = \"s3cret\"\n\
         token_url = \"https://idp.example.com/oauth2/token\"\n",
        dir.path().display()
    );
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, &config).unwrap();
    let p = path.to_str().unwrap();
    for command in ["check-config", "serve"] {
        let out = run(dir.path(), &[command, "--config", p], &[]);
        assert_eq!(out.status.code(), Some(1), "{command}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("no-such-dir") && stderr.contains("does not exist"),
            "{command}: {stderr}"
        );
    }
    // A store path under a file (not a directory).
    std::fs::write(dir.path().join("plain-file"), "x").unwrap();
    let out = run(
        dir.path(),
        &["check-config", "--config", p],
        &[(
            "A2A_GATEWAY_STORE__URL",
            &format!("sqlite://{}/plain-file/tasks.db", dir.path().display()),
        )],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("is not a directory"),
        "{}",
        text(&out.stderr)
    );

    // With a store it can write: the derived values.
    let store = format!("sqlite://{}/tasks.db", dir.path().display());
    let out = run(
        dir.path(),
        &["check-config", "--config", p],
        &[("A2A_GATEWAY_STORE__URL", &store)],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("# derived: invocation URL: https://bedrock-agentcore.eu-west-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aeu-west-1%3A123456789012%3Aruntime%2Fmy_agent-abc123/invocations?qualifier=DEFAULT"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "# derived: token endpoint: https://idp.example.com/oauth2/token (configured)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("# derived: card interface: JSONRPC https://agents.example.com/"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# derived: card interface: HTTP+JSON https://agents.example.com/a2a/rest"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# derived: card interface: GRPC agents.example.com:443 (A2A 1.0)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# derived: card interface: JSONRPC https://agents.example.com/ (A2A 0.3)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "# derived: task store: SQLite file {}/tasks.db for one instance, synchronous full \
             (`cluster`, `lease_secs`, `instance_name` and `listen_url` apply to PostgreSQL only)",
            dir.path().display()
        )),
        "{stdout}"
    );
    assert!(!stdout.contains("s3cret"), "{stdout}");
    assert!(
        !dir.path().join("tasks.db").exists(),
        "check-config creates no database"
    );
    // The other backends say what they are, a password kept out.
    for (url, line) in [
        (
            "memory:",
            "task store: process memory, nothing survives a restart",
        ),
        (
            "postgres://u:s3cret@127.0.0.1:9/db",
            "task store: PostgreSQL shared by a cluster of instances, lease 30 s",
        ),
    ] {
        let out = run(
            dir.path(),
            &["check-config", "--config", p],
            &[("A2A_GATEWAY_STORE__URL", url)],
        );
        let stdout = text(&out.stdout);
        assert!(stdout.contains(&format!("# derived: {line}")), "{stdout}");
        assert!(!stdout.contains("s3cret"), "{stdout}");
    }
}

#[tokio::test]
async fn check_config_reads_the_token_endpoint_from_discovery() {
    use axum::routing::get;
    let dir = tempfile::tempdir().unwrap();
    let app = axum::Router::new().route(
        "/.well-known/openid-configuration",
        get(|| async { axum::Json(json!({"issuer": "x", "token_endpoint": "https://idp.example.com/discovered/token"})) }),
    );
    let stop = CancellationToken::new();
    let addr = a2a_gateway::demo::spawn_local(app, stop.clone())
        .await
        .unwrap();
    let _guard = stop.drop_guard();
    let file = write_config(
        dir.path(),
        &format!(
            "[upstream.auth]\nkind = \"oauth2\"\nclient_id = \"cid\"\nclient_secret = \"s\"\n\
                  discovery_url = \"http://{addr}/.well-known/openid-configuration\"\n"
        ),
        "http://127.0.0.1:9/invocations",
    );
    let out = run_async(dir.path(), &["check-config", "--config", &file], &[]).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("# derived: token endpoint: https://idp.example.com/discovered/token (from the discovery document"),
        "{stdout}"
    );
}

#[tokio::test]
async fn health_follows_the_configured_port_and_unknown_paths_and_methods_get_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _guard) = stand_in(RuntimeOptions::default()).await;
    let port = free_port();
    let path = dir.path().join("gateway.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"0.0.0.0:{port}\"\n\n[store]\nurl = \"memory:\"\n\n[upstream]\nurl = \"{upstream}\"\n"
        ),
    )
    .unwrap();
    let file = path.to_str().unwrap().to_owned();
    let mut gw = start(dir.path(), &["serve", "--config", &file], &[]);
    // As in the container: the file comes from A2A_GATEWAY_CONFIG.
    let out = run_async(dir.path(), &["health"], &[("A2A_GATEWAY_CONFIG", &file)]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(&format!("127.0.0.1:{port}/healthz")));

    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let root = client.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(root.status(), 200);
    let hint = root.text().await.unwrap();
    assert!(
        hint.contains("POST /") && hint.contains("/.well-known/agent-card.json"),
        "{hint}"
    );
    let unknown = client
        .get(format!("{base}/no/such/path"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    assert!(
        unknown
            .text()
            .await
            .unwrap()
            .contains("/.well-known/agent-card.json")
    );
    // A method `/` does not take: 405 naming what it takes, with the hint.
    let put = client.put(format!("{base}/")).send().await.unwrap();
    assert_eq!(put.status(), 405);
    let allow = put.headers()["allow"].to_str().unwrap().to_owned();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
    assert!(put.text().await.unwrap().contains("POST /"));
    // JSON-RPC still answers at POST /.
    let v = rpc(
        &reqwest::Client::new(),
        &format!("{base}/"),
        "GetTask",
        json!({"id": "nope"}),
    )
    .await;
    assert!(v["error"].is_object(), "{v}");

    gw.kill();
    let _ = gw.wait_exit(Duration::from_secs(5));
    let out = run_async(dir.path(), &["health", "--config", &file], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("connection refused"),
        "{}",
        text(&out.stderr)
    );
}

/// `SIGHUP` makes `serve` read its API keys again: a new key works alongside the old
/// one (rotation with overlap), then the old one is removed, with no restart; a config
/// that no longer loads keeps the keys in use.
#[cfg(unix)]
#[tokio::test]
async fn sighup_reloads_the_api_keys_without_a_restart() {
    const OLD: &str = "4c2f7a9e1b3d5f7a9c1e3b5d7f9a1c3e";
    const NEW: &str = "8e6c4a2f0d1b3e5c7a9f1d3b5e7c9a1f";
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _guard) = stand_in(RuntimeOptions::default()).await;
    for (name, key) in [("old.key", OLD), ("new.key", NEW)] {
        std::fs::write(dir.path().join(name), format!("{key}\n")).unwrap();
    }
    let keys = |files: &[&str]| {
        let mut extra = "[server.auth]\nkind = \"api_key\"\n".to_owned();
        for f in files {
            extra += &format!(
                "\n[[server.auth.keys]]\ncaller = \"team-a\"\nkey_file = \"{}\"\n",
                dir.path().join(f).display()
            );
        }
        extra
    };
    let file = write_config(dir.path(), &keys(&["old.key"]), &upstream);
    let gw = start(dir.path(), &["serve", "--config", &file], &[]);
    let status = |key: &'static str| {
        let url = gw.url.clone();
        async move {
            reqwest::Client::new()
                .post(&url)
                .header("A2A-Version", "1.0")
                .bearer_auth(key)
                .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let hangup = || {
        let ok = std::process::Command::new("kill")
            .args(["-HUP", &gw.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -HUP");
    };
    // Until `want` holds (the reload is asynchronous), at most 10 s.
    let until = |key: &'static str, want: u16| {
        let status = &status;
        async move {
            for _ in 0..100 {
                if status(key).await == want {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("{key:.4}…: never {want}");
        }
    };
    assert_eq!(status(OLD).await, 200);
    assert_eq!(status(NEW).await, 401);

    write_config(dir.path(), &keys(&["old.key", "new.key"]), &upstream);
    hangup();
    until(NEW, 200).await;
    assert_eq!(status(OLD).await, 200, "the old key overlaps the new one");

    // A config that does not load changes nothing.
    std::fs::write(&file, "[server\nbroken").unwrap();
    hangup();
    until_logged(&gw, "API keys unchanged").await;
    assert_eq!((status(OLD).await, status(NEW).await), (200, 200));

    write_config(dir.path(), &keys(&["new.key"]), &upstream);
    hangup();
    until(OLD, 401).await;
    assert_eq!(status(NEW).await, 200);
    assert!(!gw.stderr().contains(NEW), "a key reached the log");
}

/// Waits (at most 10 s) until the gateway's log holds `needle`.
#[cfg(unix)]
async fn until_logged(gw: &GatewayProcess, needle: &str) {
    for _ in 0..100 {
        if gw.stderr().contains(needle) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never logged {needle:?}: {}", gw.stderr());
}

/// `push-status` reads a SQLite store another process wrote and still holds open (as
/// while `serve` runs): the pending deliveries with their attempts and last error, the
/// disabled config with its own, `--task` narrows it, and no token, credentials or URL
/// user info / query is printed. A memory store, a missing file and a file that is not
/// a store of this build are refused with a reason.
#[tokio::test]
async fn push_status_lists_pending_and_disabled_deliveries_without_secrets() {
    use a2a_gateway::protocol::{
        StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent, time,
    };
    use a2a_gateway::scope::Scope;
    use a2a_gateway::store::push::Settle;
    use a2a_gateway::store::push::StoredPushConfig;
    use a2a_gateway::store::{StoredEvent, open_store};

    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let store = open_store(&url, 2).await.unwrap();
    let push = store.push_store().unwrap();
    let scope = Scope::new("", "alice");
    let status = |state| TaskStatus {
        state,
        message: None,
        timestamp: Some(time::now()),
    };
    let config = |task: &str, id: &str, url: &str| StoredPushConfig {
        task_id: task.into(),
        id: id.into(),
        url: url.into(),
        token: Some("tok-SECRET-1".into()),
        auth_scheme: Some("Bearer".into()),
        auth_credentials: Some("cred-SECRET-2".into()),
        enabled: true,
        failures: 0,
        last_error: None,
        created_ms: time::now().timestamp_millis(),
    };
    push.put_config(
        &scope,
        &config("t-busy", "hook-a", "https://hooks.example/a"),
    )
    .await
    .unwrap();
    let gone_url = "https://user:pw-SECRET-3@hooks.example/g?key=q-SECRET-4";
    push.put_config(&scope, &config("t-gone", "hook-g", gone_url))
        .await
        .unwrap();
    for (task, n) in [("t-busy", 2), ("t-gone", 1)] {
        let mut events = vec![StreamResponse::Task(Task {
            id: task.into(),
            context_id: "ctx".into(),
            status: status(TaskState::Submitted),
            artifacts: None,
            history: None,
            metadata: None,
        })];
        if n == 2 {
            events.push(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: task.into(),
                context_id: "ctx".into(),
                status: status(TaskState::Working),
                metadata: None,
            }));
        }
        let events: Vec<Arc<StoredEvent>> = events
            .into_iter()
            .enumerate()
            .map(|(i, event)| Arc::new(StoredEvent::new(i as u64 + 1, event)))
            .collect();
        store.append_all(&scope, task, &events).await.unwrap();
    }
    let now = time::now().timestamp_millis() + 1;
    let claimed = push.claim(now, 60_000, 10).await.unwrap();
    assert_eq!(claimed.len(), 2, "one head per config: {claimed:?}");
    for c in claimed {
        let outcome = if c.key.task_id == "t-busy" {
            Settle::Retry {
                next_ms: now + 600_000,
                error: "HTTP 503 from the receiver".into(),
            }
        } else {
            Settle::Disable {
                error: "HTTP 410 Gone".into(),
            }
        };
        push.settle(&c.key, &outcome).await.unwrap();
    }
    // The store stays open (and its file locked) while push-status reads it, as
    // while `serve` runs.

    let config_file = dir.path().join("gateway.toml");
    std::fs::write(&config_file, format!("[store]\nurl = \"{url}\"\n")).unwrap();
    let config_file = config_file.display().to_string();
    let out = run_async(dir.path(), &["push-status", "--config", &config_file], &[]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let all = text(&out.stdout);
    assert!(
        all.starts_with("pending deliveries: 2 (oldest event stored "),
        "{all}"
    );
    assert!(
        all.contains("task t-busy config hook-a event 1: attempts 1, next in 9m, "),
        "{all}"
    );
    assert!(
        all.contains("last error: HTTP 503 from the receiver"),
        "{all}"
    );
    assert!(
        all.contains("task t-busy config hook-a event 2: attempts 0"),
        "{all}"
    );
    assert!(
        all.contains("webhook configs disabled or failing: 1\n"),
        "{all}"
    );
    assert!(
        all.contains("task t-gone config hook-g: disabled, ")
            && all.contains("url https://hooks.example/g?…, last error: HTTP 410 Gone"),
        "{all}"
    );
    assert!(!all.contains("SECRET"), "{all}");

    let env = [("A2A_GATEWAY_STORE__URL", url.as_str())];
    let out = run_async(dir.path(), &["push-status", "--task", "t-gone"], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let gone = text(&out.stdout);
    assert!(gone.starts_with("pending deliveries: 0\n"), "{gone}");
    assert!(
        gone.contains("task t-gone config hook-g: disabled"),
        "{gone}"
    );
    assert!(
        !gone.contains("t-busy") && !gone.contains("SECRET"),
        "{gone}"
    );
    assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));
    store.close().await;

    // A file that is not there, or not a store of this build, is refused in one line.
    std::fs::write(dir.path().join("empty.db"), b"").unwrap();
    for (file, says) in [
        ("none.db", "there is no SQLite store at"),
        (
            "empty.db",
            "has schema version none, this build reads version",
        ),
    ] {
        let url = format!("sqlite://{}", dir.path().join(file).display());
        let env = [("A2A_GATEWAY_STORE__URL", url.as_str())];
        let out = run_async(dir.path(), &["push-status"], &env).await;
        assert!(!out.status.success(), "{file}");
        assert!(text(&out.stderr).contains(says), "{}", text(&out.stderr));
    }

    let out = run_async(
        dir.path(),
        &["push-status"],
        &[("A2A_GATEWAY_STORE__URL", "memory:")],
    )
    .await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("memory:"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_closed_stdout_ends_a_command_quietly_instead_of_a_panic() {
    // The reading end is closed before the command starts, as after `| head` has
    // exited: every write gets EPIPE (`println!` would panic with status 101).
    let dir = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = gateway(dir.path(), &["keys", "new", "--caller", "team-a"], &[])
        .command()
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("spawn a2a-gateway");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn keys_new_prints_an_environment_line_that_a_shell_reads_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let caller = "o'brien \"the\" $HOME";
    let out = run(dir.path(), &["keys", "new", "--caller", caller], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("# export A2A_GATEWAY_SERVER__AUTH__KEYS="))
        .unwrap_or_else(|| panic!("{stdout}"));
    // What the shell makes of the printed word is the TOML list the gateway reads.
    let echoed = Command::new("sh")
        .arg("-c")
        .arg(format!("printf %s {line}"))
        .output()
        .unwrap();
    assert!(echoed.status.success());
    let value = String::from_utf8(echoed.stdout).unwrap();
    let parsed: toml::Value = toml::from_str(&format!("keys = {value}")).unwrap();
    assert_eq!(
        parsed["keys"][0]["caller"].as_str(),
        Some(caller),
        "{value}"
    );
    // And the gateway itself loads it from the environment, caller intact.
    let file = write_config(dir.path(), "", "https://runtime.example.com/invocations");
    let out = run(
        dir.path(),
        &["check-config", "--config", &file],
        &[
            ("A2A_GATEWAY_SERVER__AUTH__KIND", "api_key"),
            ("A2A_GATEWAY_SERVER__AUTH__KEYS", &value),
        ],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{value}\n{stdout}\n{stderr}");
    let shown = toml::Value::String(caller.to_owned()).to_string();
    assert!(stdout.contains(&format!("caller = {shown}")), "{stdout}");
}
