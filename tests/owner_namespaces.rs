//! Owner namespaces (issue 43 item 8, docs/authentication.md#owner-namespaces): an API
//! key's caller and a JWT's subject of the same name are two owners, and so are the
//! subjects of two issuers; rows written before (a JWT caller's owner was its bare
//! claim) are rewritten once per database at start, so their caller still finds them.
//!
//! Real gateways on 127.0.0.1:0 over every binding, JWTs signed with HS256, and for the
//! migration real SQLite and PostgreSQL stores.

mod bindings_common;

use std::sync::Arc;

use a2a_gateway::app::owners::{namespace_owners, owner_plan};
use a2a_gateway::config::{
    ApiKeyConfig, Config, JwtConfig, OwnerForm, ServerAuthConfig, ServerAuthKind, sha256_hex,
};
use a2a_gateway::store::TaskStore;
use a2a_gateway::store::owners::OwnerOutcome;
use a2a_gateway::test_util::PgSchema;
use a2a_gateway::test_util::user_message as message;
use a2a_gateway::transport::TransportConfig;
use a2a_gateway::transport::auth::Authenticator;
use bindings_common::client::{Binding, Operation, Opts};
use bindings_common::server::{Server, start_on};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

const ISSUER_A: &str = "https://idp-a.test.example/";
const ISSUER_B: &str = "https://idp-b.test.example/";
const AUDIENCE: &str = "a2a-gateway";
const SECRET: &[u8] = b"owner-namespaces-test-secret-of-at-least-32-bytes";
/// The API key of the caller `team-a`.
const KEY: &str = "key-of-team-a";

/// `[server.auth]` with the key `team-a` (when `keys`) and HS256 JWTs of `issuer`.
fn auth(issuer: &str, keys: bool, form: OwnerForm) -> ServerAuthConfig {
    let mut jwt = JwtConfig::default();
    jwt.issuer = issuer.into();
    jwt.audience = vec![AUDIENCE.into()];
    jwt.algorithms = vec!["HS256".into()];
    jwt.set_hmac_secret(SECRET);
    jwt.owner = form;
    let mut a = ServerAuthConfig::jwt_only(jwt);
    if keys {
        a.schemes = vec![ServerAuthKind::ApiKey, ServerAuthKind::Jwt];
        a.keys
            .push(ApiKeyConfig::from_sha256("team-a", sha256_hex(KEY)));
    }
    a
}

fn config(auth: ServerAuthConfig) -> Config {
    let mut c = Config::default();
    c.server.auth = auth;
    c
}

/// A token of `issuer` for `sub`.
fn token(issuer: &str, sub: &str) -> String {
    let now = jsonwebtoken::get_current_timestamp();
    let claims = json!({"iss": issuer, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 600});
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET).unwrap(),
    )
    .unwrap()
}

async fn gateway(store: Arc<dyn TaskStore>, auth: &ServerAuthConfig) -> Server {
    start_on(
        store,
        TransportConfig {
            auth: Authenticator::from_config(auth),
            ..TransportConfig::default()
        },
    )
    .await
}

/// A task that waits for input (`ask`), created by `credential`: its id.
async fn ask(b: &dyn Binding, credential: &str) -> String {
    let done = b
        .unary(
            Operation::SendMessage,
            json!({"message": message("ask")}),
            &Opts::bearer(credential),
        )
        .await
        .unwrap_or_else(|f| panic!("{}: {f:?}", b.name()));
    done["task"]["id"].as_str().unwrap().to_owned()
}

/// Whether `credential` gets the task `id` (GetTask), on `b`.
async fn sees(b: &dyn Binding, credential: &str, id: &str) -> bool {
    match b
        .unary(
            Operation::GetTask,
            json!({"id": id}),
            &Opts::bearer(credential),
        )
        .await
    {
        Ok(task) => {
            assert_eq!(task["id"], id, "{}", b.name());
            true
        }
        Err(f) => {
            assert_eq!(f.reason, "TASK_NOT_FOUND", "{}: {f:?}", b.name());
            false
        }
    }
}

/// The ids ListTasks gives `credential`, on `b`.
async fn listed(b: &dyn Binding, credential: &str) -> Vec<String> {
    let list = b
        .unary(Operation::ListTasks, json!({}), &Opts::bearer(credential))
        .await
        .unwrap_or_else(|f| panic!("{}: {f:?}", b.name()));
    list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_jwt_whose_subject_is_a_key_caller_cannot_reach_that_keys_tasks() {
    let auth = auth(ISSUER_A, true, OwnerForm::Namespaced);
    let s = gateway(Arc::new(a2a_gateway::store::MemoryTaskStore::new()), &auth).await;
    let namesake = token(ISSUER_A, "team-a");
    for b in s.bindings() {
        let b = b.as_ref();
        let id = ask(b, KEY).await;
        let task = json!({"id": id});
        assert!(!sees(b, &namesake, &id).await, "{}", b.name());
        assert!(!listed(b, &namesake).await.contains(&id), "{}", b.name());
        let cancel = b
            .unary(
                Operation::CancelTask,
                task.clone(),
                &Opts::bearer(&namesake),
            )
            .await
            .expect_err(b.name());
        assert_eq!(cancel.reason, "TASK_NOT_FOUND", "{}: {cancel:?}", b.name());
        let subscribe = b
            .stream(
                Operation::SubscribeToTask,
                task.clone(),
                &Opts::bearer(&namesake),
            )
            .await
            .err()
            .unwrap_or_else(|| panic!("{}: subscribed to another owner's task", b.name()));
        assert_eq!(
            subscribe.reason,
            "TASK_NOT_FOUND",
            "{}: {subscribe:?}",
            b.name()
        );
        let mut follow_up = message("hijack");
        follow_up["taskId"] = json!(id);
        let hijack = b
            .unary(
                Operation::SendMessage,
                json!({"message": follow_up}),
                &Opts::bearer(&namesake),
            )
            .await
            .expect_err(b.name());
        assert_eq!(hijack.reason, "TASK_NOT_FOUND", "{}: {hijack:?}", b.name());
        // The key's caller still has it, untouched; and the JWT's own tasks are its own.
        let got = b
            .unary(Operation::GetTask, task, &Opts::bearer(KEY))
            .await
            .unwrap();
        assert_eq!(got["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{got}");
        assert!(listed(b, KEY).await.contains(&id), "{}", b.name());
        let own = ask(b, &namesake).await;
        assert!(sees(b, &namesake, &own).await && !sees(b, KEY, &own).await);
    }
}

/// With `owner = "claim"` (bare claims on purpose), a token whose claim takes the
/// namespaced form (`jwt:<issuer>#<sub>`, as after a switch from the default) is refused,
/// so it cannot read the tasks of that namespaced owner.
#[tokio::test]
async fn in_claim_mode_a_claim_of_the_namespaced_form_is_refused() {
    let store: Arc<dyn TaskStore> = Arc::new(a2a_gateway::store::MemoryTaskStore::new());
    let namespaced = gateway(store.clone(), &auth(ISSUER_A, false, OwnerForm::Namespaced)).await;
    let b = namespaced.bindings().remove(0);
    let alice = token(ISSUER_A, "alice");
    let id = ask(b.as_ref(), &alice).await;
    drop(b);
    drop(namespaced);
    let claim = gateway(store, &auth(ISSUER_A, false, OwnerForm::Claim)).await;
    let b = claim.bindings().remove(0);
    let forged = token(
        ISSUER_A,
        &format!("{}alice", a2a_gateway::config::jwt_owner_prefix(ISSUER_A)),
    );
    let refused = b
        .unary(
            Operation::GetTask,
            json!({"id": id}),
            &Opts::bearer(&forged),
        )
        .await
        .expect_err("a claim of the namespaced form read the namespaced owner's task");
    assert_ne!(
        refused.reason, "TASK_NOT_FOUND",
        "refused as a token: {refused:?}"
    );
}

/// The upgrade on `store`: rows in the old form (a JWT caller's owner was its bare
/// claim, as `owner = "claim"` still writes), then the owner step of the first start,
/// a second start, and a start with another issuer.
async fn upgrade(store: Arc<dyn TaskStore>) {
    // Before: the old form. The key `team-a`, the JWT subjects `alice` and `team-a`
    // (which shared the key's owner).
    let old = auth(ISSUER_A, true, OwnerForm::Claim);
    let before = gateway(store.clone(), &old).await;
    let b = &before.bindings()[0];
    let alice_a = token(ISSUER_A, "alice");
    let alices = ask(b.as_ref(), &alice_a).await;
    let keys = ask(b.as_ref(), KEY).await;
    assert!(sees(b.as_ref(), &token(ISSUER_A, "team-a"), &keys).await);
    drop(before);

    // The first start of this release: alice's rows become hers under the issuer's
    // form; the key's stay the key's.
    let new = auth(ISSUER_A, true, OwnerForm::Namespaced);
    let plan = owner_plan(&config(new.clone())).unwrap();
    match store.namespace_owners(&plan).await.unwrap() {
        // alice's task, its events and link moved; the key's one task stayed.
        OwnerOutcome::Decided { rows, kept_tasks } => assert!(rows >= 2 && kept_tasks == 1),
        other => panic!("{other:?}"),
    }
    let after = gateway(store.clone(), &new).await;
    for b in after.bindings() {
        let b = b.as_ref();
        assert!(sees(b, &alice_a, &alices).await, "{}", b.name());
        assert_eq!(listed(b, &alice_a).await, [alices.as_str()], "{}", b.name());
        assert!(sees(b, KEY, &keys).await, "{}", b.name());
        assert!(!sees(b, &token(ISSUER_A, "team-a"), &keys).await);
        assert!(!sees(b, KEY, &alices).await);
    }

    // A second start decides nothing again: a row written meanwhile in the old form
    // (by an instance of the old release) stays as it is, and alice's rows are not
    // prefixed twice.
    let stray = {
        let older = gateway(store.clone(), &old).await;
        ask(older.bindings()[0].as_ref(), &token(ISSUER_A, "bob")).await
    };
    namespace_owners(&config(new.clone()), store.as_ref())
        .await
        .unwrap();
    assert!(matches!(
        store.namespace_owners(&plan).await.unwrap(),
        OwnerOutcome::AlreadyDecided(d) if d == plan.decision
    ));
    let b = &after.bindings()[0];
    assert!(!sees(b.as_ref(), &token(ISSUER_A, "bob"), &stray).await);
    assert!(sees(b.as_ref(), &alice_a, &alices).await);

    // Another issuer: its subject `alice` is someone else.
    let other = auth(ISSUER_B, true, OwnerForm::Namespaced);
    namespace_owners(&config(other.clone()), store.as_ref())
        .await
        .unwrap();
    let moved = gateway(store.clone(), &other).await;
    let alice_b = token(ISSUER_B, "alice");
    for b in moved.bindings() {
        let b = b.as_ref();
        assert!(!sees(b, &alice_b, &alices).await, "{}", b.name());
        assert!(listed(b, &alice_b).await.is_empty(), "{}", b.name());
        assert!(sees(b, KEY, &keys).await, "{}", b.name());
    }
}

#[tokio::test]
async fn sqlite_rows_of_the_old_form_are_found_by_their_jwt_caller_after_the_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("gw.db").display());
    let store = a2a_gateway::store::open_store(&url, 4).await.unwrap();
    upgrade(store.clone()).await;
    store.close().await;
}

#[tokio::test]
async fn postgres_rows_of_the_old_form_are_found_by_their_jwt_caller_after_the_upgrade() {
    PgSchema::run("owner_namespaces_upgrade", async |schema| {
        let store = a2a_gateway::store::open_store(&schema.url(), 4)
            .await
            .unwrap();
        upgrade(store.clone()).await;
        store.close().await;
    })
    .await;
}

#[tokio::test]
async fn without_jwt_the_decision_is_recorded_and_a_later_jwt_takes_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("gw.db").display());
    let store = a2a_gateway::store::open_store(&url, 4).await.unwrap();
    // Keys only: a caller `carol` whose key is later removed.
    let mut keys_only = ServerAuthConfig {
        kind: ServerAuthKind::ApiKey,
        ..ServerAuthConfig::default()
    };
    keys_only.keys.push(ApiKeyConfig::from_sha256(
        "carol",
        sha256_hex("key-of-carol"),
    ));
    namespace_owners(&config(keys_only.clone()), store.as_ref())
        .await
        .unwrap();
    let s = gateway(store.clone(), &keys_only).await;
    let carols = ask(s.bindings()[0].as_ref(), "key-of-carol").await;
    drop(s);
    // JWT added, carol's key removed: a token for `carol` does not get her tasks.
    let jwt = auth(ISSUER_A, false, OwnerForm::Namespaced);
    namespace_owners(&config(jwt.clone()), store.as_ref())
        .await
        .unwrap();
    let s = gateway(store.clone(), &jwt).await;
    let b = &s.bindings()[0];
    assert!(!sees(b.as_ref(), &token(ISSUER_A, "carol"), &carols).await);
    drop(s);
    store.close().await;
}

/// `[agents.<id>] callers` lists owners: the key caller `team-a` listed does not let a
/// token whose `sub` is `team-a` in (403 / PERMISSION_DENIED on every binding); the
/// token's owner form does.
#[tokio::test]
async fn an_agents_callers_list_owners_so_a_namesake_token_is_refused() {
    let auth = auth(ISSUER_A, true, OwnerForm::Namespaced);
    let only = |callers: &[String]| {
        start_on(
            Arc::new(a2a_gateway::store::MemoryTaskStore::new()),
            TransportConfig {
                auth: Authenticator::from_config(&auth),
                agent: a2a_gateway::transport::AgentAccess {
                    callers: Some(callers.to_vec().into()),
                    ..Default::default()
                },
                ..TransportConfig::default()
            },
        )
    };
    let namesake = token(ISSUER_A, "team-a");
    let keys_only = only(&["team-a".to_owned()]).await;
    for b in keys_only.bindings() {
        let b = b.as_ref();
        ask(b, KEY).await;
        let refused = b
            .unary(
                Operation::SendMessage,
                json!({"message": message("ask")}),
                &Opts::bearer(&namesake),
            )
            .await
            .expect_err(b.name());
        assert_eq!(
            refused.reason,
            "PERMISSION_DENIED",
            "{}: {refused:?}",
            b.name()
        );
    }
    let owner = a2a_gateway::config::jwt_owner(OwnerForm::Namespaced, ISSUER_A, "team-a");
    let tokens_only = only(&[owner]).await;
    for b in tokens_only.bindings() {
        let b = b.as_ref();
        ask(b, &namesake).await;
        let refused = b
            .unary(
                Operation::SendMessage,
                json!({"message": message("ask")}),
                &Opts::bearer(KEY),
            )
            .await
            .expect_err(b.name());
        assert_eq!(
            refused.reason,
            "PERMISSION_DENIED",
            "{}: {refused:?}",
            b.name()
        );
    }
}

/// `a2a-gateway serve` runs the owner step at start: a row written in the old form is
/// found by its JWT caller through the API of the real binary, and the step says so in
/// the log once (a second start finds the decision and says nothing); `migrate` with
/// another issuer says that an earlier start decided.
#[tokio::test]
async fn serve_rewrites_old_rows_at_its_first_start_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gw.db");
    let url = format!("sqlite://{}", db.display());
    // The old form, written by a gateway that keeps the bare claim.
    let alices = {
        let store = a2a_gateway::store::open_store(&url, 2).await.unwrap();
        let old = gateway(store.clone(), &auth(ISSUER_A, false, OwnerForm::Claim)).await;
        let id = ask(old.bindings()[0].as_ref(), &token(ISSUER_A, "alice")).await;
        store.close().await;
        id
    };
    let secret = dir.path().join("hmac");
    std::fs::write(&secret, SECRET).unwrap();
    let toml = format!(
        "[server.auth]\nkind = \"jwt\"\n[server.auth.jwt]\nissuer = \"{ISSUER_A}\"\n\
         audience = \"{AUDIENCE}\"\nalgorithms = [\"HS256\"]\nhmac_secret_file = \"{}\"\n\
         [upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n[store]\nurl = \"{url}\"\n",
        secret.display()
    );
    let said = "owner namespaces: rows of JWT callers now owned by";
    for first in [true, false] {
        let gw = a2a_gateway::test_util::GatewayProcess::init(env!("CARGO_BIN_EXE_a2a-gateway"))
            .config(toml.clone())
            .listen("127.0.0.1:0")
            .arg("serve")
            .start();
        let got: serde_json::Value = reqwest::Client::new()
            .post(&gw.url)
            .bearer_auth(token(ISSUER_A, "alice"))
            .header("content-type", "application/json")
            .body(
                json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": alices}})
                    .to_string(),
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(got["result"]["id"], alices.as_str(), "{got}");
        assert_eq!(gw.logs().contains(said), first, "{}", gw.logs());
        gw.terminate();
    }
    // `migrate` with another issuer: nothing rewritten, and it says why.
    let out = a2a_gateway::test_util::GatewayProcess::init(env!("CARGO_BIN_EXE_a2a-gateway"))
        .config(toml.replace(ISSUER_A, ISSUER_B))
        .arg("migrate")
        .run();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("decided by an earlier start") && stdout.contains(ISSUER_A),
        "{stdout}"
    );
}
