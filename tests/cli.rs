//! End-to-end tests of the real `a2a-gateway` binary: `demo` + `send`, `serve` with a
//! file and an environment override, `check-config` redaction and errors, SIGTERM
//! during a streaming task, and `/metrics`.
//!
//! Every child gets an explicit, cleared environment (the test process environment
//! is never changed), listens on `127.0.0.1:0`, runs in a temporary directory, and
//! is killed by its pid if a test fails. Every wait is bounded.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use a2a_gateway::demo::runtime::{self, RuntimeOptions};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A child process (`serve` or `demo`) with its output collected; killed on drop.
struct Gateway {
    child: Child,
    url: String,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Gateway {
    /// Starts `a2a-gateway ARGS` in `dir` with exactly `env`, and waits until it
    /// reports its URL (`serve` logs "listening on URL"; `demo` prints "gateway: URL").
    fn start(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Gateway {
        let mut cmd = base_command(dir, env);
        let mut child = cmd
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn a2a-gateway");
        let (tx, rx) = mpsc::channel::<String>();
        let stdout = collect(child.stdout.take().unwrap(), tx.clone());
        let stderr = collect(child.stderr.take().unwrap(), tx);
        let deadline = Instant::now() + START_TIMEOUT;
        let url = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(url) = url_in(&line) {
                        break url;
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    panic!(
                        "a2a-gateway did not start:\nstdout:\n{}\nstderr:\n{}",
                        stdout.lock().unwrap(),
                        stderr.lock().unwrap()
                    );
                }
            }
        };
        Gateway {
            child,
            url,
            stdout,
            stderr,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `limit` for the process to exit.
    fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    fn logs(&self) -> String {
        format!(
            "{}\n{}",
            self.stdout.lock().unwrap(),
            self.stderr.lock().unwrap()
        )
    }
}

fn base_command(dir: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir).env_clear().env("NO_COLOR", "1");
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Forwards each line of `r` to `tx` and keeps them all (without ANSI colours).
fn collect(r: impl std::io::Read + Send + 'static, tx: mpsc::Sender<String>) -> Arc<Mutex<String>> {
    let all = Arc::new(Mutex::new(String::new()));
    let keep = all.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            let line = strip_ansi(&line);
            keep.lock().unwrap().push_str(&line);
            keep.lock().unwrap().push('\n');
            let _ = tx.send(line);
        }
    });
    all
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn url_in(line: &str) -> Option<String> {
    let rest = line
        .split_once("listening on ")
        .map(|(_, r)| r)
        .or_else(|| line.strip_prefix("gateway: "))?;
    let url = rest.split_whitespace().next()?;
    url.starts_with("http").then(|| url.to_owned())
}

/// Runs `a2a-gateway ARGS` to completion (bounded).
fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut child = base_command(dir, env)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a2a-gateway");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a2a-gateway {args:?} did not finish in 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
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

async fn rpc(url: &str, method: &str, params: Value) -> Value {
    reqwest::Client::new()
        .post(url)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[test]
fn demo_starts_and_send_gets_a_streamed_answer() {
    let dir = tempfile::tempdir().unwrap();
    let demo_dir = dir.path().join("demo-data");
    let demo = Gateway::start(
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
    let logs = demo.logs();
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
    let gw = Gateway::start(
        dir.path(),
        &["serve", "--config", &file],
        &[("A2A_GATEWAY_AGENT__NAME", "name-from-env")],
    );
    let card: Value = reqwest::get(format!("{}.well-known/agent-card.json", gw.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["name"], "name-from-env", "{card}");
    assert_eq!(card["description"], "description-from-file", "{card}");

    // A2A_GATEWAY_CONFIG names the file when --config is absent.
    let gw2 = Gateway::start(dir.path(), &["serve"], &[("A2A_GATEWAY_CONFIG", &file)]);
    let card: Value = reqwest::get(format!("{}.well-known/agent-card.json", gw2.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["name"], "name-from-file", "{card}");

    // The gateway forwards to the upstream the file names.
    let reply = rpc(
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
    let (upstream, _guard) = stand_in(RuntimeOptions {
        word_delay: Duration::from_millis(1),
        slow_word_delay: Duration::from_millis(400),
        issuer: None,
    })
    .await;
    let file = write_config(dir.path(), "", &upstream);
    let grace = Duration::from_secs(1);
    let mut gw = Gateway::start(
        dir.path(),
        &["serve", "--config", &file],
        &[("A2A_GATEWAY_SERVER__SHUTDOWN_GRACE_SECS", "1")],
    );
    let resp = reqwest::Client::new()
        .post(&gw.url)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "a slow one please"}]}}}))
        .send()
        .await
        .unwrap();
    let mut events = resp.bytes_stream().eventsource();
    let mut seen: Vec<Value> = Vec::new();
    // Wait for the first artifact chunk: the task is streaming.
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an event in time")
    {
        let v: Value = serde_json::from_str(&ev.unwrap().data).unwrap();
        let chunk = v["result"].get("artifactUpdate").is_some();
        seen.push(v);
        if chunk {
            break;
        }
    }
    let sent = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &gw.pid().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
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

#[tokio::test]
async fn metrics_count_the_requests_just_made() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _guard) = stand_in(RuntimeOptions {
        word_delay: Duration::from_millis(1),
        ..RuntimeOptions::default()
    })
    .await;
    let file = write_config(dir.path(), "", &upstream);
    let gw = Gateway::start(dir.path(), &["serve", "--config", &file], &[]);
    for _ in 0..3 {
        let v = rpc(&gw.url, "GetTask", json!({"id": "no-such-task"})).await;
        assert!(v.get("error").is_some(), "{v}");
    }
    let v = rpc(&gw.url, "ListTasks", json!({})).await;
    assert!(v.get("result").is_some(), "{v}");
    let v = rpc(
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
        let out = run(dir.path(), &[command], &[]);
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
    let gw = Gateway::start(
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

    let logs = gw.logs();
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
