//! What JWT bearer authentication (`[server.auth] kind = "jwt"`) costs a gateway: blocking
//! JSON-RPC `SendMessage` against the hello-world executor on the in-memory store, with no
//! authentication and with RS256 tokens verified against a JWKS whose keys are cached,
//! over real sockets on 127.0.0.1, in one run.
//!
//! Three gateways run side by side in this process (one runtime): `none` (no
//! authentication), `jwt` (the default: a token that passed is remembered by its SHA-256
//! until its `exp` or the next JWKS fetch) and `jwt-uncached` (`cache_verified = false`:
//! every request verified in full). The JWKS (the public half of
//! `tests/fixtures/jwt/rsa-1.pem`) is served on 127.0.0.1 with `Cache-Control:
//! max-age=3600` and fetched once before the measurement. Each client has its own token
//! (its own `sub`), reused for every request, as a client-credentials caller does until
//! its token expires. The load generator runs in the same process (its own runtime), so
//! the figures include its cost.
//!
//! The modes alternate (`none`, `jwt`, `jwt-uncached`, `none`, …) for `BENCH_ROUNDS`
//! rounds, so slow drifts of the shared machine's load hit all; each row gives its
//! throughput and the CPU time this process spent per request (`/proc/self/stat` utime +
//! stime, both runtimes and the load generator included): the difference between the
//! modes is what authentication costs per request, whatever else runs on the machine.
//!
//! A last table times `Authenticator::authenticate` alone, on one thread: a cache hit, a
//! token never seen (full RS256 verification, then cached), and the uncached gateway.
//!
//! Run: `cargo bench --bench auth_overhead` with, in the environment:
//!
//! - `BENCH_SECS`: seconds per round and mode (default 5);
//! - `BENCH_CLIENTS`: e.g. `64` (the default) or `1,16,64`;
//! - `BENCH_ROUNDS`: rounds per client count (default 3).

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::agents::hello_world::HelloWorldAgentExecutor;
use a2a_gateway::config::{JwtConfig, ServerAuthConfig};
use a2a_gateway::server;
use a2a_gateway::store::open_store;
use a2a_gateway::transport::auth::Authenticator;
use a2a_gateway::transport::{AppState, TransportConfig};
use a2a_gateway::{HandlerConfig, RequestHandler};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

mod common;
use common::percentile;

const ISSUER: &str = "https://idp.bench.example/";
const AUDIENCE: &str = "a2a-gateway";
const KID: &str = "bench-1";
const RSA_1: &[u8] = include_bytes!("../tests/fixtures/jwt/rsa-1.pem");
/// The gateways measured: no authentication, JWT with the verified-token cache (the
/// default), JWT with `cache_verified = false` (every request verified in full).
const MODES: [&str; 3] = ["none", "jwt", "jwt-uncached"];

/// The process's CPU time so far (user + system), from `/proc/self/stat`.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the file, 12 and 13 after the name.
    let total = ticks(11) + ticks(12);
    // Linux reports them in USER_HZ, 100 per second on every supported architecture.
    Duration::from_millis(total * 10)
}

fn token(key: &EncodingKey, sub: &str) -> String {
    let now = jsonwebtoken::get_current_timestamp();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(KID.into());
    let claims = json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": sub,
        "iat": now, "exp": now + 3600, "scope": "a2a.invoke",
    });
    jsonwebtoken::encode(&header, &claims, key).unwrap()
}

/// Serves the JWKS on 127.0.0.1; returns its URL.
async fn jwks_server(key: &EncodingKey) -> String {
    let mut jwk = Jwk::from_encoding_key(key, Algorithm::RS256).unwrap();
    jwk.common.key_id = Some(KID.into());
    let body = json!({"keys": [jwk]});
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let app = axum::Router::new().route(
        "/jwks.json",
        axum::routing::get(move || {
            let body = body.clone();
            async move {
                (
                    [("cache-control", "public, max-age=3600")],
                    axum::Json(body),
                )
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn jwt_authenticator(jwks_url: &str, cache_verified: bool) -> Authenticator {
    let mut jwt = JwtConfig::default();
    jwt.cache_verified = cache_verified;
    jwt.issuer = ISSUER.into();
    jwt.audience = vec![AUDIENCE.into()];
    jwt.jwks_url = Some(jwks_url.parse().unwrap());
    jwt.required_scopes = vec!["a2a.invoke".into()];
    Authenticator::from_config(&ServerAuthConfig::jwt_only(jwt))
}

/// A gateway on 127.0.0.1 with `auth`; returns its URL.
async fn gateway(auth: Authenticator) -> String {
    auth.start();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let handler = RequestHandler::new(
        Arc::new(HelloWorldAgentExecutor::new()),
        open_store("memory:", 10).await.unwrap(),
        HandlerConfig::default(),
    );
    let card = server::simple_card("hello", "hello world", &url, vec![]);
    let config = TransportConfig {
        auth,
        ..TransportConfig::default()
    };
    let app = server::router(AppState::new(handler, card, config), None);
    tokio::spawn(server::serve(listener, app, std::future::pending()));
    url
}

/// What one measured point gives.
struct Point {
    requests: usize,
    rps: f64,
    p50: Duration,
    p99: Duration,
}

/// `clients` clients sending blocking SendMessage for `secs`, client `c` with
/// `tokens[c]` (none when empty).
async fn run_point(url: &str, tokens: &[String], clients: usize, secs: u64) -> Point {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut joins = Vec::new();
    for c in 0..clients {
        let http = http.clone();
        let url = url.to_owned();
        let bearer = tokens.get(c).map(|t| format!("Bearer {t}"));
        joins.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut i = c * 1_000_000;
            while Instant::now() < deadline {
                i += 1;
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{i},"method":"SendMessage","params":{{"message":{{"messageId":"m{i}","role":"ROLE_USER","parts":[{{"text":"hello {i}"}}]}}}}}}"#
                );
                let mut req = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("a2a-version", "1.0")
                    .body(body);
                if let Some(b) = &bearer {
                    req = req.header("authorization", b);
                }
                let t0 = Instant::now();
                let resp = req.send().await.expect("request");
                assert!(resp.status().is_success(), "HTTP {}", resp.status());
                let text = resp.text().await.expect("body");
                assert!(text.contains("TASK_STATE_COMPLETED"), "{text}");
                lat.push(t0.elapsed());
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for j in joins {
        all.extend(j.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort();
    Point {
        requests: all.len(),
        rps: all.len() as f64 / elapsed,
        p50: percentile(&all, 0.5),
        p99: percentile(&all, 0.99),
    }
}

fn main() {
    let secs = common::env_u64("BENCH_SECS", 5);
    let rounds = common::env_u64("BENCH_ROUNDS", 3);
    let clients = common::clients("64");
    let server_rt = common::runtime();
    let client_rt = common::runtime();
    let key = EncodingKey::from_rsa_pem(RSA_1).unwrap();

    let (urls, jwks_url) = server_rt.block_on(async {
        let jwks_url = jwks_server(&key).await;
        let urls = [
            gateway(Authenticator::none()).await,
            gateway(jwt_authenticator(&jwks_url, true)).await,
            gateway(jwt_authenticator(&jwks_url, false)).await,
        ];
        (urls, jwks_url)
    });
    let max_clients = clients.iter().copied().max().unwrap_or(1);
    let tokens: Vec<String> = (0..max_clients)
        .map(|c| token(&key, &format!("bench-client-{c}")))
        .collect();
    // The JWKS is fetched (and every token seen once) before anything is measured.
    for url in &urls[1..] {
        client_rt.block_on(run_point(url, &tokens, max_clients, 1));
    }

    println!("| clients | round | auth | requests/s | CPU per request | p50 | p99 |");
    println!("|---:|---:|---|---:|---:|---:|---:|");
    for &c in &clients {
        // Per mode: the sum of requests/s, CPU time and requests over the rounds.
        let mut totals = [(0.0f64, Duration::ZERO, 0usize); 3];
        for round in 1..=rounds {
            for (m, mode) in MODES.into_iter().enumerate() {
                let toks: &[String] = if m == 0 { &[] } else { &tokens };
                let url = &urls[m];
                let cpu0 = cpu_time();
                let p = client_rt.block_on(run_point(url, toks, c, secs));
                let cpu = cpu_time().saturating_sub(cpu0);
                totals[m].0 += p.rps;
                totals[m].1 += cpu;
                totals[m].2 += p.requests;
                println!(
                    "| {c} | {round} | {mode} | {:.0} | {:.0} µs | {:.2} ms | {:.2} ms |",
                    p.rps,
                    cpu.as_secs_f64() * 1e6 / p.requests.max(1) as f64,
                    p.p50.as_secs_f64() * 1e3,
                    p.p99.as_secs_f64() * 1e3
                );
            }
        }
        let per_req = |t: &(f64, Duration, usize)| t.1.as_secs_f64() * 1e6 / t.2.max(1) as f64;
        let none = &totals[0];
        for (m, mode) in MODES.into_iter().enumerate().skip(1) {
            println!(
                "| {c} | mean | {mode} vs none | {:.1}% | {:+.0} µs | | |",
                100.0 * totals[m].0 / none.0.max(f64::MIN_POSITIVE),
                per_req(&totals[m]) - per_req(none)
            );
        }
    }

    // Authentication alone, outside the HTTP path.
    let auth = jwt_authenticator(&jwks_url, true);
    let uncached = jwt_authenticator(&jwks_url, false);
    let headers = |t: &str| {
        let mut h = http::HeaderMap::new();
        h.insert(
            http::header::AUTHORIZATION,
            format!("Bearer {t}").parse().unwrap(),
        );
        h
    };
    let seen = headers(&tokens[0]);
    // Signing is slower than verifying: a few hundred fresh tokens are enough.
    let n = 500u32;
    let fresh: Vec<_> = (0..n)
        .map(|i| headers(&token(&key, &format!("fresh-{i}"))))
        .collect();
    let us = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(n);
    server_rt.block_on(async {
        auth.authenticate(&seen).await.expect("the JWKS is fetched");
        uncached
            .authenticate(&seen)
            .await
            .expect("the JWKS is fetched");
        let t0 = Instant::now();
        for _ in 0..n {
            auth.authenticate(&seen).await.unwrap();
        }
        let hit = t0.elapsed();
        let t0 = Instant::now();
        for h in &fresh {
            auth.authenticate(h).await.unwrap();
        }
        let miss = t0.elapsed();
        let t0 = Instant::now();
        for _ in 0..n {
            uncached.authenticate(&seen).await.unwrap();
        }
        let full = t0.elapsed();
        println!();
        println!("| authenticate, one thread, {n} calls | per call |");
        println!("|---|---:|");
        println!(
            "| jwt: a token seen before (cache hit) | {:.1} µs |",
            us(hit)
        );
        println!(
            "| jwt: a token never seen (RS256 verification, then cached) | {:.1} µs |",
            us(miss)
        );
        println!(
            "| jwt-uncached: the same token, verified in full | {:.1} µs |",
            us(full)
        );
    });
}
