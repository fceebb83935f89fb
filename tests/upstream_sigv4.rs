//! IAM (SigV4) upstream auth end to end: `a2a-gateway serve` with
//! `upstream.auth.kind = "sigv4"` against the AgentCore double of `tests/aws/`, which
//! recomputes every signature with botocore over the request as received and refuses a
//! mismatch (403), an unsigned runtime header, an unknown key and expired credentials.
//! The credentials come from each source of the standard AWS chain, served by the
//! credential doubles (environment keys, the ECS / EKS Pod Identity container endpoint,
//! web identity through the STS double, a shared profile's role chain through the STS
//! double, IMDSv2); the doubles hand out fresh keys per fetch and tell the AgentCore
//! double about them through a shared keys file.
//!
//! Python comes from `A2A_GATEWAY_TEST_PYTHON` (default `.venv/bin/python`) with
//! `bedrock-agentcore` and `moto`; without them the tests are skipped, unless `CI=true`.

mod upstream_common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use a2a_gateway::protocol::TaskState;
use a2a_gateway::upstream::auth::{SigV4, SigV4Settings};
use a2a_gateway::upstream::mock::MockRuntime;
use a2a_gateway::upstream::{AgentCoreExecutor, AgentCoreSettings};
use aws_credential_types::provider::SharedCredentialsProvider;

use a2a_gateway::test_util::{
    GatewayProcess, PythonPeer, python_with, rpc, rpc_stream_with, rpc_with, skip, user_message,
};
use futures::StreamExt;
use serde_json::{Value, json};

const ARN: &str = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/my_agent-AbC123";
const ENCODED_ARN: &str =
    "arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fmy_agent-AbC123";
const AKID: &str = "AKIAENVEXAMPLE000001";
const SECRET: &str = "env/Secret+Key/0123456789abcdefEXAMPLE";
const SESSION_TOKEN: &str = "env-session-token-EXAMPLE-0123456789";
const API_KEY: &str = "key-of-team-a";

/// The venv's python with the doubles' packages, or `None` (the test is skipped).
fn python(test: &str) -> Option<PathBuf> {
    let py = python_with("bedrock_agentcore.runtime").and_then(|_| python_with("moto"));
    if py.is_none() {
        skip(
            test,
            "the venv's python cannot import bedrock_agentcore and moto (tests/python/requirements.txt)",
        );
    }
    py
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/aws")
        .join(name)
}

/// The AWS side of one test: a directory with the shared keys file, and the AgentCore
/// double reading it.
struct Aws {
    py: PathBuf,
    dir: tempfile::TempDir,
    agentcore: PythonPeer,
}

impl Aws {
    fn start(py: PathBuf, agentcore_args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys.jsonl");
        let mut args = vec![
            "--keys-file".to_owned(),
            keys.display().to_string(),
            "--arn".to_owned(),
            ARN.to_owned(),
        ];
        args.extend(agentcore_args.iter().map(|a| (*a).to_owned()));
        let agentcore = PythonPeer::start(&py, &script("agentcore_double.py"), &args);
        Self { py, dir, agentcore }
    }

    fn keys_file(&self) -> String {
        self.dir.path().join("keys.jsonl").display().to_string()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A credential double sharing the keys file.
    fn double(&self, name: &str, args: &[&str]) -> PythonPeer {
        let mut all = vec!["--keys-file".to_owned(), self.keys_file()];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        PythonPeer::start(&self.py, &script(name), &all)
    }

    /// The gateway, signing for the double with `extra_auth` under `[upstream.auth]`,
    /// `extra_upstream` under `[upstream]`, `server` before them and the AWS
    /// environment `env` (nothing else of the chain: no shared files, no IMDS).
    fn gateway(
        &self,
        server: &str,
        extra_upstream: &str,
        extra_auth: &str,
        env: &[(&str, String)],
    ) -> GatewayProcess {
        let config = format!(
            "{server}\n[upstream]\nagent_runtime_arn = \"{ARN}\"\n\
             url = \"{}/runtimes/{ENCODED_ARN}/invocations?qualifier=DEFAULT\"\n\
             max_retries = 1\n{extra_upstream}\n[upstream.auth]\nkind = \"sigv4\"\n{extra_auth}\n",
            self.agentcore.url
        );
        self.gateway_with(config, env)
    }

    /// The gateway with the whole `config` file, and the AWS environment `env` (nothing
    /// else of the chain: no shared files, no IMDS).
    fn gateway_with(&self, config: String, env: &[(&str, String)]) -> GatewayProcess {
        GatewayProcess::init(env!("CARGO_BIN_EXE_a2a-gateway"))
            .arg("serve")
            .listen("127.0.0.1:0")
            .env("A2A_GATEWAY_STORE__URL", "memory:")
            .env("A2A_GATEWAY_LOG__LEVEL", "trace")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_CONFIG_FILE", self.path("no-config"))
            .env("AWS_SHARED_CREDENTIALS_FILE", self.path("no-credentials"))
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .config(config)
            .start()
    }

    async fn calls(&self) -> Vec<Value> {
        calls(&self.agentcore).await
    }
}

async fn calls(peer: &PythonPeer) -> Vec<Value> {
    let v: Value = reqwest::get(format!("{}/_calls", peer.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v.as_array().cloned().unwrap_or_default()
}

async fn control(peer: &PythonPeer, settings: Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/_control", peer.url))
        .json(&settings)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
}

/// A blocking SendMessage of `text` (with the API key when `key`), its `result.task`.
async fn send(gw: &GatewayProcess, text: &str, key: bool) -> Value {
    let mut rb = reqwest::Client::new().post(&gw.url);
    if key {
        rb = rb.bearer_auth(API_KEY);
    }
    let reply = rpc_with(rb, "SendMessage", json!({"message": user_message(text)})).await;
    assert!(reply.get("error").is_none(), "{reply}");
    reply["result"]["task"].clone()
}

/// A streamed SendStreamingMessage of `stream 2`: the double's two SSE chunks, completed.
async fn streamed(gw: &GatewayProcess) {
    let (_, events) = rpc_stream_with(
        reqwest::Client::new().post(&gw.url),
        "SendStreamingMessage",
        json!({"message": user_message("stream 2")}),
    )
    .await;
    let events: Vec<_> = events.collect().await;
    assert_eq!(
        events.last().and_then(|e| e.state()),
        Some("TASK_STATE_COMPLETED"),
        "{events:?}"
    );
    let text: String = events
        .iter()
        .filter_map(|e| e.result["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "chunk-1 chunk-2 ");
}

fn text_of(task: &Value) -> String {
    task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect()
}

fn assert_completed(task: &Value, text: &str) {
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(text_of(task), text, "{task}");
}

/// The invocations (and stops) the double received, each verified by botocore.
fn assert_all_verified(calls: &[Value]) {
    assert!(!calls.is_empty());
    for c in calls {
        assert_eq!(c["verified"], true, "refused by the double: {c}");
        let signed: Vec<&str> = c["signed_headers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        // A GET (an A2A runtime's GetAgentCard) has no body and no session.
        let musts: &[&str] = if c["method"] == "GET" {
            &["host", "x-amz-date"]
        } else {
            &[
                "host",
                "content-type",
                "x-amz-date",
                "x-amzn-bedrock-agentcore-runtime-session-id",
            ]
        };
        for must in musts {
            assert!(signed.contains(must), "{must} is signed: {c}");
        }
        for never in ["traceparent", "user-agent", "accept", "content-length"] {
            assert!(!signed.contains(&never), "{never} is not signed: {c}");
        }
    }
}

/// Secrets never in the log, at trace level.
fn assert_no_secret_in(logs: &str, secrets: &[&str]) {
    assert!(logs.contains("TRACE"), "the log is at trace level");
    for s in secrets {
        assert!(
            !s.is_empty() && !logs.contains(s),
            "the log shows a secret ({s})"
        );
    }
    assert!(!logs.contains("Signature="), "the log shows a signature");
}

fn env_keys() -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID", AKID.to_owned()),
        ("AWS_SECRET_ACCESS_KEY", SECRET.to_owned()),
        ("AWS_SESSION_TOKEN", SESSION_TOKEN.to_owned()),
    ]
}

#[tokio::test]
async fn environment_keys_sign_blocking_streamed_and_stop_calls() {
    let Some(py) = python("environment_keys_sign_blocking_streamed_and_stop_calls") else {
        return;
    };
    let key = format!("{AKID}:{SECRET}:{SESSION_TOKEN}");
    let aws = Aws::start(py, &["--key", &key]);
    let gw = aws.gateway("", "", "", &env_keys());

    let task = send(&gw, "echo signed and verified", false).await;
    assert_completed(&task, "signed and verified");

    // Streamed: the SSE reply of a signed invocation.
    let (_, events) = rpc_stream_with(
        reqwest::Client::new().post(&gw.url),
        "SendStreamingMessage",
        json!({"message": user_message("stream 3")}),
    )
    .await;
    let events: Vec<_> = events.collect().await;
    assert_eq!(
        events.last().and_then(|e| e.state()),
        Some("TASK_STATE_COMPLETED"),
        "{events:?}"
    );
    let streamed: String = events
        .iter()
        .filter_map(|e| e.result["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(streamed, "chunk-1 chunk-2 chunk-3 ");

    // Cancel: StopRuntimeSession, signed the same way.
    let (_, mut events) = rpc_stream_with(
        reqwest::Client::new().post(&gw.url),
        "SendStreamingMessage",
        json!({"message": user_message("slow 20")}),
    )
    .await;
    let mut task_id = None;
    while let Some(e) = events.next().await {
        if let Some(id) = e.result["task"]["id"]
            .as_str()
            .or(e.result["artifactUpdate"]["taskId"].as_str())
        {
            task_id = Some(id.to_owned());
            break;
        }
    }
    let task_id = task_id.expect("the slow task started");
    let canceled = rpc(
        &reqwest::Client::new(),
        &gw.url,
        "CancelTask",
        json!({"id": task_id}),
    )
    .await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );

    let calls = aws.calls().await;
    assert_all_verified(&calls);
    let ops: Vec<&str> = calls
        .iter()
        .filter_map(|c| c["operation"].as_str())
        .collect();
    assert_eq!(
        ops,
        [
            "InvokeAgentRuntime",
            "InvokeAgentRuntime",
            "InvokeAgentRuntime",
            "StopRuntimeSession"
        ]
    );
    for c in &calls {
        assert_eq!(c["access_key_id"], AKID);
        assert_eq!(c["session_token_sent"], true, "{c}");
        let signed = c["signed_headers"].to_string();
        assert!(signed.contains("x-amz-security-token"), "{c}");
        // The custom caller header (the default caller_header) is signed too.
        assert!(
            signed.contains("x-amzn-bedrock-agentcore-runtime-custom-caller"),
            "{c}"
        );
    }
    assert_eq!(calls[2]["session_id"], calls[3]["session_id"]);
    assert_no_secret_in(&gw.logs(), &[SECRET, SESSION_TOKEN]);
}

#[tokio::test]
async fn container_credentials_are_fetched_once_and_the_caller_is_the_signed_user() {
    let Some(py) =
        python("container_credentials_are_fetched_once_and_the_caller_is_the_signed_user")
    else {
        return;
    };
    let aws = Aws::start(py, &[]);
    let token_file = aws.path("pod-identity-token");
    std::fs::write(&token_file, "eks-pod-identity-token-value").unwrap();
    let ecs = aws.double(
        "container_credentials_double.py",
        &[
            "--token-file",
            &token_file.display().to_string(),
            "--path",
            "/v1/credentials",
        ],
    );
    let server = format!(
        "[server.auth]\nkind = \"api_key\"\n[[server.auth.keys]]\ncaller = \"team-a\"\nsha256 = \"{}\"\n",
        a2a_gateway::config::sha256_hex(API_KEY)
    );
    let gw = aws.gateway(
        &server,
        "user_id = \"caller\"",
        "",
        &[
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                format!("{}/v1/credentials", ecs.url),
            ),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                token_file.display().to_string(),
            ),
        ],
    );
    for i in 0..3 {
        let task = send(&gw, &format!("echo round {i}"), true).await;
        assert_completed(&task, &format!("round {i}"));
    }
    let task = send(&gw, "whoami", true).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert!(
        text_of(&task).contains("double-wat-for:team-a")
            || task.to_string().contains("double-wat-for:team-a"),
        "the agent got the caller's workload access token: {task}"
    );

    let fetches = calls(&ecs).await;
    assert_eq!(fetches.len(), 1, "fetched once, reused: {fetches:?}");
    assert_eq!(fetches[0]["authorized"], true, "{fetches:?}");
    let calls = aws.calls().await;
    assert_eq!(calls.len(), 4);
    assert_all_verified(&calls);
    for c in &calls {
        assert_eq!(c["user_id"], "team-a", "{c}");
        assert!(
            c["signed_headers"]
                .to_string()
                .contains("x-amzn-bedrock-agentcore-runtime-user-id"),
            "{c}"
        );
        assert!(
            c["access_key_id"].as_str().unwrap().starts_with("ASIAECS"),
            "{c}"
        );
    }
    assert_no_secret_in(&gw.logs(), &["eks-pod-identity-token-value"]);
}

#[tokio::test]
async fn short_lived_credentials_are_refreshed_before_expiry_and_an_expired_token_answer_is_retried_once()
 {
    let Some(py) = python(
        "short_lived_credentials_are_refreshed_before_expiry_and_an_expired_token_answer_is_retried_once",
    ) else {
        return;
    };
    let aws = Aws::start(py, &[]);
    // Credentials valid 6 s (the double's Expiration has whole seconds: 5 to 7 s),
    // refreshed 4 s before they expire.
    let ecs = aws.double("container_credentials_double.py", &["--expires-in", "6"]);
    let gw = aws.gateway(
        "",
        "",
        "credentials_refresh_secs = 4",
        &[(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            format!("{}/credentials", ecs.url),
        )],
    );
    assert_completed(&send(&gw, "echo one", false).await, "one");
    streamed(&gw).await;
    assert_eq!(calls(&ecs).await.len(), 1);
    // Past the refresh point (at most 3 s after the fetch), before the expiry (5 s at
    // least): waiting for time to pass, the assertion is on the fetch count.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_completed(&send(&gw, "echo three", false).await, "three");
    let fetches = calls(&ecs).await;
    assert_eq!(fetches.len(), 2, "refreshed before expiry: {fetches:?}");

    // The runtime answers ExpiredTokenException once: dropped, refetched, retried once.
    control(&aws.agentcore, json!({"expire_next": 1})).await;
    assert_completed(&send(&gw, "echo after expiry", false).await, "after expiry");
    assert_eq!(
        calls(&ecs).await.len(),
        3,
        "refetched after ExpiredTokenException"
    );

    let calls = aws.calls().await;
    let refused: Vec<&Value> = calls
        .iter()
        .filter(|c| c["status"].as_u64().is_some_and(|s| s >= 400))
        .collect();
    assert_eq!(refused.len(), 1, "only the injected refusal: {refused:?}");
    assert_eq!(refused[0]["injected"], "ExpiredTokenException");
    // Every other request was signed with credentials still valid when it arrived.
    let accepted: Vec<Value> = calls
        .iter()
        .filter(|c| c.get("injected").is_none())
        .cloned()
        .collect();
    assert_eq!(accepted.len(), 4);
    assert_all_verified(&accepted);
}

#[tokio::test]
async fn web_identity_through_sts() {
    let Some(py) = python("web_identity_through_sts") else {
        return;
    };
    let aws = Aws::start(py, &[]);
    let sts = aws.double("sts_double.py", &[]);
    let token_file = aws.path("web-identity-token");
    std::fs::write(&token_file, "eyJ.web-identity-token.sig").unwrap();
    let gw = aws.gateway(
        "",
        "",
        "",
        &[
            (
                "AWS_WEB_IDENTITY_TOKEN_FILE",
                token_file.display().to_string(),
            ),
            (
                "AWS_ROLE_ARN",
                "arn:aws:iam::123456789012:role/irsa-role".to_owned(),
            ),
            ("AWS_ROLE_SESSION_NAME", "gateway-pod".to_owned()),
            ("AWS_ENDPOINT_URL_STS", sts.url.clone()),
            ("AWS_REGION", "us-east-1".to_owned()),
        ],
    );
    assert_completed(&send(&gw, "echo irsa", false).await, "irsa");
    assert_completed(&send(&gw, "echo again", false).await, "again");
    streamed(&gw).await;
    let sts_calls = calls(&sts).await;
    assert_eq!(sts_calls.len(), 1, "{sts_calls:?}");
    assert_eq!(sts_calls[0]["action"], "AssumeRoleWithWebIdentity");
    assert_eq!(
        sts_calls[0]["role_arn"],
        "arn:aws:iam::123456789012:role/irsa-role"
    );
    assert_all_verified(&aws.calls().await);
}

#[tokio::test]
async fn a_shared_profile_role_chain_through_sts_then_assume_role_on_top() {
    let Some(py) = python("a_shared_profile_role_chain_through_sts_then_assume_role_on_top") else {
        return;
    };
    let aws = Aws::start(py, &[]);
    let base = "AKIAPROFILEBASE00001:profile/base/Secret0123456789EXAMPLE";
    let sts = aws.double("sts_double.py", &["--key", base, "--require-signature"]);
    let config = aws.path("aws-config");
    std::fs::write(
        &config,
        "[profile base]\nregion = us-east-1\n\n[profile gateway]\nrole_arn = arn:aws:iam::123456789012:role/profile-role\nsource_profile = base\nregion = us-east-1\n",
    )
    .unwrap();
    let credentials = aws.path("aws-credentials");
    std::fs::write(
        &credentials,
        "[base]\naws_access_key_id = AKIAPROFILEBASE00001\naws_secret_access_key = profile/base/Secret0123456789EXAMPLE\n",
    )
    .unwrap();
    let gw = aws.gateway(
        "",
        "",
        "assume_role_arn = \"arn:aws:iam::123456789012:role/a2a-invoker\"\nexternal_id = \"ext-42\"",
        &[
            ("AWS_PROFILE", "gateway".to_owned()),
            ("AWS_CONFIG_FILE", config.display().to_string()),
            ("AWS_SHARED_CREDENTIALS_FILE", credentials.display().to_string()),
            ("AWS_ENDPOINT_URL_STS", sts.url.clone()),
        ],
    );
    assert_completed(&send(&gw, "echo chained", false).await, "chained");
    streamed(&gw).await;
    let sts_calls = calls(&sts).await;
    let roles: Vec<&str> = sts_calls
        .iter()
        .filter_map(|c| c["role_arn"].as_str())
        .collect();
    assert_eq!(
        roles,
        [
            "arn:aws:iam::123456789012:role/profile-role",
            "arn:aws:iam::123456789012:role/a2a-invoker"
        ],
        "{sts_calls:?}"
    );
    assert!(
        sts_calls.iter().all(|c| c["verified"] == true),
        "{sts_calls:?}"
    );
    assert_eq!(sts_calls[1]["external_id"], "ext-42");
    assert_all_verified(&aws.calls().await);
}

#[tokio::test]
async fn imds_v2_credentials() {
    let Some(py) = python("imds_v2_credentials") else {
        return;
    };
    let aws = Aws::start(py, &[]);
    let imds = aws.double("imds_double.py", &[]);
    let gw = aws.gateway(
        "",
        "",
        "",
        &[
            ("AWS_EC2_METADATA_DISABLED", "false".to_owned()),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url.clone()),
        ],
    );
    assert_completed(&send(&gw, "echo from ec2", false).await, "from ec2");
    streamed(&gw).await;
    assert_all_verified(&aws.calls().await);
}

#[tokio::test]
async fn readyz_reports_credentials_that_cannot_be_obtained() {
    let Some(py) = python("readyz_reports_credentials_that_cannot_be_obtained") else {
        return;
    };
    let aws = Aws::start(py, &[]);
    let gw = aws.gateway("", "", "", &[]);
    let r = reqwest::get(format!("{}readyz", gw.url)).await.unwrap();
    let status = r.status().as_u16();
    let body = r.text().await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("AWS credentials"), "{body}");

    // A message fails readably, and nothing reached the runtime.
    let reply = rpc(
        &reqwest::Client::new(),
        &gw.url,
        "SendMessage",
        json!({"message": user_message("echo x")}),
    )
    .await;
    let task = &reply["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{reply}");
    assert!(
        task["status"]["message"]
            .to_string()
            .contains("AWS credentials"),
        "{reply}"
    );
    assert!(aws.calls().await.is_empty());
}

#[tokio::test]
async fn a_clock_skew_answer_is_reported_as_such_and_not_retried() {
    let Some(py) = python("a_clock_skew_answer_is_reported_as_such_and_not_retried") else {
        return;
    };
    let key = format!("{AKID}:{SECRET}:{SESSION_TOKEN}");
    // The double's clock is 20 minutes ahead of ours.
    let aws = Aws::start(py, &["--key", &key, "--clock-offset", "1200"]);
    let gw = aws.gateway("", "", "", &env_keys());
    let task = send(&gw, "echo late", false).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
    let reason = task["status"]["message"]["parts"][0]["text"].to_string();
    assert!(
        reason.contains("RequestExpired") && reason.contains("clock skew"),
        "{reason}"
    );
    let calls = aws.calls().await;
    assert_eq!(calls.len(), 1, "not retried: {calls:?}");
    assert_eq!(calls[0]["error_type"], "RequestExpired");
}

#[tokio::test]
async fn check_config_names_the_source_of_the_credentials_never_the_secret() {
    let Some(py) = python("check_config_names_the_source_of_the_credentials_never_the_secret")
    else {
        return;
    };
    let aws = Aws::start(py, &[]);
    let ecs = aws.double("container_credentials_double.py", &[]);
    let config =
        format!("[upstream]\nagent_runtime_arn = \"{ARN}\"\n[upstream.auth]\nkind = \"sigv4\"\n");
    let run = |env: Vec<(&'static str, String)>| {
        GatewayProcess::init(env!("CARGO_BIN_EXE_a2a-gateway"))
            .arg("check-config")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_CONFIG_FILE", aws.path("no-config"))
            .env("AWS_SHARED_CREDENTIALS_FILE", aws.path("no-credentials"))
            .envs(env)
            .config(config.clone())
            .run()
    };
    let out = run(env_keys());
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("AWS SigV4, service bedrock-agentcore, region us-east-1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the chain's EnvironmentVariable provider (access key AKIA…0001"),
        "{stdout}"
    );
    assert!(!stdout.contains(SECRET) && !stdout.contains(SESSION_TOKEN));

    let out = run(vec![(
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        format!("{}/credentials", ecs.url),
    )]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(stdout.contains("EcsContainer provider"), "{stdout}");
    assert!(
        stdout.contains(", expiring ") && stdout.contains(" GMT, in "),
        "the expiry as a date, then the seconds left: {stdout}"
    );

    // --probe: who STS says the credentials are (GetCallerIdentity, signed).
    let sts = aws.double(
        "sts_double.py",
        &["--key", &format!("{AKID}:{SECRET}:{SESSION_TOKEN}")],
    );
    let mut env = env_keys();
    env.push(("AWS_ENDPOINT_URL_STS", sts.url.clone()));
    let out = GatewayProcess::init(env!("CARGO_BIN_EXE_a2a-gateway"))
        .args(["check-config", "--probe"])
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", aws.path("no-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", aws.path("no-credentials"))
        .envs(env)
        .config(config.clone())
        .run();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        stdout.contains("upstream identity (sts:GetCallerIdentity): arn:aws:"),
        "{stdout}"
    );
    let probed = calls(&sts).await;
    assert_eq!(probed.len(), 1, "{probed:?}");
    assert_eq!(probed[0]["action"], "GetCallerIdentity");
    assert_eq!(probed[0]["verified"], true, "{probed:?}");

    // No source: said so, and check-config still succeeds (serve starts, not ready).
    let out = run(vec![]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("upstream credentials: none found yet"),
        "{stdout}"
    );
}

/// Without Python: the user id is the caller, percent-encoded and signed; a caller too
/// long for AgentCore's 1024 characters is refused before any request.
#[tokio::test]
async fn the_user_id_is_the_percent_encoded_caller_signed_and_a_too_long_one_is_refused() {
    let mock = MockRuntime::start().await;
    let mut s = AgentCoreSettings::for_url(mock.url());
    s.user_id = true;
    let sigv4 = SigV4::with_provider(
        SigV4Settings {
            region: "us-east-1".into(),
            assume_role: None,
            refresh_before_expiry: Duration::from_secs(300),
        },
        SharedCredentialsProvider::new(aws_credential_types::Credentials::new(
            AKID, SECRET, None, None, "test",
        )),
    );
    let e = AgentCoreExecutor::with_credentials(s, Arc::new(sigv4)).unwrap();
    let out = upstream_common::run(&e, upstream_common::ctx_in("ctx-1", "Zoë Q", "hello")).await;
    assert_eq!(out.final_state(), TaskState::Completed, "{}", out.reason());
    let req = mock.invocations().pop().unwrap();
    assert_eq!(
        req.header("x-amzn-bedrock-agentcore-runtime-user-id"),
        Some("Zo%C3%AB%20Q")
    );
    let auth = req.header("authorization").unwrap_or_default();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIAENVEXAMPLE000001/")
            && auth.contains("x-amzn-bedrock-agentcore-runtime-user-id"),
        "{auth}"
    );

    let long = "é".repeat(200); // 400 bytes, 1200 characters percent-encoded
    let out = upstream_common::run(&e, upstream_common::ctx_in("ctx-2", &long, "hello")).await;
    assert_eq!(out.final_state(), TaskState::Rejected);
    assert!(out.reason().contains("too long"), "{}", out.reason());
    assert_eq!(
        mock.invocations().len(),
        1,
        "nothing sent for the refused one"
    );
}

#[tokio::test]
async fn a_failed_refresh_keeps_the_valid_credentials_logged_once_and_counted() {
    let Some(py) = python("a_failed_refresh_keeps_the_valid_credentials_logged_once_and_counted")
    else {
        return;
    };
    let aws = Aws::start(py, &[]);
    // Credentials valid 10 s (9 to 11 with whole-second expirations), refreshed 8 s
    // early: the refresh point is at most 3 s after the fetch, the expiry 9 s at least.
    let ecs = aws.double("container_credentials_double.py", &["--expires-in", "10"]);
    let gw = aws.gateway(
        "",
        "",
        "credentials_refresh_secs = 8",
        &[(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            format!("{}/credentials", ecs.url),
        )],
    );
    assert_completed(&send(&gw, "echo first", false).await, "first");
    // From now on the endpoint refuses (4xx: not retried by the chain).
    control(&ecs, json!({"fail": 403, "fail_count": -1})).await;
    // Past the refresh point, before the expiry: waiting for time to pass.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_completed(&send(&gw, "echo second", false).await, "second");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_completed(&send(&gw, "echo third", false).await, "third");

    let fetches = calls(&ecs).await;
    assert!(fetches.len() >= 2, "a refresh was tried: {fetches:?}");
    assert!(
        fetches[1..].iter().all(|f| f["status"] == 403),
        "{fetches:?}"
    );
    let calls = aws.calls().await;
    assert_eq!(calls.len(), 3);
    assert_all_verified(&calls);
    let first_key = &calls[0]["access_key_id"];
    assert!(
        calls.iter().all(|c| &c["access_key_id"] == first_key),
        "the cached credentials stayed in use: {calls:?}"
    );
    let logs = gw.logs();
    assert_eq!(
        logs.matches("refreshing the AWS credentials failed")
            .count(),
        1,
        "logged once per spell of failures"
    );
    let metrics = reqwest::get(format!("{}metrics", gw.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let kept = metrics
        .lines()
        .find(|l| l.starts_with("a2a_upstream_credential_fetches_total{outcome=\"kept\"}"))
        .unwrap_or_else(|| panic!("no kept count in /metrics:\n{metrics}"));
    assert!(!kept.ends_with(" 0"), "{kept}");
}

/// An AgentCore A2A runtime (`kind = "a2a"` with `agent_runtime_arn`) behind the double
/// in its A2A mode (`--forward-a2a`: a verified request goes on to bedrock-agentcore's
/// A2A app): the card read, a blocking and a streamed message all reach the agent signed
/// (botocore recomputes each signature), with the runtime session id among the signed
/// headers, and the agent's answers become the gateway's task.
#[tokio::test]
async fn an_agentcore_a2a_runtime_is_reached_signed() {
    use a2a_gateway::test_util::{A2aAgent, AgentKind};
    let test = "an_agentcore_a2a_runtime_is_reached_signed";
    let Some(py) = python(test) else {
        return;
    };
    let Some(agent) = A2aAgent::start(AgentKind::AgentCore, &[]) else {
        skip(
            test,
            "bedrock-agentcore's A2A app did not start (tests/a2a_agents)",
        );
        return;
    };
    let key = format!("{AKID}:{SECRET}:{SESSION_TOKEN}");
    let aws = Aws::start(py, &["--key", &key, "--forward-a2a", &agent.url]);
    let config = format!(
        "[upstream]\nkind = \"a2a\"\nagent_runtime_arn = \"{ARN}\"\n\
         url = \"{}/runtimes/{ENCODED_ARN}/invocations/\"\nmax_retries = 1\n\
         [upstream.auth]\nkind = \"sigv4\"\n",
        aws.agentcore.url
    );
    let gw = aws.gateway_with(config, &env_keys());

    let task = send(&gw, "hello through IAM", false).await;
    assert_completed(&task, "echo: hello through IAM");
    let (_, events) = rpc_stream_with(
        reqwest::Client::new().post(&gw.url),
        "SendStreamingMessage",
        json!({"message": user_message("stream 3 10")}),
    )
    .await;
    let events: Vec<_> = events.collect().await;
    assert_eq!(
        events.last().and_then(|e| e.state()),
        Some("TASK_STATE_COMPLETED"),
        "{events:?}"
    );
    let streamed: String = events
        .iter()
        .filter_map(|e| e.result["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(streamed, "chunk 1/3\nchunk 2/3\nchunk 3/3\n");

    let calls = aws.calls().await;
    assert_all_verified(&calls);
    let methods: Vec<&str> = calls.iter().filter_map(|c| c["method"].as_str()).collect();
    assert!(
        methods.contains(&"GET"),
        "the card was read signed: {calls:?}"
    );
    assert!(
        methods.iter().filter(|m| **m == "POST").count() >= 2,
        "both messages went through the double: {calls:?}"
    );
    for c in &calls {
        assert_eq!(c["access_key_id"], AKID, "{c}");
        let signed = c["signed_headers"].to_string();
        if c["method"] == "POST" {
            assert!(
                signed.contains("x-amzn-bedrock-agentcore-runtime-session-id"),
                "{c}"
            );
        }
    }
    let seen = agent.calls().await;
    assert!(
        seen.iter()
            .any(|c| c.to_string().contains("hello through IAM")),
        "the agent received the message: {seen:?}"
    );
    assert_no_secret_in(&gw.logs(), &[SECRET, SESSION_TOKEN]);
}

/// Several agents of one gateway (`[agents.<id>]`) signing with the same SigV4
/// credential (region, no role, refresh margin) share one credential cache: one fetch
/// from the container endpoint for all of them; an agent whose credential differs (here
/// its `credentials_refresh_secs`) has a cache of its own.
#[tokio::test]
async fn agents_with_the_same_sigv4_credential_share_one_fetch() {
    let Some(py) = python("agents_with_the_same_sigv4_credential_share_one_fetch") else {
        return;
    };
    let aws = Aws::start(py, &[]);
    let token_file = aws.path("pod-identity-token");
    std::fs::write(&token_file, "eks-pod-identity-token-value").unwrap();
    let ecs = aws.double(
        "container_credentials_double.py",
        &[
            "--token-file",
            &token_file.display().to_string(),
            "--path",
            "/v1/credentials",
        ],
    );
    let agent = |id: &str, extra_auth: &str| {
        format!(
            "[agents.{id}]\n[agents.{id}.upstream]\nagent_runtime_arn = \"{ARN}\"\n\
             url = \"{}/runtimes/{ENCODED_ARN}/invocations?qualifier=DEFAULT\"\n\
             max_retries = 1\n[agents.{id}.upstream.auth]\nkind = \"sigv4\"\n{extra_auth}\n",
            aws.agentcore.url
        )
    };
    let config = format!(
        "{}{}{}",
        agent("a", ""),
        agent("b", ""),
        agent("c", "credentials_refresh_secs = 120")
    );
    let gw = aws.gateway_with(
        config,
        &[
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                format!("{}/v1/credentials", ecs.url),
            ),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                token_file.display().to_string(),
            ),
        ],
    );
    let client = reqwest::Client::new();
    let send_to = |id: &str, text: String| {
        let rb = client.post(format!("{}agents/{id}/", gw.url));
        async move {
            let reply = rpc_with(rb, "SendMessage", json!({"message": user_message(&text)})).await;
            assert!(reply.get("error").is_none(), "{reply}");
            reply["result"]["task"].clone()
        }
    };
    for (id, n) in [("a", 1), ("b", 1), ("a", 2), ("b", 2)] {
        let task = send_to(id, format!("echo {id}{n}")).await;
        assert_completed(&task, &format!("{id}{n}"));
    }
    assert_eq!(calls(&ecs).await.len(), 1, "a and b share one fetch");
    let task = send_to("c", "echo c1".into()).await;
    assert_completed(&task, "c1");
    assert_eq!(calls(&ecs).await.len(), 2, "c has a cache of its own");
    let calls = aws.calls().await;
    assert_eq!(calls.len(), 5);
    assert_all_verified(&calls);
    assert_no_secret_in(&gw.logs(), &["eks-pod-identity-token-value"]);
}
