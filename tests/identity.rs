//! JWT bearer tokens (`[server.auth] kind = "jwt"`) over real sockets, on every binding:
//! a JWKS endpoint on 127.0.0.1 serving the public halves of test keys (RSA from
//! `tests/fixtures/jwt`, ECDSA generated here with rcgen), tokens signed here with
//! `jsonwebtoken`, and the gateway of `tests/bindings_common`.
//!
//! - every bad token of the table is refused with its status (401, or 403 for a missing
//!   scope or another tenant), the `WWW-Authenticate` challenge on the HTTP bindings
//!   (`UNAUTHENTICATED` / `PERMISSION_DENIED` on gRPC), and no task is created;
//! - key rotation at the provider: a token with a new `kid` causes one refetch and is
//!   accepted; a flood of unknown `kid`s costs no further fetch;
//! - an unreachable JWKS keeps the last good keys and shows in `/readyz`; a failed
//!   background fetch is retried within seconds.

mod bindings_common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use a2a_gateway::config::{JwtConfig, ServerAuthConfig};
use a2a_gateway::test_util::get_json;
use a2a_gateway::test_util::user_message as message;
use a2a_gateway::transport::TransportConfig;
use a2a_gateway::transport::auth::Authenticator;
use axum::extract::State;
use axum::response::IntoResponse;
use base64::Engine;
use bindings_common::client::{Binding, Codes, Failure, Operation, Opts};
use bindings_common::server::{Server, start_with};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

const ISSUER: &str = "https://idp.test.example/";
const AUDIENCE: &str = "a2a-gateway";
const RSA_1: &[u8] = include_bytes!("fixtures/jwt/rsa-1.pem");
const RSA_1_PUBLIC: &[u8] = include_bytes!("fixtures/jwt/rsa-1.pub.pem");
const RSA_2: &[u8] = include_bytes!("fixtures/jwt/rsa-2.pem");

/// A signing key and its public JWK.
#[derive(Clone)]
struct Signer {
    kid: String,
    alg: Algorithm,
    key: EncodingKey,
}

impl Signer {
    fn rsa(kid: &str, pem: &[u8]) -> Self {
        Signer {
            kid: kid.into(),
            alg: Algorithm::RS256,
            key: EncodingKey::from_rsa_pem(pem).unwrap(),
        }
    }

    fn ec(kid: &str) -> Self {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        Signer {
            kid: kid.into(),
            alg: Algorithm::ES256,
            key: EncodingKey::from_ec_der(&pair.serialize_der()),
        }
    }

    fn jwk(&self) -> Value {
        let mut jwk = Jwk::from_encoding_key(&self.key, self.alg).unwrap();
        jwk.common.key_id = Some(self.kid.clone());
        serde_json::to_value(jwk).unwrap()
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key).unwrap()
    }
}

fn now() -> i64 {
    jsonwebtoken::get_current_timestamp() as i64
}

fn claims(sub: &str) -> Value {
    json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": sub,
        "iat": now(), "exp": now() + 600,
        "scope": "a2a.invoke other",
    })
}

fn with(mut v: Value, key: &str, value: Value) -> Value {
    if value.is_null() {
        v.as_object_mut().unwrap().remove(key);
    } else {
        v[key] = value;
    }
    v
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The identity provider's JWKS endpoint (and discovery document).
struct Provider {
    jwks: Mutex<Vec<Value>>,
    fetches: AtomicUsize,
    down: AtomicBool,
    url: String,
}

async fn jwks(State(p): State<Arc<Provider>>) -> axum::response::Response {
    p.fetches.fetch_add(1, Ordering::SeqCst);
    if p.down.load(Ordering::SeqCst) {
        return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "down").into_response();
    }
    let keys = p.jwks.lock().unwrap().clone();
    (
        [("cache-control", "public, max-age=3600")],
        axum::Json(json!({"keys": keys})),
    )
        .into_response()
}

async fn discovery(State(p): State<Arc<Provider>>) -> axum::Json<Value> {
    axum::Json(json!({"issuer": ISSUER, "jwks_uri": format!("{}jwks.json", p.url)}))
}

async fn provider(keys: &[&Signer]) -> Arc<Provider> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let p = Arc::new(Provider {
        jwks: Mutex::new(keys.iter().map(|k| k.jwk()).collect()),
        fetches: AtomicUsize::new(0),
        down: AtomicBool::new(false),
        url: format!("http://{}/", listener.local_addr().unwrap()),
    });
    let app = axum::Router::new()
        .route("/jwks.json", axum::routing::get(jwks))
        .route(
            "/.well-known/openid-configuration",
            axum::routing::get(discovery),
        )
        .with_state(p.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    p
}

fn jwt_config(p: &Provider, discovery: bool) -> JwtConfig {
    let url = |path: &str| format!("{}{path}", p.url).parse().unwrap();
    let mut c = JwtConfig::default();
    c.issuer = ISSUER.into();
    c.audience = vec![AUDIENCE.into(), "another-audience".into()];
    c.jwks_url = (!discovery).then(|| url("jwks.json"));
    c.discovery_url = discovery.then(|| url(".well-known/openid-configuration"));
    c.required_scopes = vec!["a2a.invoke".into()];
    c.unknown_kid_refetch_secs = 3600;
    c
}

async fn gateway(p: &Provider, discovery: bool) -> Server {
    let auth = ServerAuthConfig {
        tenant_claim: Some("tenant".into()),
        ..ServerAuthConfig::jwt_only(jwt_config(p, discovery))
    };
    start_with(TransportConfig {
        auth: Authenticator::from_config(&auth),
        ..TransportConfig::default()
    })
    .await
}

async fn send(b: &dyn Binding, token: &str, tenant: Option<&str>) -> Result<Value, Failure> {
    let mut req = json!({"message": message("echo hi")});
    if let Some(t) = tenant {
        req["tenant"] = json!(t);
    }
    b.unary(Operation::SendMessage, req, &Opts::bearer(token))
        .await
}

/// The raw HTTP answer of the JSON-RPC binding to `authorization`: status and challenge.
async fn challenge(s: &Server, authorization: &str) -> (u16, String) {
    let resp = s
        .http
        .post(&s.url)
        .header("authorization", authorization)
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let www = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, www)
}

#[tokio::test]
async fn bad_tokens_are_refused_on_every_binding_and_create_no_task() {
    let rsa = Signer::rsa("rsa-1", RSA_1);
    let ec = Signer::ec("ec-1");
    let p = provider(&[&rsa, &ec]).await;
    let s = gateway(&p, false).await;
    let good = rsa.sign(&claims("alice"));

    let header_none = b64(br#"{"alg":"none","typ":"JWT"}"#);
    let payload = b64(claims("alice").to_string().as_bytes());
    let alg_none = format!("{header_none}.{payload}.");
    // RS256 → HS256 with the RSA public key (PEM) as the HMAC secret.
    let confused = {
        let mut h = Header::new(Algorithm::HS256);
        h.kid = Some("rsa-1".into());
        jsonwebtoken::encode(
            &h,
            &claims("alice"),
            &EncodingKey::from_secret(RSA_1_PUBLIC).unwrap(),
        )
        .unwrap()
    };
    let tampered = {
        let parts: Vec<&str> = good.split('.').collect();
        let forged = b64(claims("mallory").to_string().as_bytes());
        format!("{}.{forged}.{}", parts[0], parts[2])
    };
    let unknown_kid = Signer::rsa("not-published", RSA_2).sign(&claims("alice"));
    let huge = "a".repeat(64 * 1024);
    let c = || claims("alice");
    #[rustfmt::skip]
    let cases: Vec<(&str, String, Option<&str>, u16, &str)> = vec![
        ("expired", rsa.sign(&with(c(), "exp", json!(now() - 3600))), None, 401, "expired"),
        ("not yet valid", rsa.sign(&with(c(), "nbf", json!(now() + 3600))), None, 401, "not valid yet"),
        ("issued in the future", rsa.sign(&with(c(), "iat", json!(now() + 3600))), None, 401, "iat"),
        ("wrong issuer", rsa.sign(&with(c(), "iss", json!("https://evil.example/"))), None, 401, "issuer"),
        ("wrong audience", rsa.sign(&with(c(), "aud", json!("someone-else"))), None, 401, "audience"),
        ("no exp", rsa.sign(&with(c(), "exp", Value::Null)), None, 401, "claim"),
        ("no sub", rsa.sign(&with(c(), "sub", Value::Null)), None, 401, "claim"),
        ("sub with a newline", rsa.sign(&with(c(), "sub", json!("alice\nadmin"))), None, 401, "unusable"),
        ("sub with a bidi override", rsa.sign(&with(c(), "sub", json!("ali\u{202e}ce"))), None, 401, "unusable"),
        ("alg none", alg_none, None, 401, "algorithm"),
        ("RS256 re-signed as HS256 with the public key", confused, None, 401, "algorithm"),
        ("unknown kid", unknown_kid, None, 401, "kid"),
        ("tampered payload", tampered, None, 401, "signature"),
        ("missing scope", rsa.sign(&with(c(), "scope", json!("other"))), None, 403, "insufficient_scope"),
        ("another tenant", rsa.sign(&with(c(), "tenant", json!("t2"))), Some("t1"), 403, "tenant"),
        ("64 KB header", huge, None, 401, "too long"),
        ("garbage", "!!not-a-token!!".into(), None, 401, "not accepted"),
        ("three garbage parts", "abc.def.ghi".into(), None, 401, "well-formed"),
    ];
    for (what, token, tenant, status, said) in &cases {
        for b in s.bindings() {
            let err = send(b.as_ref(), token, *tenant)
                .await
                .expect_err(&format!("{what} on {}", b.name()));
            if *what == "64 KB header" && b.name() == "GRPC" {
                // HTTP/2's header-list limit (16 KiB) refuses it before the gateway
                // reads it: the call fails (no task), though not with a gRPC status.
                continue;
            }
            let (reason, code) = if *status == 403 {
                ("PERMISSION_DENIED", ("-32600", "403", "PERMISSION_DENIED"))
            } else {
                ("UNAUTHENTICATED", ("-32600", "401", "UNAUTHENTICATED"))
            };
            let want = match b.name() {
                "JSONRPC" => code.0,
                "HTTP+JSON" => code.1,
                _ => code.2,
            };
            assert_eq!(
                err,
                Failure {
                    reason: reason.into(),
                    code: want.into()
                },
                "{what} on {}",
                b.name()
            );
        }
        if *tenant == Some("t1") {
            continue;
        }
        let (got, www) = challenge(&s, &format!("Bearer {token}")).await;
        assert_eq!(got, *status, "{what}");
        assert!(
            www.starts_with("Bearer realm=\"a2a-gateway\""),
            "{what}: {www}"
        );
        let error = if *status == 403 {
            "insufficient_scope"
        } else {
            "invalid_token"
        };
        assert!(www.contains(&format!("error=\"{error}\"")), "{what}: {www}");
        assert!(www.contains(said), "{what}: {www}");
        assert!(
            !www.contains(&token[..token.len().min(40)]),
            "{what}: echoed"
        );
    }
    // The unknown kid caused one refetch, whatever the number of bindings and attempts.
    assert_eq!(
        p.fetches.load(Ordering::SeqCst),
        2,
        "initial fetch + one refetch"
    );
    // No credential at all: 401 with a bare challenge.
    let resp = s.http.post(&s.url).body("{}").send().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(
        resp.headers()["www-authenticate"],
        "Bearer realm=\"a2a-gateway\""
    );

    // The good tokens work on every binding (RS256 and ES256), and the tenant claim
    // binds the tenant; none of the refused requests created a task.
    let es = ec.sign(&with(claims("alice"), "tenant", json!(["t1", "t2"])));
    for b in s.bindings() {
        let b = b.as_ref();
        let task = send(b, &good, None).await.unwrap();
        assert_eq!(task["task"]["status"]["state"], "TASK_STATE_COMPLETED");
        send(b, &es, Some("t2")).await.unwrap();
    }
    let b = &s.bindings()[0];
    let mine = b
        .unary(Operation::ListTasks, json!({}), &Opts::bearer(&good))
        .await
        .unwrap();
    assert_eq!(
        mine["tasks"].as_array().unwrap().len(),
        3,
        "one per binding: {mine}"
    );
    let t2 = b
        .unary(
            Operation::ListTasks,
            json!({"tenant": "t2"}),
            &Opts::bearer(&es),
        )
        .await
        .unwrap();
    assert_eq!(
        t2["tasks"].as_array().unwrap().len(),
        3,
        "one per binding in t2"
    );
}

#[tokio::test]
async fn key_rotation_needs_one_refetch_and_unknown_kids_cost_no_flood() {
    let old = Signer::rsa("2026-01", RSA_1);
    let new = Signer::ec("2026-02");
    let p = provider(&[&old]).await;
    let s = gateway(&p, true).await;
    let b = &s.bindings()[0];
    let old_token = old.sign(&claims("svc"));
    send(b.as_ref(), &old_token, None).await.unwrap();
    assert_eq!(p.fetches.load(Ordering::SeqCst), 1);
    // The provider publishes the new key beside the old one and signs with it.
    p.jwks.lock().unwrap().push(new.jwk());
    let new_token = new.sign(&claims("svc"));
    for b in s.bindings() {
        send(b.as_ref(), &new_token, None).await.unwrap();
        send(b.as_ref(), &old_token, None).await.unwrap();
    }
    assert_eq!(
        p.fetches.load(Ordering::SeqCst),
        2,
        "one refetch for the new kid"
    );
    // A flood of tokens with kids nobody published: refused, and no fetch at all
    // within unknown_kid_refetch_secs.
    for i in 0..30 {
        let t = Signer::rsa(&format!("bogus-{i}"), RSA_2).sign(&claims("svc"));
        let err = send(b.as_ref(), &t, None).await.unwrap_err();
        assert_eq!(err.reason, "UNAUTHENTICATED");
    }
    assert_eq!(p.fetches.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_unreachable_jwks_keeps_the_last_good_keys_and_shows_in_readyz() {
    let key = Signer::rsa("k", RSA_1);
    let p = provider(&[&key]).await;
    let s = gateway(&p, false).await;
    let readyz = |s: &Server| {
        let http = s.http.clone();
        let url = format!("{}readyz", s.url);
        async move {
            let r = http.get(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (status, body) = readyz(&s).await;
    assert_eq!(status, 503, "no keys fetched yet: {body}");
    assert!(body.contains("no JWKS signing keys yet"), "{body}");
    let token = key.sign(&claims("svc"));
    let b = &s.bindings()[0];
    send(b.as_ref(), &token, None).await.unwrap();
    assert_eq!(readyz(&s).await, (200, "ready\n".into()));
    p.down.store(true, Ordering::SeqCst);
    // A token with a new kid makes the gateway refetch: the fetch fails.
    let unknown = Signer::rsa("rotated", RSA_2).sign(&claims("svc"));
    assert!(send(b.as_ref(), &unknown, None).await.is_err());
    assert_eq!(p.fetches.load(Ordering::SeqCst), 2);
    // The last good key still verifies, and readiness says the keys are stale.
    send(b.as_ref(), &token, None).await.unwrap();
    let (status, body) = readyz(&s).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("JWKS stale: keeping 1 keys"), "{body}");
    assert!(body.contains("HTTP 500"), "{body}");
}

/// The background refresh retries a failed fetch after 1 s, doubling: with the issuer down
/// at start and no JWT traffic at all, `/readyz` turns 200 within seconds of the issuer
/// coming back, not after `min_refresh_secs` (60 here).
#[tokio::test]
async fn the_background_refresh_retries_a_failed_fetch_within_seconds() {
    let key = Signer::rsa("k", RSA_1);
    let p = provider(&[&key]).await;
    p.down.store(true, Ordering::SeqCst);
    let mut jwt = jwt_config(&p, false);
    jwt.min_refresh_secs = 60;
    let auth = Authenticator::from_config(&ServerAuthConfig::jwt_only(jwt));
    auth.start();
    let s = start_with(TransportConfig {
        auth,
        ..TransportConfig::default()
    })
    .await;
    let readyz = || {
        let http = s.http.clone();
        let url = format!("{}readyz", s.url);
        async move { http.get(url).send().await.unwrap().status().as_u16() }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while p.fetches.load(Ordering::SeqCst) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "no retry after a failed fetch"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(readyz().await, 503);
    p.down.store(false, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while readyz().await != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "keys not fetched within 15 s of the issuer coming back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let fetches = p.fetches.load(Ordering::SeqCst);
    assert!(
        fetches <= 6,
        "{fetches} fetches: the retry does not back off"
    );
}

/// A valid token that needs a JWKS key while no key set was ever fetched is the gateway's
/// outage, not the caller's fault: `UNAVAILABLE` on every binding (503 with `Retry-After`
/// and no challenge, checked on JSON-RPC's raw answer), and accepted once the issuer
/// answers.
#[tokio::test]
async fn a_token_before_any_jwks_fetch_is_unavailable_not_unauthenticated() {
    let key = Signer::rsa("k", RSA_1);
    let p = provider(&[&key]).await;
    p.down.store(true, Ordering::SeqCst);
    let s = gateway(&p, false).await;
    let token = key.sign(&claims("svc"));
    for b in s.bindings() {
        let f = send(b.as_ref(), &token, None).await.unwrap_err();
        assert_eq!(f.reason, "UNAVAILABLE", "{}: {f:?}", b.name());
        let want = b.code(Codes {
            jsonrpc: -32000,
            http: 503,
            grpc: "UNAVAILABLE",
        });
        assert_eq!(f.code, want, "{}: {f:?}", b.name());
    }
    let resp = s
        .http
        .post(&s.url)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    assert!(resp.headers().get("www-authenticate").is_none());
    let body: Value = resp.json().await.unwrap();
    // Refused before the body is read, as every authentication failure: no id yet.
    assert_eq!(body["id"], Value::Null, "{body}");
    assert_eq!(body["error"]["code"], -32000, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("signing keys"),
        "{body}"
    );
    // A token that is not a JWT at all is still the caller's fault.
    assert_eq!(challenge(&s, "Bearer not-a-jwt").await.0, 401);
    // Once the issuer answers, the same token is accepted (the gateway refetches at
    // most once a second while it holds no keys).
    p.down.store(false, Ordering::SeqCst);
    let b = &s.bindings()[0];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match send(b.as_ref(), &token, None).await {
            Ok(_) => break,
            Err(f) => {
                assert_eq!(f.reason, "UNAVAILABLE", "{f:?}");
                assert!(std::time::Instant::now() < deadline, "keys never fetched");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    }
}

/// `[agent.extended]` on a gateway built from its configuration: the public card says
/// `extendedAgentCard: true` without the extended skills; GetExtendedAgentCard returns
/// the extended card to an authenticated caller on every binding and refuses an
/// anonymous one.
#[tokio::test]
async fn the_extended_card_is_for_authenticated_callers_only() {
    use a2a_gateway::app::Gateway;
    use a2a_gateway::config::{Config, ConfigSources, sha256_hex};
    let key = "extended-card-test-key-0123456789";
    let config = Config::load(ConfigSources {
        file: None,
        env: vec![
            ("A2A_GATEWAY_SERVER__AUTH__KIND".into(), "api_key".into()),
            (
                "A2A_GATEWAY_SERVER__AUTH__KEYS".into(),
                format!(r#"[{{caller = "c", sha256 = "{}"}}]"#, sha256_hex(key)),
            ),
            (
                "A2A_GATEWAY_AGENT__EXTENDED".into(),
                r#"{description = "for insiders", skills = [{id = "runbooks", name = "Runbooks", description = "internal", tags = []}]}"#.into(),
            ),
        ],
        overrides: vec![("store.url".into(), "memory:".into())],
    })
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut config = config;
    config.server.public_url = Some(format!("http://{addr}/").parse().unwrap());
    config.agent.v03_card_fields = false;
    let gateway = Gateway::new(
        &config,
        Arc::new(a2a_gateway::agents::hello_world::HelloWorldAgentExecutor),
        Arc::new(a2a_gateway::store::MemoryTaskStore::new()),
        None,
    );
    tokio::spawn(gateway.serve(
        listener,
        std::time::Duration::from_secs(1),
        futures::future::pending(),
    ));
    let http = reqwest::Client::new();
    let card: a2a_gateway::protocol::AgentCard =
        get_json(&http, &format!("http://{addr}/.well-known/agent-card.json")).await;
    assert_eq!(card.capabilities.extended_agent_card, Some(true));
    assert!(card.skills.iter().all(|s| s.id != "runbooks"));
    let public_skills = card.skills.len();
    let s = Server {
        url: format!("http://{addr}/"),
        card,
        gate: Arc::new(tokio::sync::Notify::new()),
        http,
        hooks: bindings_common::server::Receiver::start().await,
        push: None,
        stop_push: None,
    };
    for b in s.bindings() {
        let extended = b
            .unary(
                Operation::GetExtendedAgentCard,
                json!({}),
                &Opts::bearer(key),
            )
            .await
            .unwrap();
        assert_eq!(extended["description"], "for insiders", "{}", b.name());
        let skills = extended["skills"].as_array().unwrap();
        assert_eq!(skills.len(), public_skills + 1);
        assert_eq!(skills.last().unwrap()["id"], "runbooks");
        let err = b
            .unary(Operation::GetExtendedAgentCard, json!({}), &Opts::default())
            .await
            .unwrap_err();
        assert_eq!(err.reason, "UNAUTHENTICATED", "{}", b.name());
    }

    // HTTP+JSON `GET /extendedAgentCard` has the public card's validators (ETag,
    // Last-Modified, If-None-Match → 304), kept out of shared caches.
    let url = format!("http://{addr}/a2a/rest/extendedAgentCard");
    let get = |extra: Option<(&str, String)>| {
        let mut req = s.http.get(&url).bearer_auth(key);
        if let Some((name, value)) = extra {
            req = req.header(name, value);
        }
        req.send()
    };
    let first = get(None).await.unwrap();
    assert_eq!(first.status(), 200);
    let header = |r: &reqwest::Response, name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let etag = header(&first, "etag");
    assert!(etag.starts_with('"') && etag.len() == 34, "{etag}");
    assert_eq!(header(&first, "cache-control"), "private, max-age=300");
    assert_eq!(header(&first, "vary"), "authorization");
    let public = s
        .http
        .get(format!("http://{addr}/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        header(&first, "last-modified"),
        header(&public, "last-modified")
    );
    assert_ne!(
        etag,
        header(&public, "etag"),
        "another document, another ETag"
    );
    let body: Value = first.json().await.unwrap();
    assert_eq!(body["description"], "for insiders");
    let again = get(Some(("if-none-match", etag.clone()))).await.unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(header(&again, "etag"), etag);
    assert_eq!(header(&again, "cache-control"), "private, max-age=300");
    assert!(again.bytes().await.unwrap().is_empty());
    let weak = get(Some(("if-none-match", format!("W/{etag}"))))
        .await
        .unwrap();
    assert_eq!(weak.status(), 304);
    let other = get(Some(("if-none-match", "\"0123\"".into())))
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    let since = get(Some((
        "if-modified-since",
        header(&public, "last-modified"),
    )))
    .await
    .unwrap();
    assert_eq!(since.status(), 304);
    // Validators never let an anonymous caller through.
    let anonymous = s
        .http
        .get(&url)
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}

/// `require_tenant_claim` (issue 43): a token without the tenant claim, or with an empty
/// one, is refused with 403 / `PERMISSION_DENIED` naming the claim on every binding,
/// instead of running in the default tenant `""`; a token with it works.
#[tokio::test]
async fn a_token_without_the_required_tenant_claim_is_refused_naming_the_claim() {
    let rsa = Signer::rsa("rsa-1", RSA_1);
    let p = provider(&[&rsa]).await;
    let mut jwt = jwt_config(&p, false);
    jwt.require_tenant_claim = true;
    let auth = ServerAuthConfig {
        tenant_claim: Some("tenant".into()),
        ..ServerAuthConfig::jwt_only(jwt)
    };
    let s = start_with(TransportConfig {
        auth: Authenticator::from_config(&auth),
        ..TransportConfig::default()
    })
    .await;
    let without = rsa.sign(&claims("alice"));
    let empty = rsa.sign(&with(claims("alice"), "tenant", json!("")));
    let with_tenant = rsa.sign(&with(claims("alice"), "tenant", json!("t1")));
    for b in s.bindings() {
        for token in [&without, &empty] {
            let err = send(b.as_ref(), token, None).await.expect_err(b.name());
            let code = match b.name() {
                "JSONRPC" => "-32600",
                "HTTP+JSON" => "403",
                _ => "PERMISSION_DENIED",
            };
            assert_eq!(
                err,
                Failure {
                    reason: "PERMISSION_DENIED".into(),
                    code: code.into()
                },
                "{}",
                b.name()
            );
        }
        let ok = send(b.as_ref(), &with_tenant, None).await.unwrap();
        assert_eq!(ok["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    }
    // The message names the claim; the challenge stays a well-formed quoted string.
    let resp = s
        .http
        .post(&s.url)
        .header("authorization", format!("Bearer {without}"))
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let www = resp.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(www.contains("error=\"insufficient_scope\""), "{www}");
    assert_eq!(www.matches('"').count() % 2, 0, "{www}");
    let body: Value = resp.json().await.unwrap();
    let said = body["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("\"tenant\""), "{body}");
}
