//! Load benchmark of the HTTP bindings (JSON-RPC, HTTP+JSON): blocking `SendMessage` and
//! streaming `SendStreamingMessage` against the hello-world executor, at 1, 16 and 64
//! concurrent clients, over real sockets on 127.0.0.1, on one or more task stores in
//! one run. The load generator runs in the same process (its own runtime), so the
//! figures include its cost, as on a 2-core machine they must.
//!
//! Run: `cargo bench --bench send_message` with, in the environment:
//!
//! - `BENCH_SECS`: seconds per point (default 5);
//! - `BENCH_CLIENTS`: e.g. `1,16,64` (the default);
//! - `BENCH_BINDING`: a comma-separated list of `jsonrpc`, `rest`, `grpc` (default
//!   `jsonrpc`): the same load through `POST /`, `POST /a2a/rest/message:send|stream`, or
//!   the gRPC `SendMessage` / `SendStreamingMessage` on the same port, one tonic channel
//!   (one HTTP/2 connection) per client as the HTTP bindings have one connection per
//!   client; `grpc-shared` is the same with one channel multiplexing every client;
//! - `BENCH_STORE`: a comma-separated list of `memory`, `sqlite`, `sqlite-normal`,
//!   `postgres` (default `memory`). `sqlite` is a fresh database file in a temporary
//!   directory with the default `synchronous = FULL`, `sqlite-normal` the same with
//!   `[store] sqlite_synchronous = "normal"`;
//!   `postgres` a fresh schema (dropped at the end) in the database at
//!   `A2A_GATEWAY_TEST_POSTGRES_URL`, skipped with a note when that is unset. Each is
//!   opened with the default pool size (10), as `serve` does.
//!
//! Each row also gives its throughput as a percentage of the in-memory store's at
//! the same method and client count (when `memory` is in the list; run it first for
//! the ratios to appear), so compare stores within one run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::agents::hello_world::HelloWorldAgentExecutor;
use a2a_gateway::server;
use a2a_gateway::store::{SqliteTaskStore, Synchronous, TaskStore, open_store};
use a2a_gateway::test_util::PgSchema;
use a2a_gateway::transport::grpc::proto::{self, a2a_service_client::A2aServiceClient};
use a2a_gateway::transport::{AppState, TransportConfig};
use a2a_gateway::{HandlerConfig, RequestHandler};

mod common;
use common::percentile;

/// The pool size `serve` uses by default (`[store] max_connections`).
const MAX_CONNECTIONS: u32 = 10;

/// A store under test and what to clean up after it.
struct BenchStore {
    store: Arc<dyn TaskStore>,
    /// Holds the SQLite file until the store is done.
    _dir: Option<tempfile::TempDir>,
    /// The PostgreSQL schema to drop.
    pg_schema: Option<PgSchema>,
}

/// Opens the store `kind`, or `None` (after a note) when it cannot run here.
async fn open_bench_store(kind: &str) -> Option<BenchStore> {
    match kind {
        "memory" => Some(BenchStore {
            store: open_store("memory:", MAX_CONNECTIONS).await.unwrap(),
            _dir: None,
            pg_schema: None,
        }),
        "sqlite" | "sqlite-normal" => {
            let dir = tempfile::tempdir().unwrap();
            let sync = if kind == "sqlite" {
                Synchronous::Full
            } else {
                Synchronous::Normal
            };
            let store = SqliteTaskStore::open_path_with(
                &dir.path().join("bench.db"),
                MAX_CONNECTIONS,
                sync,
            )
            .await
            .unwrap();
            Some(BenchStore {
                store: Arc::new(store),
                _dir: Some(dir),
                pg_schema: None,
            })
        }
        "postgres" => {
            let schema = PgSchema::create("bench_send_message").await?;
            Some(BenchStore {
                store: open_store(&schema.url(), MAX_CONNECTIONS).await.unwrap(),
                _dir: None,
                pg_schema: Some(schema),
            })
        }
        other => panic!(
            "unknown BENCH_STORE entry {other:?}: use memory, sqlite, sqlite-normal, postgres"
        ),
    }
}

/// The request URL and body of request `i` on `binding` (`jsonrpc` or `rest`) at the
/// server `base` (ending in `/`).
fn request(base: &str, binding: &str, i: usize, stream: bool) -> (String, String) {
    let message = format!(
        r#"{{"message":{{"messageId":"m{i}","role":"ROLE_USER","parts":[{{"text":"hello {i}"}}]}}}}"#
    );
    match binding {
        "rest" => {
            let verb = if stream { "stream" } else { "send" };
            (format!("{base}a2a/rest/message:{verb}"), message)
        }
        "jsonrpc" => {
            let method = if stream {
                "SendStreamingMessage"
            } else {
                "SendMessage"
            };
            (
                base.to_owned(),
                format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"{method}","params":{message}}}"#),
            )
        }
        other => {
            panic!("unknown BENCH_BINDING entry {other:?}: use jsonrpc, rest, grpc, grpc-shared")
        }
    }
}

/// One gRPC call of `stream`ing or blocking SendMessage number `i`: the latency, the time
/// to the first event for a stream.
async fn grpc_call(
    client: &mut A2aServiceClient<tonic::transport::Channel>,
    i: usize,
    stream: bool,
) -> (Duration, Option<Duration>) {
    let message = proto::Message {
        message_id: format!("m{i}"),
        role: proto::Role::User as i32,
        parts: vec![proto::Part {
            content: Some(proto::part::Content::Text(format!("hello {i}"))),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut req = tonic::Request::new(proto::SendMessageRequest {
        message: Some(message),
        ..Default::default()
    });
    req.metadata_mut().insert(
        "a2a-version",
        tonic::metadata::MetadataValue::from_static("1.0"),
    );
    let t0 = Instant::now();
    if stream {
        let mut events = client
            .send_streaming_message(req)
            .await
            .expect("stream")
            .into_inner();
        let mut first = None;
        let mut last = None;
        while let Some(ev) = events.message().await.expect("event") {
            first.get_or_insert_with(|| t0.elapsed());
            last = Some(ev);
        }
        let completed = proto::TaskState::Completed as i32;
        assert!(
            matches!(last.and_then(|e| e.payload),
                Some(proto::stream_response::Payload::StatusUpdate(u))
                    if u.status.as_ref().is_some_and(|s| s.state == completed)),
            "the stream ends COMPLETED"
        );
        (t0.elapsed(), first)
    } else {
        let resp = client.send_message(req).await.expect("send").into_inner();
        assert!(
            matches!(resp.payload, Some(proto::send_message_response::Payload::Task(ref t))
                if t.status.as_ref().is_some_and(|s| s.state == proto::TaskState::Completed as i32)),
            "{resp:?}"
        );
        (t0.elapsed(), None)
    }
}

async fn run_point(
    url: &str,
    binding: &str,
    clients: usize,
    secs: u64,
    stream: bool,
) -> (f64, Duration, Duration, Option<Duration>) {
    // gRPC: one channel (one HTTP/2 connection) per client, or one for all of them
    // (`grpc-shared`); the HTTP bindings get a pool of up to `clients` connections,
    // which reqwest fills with one HTTP/1.1 connection per client in flight.
    let endpoint = binding.starts_with("grpc").then(|| {
        tonic::transport::Endpoint::from_shared(url.trim_end_matches('/').to_owned())
            .expect("the server URL")
    });
    let shared = (binding == "grpc-shared")
        .then(|| endpoint.as_ref().map(|e| e.connect_lazy()))
        .flatten();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut joins = Vec::new();
    for c in 0..clients {
        let client = client.clone();
        let url = url.to_owned();
        let binding = binding.to_owned();
        let grpc = shared
            .clone()
            .or_else(|| endpoint.as_ref().map(|e| e.connect_lazy()));
        joins.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut first = Vec::new();
            let mut i = c * 1_000_000;
            if let Some(channel) = grpc {
                let mut client = A2aServiceClient::new(channel);
                while Instant::now() < deadline {
                    i += 1;
                    let (l, f) = grpc_call(&mut client, i, stream).await;
                    lat.push(l);
                    first.extend(f);
                }
                return (lat, first);
            }
            while Instant::now() < deadline {
                i += 1;
                let (target, body) = request(&url, &binding, i, stream);
                let t0 = Instant::now();
                let resp = client
                    .post(&target)
                    .header("content-type", "application/json")
                    .header("a2a-version", "1.0")
                    .body(body)
                    .send()
                    .await
                    .expect("request");
                assert!(resp.status().is_success());
                if stream {
                    let mut resp = resp;
                    let mut got_first = false;
                    let mut text = Vec::new();
                    while let Some(chunk) = resp.chunk().await.expect("chunk") {
                        if !got_first {
                            first.push(t0.elapsed());
                            got_first = true;
                        }
                        text.extend_from_slice(&chunk);
                    }
                    assert!(
                        std::str::from_utf8(&text)
                            .unwrap()
                            .contains("TASK_STATE_COMPLETED")
                    );
                } else {
                    let text = resp.text().await.expect("body");
                    assert!(text.contains("TASK_STATE_COMPLETED"), "{text}");
                }
                lat.push(t0.elapsed());
            }
            (lat, first)
        }));
    }
    let started = Instant::now();
    let mut all = Vec::new();
    let mut firsts = Vec::new();
    for j in joins {
        let (l, f) = j.await.unwrap();
        all.extend(l);
        firsts.extend(f);
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort();
    firsts.sort();
    let rps = all.len() as f64 / elapsed;
    let first = (!firsts.is_empty()).then(|| percentile(&firsts, 0.5));
    (rps, percentile(&all, 0.5), percentile(&all, 0.99), first)
}

fn main() {
    let secs = common::env_u64("BENCH_SECS", 5);
    let clients = common::clients("1,16,64");
    let stores = common::env_list("BENCH_STORE", "memory");
    let bindings = common::env_list("BENCH_BINDING", "jsonrpc");
    let server_rt = common::runtime();
    let client_rt = common::runtime();
    println!(
        "| store | binding | method | clients | requests/s | vs memory | p50 | p99 | p50 first event |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|");
    // Memory throughput by (binding, streaming, clients), for the ratio column.
    let mut baseline: Vec<((String, bool, usize), f64)> = Vec::new();
    for store_kind in &stores {
        let Some(bench) = server_rt.block_on(open_bench_store(store_kind)) else {
            continue;
        };
        let (url, shutdown) = server_rt.block_on(async {
            let store = bench.store.clone();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/", listener.local_addr().unwrap());
            let handler = RequestHandler::new(
                Arc::new(HelloWorldAgentExecutor::new()),
                store,
                HandlerConfig::default(),
            );
            let card = server::simple_card("hello", "hello world", &url, vec![]);
            let app = server::router(
                AppState::new(handler, card, TransportConfig::default()),
                None,
            );
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let served = tokio::spawn(server::serve(listener, app, async move {
                let _ = stopped.await;
            }));
            (url, (stop, served))
        });
        for (binding, stream) in [false, true]
            .into_iter()
            .flat_map(|stream| bindings.iter().map(move |b| (b.clone(), stream)))
        {
            for &c in &clients {
                let (rps, p50, p99, first) =
                    client_rt.block_on(run_point(&url, &binding, c, secs, stream));
                let method = if stream {
                    "SendStreamingMessage"
                } else {
                    "SendMessage"
                };
                let first = first
                    .map(|d| format!("{:.2} ms", d.as_secs_f64() * 1e3))
                    .unwrap_or_else(|| "-".into());
                let key = (binding.clone(), stream, c);
                if store_kind == "memory" {
                    baseline.push((key.clone(), rps));
                }
                let ratio = baseline
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, m)| format!("{:.0}%", 100.0 * rps / m))
                    .unwrap_or_else(|| "-".into());
                println!(
                    "| {store_kind} | {binding} | {method} | {c} | {rps:.0} | {ratio} | {:.2} ms | {:.2} ms | {first} |",
                    p50.as_secs_f64() * 1e3,
                    p99.as_secs_f64() * 1e3
                );
            }
        }
        // Stop this server (and let its in-flight work finish) before the next store.
        let (stop, served) = shutdown;
        let _ = stop.send(());
        server_rt.block_on(async {
            let _ = tokio::time::timeout(Duration::from_secs(10), served).await;
        });
        drop(bench.store);
        if let Some(schema) = bench.pg_schema {
            server_rt.block_on(schema.close());
        }
    }
}
