//! Tests of loading, precedence, validation messages and redaction.

use std::io::Write;
use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};
use sha2::Digest;

use super::*;

const EXAMPLE: &str = include_str!("../../config.example.toml");
pub(super) const ARN: &str =
    "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/my_agent-abc123";

/// A TOML file in a fresh temporary directory (kept alive by the returned guard).
pub(super) fn file(contents: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, contents).unwrap();
    (dir, path)
}

pub(super) fn sources(file: Option<&Path>, env: &[(&str, &str)]) -> ConfigSources {
    ConfigSources {
        file: file.map(Path::to_owned),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        overrides: Vec::new(),
    }
}

pub(super) fn load_err(sources: ConfigSources) -> (String, ConfigError) {
    let err = Config::load(sources).expect_err("config should be refused");
    (err.to_string(), err)
}

pub(super) fn invalid_parts(err: &ConfigError) -> (&str, &ConfigOrigin) {
    match err {
        ConfigError::Invalid { key, origin, .. } => (key, origin),
        other => panic!("expected ConfigError::Invalid, got {other:?}"),
    }
}

/// The `[upstream]` section of kind `agentcore`.
pub(super) fn agentcore(config: &Config) -> &AgentCoreUpstreamConfig {
    match &config.upstream {
        UpstreamConfig::AgentCore(c) => c,
        UpstreamConfig::A2a(_) => panic!("kind a2a"),
    }
}

#[test]
fn defaults_load_with_no_sources() {
    let config = Config::load(ConfigSources::default()).unwrap();
    assert_eq!(config.server.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(
        config.server.public_url().as_str(),
        "http://127.0.0.1:8080/"
    );
    assert_eq!(config.server.max_body_bytes, 10 * 1024 * 1024);
    assert_eq!(config.server.sse_keepalive_secs, 15);
    assert_eq!(config.server.shutdown_grace_secs, 30);
    assert_eq!(config.agent.skills.len(), 1);
    assert_eq!(config.agent.default_input_modes, ["text/plain"]);
    assert!(matches!(
        &config.store.url,
        StoreUrl::Sqlite(SqliteLocation::File(p)) if p == Path::new("a2a-gateway.db")
    ));
    assert_eq!(config.store.retention_days, 30);
    assert_eq!(config.upstream.kind(), UpstreamKind::AgentCore);
    assert_eq!(agentcore(&config).qualifier, "DEFAULT");
    assert_eq!(agentcore(&config).http_version, HttpVersion::Auto);
    assert_eq!(agentcore(&config).request_timeout_secs, 900);
    assert_eq!(agentcore(&config).max_stream_secs, 3600);
    assert_eq!(agentcore(&config).auth.kind, AuthKind::None);
    assert_eq!(agentcore(&config).auth.refresh_before_expiry_secs, 30);
    assert!(agentcore(&config).stop_session_on_cancel);
    assert_eq!(config.log.format, LogFormat::Pretty);
    assert_eq!(config.log.level, "info");
}

#[test]
fn example_file_loads_and_states_the_defaults() {
    let (_dir, path) = file(EXAMPLE);
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    assert_eq!(
        config.redacted_toml(),
        Config::default().redacted_toml(),
        "config.example.toml must state exactly the built-in defaults"
    );
}

/// Every key of every section, optional ones included: a struct literal per section (no
/// `..Default::default()`), so adding a field fails to compile here until it is listed.
fn fully_populated() -> Config {
    let secret = || Some(SecretString::from("x"));
    Config {
        server: ServerConfig {
            listen: "127.0.0.1:1".parse().unwrap(),
            public_url: Some("https://a.example/".parse().unwrap()),
            max_body_bytes: 1,
            max_concurrent_tasks: 1,
            max_tasks_per_caller: Some(1),
            max_tasks_per_tenant: Some(1),
            max_task_values: 1,
            max_task_bytes: 1,
            max_message_bytes_per_caller_per_minute: 1,
            max_list_page_bytes: 1,
            sse_keepalive_secs: 1,
            tls_cert_file: Some("c".into()),
            tls_key_file: Some("k".into()),
            shutdown_grace_secs: 1,
            bindings: vec![Binding::Rest, Binding::Grpc],
            header_timeout_secs: 1,
            idle_timeout_secs: 1,
            max_connections: Some(1),
            auth: ServerAuthConfig {
                kind: ServerAuthKind::ApiKey,
                keys: vec![ApiKeyConfig {
                    caller: "c".into(),
                    sha256: Some("0".repeat(64)),
                    key_file: Some("k".into()),
                    tenant: Some("t".into()),
                    digest: None,
                }],
                schemes: vec![ServerAuthKind::ApiKey, ServerAuthKind::Jwt],
                jwt: Some(crate::config::JwtConfig {
                    issuer: "https://i.example/".into(),
                    audience: vec!["a".into()],
                    jwks_url: Some("https://i.example/jwks".parse().unwrap()),
                    discovery_url: Some("https://i.example/d".parse().unwrap()),
                    token_url: Some("https://i.example/t".parse().unwrap()),
                    required_scopes: vec!["s".into()],
                    hmac_secret_file: Some("h".into()),
                    ..Default::default()
                }),
                tenant_claim: Some("tenant".into()),
                default_tenant: Some("t".into()),
            },
            grpc_listen: Some("127.0.0.1:2".parse().unwrap()),
            allowed_origins: vec!["https://app.a.example".into()],
            allowed_hosts: vec!["gw.a.example".into()],
        },
        agent: AgentConfig {
            name: "n".into(),
            description: "d".into(),
            version: "v".into(),
            provider: Some(AgentProviderConfig {
                organization: "o".into(),
                url: "https://o.example/".parse().unwrap(),
            }),
            documentation_url: Some("https://d.example/".parse().unwrap()),
            default_input_modes: vec!["text/plain".into()],
            default_output_modes: vec!["text/plain".into()],
            skills: vec![SkillConfig {
                id: "i".into(),
                name: "n".into(),
                description: "d".into(),
                tags: vec![],
                examples: vec![],
                input_modes: Some(vec![]),
                output_modes: Some(vec![]),
            }],
            streaming: false,
            extensions: vec![ExtensionConfig {
                uri: "urn:x".into(),
                description: Some("d".into()),
                required: true,
                params: Some(serde_json::Map::from_iter([("header".into(), "x".into())])),
            }],
            v03_card_fields: false,
            extended: Some(crate::config::ExtendedCardConfig {
                description: Some("more".into()),
                skills: vec![SkillConfig {
                    id: "x".into(),
                    name: "X".into(),
                    description: "d".into(),
                    tags: vec!["t".into()],
                    examples: vec!["e".into()],
                    input_modes: Some(vec!["text/plain".into()]),
                    output_modes: Some(vec!["text/plain".into()]),
                }],
            }),
        },
        store: StoreConfig {
            url: StoreUrl::Memory,
            retention_days: 1,
            input_required_ttl_secs: 1,
            purge_interval_secs: 1,
            max_connections: 1,
            recover_on_start: false,
            stale_task_secs: 1,
            sqlite_synchronous: SqliteSynchronous::Normal,
            listen_url: Some("postgres://u:pw@127.0.0.1/db".parse().unwrap()),
            cluster: false,
            lease_secs: 7,
            instance_name: "gw-a".into(),
            password_file: Some("/run/secrets/pg".into()),
        },
        upstream: UpstreamConfig::AgentCore(AgentCoreUpstreamConfig {
            agent_runtime_arn: Some(ARN.parse().unwrap()),
            qualifier: "q".into(),
            url: Some("http://127.0.0.1:1/invocations".parse().unwrap()),
            http_version: HttpVersion::Http2,
            ca_file: Some("ca".into()),
            connect_timeout_secs: 1,
            read_timeout_secs: 1,
            write_timeout_secs: 1,
            pool_timeout_secs: 1,
            request_timeout_secs: 1,
            max_stream_secs: 1,
            max_event_bytes: 1,
            max_stream_bytes: 1,
            max_reply_bytes: 1,
            max_retries: 1,
            include_message: true,
            stop_session_on_cancel: true,
            caller_header: "X-Caller".into(),
            tenant_header: "X-Tenant".into(),
            user_id: crate::config::UserId::Caller,
            auth: UpstreamAuthConfig {
                kind: AuthKind::OAuth2,
                client_id: Some("c".into()),
                client_secret: secret(),
                client_secret_file: Some("f".into()),
                scope: Some("s".into()),
                token_url: Some("https://t.example/".parse().unwrap()),
                discovery_url: Some("https://t.example/".parse().unwrap()),
                refresh_before_expiry_secs: 1,
                token: secret(),
                token_file: Some("f".into()),
                region: Some("us-east-1".into()),
                assume_role_arn: Some("arn:aws:iam::123456789012:role/r".into()),
                external_id: Some("x".into()),
                session_name: Some("s".into()),
                credentials_refresh_secs: 1,
            },
        }),
        log: LogConfig {
            format: LogFormat::Json,
            level: "debug".into(),
        },
        telemetry: crate::config::TelemetryConfig {
            otlp_endpoint: Some("http://c.example:4318".into()),
            service_name: Some("gw".into()),
        },
        push: crate::config::PushConfig {
            enabled: true,
            allow_http: true,
            allow_cidrs: vec!["127.0.0.1/32".into()],
            max_attempts: 1,
            max_age_secs: 1,
            timeout_secs: 1,
            initial_backoff_ms: 1,
            max_backoff_secs: 1,
            concurrency: 1,
            per_host_concurrency: 1,
            disable_after_failures: 1,
            lease_secs: 2,
            poll_interval_ms: 1,
            coalesce: false,
            max_coalesce_events: 1,
            max_coalesce_bytes: 1,
            signature: crate::config::SignatureScheme::V1,
            signing_key_file: Some("s".into()),
            extra_signing_key_files: vec!["e".into()],
            hmac_secret_file: Some("h".into()),
        },
        agents: Default::default(),
        no_root_agent: false,
    }
}

/// `(section, key)` pairs of a TOML value: `("upstream.auth", "kind")`; arrays of tables
/// contribute their element keys under the array's own section name.
fn keys_of(value: &toml::Value, section: &str, out: &mut Vec<(String, String)>) {
    let Some(table) = value.as_table() else {
        return;
    };
    for (key, value) in table {
        let child = if section.is_empty() {
            key.clone()
        } else {
            format!("{section}.{key}")
        };
        match value {
            toml::Value::Table(_) => keys_of(value, &child, out),
            toml::Value::Array(items)
                if items.iter().all(toml::Value::is_table) && !items.is_empty() =>
            {
                for item in items {
                    keys_of(item, &child, out);
                }
            }
            _ => out.push((section.to_owned(), key.clone())),
        }
    }
}

/// `(section, key)` pairs written in the example, set or commented out (`# key = ...`).
fn keys_in_example() -> Vec<(String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in EXAMPLE.lines() {
        let line = line.trim().trim_start_matches('#').trim();
        if let Some(header) = line.strip_prefix('[') {
            section = header.trim_matches(['[', ']']).to_owned();
        } else if let Some((key, _)) = line.split_once('=') {
            let key = key.trim();
            if !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                out.push((section.clone(), key.to_owned()));
            }
        }
    }
    out
}

#[test]
fn example_documents_every_key() {
    let value = toml::Value::try_from(fully_populated()).unwrap();
    let mut keys = Vec::new();
    keys_of(&value, "", &mut keys);
    assert!(keys.len() > 50, "walked too few keys: {keys:?}");
    let documented = keys_in_example();
    let missing: Vec<_> = keys
        .iter()
        .filter(|k| !documented.contains(k))
        .map(|(s, k)| format!("{s}.{k}"))
        .collect();
    assert!(missing.is_empty(), "config.example.toml lacks: {missing:?}");
}

#[test]
fn env_beats_file_and_override_beats_env() {
    let (_dir, path) = file("[server]\nlisten = \"127.0.0.1:1111\"\n[upstream]\nmax_retries = 7\n");
    let env = [("A2A_GATEWAY_SERVER__LISTEN", "127.0.0.1:2222")];

    let config = Config::load(sources(Some(&path), &[])).unwrap();
    assert_eq!(config.server.listen.port(), 1111);

    let config = Config::load(sources(Some(&path), &env)).unwrap();
    assert_eq!(config.server.listen.port(), 2222);
    assert_eq!(
        agentcore(&config).max_retries,
        7,
        "file keys the env leaves alone stay"
    );

    let config =
        Config::load(sources(Some(&path), &env).with_override("server.listen", "127.0.0.1:3333"))
            .unwrap();
    assert_eq!(config.server.listen.port(), 3333);
}

#[test]
fn env_values_are_read_by_the_type_they_fill() {
    let config = Config::load(sources(
        None,
        &[
            ("A2A_GATEWAY_UPSTREAM__MAX_RETRIES", "5"),
            ("A2A_GATEWAY_UPSTREAM__INCLUDE_MESSAGE", "true"),
            ("a2a_gateway_log__format", "json"),
            ("A2A_GATEWAY_UPSTREAM__QUALIFIER", "0123"),
            ("A2A_GATEWAY_AGENT__VERSION", "1.0"),
            (
                "A2A_GATEWAY_AGENT__DEFAULT_INPUT_MODES",
                r#"["text/plain", "application/json"]"#,
            ),
            ("A2A_GATEWAY_CONFIG", "/not/a/config/key.toml"),
            ("A2A_GATEWAY_TEST_POSTGRES_URL", "postgres://x@y/z"),
            ("HOME", "/root"),
        ],
    ))
    .unwrap();
    assert_eq!(agentcore(&config).max_retries, 5);
    assert!(agentcore(&config).include_message);
    assert_eq!(config.log.format, LogFormat::Json);
    assert_eq!(
        agentcore(&config).qualifier,
        "0123",
        "digits stay text for text keys"
    );
    assert_eq!(config.agent.version, "1.0");
    assert_eq!(
        config.agent.default_input_modes,
        ["text/plain", "application/json"]
    );
}

#[test]
fn unknown_key_in_file_names_key_file_and_line() {
    let (_dir, path) = file("[server]\nlisten = \"127.0.0.1:8080\"\nlisten_port = 9\n");
    let (message, err) = load_err(sources(Some(&path), &[]));
    let (key, origin) = invalid_parts(&err);
    assert_eq!(key, "server.listen_port");
    assert_eq!(
        origin,
        &ConfigOrigin::File {
            path: path.clone(),
            line: Some(3)
        }
    );
    assert!(message.contains("`server.listen_port`"), "{message}");
    assert!(
        message.contains(&format!("{} line 3", path.display())),
        "{message}"
    );
    assert!(message.contains("unknown key"), "{message}");
}

#[test]
fn unknown_section_in_env_names_the_variable() {
    let (message, err) = load_err(sources(None, &[("A2A_GATEWAY_SERVR__LISTEN", "x")]));
    let (key, origin) = invalid_parts(&err);
    assert_eq!(key, "servr");
    assert_eq!(
        origin,
        &ConfigOrigin::Env {
            var: "A2A_GATEWAY_SERVR__LISTEN".into()
        }
    );
    assert!(message.contains("A2A_GATEWAY_SERVR__LISTEN"), "{message}");
}

#[test]
fn wrong_type_in_env_names_the_variable() {
    let (message, err) = load_err(sources(
        None,
        &[("A2A_GATEWAY_SERVER__MAX_BODY_BYTES", "lots")],
    ));
    assert_eq!(invalid_parts(&err).0, "server.max_body_bytes");
    assert!(
        message.contains("environment variable A2A_GATEWAY_SERVER__MAX_BODY_BYTES"),
        "{message}"
    );

    let (message, _) = load_err(sources(
        None,
        &[("A2A_GATEWAY_SERVER__LISTEN", "localhost")],
    ));
    assert!(message.contains("`server.listen`"), "{message}");
    assert!(message.contains("A2A_GATEWAY_SERVER__LISTEN"), "{message}");
}

#[test]
fn wrong_type_in_file_is_refused_even_if_it_would_parse() {
    let (_dir, path) = file("[upstream]\nmax_retries = \"3\"\n");
    let (message, err) = load_err(sources(Some(&path), &[]));
    assert_eq!(invalid_parts(&err).0, "upstream.max_retries");
    assert!(message.contains("line 2"), "{message}");
}

#[test]
fn toml_syntax_error_names_file_and_line() {
    let (_dir, path) = file("[server]\nlisten = \n");
    let (message, err) = load_err(sources(Some(&path), &[]));
    assert!(
        matches!(err, ConfigError::Syntax { line: 2, .. }),
        "{err:?}"
    );
    assert!(message.contains(&path.display().to_string()), "{message}");
}

#[test]
fn missing_config_file_is_an_error() {
    let (message, err) = load_err(sources(Some(Path::new("/nonexistent/gw.toml")), &[]));
    assert!(matches!(err, ConfigError::ReadFile { .. }));
    assert!(message.contains("/nonexistent/gw.toml"), "{message}");
}

#[test]
fn zero_timeouts_are_refused() {
    let (message, err) = load_err(sources(
        None,
        &[("A2A_GATEWAY_UPSTREAM__CONNECT_TIMEOUT_SECS", "0")],
    ));
    assert_eq!(invalid_parts(&err).0, "upstream.connect_timeout_secs");
    assert!(message.contains("greater than 0"), "{message}");
    assert!(
        message.contains("A2A_GATEWAY_UPSTREAM__CONNECT_TIMEOUT_SECS"),
        "{message}"
    );

    let (_dir, path) = file("[server]\n\nsse_keepalive_secs = 0\n");
    let (_, err) = load_err(sources(Some(&path), &[]));
    let (key, origin) = invalid_parts(&err);
    assert_eq!(key, "server.sse_keepalive_secs");
    assert!(
        matches!(origin, ConfigOrigin::File { line: Some(3), .. }),
        "{origin:?}"
    );
}

#[test]
fn override_errors_name_the_override() {
    let (message, err) =
        load_err(ConfigSources::default().with_override("store.max_connections", 0));
    assert_eq!(
        invalid_parts(&err).1,
        &ConfigOrigin::Override {
            key: "store.max_connections".into()
        }
    );
    assert!(message.contains("command-line override"), "{message}");
}

#[test]
fn tls_cert_without_key_is_refused() {
    let (_dir, path) = file("[server]\ntls_cert_file = \"/etc/cert.pem\"\n");
    let (message, err) = load_err(sources(Some(&path), &[]));
    let (key, origin) = invalid_parts(&err);
    assert_eq!(key, "server.tls_key_file");
    assert!(
        matches!(origin, ConfigOrigin::File { line: Some(2), .. }),
        "{origin:?}"
    );
    assert!(message.contains("tls_cert_file"), "{message}");
}

#[test]
fn oauth2_requires_its_keys() {
    let (_dir, path) = file("[upstream.auth]\nkind = \"oauth2\"\n");
    let (message, err) = load_err(sources(Some(&path), &[]));
    let (key, origin) = invalid_parts(&err);
    assert_eq!(key, "upstream.auth.client_id");
    assert!(
        matches!(origin, ConfigOrigin::File { line: Some(2), .. }),
        "{origin:?}"
    );
    assert!(message.contains("oauth2"), "{message}");

    let env = [
        ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "oauth2"),
        ("A2A_GATEWAY_UPSTREAM__AUTH__CLIENT_ID", "id"),
        ("A2A_GATEWAY_UPSTREAM__AUTH__CLIENT_SECRET", "s"),
    ];
    let (message, err) = load_err(sources(None, &env));
    assert_eq!(invalid_parts(&err).0, "upstream.auth.token_url");
    assert!(message.contains("discovery_url"), "{message}");
}

#[test]
fn client_secret_and_its_file_together_are_refused() {
    let (_dir, path) = file(
        "[upstream.auth]\nkind = \"oauth2\"\nclient_id = \"id\"\nclient_secret_file = \"/x\"\ntoken_url = \"https://t.example/token\"\n",
    );
    let (message, err) = load_err(sources(
        Some(&path),
        &[("A2A_GATEWAY_UPSTREAM__AUTH__CLIENT_SECRET", "hunter2")],
    ));
    let (key, origin) = invalid_parts(&err);
    assert_eq!(key, "upstream.auth.client_secret_file");
    assert!(
        matches!(origin, ConfigOrigin::File { line: Some(4), .. }),
        "{origin:?}"
    );
    assert!(message.contains("not both"), "{message}");
    assert!(
        message.contains(
            "upstream.auth.client_secret is set by environment variable A2A_GATEWAY_UPSTREAM__AUTH__CLIENT_SECRET"
        ),
        "the environment is named: {message}"
    );
    assert!(!message.contains("hunter2"));
}

#[test]
fn keys_of_another_auth_kind_are_refused() {
    let (message, err) = load_err(sources(
        None,
        &[("A2A_GATEWAY_UPSTREAM__AUTH__CLIENT_ID", "id")],
    ));
    assert_eq!(invalid_parts(&err).0, "upstream.auth.client_id");
    assert!(message.contains("\"none\""), "{message}");
}

#[test]
fn secrets_are_read_from_files() {
    let dir = tempfile::tempdir().unwrap();
    let secret_path = dir.path().join("secret");
    let mut f = std::fs::File::create(&secret_path).unwrap();
    writeln!(f, "s3cr3t value").unwrap();
    let token_path = dir.path().join("token");
    std::fs::write(&token_path, "tok\r\n").unwrap();

    let config = Config::load(sources(
        None,
        &[
            ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "oauth2"),
            ("A2A_GATEWAY_UPSTREAM__AUTH__CLIENT_ID", "id"),
            (
                "A2A_GATEWAY_UPSTREAM__AUTH__CLIENT_SECRET_FILE",
                secret_path.to_str().unwrap(),
            ),
            (
                "A2A_GATEWAY_UPSTREAM__AUTH__DISCOVERY_URL",
                "https://idp.example/.well-known/openid-configuration",
            ),
        ],
    ))
    .unwrap();
    let secret = agentcore(&config).auth.client_secret.as_ref().unwrap();
    assert_eq!(secret.expose_secret(), "s3cr3t value");

    let config = Config::load(sources(
        None,
        &[
            ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "bearer"),
            (
                "A2A_GATEWAY_UPSTREAM__AUTH__TOKEN_FILE",
                token_path.to_str().unwrap(),
            ),
        ],
    ))
    .unwrap();
    assert_eq!(
        agentcore(&config)
            .auth
            .token
            .as_ref()
            .unwrap()
            .expose_secret(),
        "tok"
    );
}

#[test]
fn unreadable_secret_file_names_the_key() {
    let (message, err) = load_err(sources(
        None,
        &[
            ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "bearer"),
            (
                "A2A_GATEWAY_UPSTREAM__AUTH__TOKEN_FILE",
                "/nonexistent/token",
            ),
        ],
    ));
    assert_eq!(invalid_parts(&err).0, "upstream.auth.token_file");
    assert!(
        message.contains("A2A_GATEWAY_UPSTREAM__AUTH__TOKEN_FILE"),
        "{message}"
    );
    assert!(message.contains("/nonexistent/token"), "{message}");
}

#[test]
fn debug_and_redacted_output_never_show_secrets() {
    const SECRET: &str = "hunter2-client-secret";
    const DB_PASSWORD: &str = "db-pa55word";
    let (_dir, path) = file(&format!(
        "[store]\nurl = \"postgres://gw:{DB_PASSWORD}@127.0.0.1:5432/test\"\n"
    ));
    let config = Config::load(sources(
        Some(&path),
        &[
            ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "oauth2"),
            ("A2A_GATEWAY_UPSTREAM__AUTH__CLIENT_ID", "id"),
            ("A2A_GATEWAY_UPSTREAM__AUTH__CLIENT_SECRET", SECRET),
            (
                "A2A_GATEWAY_UPSTREAM__AUTH__TOKEN_URL",
                "https://idp.example/token",
            ),
        ],
    ))
    .unwrap();
    let debug = format!("{config:?} {config:#?}");
    let redacted = config.redacted_toml();
    for text in [&debug, &redacted] {
        assert!(!text.contains(SECRET), "secret leaked: {text}");
        assert!(!text.contains(DB_PASSWORD), "password leaked: {text}");
    }
    assert!(redacted.contains("client_secret = \"***\""), "{redacted}");
    assert!(
        redacted.contains("postgres://gw:***@127.0.0.1:5432/test"),
        "{redacted}"
    );
    let StoreUrl::Postgres(url) = &config.store.url else {
        panic!("expected postgres")
    };
    assert!(
        url.expose_secret().contains(DB_PASSWORD),
        "the real URL is kept"
    );

    let sources = sources(None, &[("A2A_GATEWAY_UPSTREAM__AUTH__TOKEN", SECRET)]);
    assert!(!format!("{sources:?}").contains(SECRET));
}

#[test]
fn redacted_toml_loads_back() {
    let (_dir, path) = file(&Config::default().redacted_toml());
    Config::load(sources(Some(&path), &[])).unwrap();
}

/// A secret read from its `*_file` is printed as the file alone (not also as
/// `token = "***"`, which would not load back beside the file).
#[test]
fn a_secret_from_its_file_is_printed_as_the_file_only() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-from-file\n").unwrap();
    let toml = format!(
        "[upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n[upstream.auth]\nkind = \"bearer\"\ntoken_file = {:?}\n\
         [agents.a]\n[agents.a.upstream]\nurl = \"http://127.0.0.1:9/invocations\"\n[agents.a.upstream.auth]\nkind = \"bearer\"\ntoken_file = {:?}\n",
        token.display().to_string(),
        token.display().to_string()
    );
    let (_d, path) = file(&toml);
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    let printed = config.redacted_toml();
    assert!(!printed.contains("token = "), "{printed}");
    assert!(!printed.contains("s3cret-from-file"), "{printed}");
    assert_eq!(printed.matches("token_file = ").count(), 2, "{printed}");
    let (_d2, again) = file(&printed);
    Config::load(sources(Some(&again), &[])).unwrap();
}

#[test]
fn arn_derives_the_agentcore_urls() {
    let config = Config::load(sources(
        None,
        &[("A2A_GATEWAY_UPSTREAM__AGENT_RUNTIME_ARN", ARN)],
    ))
    .unwrap();
    let arn = agentcore(&config).agent_runtime_arn.as_ref().unwrap();
    assert_eq!(arn.region(), "us-east-1");
    assert_eq!(arn.account_id(), "123456789012");
    assert_eq!(arn.runtime_id(), "my_agent-abc123");
    assert_eq!(
        agentcore(&config).invocation_url().unwrap().as_str(),
        "https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fmy_agent-abc123/invocations?qualifier=DEFAULT"
    );
    assert_eq!(
        agentcore(&config).stop_session_url().unwrap().as_str(),
        "https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fmy_agent-abc123/stopruntimesession?qualifier=DEFAULT"
    );
}

#[test]
fn arn_partitions_and_qualifier_encoding() {
    let mut upstream = AgentCoreUpstreamConfig {
        agent_runtime_arn: Some(
            "arn:aws-cn:bedrock-agentcore:cn-north-1:123456789012:runtime/a"
                .parse()
                .unwrap(),
        ),
        qualifier: "v 1&x".into(),
        ..AgentCoreUpstreamConfig::default()
    };
    assert_eq!(
        upstream.invocation_url().unwrap().as_str(),
        "https://bedrock-agentcore.cn-north-1.amazonaws.com.cn/runtimes/arn%3Aaws-cn%3Abedrock-agentcore%3Acn-north-1%3A123456789012%3Aruntime%2Fa/invocations?qualifier=v%201%26x"
    );
    upstream.agent_runtime_arn = Some(
        "arn:aws-us-gov:bedrock-agentcore:us-gov-west-1:123456789012:runtime/b"
            .parse()
            .unwrap(),
    );
    assert!(
        upstream
            .invocation_url()
            .unwrap()
            .as_str()
            .starts_with("https://bedrock-agentcore.us-gov-west-1.amazonaws.com/")
    );
}

#[test]
fn malformed_arns_are_refused_naming_the_key() {
    for bad in [
        "my_agent-abc123",
        "arn:aws:bedrock:us-east-1:123456789012:runtime/x",
        "arn:aws:bedrock-agentcore:us-east-1:12345:runtime/x",
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:agent/x",
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/",
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/a/b",
        "arn:gcp:bedrock-agentcore:us-east-1:123456789012:runtime/x",
        "arn:aws:bedrock-agentcore:US-EAST-1:123456789012:runtime/x",
    ] {
        let (_dir, path) = file(&format!("[upstream]\nagent_runtime_arn = \"{bad}\"\n"));
        let (message, err) = load_err(sources(Some(&path), &[]));
        let (key, origin) = invalid_parts(&err);
        assert_eq!(key, "upstream.agent_runtime_arn", "{bad}");
        assert!(
            matches!(origin, ConfigOrigin::File { line: Some(2), .. }),
            "{origin:?}"
        );
        assert!(message.contains("runtime/ID"), "{message}");
    }
}

#[test]
fn url_replaces_the_derived_one() {
    let config = Config::load(sources(
        None,
        &[
            ("A2A_GATEWAY_UPSTREAM__AGENT_RUNTIME_ARN", ARN),
            (
                "A2A_GATEWAY_UPSTREAM__URL",
                "http://127.0.0.1:9000/invocations",
            ),
        ],
    ))
    .unwrap();
    assert_eq!(
        agentcore(&config).invocation_url().unwrap().as_str(),
        "http://127.0.0.1:9000/invocations"
    );
    assert_eq!(
        agentcore(&config).stop_session_url().unwrap().as_str(),
        "http://127.0.0.1:9000/stopruntimesession"
    );

    // An encoded ARN in a custom URL stays encoded once.
    let upstream = AgentCoreUpstreamConfig {
        url: Some(
            "https://vpce.example/runtimes/arn%3Aaws/invocations?qualifier=DEFAULT"
                .parse()
                .unwrap(),
        ),
        ..AgentCoreUpstreamConfig::default()
    };
    assert_eq!(
        upstream.stop_session_url().unwrap().as_str(),
        "https://vpce.example/runtimes/arn%3Aaws/stopruntimesession?qualifier=DEFAULT"
    );
}

#[test]
fn url_that_cannot_derive_stop_session_is_refused_unless_stop_is_off() {
    let env = [("A2A_GATEWAY_UPSTREAM__URL", "http://127.0.0.1:9000/invoke")];
    let (message, err) = load_err(sources(None, &env));
    assert_eq!(invalid_parts(&err).0, "upstream.url");
    assert!(message.contains("stop_session_on_cancel"), "{message}");

    let config =
        Config::load(sources(None, &env).with_override("upstream.stop_session_on_cancel", false))
            .unwrap();
    assert!(agentcore(&config).invocation_url().is_ok());
    assert!(matches!(
        agentcore(&config).stop_session_url(),
        Err(ConfigError::NoStopSessionUrl)
    ));
}

#[test]
fn no_upstream_is_allowed_at_load_but_not_for_a_url() {
    let config = Config::load(ConfigSources::default()).unwrap();
    let err = agentcore(&config).invocation_url().unwrap_err();
    assert!(matches!(err, ConfigError::NoUpstream));
    assert!(err.to_string().contains("upstream.agent_runtime_arn"));
}

#[test]
fn bad_urls_are_refused() {
    for (var, value) in [
        ("A2A_GATEWAY_SERVER__PUBLIC_URL", "not a url"),
        ("A2A_GATEWAY_SERVER__PUBLIC_URL", "ftp://x.example/"),
        ("A2A_GATEWAY_UPSTREAM__URL", "localhost:9000/invocations"),
    ] {
        let (message, _) = load_err(sources(None, &[(var, value)]));
        assert!(message.contains(var), "{message}");
        assert!(message.contains("URL"), "{message}");
    }
}

#[test]
fn store_urls_parse() {
    let parse = |s: &str| s.parse::<StoreUrl>();
    assert!(matches!(parse("memory:"), Ok(StoreUrl::Memory)));
    assert!(matches!(
        parse("sqlite::memory:"),
        Ok(StoreUrl::Sqlite(SqliteLocation::Memory))
    ));
    assert!(matches!(
        parse("sqlite:///var/lib/gw.db"),
        Ok(StoreUrl::Sqlite(SqliteLocation::File(p))) if p == Path::new("/var/lib/gw.db")
    ));
    assert!(matches!(
        parse("sqlite://data/gw.db"),
        Ok(StoreUrl::Sqlite(SqliteLocation::File(p))) if p == Path::new("data/gw.db")
    ));
    assert!(matches!(
        parse("postgresql://u@h/db"),
        Ok(StoreUrl::Postgres(_))
    ));
    for bad in [
        "mysql://x",
        "sqlite://",
        "sqlite://a.db?mode=rwc",
        "postgres://u:p@[bad",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
    let err = parse("postgres://u:topsecret@[bad")
        .unwrap_err()
        .to_string();
    assert!(!err.contains("topsecret"), "{err}");

    let (message, _) = load_err(sources(None, &[("A2A_GATEWAY_STORE__URL", "redis://x")]));
    assert!(message.contains("A2A_GATEWAY_STORE__URL"), "{message}");
}

#[test]
fn skills_from_a_file_replace_the_default_and_are_checked() {
    let (_dir, path) = file(
        "[[agent.skills]]\nid = \"a\"\nname = \"A\"\ndescription = \"does a\"\n\n[[agent.skills]]\nname = \"B\"\ndescription = \"does b\"\n",
    );
    let (message, err) = load_err(sources(Some(&path), &[]));
    let (key, origin) = invalid_parts(&err);
    assert_eq!(key, "agent.skills.1.id");
    assert!(matches!(origin, ConfigOrigin::File { .. }), "{origin:?}");
    assert!(message.contains("required"), "{message}");

    let (_dir, path) =
        file("[[agent.skills]]\nid = \"a\"\nname = \"A\"\ndescription = \"does a\"\n");
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    assert_eq!(config.agent.skills.len(), 1);
    assert_eq!(config.agent.skills[0].id, "a");
}

#[test]
fn media_types_and_extensions_are_checked() {
    for (toml, want) in [
        (
            "[agent]\ndefault_input_modes = [\"text\"]\n",
            "agent.default_input_modes.0",
        ),
        (
            "[agent]\ndefault_output_modes = [\"text/plain\", \"*/json\"]\n",
            "agent.default_output_modes.1",
        ),
        (
            "[[agent.skills]]\nid = \"a\"\nname = \"A\"\ndescription = \"d\"\ninput_modes = [\"image/p*\"]\n",
            "agent.skills.0.input_modes.0",
        ),
        (
            "[[agent.extensions]]\nuri = \"\"\n",
            "agent.extensions.0.uri",
        ),
        (
            "[[agent.extensions]]\nuri = \"a,b\"\n",
            "agent.extensions.0.uri",
        ),
        (
            "[[agent.extensions]]\nuri = \"urn:a\"\n[[agent.extensions]]\nuri = \"urn:a\"\n",
            "agent.extensions.1.uri",
        ),
    ] {
        let (_dir, path) = file(toml);
        let (_, err) = load_err(sources(Some(&path), &[]));
        assert_eq!(invalid_parts(&err).0, want, "{toml}");
    }
    let (_dir, path) = file(
        "[agent]\nstreaming = false\ndefault_input_modes = [\"text/*\", \"*/*\"]\n[[agent.extensions]]\nuri = \"urn:a\"\nrequired = true\nparams = { n = 1, deep = { x = [\"y\"] } }\n",
    );
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    assert!(!config.agent.streaming);
    let ext = &config.agent.extensions[0];
    assert!(ext.required);
    assert_eq!(
        serde_json::Value::Object(ext.params.clone().unwrap()),
        serde_json::json!({"n": 1, "deep": {"x": ["y"]}})
    );
}

#[test]
fn bad_log_level_is_refused() {
    let (message, _) = load_err(sources(None, &[("A2A_GATEWAY_LOG__LEVEL", "a2a=[")]));
    assert!(message.contains("`log.level`"), "{message}");
}

#[test]
fn a_log_level_that_is_no_level_is_refused_not_taken_as_a_target() {
    for bad in ["verbose", "WARN", "warning", "a2a_gateway=debug,loud"] {
        let (message, _) = load_err(sources(None, &[("A2A_GATEWAY_LOG__LEVEL", bad)]));
        assert!(message.contains("`log.level`"), "{bad}: {message}");
        assert!(message.contains("is not a level"), "{bad}: {message}");
    }
    for good in [
        "info",
        "warn",
        "off",
        "a2a_gateway=debug,info",
        "a2a_gateway::store=trace",
    ] {
        let config = Config::load(sources(None, &[("A2A_GATEWAY_LOG__LEVEL", good)]));
        assert!(config.is_ok(), "{good}: {:?}", config.err());
    }
}

#[test]
fn numbers_beyond_what_the_gateway_can_use_are_refused_naming_the_key() {
    let (message, _) = load_err(sources(
        None,
        &[("A2A_GATEWAY_SERVER__MAX_BODY_BYTES", "9223372036854775808")],
    ));
    assert!(message.contains("`server.max_body_bytes`"), "{message}");
    assert!(
        message.contains("must be at most 9223372036854775807"),
        "{message}"
    );
    assert!(
        message.contains("A2A_GATEWAY_SERVER__MAX_BODY_BYTES"),
        "{message}"
    );
    let (_dir, path) = file("[server]\nheader_timeout_secs = 9223372036854775807\n");
    let (message, _) = load_err(sources(Some(&path), &[]));
    assert!(
        message.contains("`server.header_timeout_secs`"),
        "{message}"
    );
    assert!(
        message.contains("must be at most 315360000 (10 years)"),
        "{message}"
    );
    assert!(message.contains("line 2"), "{message}");
    // Ten years is still accepted, and the defaults pass.
    let (_dir, path) = file("[server]\nheader_timeout_secs = 315360000\n");
    assert!(Config::load(sources(Some(&path), &[])).is_ok());
}

#[test]
fn sqlite_synchronous_defaults_to_full_and_refuses_unknown_values() {
    use SqliteSynchronous as Synchronous;
    let config = Config::load(sources(None, &[])).unwrap();
    assert_eq!(config.store.sqlite_synchronous, Synchronous::Full);
    let config = Config::load(sources(
        None,
        &[("A2A_GATEWAY_STORE__SQLITE_SYNCHRONOUS", "normal")],
    ))
    .unwrap();
    assert_eq!(config.store.sqlite_synchronous, Synchronous::Normal);
    let (message, _) = load_err(sources(
        None,
        &[("A2A_GATEWAY_STORE__SQLITE_SYNCHRONOUS", "off")],
    ));
    assert!(
        message.contains("store.sqlite_synchronous") && message.contains("full"),
        "{message}"
    );
}

#[test]
fn an_otlp_endpoint_with_credentials_is_refused_at_load_as_serve_refuses_it() {
    for endpoint in [
        "http://user:OTLPPASS@127.0.0.1:4318",
        "http://user@127.0.0.1:4318",
        "ftp://127.0.0.1:4318",
        "not a url",
    ] {
        let (message, err) = load_err(sources(
            None,
            &[("A2A_GATEWAY_TELEMETRY__OTLP_ENDPOINT", endpoint)],
        ));
        assert_eq!(
            invalid_parts(&err).0,
            "telemetry.otlp_endpoint",
            "{message}"
        );
        assert!(!message.contains("OTLPPASS"), "{message}");
    }
    let config = Config::load(sources(
        None,
        &[(
            "A2A_GATEWAY_TELEMETRY__OTLP_ENDPOINT",
            "http://127.0.0.1:4318",
        )],
    ))
    .unwrap();
    assert!(config.telemetry.otlp_endpoint.is_some());
}

#[test]
fn the_postgres_password_can_come_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("pg-password");
    std::fs::write(&pw, "s3cr3t-pg\n").unwrap();
    let toml = format!(
        "[store]\nurl = \"postgres://gw@db.example.com/test\"\n\
         listen_url = \"postgres://gw@db-primary.example.com/test\"\n\
         password_file = \"{}\"\n",
        pw.display()
    );
    let (_d, path) = file(&toml);
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    for url in [Some(&config.store.url), config.store.listen_url.as_ref()] {
        let Some(StoreUrl::Postgres(secret)) = url else {
            panic!("postgres")
        };
        assert!(
            secret
                .expose_secret()
                .starts_with("postgres://gw:s3cr3t-pg@"),
            "the password is put into the URL"
        );
    }
    assert!(!config.redacted_toml().contains("s3cr3t-pg"));

    // Beside a password already in the URL (here from the environment): refused,
    // naming both places.
    let (message, err) = load_err(sources(
        Some(&path),
        &[(
            "A2A_GATEWAY_STORE__URL",
            "postgres://gw:other@db.example.com/test",
        )],
    ));
    assert_eq!(invalid_parts(&err).0, "store.password_file", "{message}");
    assert!(message.contains("not both"), "{message}");
    assert!(message.contains("A2A_GATEWAY_STORE__URL"), "{message}");
    assert!(!message.contains("other@"), "{message}");
}

#[test]
fn a_store_password_given_as_a_query_parameter_is_masked_too() {
    let url: StoreUrl = "postgres://gw@db.example.com/test?password=QPASS&sslmode=require"
        .parse()
        .unwrap();
    let shown = url.to_string();
    assert!(!shown.contains("QPASS"), "{shown}");
    assert!(
        shown.contains("password=***") && shown.contains("sslmode=require"),
        "{shown}"
    );
}

#[test]
fn allowed_origins_and_hosts_are_checked_at_start() {
    for (key, value) in [
        ("allowed_origins", "[\"app.example.com\"]"),
        ("allowed_origins", "[\"https://app.example.com/path\"]"),
        ("allowed_origins", "[\"ftp://app.example.com\"]"),
        ("allowed_hosts", "[\"gw.example.com:8080\"]"),
        ("allowed_hosts", "[\"https://gw.example.com\"]"),
        ("allowed_hosts", "[\"\"]"),
    ] {
        let (_dir, path) = file(&format!("[server]\n{key} = {value}\n"));
        let (message, err) = load_err(sources(Some(&path), &[]));
        assert_eq!(
            invalid_parts(&err).0,
            format!("server.{key}[0]"),
            "{message}"
        );
    }
    let mut server = ServerConfig::default();
    assert_eq!(
        server.host_names(),
        Some(vec![]),
        "loopback: loopback names only"
    );
    server.listen = "0.0.0.0:8080".parse().unwrap();
    assert_eq!(server.host_names(), None, "no name known: no check");
    server.allowed_hosts = vec!["gw.internal".into()];
    server.public_url = Some("https://agents.example.com/".parse().unwrap());
    assert_eq!(
        server.host_names(),
        Some(vec!["agents.example.com".into(), "gw.internal".into()])
    );
}

#[test]
fn public_url_derivation() {
    let mut server = ServerConfig {
        listen: "0.0.0.0:9000".parse().unwrap(),
        ..ServerConfig::default()
    };
    assert_eq!(server.public_url().as_str(), "http://127.0.0.1:9000/");
    server.public_url = Some("https://agents.example.com/a2a".parse().unwrap());
    assert_eq!(
        server.public_url().as_str(),
        "https://agents.example.com/a2a"
    );
}

#[test]
fn config_path_resolution_order() {
    let dir = tempfile::tempdir().unwrap();
    let env = vec![(CONFIG_PATH_ENV.to_owned(), "/from/env.toml".to_owned())];
    assert_eq!(
        resolve_config_path(Some("/cli.toml".into()), &env, dir.path()),
        Some(PathBuf::from("/cli.toml"))
    );
    assert_eq!(
        resolve_config_path(None, &env, dir.path()),
        Some(PathBuf::from("/from/env.toml"))
    );
    assert_eq!(resolve_config_path(None, &[], dir.path()), None);
    std::fs::write(dir.path().join(DEFAULT_CONFIG_FILE), "").unwrap();
    assert_eq!(
        resolve_config_path(None, &[], dir.path()),
        Some(dir.path().join(DEFAULT_CONFIG_FILE))
    );
}

#[test]
fn unused_env_vars_are_reported() {
    let sources = sources(
        None,
        &[
            ("A2A_GATEWAY_CONFIG", "/x.toml"),
            ("A2A_GATEWAY_TEST_POSTGRES_URL", "postgres://x@y/z"),
            ("A2A_GATEWAY_SERVER__LISTEN", "127.0.0.1:1"),
            ("A2A_GATEWAY_SERVER_LISTEN", "127.0.0.1:1"),
            ("PATH", "/bin"),
        ],
    );
    assert_eq!(sources.unused_env_vars(), ["A2A_GATEWAY_SERVER_LISTEN"]);
}

const KEY_A: &str = "key-of-team-a";
const KEY_B: &str = "key-of-team-b";

#[test]
fn api_keys_load_from_file_env_and_key_file() {
    let (_dir, path) = file(&format!(
        "[server.auth]\nkind = \"api_key\"\n\n[[server.auth.keys]]\ncaller = \"team-a\"\nsha256 = \"{}\"\n",
        sha256_hex(KEY_A).to_ascii_uppercase()
    ));
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    let keys = &config.server.auth.keys;
    assert!(config.server.auth.required());
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].caller, "team-a");
    let digest_a: [u8; 32] = sha2::Sha256::digest(KEY_A.as_bytes()).into();
    assert_eq!(keys[0].digest(), Some(digest_a));

    // The whole list as one variable in TOML inline form, one key from a file.
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("key-b");
    std::fs::write(&key_path, format!("{KEY_B}\n")).unwrap();
    let list = format!(
        r#"[{{caller = "team-a", sha256 = "{}"}}, {{caller = "team-b", key_file = "{}"}}]"#,
        sha256_hex(KEY_A),
        key_path.display()
    );
    let config = Config::load(sources(
        None,
        &[
            ("A2A_GATEWAY_SERVER__AUTH__KIND", "api_key"),
            ("A2A_GATEWAY_SERVER__AUTH__KEYS", &list),
        ],
    ))
    .unwrap();
    let keys = &config.server.auth.keys;
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[1].caller, "team-b");
    let digest_b: [u8; 32] = sha2::Sha256::digest(KEY_B.as_bytes()).into();
    assert_eq!(keys[1].digest(), Some(digest_b));

    // Neither the hash nor the key is ever printed.
    let printed = format!("{config:?} {}", config.redacted_toml());
    assert!(!printed.contains(&sha256_hex(KEY_A)), "{printed}");
    assert!(!printed.contains(KEY_B), "{printed}");
    assert!(printed.contains("team-b"), "{printed}");
}

/// The environment list is read as TOML: a caller with `"`, `\\` or `'` (a basic string with
/// escapes, or a literal string, as `keys new` prints it) loads as written.
#[test]
fn an_environment_key_list_takes_toml_strings_with_escapes_and_literal_strings() {
    let callers = ["o'brien", "say \"hi\"", "back\\slash", "ünï"];
    let list = format!(
        r#"[{{caller = "o'brien", sha256 = "{a}"}}, {{caller = 'say "hi"', sha256 = "{b}"}}, {{caller = "back\\slash", sha256 = "{c}"}}, {{caller = "\u00fcn\u00ef", sha256 = "{d}"}}]"#,
        a = sha256_hex("key-a"),
        b = sha256_hex("key-b"),
        c = sha256_hex("key-c"),
        d = sha256_hex("key-d"),
    );
    let config = Config::load(sources(
        None,
        &[
            ("A2A_GATEWAY_SERVER__AUTH__KIND", "api_key"),
            ("A2A_GATEWAY_SERVER__AUTH__KEYS", &list),
        ],
    ))
    .unwrap_or_else(|e| panic!("{list}: {e}"));
    let loaded: Vec<&str> = config
        .server
        .auth
        .keys
        .iter()
        .map(|k| k.caller.as_str())
        .collect();
    assert_eq!(loaded, callers, "{list}");
}

/// A caller name that would reorder or hide text where it is shown is refused at load.
#[test]
fn a_caller_with_invisible_formatting_characters_is_refused() {
    let (_dir, path) = file(&format!(
        "[server.auth]\nkind = \"api_key\"\n[[server.auth.keys]]\ncaller = \"adm\\u202Enimda\"\nsha256 = \"{}\"\n",
        sha256_hex(KEY_A)
    ));
    let (message, err) = load_err(sources(Some(&path), &[]));
    assert_eq!(invalid_parts(&err).0, "server.auth.keys.0.caller");
    assert!(message.contains("invisible formatting"), "{message}");
}

/// A key's caller can never be a JWT caller's owner (`jwt:<issuer>#<claim>`), and
/// `[server.auth.jwt] owner` reads `namespaced` (default) or `claim`.
#[test]
fn a_key_caller_in_the_jwt_owner_form_is_refused() {
    let (_dir, path) = file(&format!(
        "[server.auth]\nkind = \"api_key\"\n[[server.auth.keys]]\ncaller = \"jwt:https://idp/#alice\"\nsha256 = \"{}\"\n",
        sha256_hex(KEY_A)
    ));
    let (message, err) = load_err(sources(Some(&path), &[]));
    assert_eq!(invalid_parts(&err).0, "server.auth.keys.0.caller");
    assert!(
        message.contains("must not start with \"jwt:\""),
        "{message}"
    );
    let (_dir, path) = file(
        "[server.auth]\nkind = \"jwt\"\n[server.auth.jwt]\nissuer = \"https://idp/\"\naudience = \"a\"\njwks_url = \"https://idp/jwks\"\nowner = \"claim\"\n",
    );
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    let jwt = config.server.auth.jwt.unwrap();
    assert_eq!(jwt.owner, crate::config::OwnerForm::Claim);
    assert_eq!(
        JwtConfig::default().owner,
        crate::config::OwnerForm::Namespaced
    );
}

/// `require_tenant_claim` names no claim by itself: it needs `tenant_claim`.
#[test]
fn require_tenant_claim_needs_a_tenant_claim() {
    let base = "[server.auth]\nkind = \"jwt\"\n[server.auth.jwt]\nissuer = \"https://idp/\"\naudience = \"a\"\njwks_url = \"https://idp/jwks\"\nrequire_tenant_claim = true\n";
    let (_dir, path) = file(base);
    let (message, err) = load_err(sources(Some(&path), &[]));
    assert_eq!(
        invalid_parts(&err).0,
        "server.auth.jwt.require_tenant_claim"
    );
    assert!(message.contains("server.auth.tenant_claim"), "{message}");
    let (_dir, path) = file(&base.replace(
        "kind = \"jwt\"\n",
        "kind = \"jwt\"\ntenant_claim = \"tenant\"\n",
    ));
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    assert!(config.server.auth.jwt.unwrap().require_tenant_claim);
}

#[test]
fn api_key_without_keys_is_refused() {
    let (_dir, path) = file("[server.auth]\nkind = \"api_key\"\n");
    let (message, err) = load_err(sources(Some(&path), &[]));
    let (key, origin) = invalid_parts(&err);
    assert_eq!(key, "server.auth.keys");
    assert!(
        matches!(origin, ConfigOrigin::File { line: Some(2), .. }),
        "{origin:?}"
    );
    assert!(message.contains("at least one key"), "{message}");
}

#[test]
fn keys_without_api_key_kind_are_refused() {
    let list = format!(r#"[{{caller = "a", sha256 = "{}"}}]"#, sha256_hex(KEY_A));
    let (message, err) = load_err(sources(None, &[("A2A_GATEWAY_SERVER__AUTH__KEYS", &list)]));
    assert_eq!(invalid_parts(&err).0, "server.auth.keys");
    assert!(
        message.contains("A2A_GATEWAY_SERVER__AUTH__KEYS"),
        "{message}"
    );
    assert!(message.contains("api_key"), "{message}");
}

#[test]
fn a_caller_may_hold_several_keys() {
    let (_dir, path) = file(&format!(
        "[server.auth]\nkind = \"api_key\"\n[[server.auth.keys]]\ncaller = \"a\"\nsha256 = \"{}\"\n[[server.auth.keys]]\ncaller = \"a\"\nsha256 = \"{}\"\ntenant = \"t1\"\n",
        sha256_hex(KEY_A),
        sha256_hex(KEY_B)
    ));
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    let keys = &config.server.auth.keys;
    assert_eq!(keys.len(), 2);
    assert!(keys.iter().all(|k| k.caller == "a" && k.digest().is_some()));
    assert_eq!(keys[1].tenant.as_deref(), Some("t1"));
    assert!(config.server.auth.binds_tenants());
}

#[test]
fn malformed_hashes_are_refused_without_echoing_them() {
    for bad in [
        "abc".to_owned(),
        KEY_A.to_owned(),
        format!("{}zz", &sha256_hex(KEY_A)[..62]),
    ] {
        let list = format!(r#"[{{caller = "a", sha256 = "{bad}"}}]"#);
        let (message, err) = load_err(sources(
            None,
            &[
                ("A2A_GATEWAY_SERVER__AUTH__KIND", "api_key"),
                ("A2A_GATEWAY_SERVER__AUTH__KEYS", &list),
            ],
        ));
        assert_eq!(invalid_parts(&err).0, "server.auth.keys.0.sha256", "{bad}");
        assert!(message.contains("64 hexadecimal digits"), "{message}");
        assert!(
            message.contains("A2A_GATEWAY_SERVER__AUTH__KEYS"),
            "{message}"
        );
        assert!(!message.contains(&bad), "{message}");
    }
}

#[test]
fn a_key_needs_exactly_one_of_hash_and_file_and_keys_are_distinct() {
    let env = |list: String| {
        sources(
            None,
            &[
                ("A2A_GATEWAY_SERVER__AUTH__KIND", "api_key"),
                ("A2A_GATEWAY_SERVER__AUTH__KEYS", &list),
            ],
        )
    };
    let (message, err) = load_err(env(r#"[{caller = "a"}]"#.to_owned()));
    assert_eq!(invalid_parts(&err).0, "server.auth.keys.0.sha256");
    assert!(message.contains("key_file"), "{message}");

    let (message, err) = load_err(env(format!(
        r#"[{{caller = "a", sha256 = "{}", key_file = "/k"}}]"#,
        sha256_hex(KEY_A)
    )));
    assert_eq!(invalid_parts(&err).0, "server.auth.keys.0.key_file");
    assert!(message.contains("not both"), "{message}");

    let (message, err) = load_err(env(
        r#"[{caller = "a", key_file = "/nonexistent/key"}]"#.to_owned()
    ));
    assert_eq!(invalid_parts(&err).0, "server.auth.keys.0.key_file");
    assert!(message.contains("/nonexistent/key"), "{message}");

    // The same key for two callers: ambiguous, refused (found after reading the file).
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("k");
    std::fs::write(&key_path, KEY_A).unwrap();
    let (message, err) = load_err(env(format!(
        r#"[{{caller = "a", sha256 = "{}"}}, {{caller = "b", key_file = "{}"}}]"#,
        sha256_hex(KEY_A),
        key_path.display()
    )));
    assert_eq!(invalid_parts(&err).0, "server.auth.keys.1");
    assert!(message.contains("same key"), "{message}");
    assert!(!message.contains(KEY_A), "{message}");
}

#[test]
fn a_password_in_the_upstream_url_is_not_printed() {
    let config = Config::load(sources(
        None,
        &[(
            "A2A_GATEWAY_UPSTREAM__URL",
            "http://user:pa55word@127.0.0.1:9/invocations",
        )],
    ))
    .unwrap();
    let shown = config.redacted_toml();
    assert!(!shown.contains("pa55word"), "{shown}");
    assert!(shown.contains("user:***@127.0.0.1"), "{shown}");
    // The real URL is still used.
    assert_eq!(
        agentcore(&config).invocation_url().unwrap().password(),
        Some("pa55word")
    );
}

#[test]
fn bindings_load_from_file_and_env_and_refuse_empty_or_repeated() {
    let (_dir, path) = file("[server]\nbindings = [\"rest\", \"jsonrpc\"]\n");
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    assert_eq!(config.server.bindings, [Binding::Rest, Binding::Jsonrpc]);
    let config = Config::load(sources(
        None,
        &[("A2A_GATEWAY_SERVER__BINDINGS", "[\"grpc\"]")],
    ))
    .unwrap();
    assert_eq!(config.server.bindings, [Binding::Grpc]);
    assert_eq!(Config::default().server.bindings, Binding::ALL);
    for bad in ["[]", "[\"rest\", \"rest\"]", "[\"soap\"]"] {
        let (_dir, path) = file(&format!("[server]\nbindings = {bad}\n"));
        let (message, err) = load_err(sources(Some(&path), &[]));
        let key = invalid_parts(&err).0;
        assert!(key.starts_with("server.bindings"), "{bad}: {message}");
    }
}

#[test]
fn the_card_declares_the_configured_bindings() {
    let mut config = Config::default();
    config.server.public_url = Some("https://agents.example.com/".parse().unwrap());
    let card = crate::app::agent_card(&config);
    let got: Vec<(&str, &str)> = card
        .supported_interfaces
        .iter()
        .map(|i| (i.protocol_binding.as_str(), i.url.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("JSONRPC", "https://agents.example.com/"),
            ("HTTP+JSON", "https://agents.example.com/a2a/rest"),
            ("GRPC", "agents.example.com:443"),
            ("JSONRPC", "https://agents.example.com/"),
        ]
    );
    assert_eq!(card.supported_interfaces[3].protocol_version, "0.3");
    config.server.bindings = vec![Binding::Rest];
    let card = crate::app::agent_card(&config);
    assert_eq!(
        card.supported_interfaces.len(),
        1,
        "no JSON-RPC, no 0.3 interface"
    );
    assert_eq!(card.supported_interfaces[0].protocol_binding, "HTTP+JSON");
    assert!(crate::transport::compat03::response::card_fields(&card).is_empty());
}

/// A cross-key error names where the key itself was set, not the other key's default.
#[test]
fn a_conflict_names_where_the_key_was_set() {
    let (_dir, path) = file("[server]\ngrpc_listen = \"127.0.0.1:8080\"\n");
    let (message, err) = load_err(sources(Some(&path), &[]));
    let (key, origin) = invalid_parts(&err);
    assert_eq!(key, "server.grpc_listen");
    assert!(
        matches!(origin, ConfigOrigin::File { line: Some(2), .. }),
        "{origin:?}: {message}"
    );
    assert!(
        message.contains("must differ from server.listen"),
        "{message}"
    );
    assert!(!message.contains("built-in default"), "{message}");
}

/// `public_url` goes into the public card with the binding paths appended: user info, a
/// query, a fragment or another scheme are refused, naming the key (nothing of the URL
/// echoed).
#[test]
fn a_public_url_with_credentials_a_query_or_a_fragment_is_refused() {
    for (url, says) in [
        (
            "https://user:pw-secret@agents.example.com/",
            "user name or password",
        ),
        ("https://user@agents.example.com/", "user name or password"),
        ("https://agents.example.com/?q=1", "query"),
        ("https://agents.example.com/a2a#f", "fragment"),
        ("ftp://agents.example.com/", "http or https"),
    ] {
        let (message, err) = load_err(sources(None, &[("A2A_GATEWAY_SERVER__PUBLIC_URL", url)]));
        assert_eq!(invalid_parts(&err).0, "server.public_url", "{url}");
        assert!(message.contains(says), "{url}: {message}");
        assert!(!message.contains("pw-secret"), "{message}");
    }
    let ok = Config::load(sources(
        None,
        &[(
            "A2A_GATEWAY_SERVER__PUBLIC_URL",
            "https://agents.example.com/a2a/",
        )],
    ));
    assert!(ok.is_ok());
}

#[test]
fn bindings_default_to_all_three_and_name_the_card_interfaces() {
    let config = Config::load(sources(None, &[])).unwrap();
    assert_eq!(config.server.bindings, Binding::ALL.to_vec());
    assert_eq!(config.server.grpc_address(), "127.0.0.1:8080");
    let env = [
        ("A2A_GATEWAY_SERVER__BINDINGS", r#"["grpc"]"#),
        ("A2A_GATEWAY_SERVER__GRPC_LISTEN", "0.0.0.0:50051"),
        (
            "A2A_GATEWAY_SERVER__PUBLIC_URL",
            "https://gw.example.com/a2a",
        ),
    ];
    let config = Config::load(sources(None, &env)).unwrap();
    assert!(config.server.serves(Binding::Grpc));
    assert!(!config.server.serves(Binding::Jsonrpc));
    assert_eq!(config.server.grpc_address(), "gw.example.com:50051");
    // Without public_url, the gRPC listener's own address (not listen's host).
    // An unspecified one takes the host the HTTP interfaces publish.
    for (listen, grpc_listen, published) in [
        ("127.0.0.1:8080", "[::1]:50051", "[::1]:50051"),
        ("127.0.0.1:8080", "0.0.0.0:50051", "127.0.0.1:50051"),
        ("192.168.1.10:8080", "0.0.0.0:50051", "192.168.1.10:50051"),
    ] {
        let own = Config::load(sources(
            None,
            &[
                ("A2A_GATEWAY_SERVER__LISTEN", listen),
                ("A2A_GATEWAY_SERVER__GRPC_LISTEN", grpc_listen),
            ],
        ))
        .unwrap();
        assert_eq!(
            own.server.grpc_address(),
            published,
            "{listen} {grpc_listen}"
        );
    }
    let cards = crate::app::interfaces(&config.server);
    assert_eq!(cards.len(), 1);
    assert_eq!(cards[0].protocol_binding, "GRPC");
    assert_eq!(cards[0].url, "gw.example.com:50051");
}

#[test]
fn bad_bindings_are_refused() {
    let (_dir, path) = file("[server]\nbindings = []\n");
    let (_, err) = load_err(sources(Some(&path), &[]));
    assert_eq!(invalid_parts(&err).0, "server.bindings");

    let (_dir, path) = file("[server]\nbindings = [\"soap\"]\n");
    let (message, _) = load_err(sources(Some(&path), &[]));
    assert!(message.contains("soap"), "{message}");

    let (_dir, path) =
        file("[server]\nbindings = [\"jsonrpc\"]\ngrpc_listen = \"127.0.0.1:50051\"\n");
    let (message, err) = load_err(sources(Some(&path), &[]));
    assert_eq!(invalid_parts(&err).0, "server.grpc_listen");
    assert!(message.contains("grpc"), "{message}");
}

#[test]
fn an_empty_environment_value_unsets_an_optional_key() {
    let (_dir, path) = file(&format!(
        "[server]\nlisten = \"127.0.0.1:9001\"\nsse_keepalive_secs = 5\n\n[upstream]\nagent_runtime_arn = \"{ARN}\"\n"
    ));
    let config = Config::load(sources(
        Some(&path),
        &[("A2A_GATEWAY_SERVER__SSE_KEEPALIVE_SECS", "")],
    ))
    .unwrap();
    // Back to the built-in default; the file's other keys stay.
    assert_eq!(config.server.sse_keepalive_secs, 15);
    assert_eq!(config.server.listen.to_string(), "127.0.0.1:9001");
    let config = Config::load(sources(
        Some(&path),
        &[("A2A_GATEWAY_UPSTREAM__AGENT_RUNTIME_ARN", "")],
    ))
    .unwrap();
    assert!(agentcore(&config).agent_runtime_arn.is_none());
    assert!(
        agentcore(&Config::load(sources(Some(&path), &[])).unwrap())
            .agent_runtime_arn
            .is_some()
    );
}

#[test]
fn type_errors_speak_of_numbers_and_strings_not_rust_types() {
    let (_dir, path) = file("[server]\nsse_keepalive_secs = \"often\"\n");
    let (message, _) = load_err(sources(Some(&path), &[]));
    assert!(
        message.contains("expected a whole number, found the string \"often\""),
        "{message}"
    );
    assert!(!message.contains("u64"), "{message}");
    // A socket address that is not one says what is expected.
    let (_dir, path) = file("[server]\nlisten = \"localhost:8080\"\n");
    let (message, err) = load_err(sources(Some(&path), &[]));
    assert_eq!(invalid_parts(&err).0, "server.listen");
    assert!(message.contains("an IP address and a port"), "{message}");
    let (_dir, path) = file("[server]\nsse_keepalive_secs = 1e3\n");
    let (message, _) = load_err(sources(Some(&path), &[]));
    assert!(message.contains("found the number 1000.0"), "{message}");
    // A fraction where a whole number is due says which kind of number.
    let (_dir, path) = file("[server]\nsse_keepalive_secs = 1.5\n");
    let (message, _) = load_err(sources(Some(&path), &[]));
    assert!(
        message.contains("expected a whole number, found the number 1.5"),
        "{message}"
    );
    let (_dir, path) = file("[agent]\nname = 42\n");
    let (message, _) = load_err(sources(Some(&path), &[]));
    assert!(
        message.contains("expected a string, found the number 42"),
        "{message}"
    );
    let (message, _) = load_err(sources(
        None,
        &[("A2A_GATEWAY_SERVER__SSE_KEEPALIVE_SECS", "soon")],
    ));
    assert!(message.contains("a whole number"), "{message}");
    assert!(!message.contains("u64"), "{message}");
}

#[test]
fn a_number_out_of_range_says_which_numbers_are_allowed() {
    let want =
        "the number -1 is out of range: expected a whole number from 0 to 9223372036854775807";
    let (_dir, path) = file("[server]\nmax_body_bytes = -1\n");
    let (message, _) = load_err(sources(Some(&path), &[]));
    assert!(message.contains(want), "{message}");
    assert!(message.contains("line 2"), "{message}");
    let (message, _) = load_err(sources(
        None,
        &[("A2A_GATEWAY_SERVER__MAX_BODY_BYTES", "-1")],
    ));
    assert!(message.contains(want), "{message}");
    assert!(!message.contains("u64"), "{message}");
    // Beyond what any integer holds: the same words, not serde's type names.
    let (message, _) = load_err(sources(
        None,
        &[("A2A_GATEWAY_SERVER__MAX_BODY_BYTES", "99999999999999999999")],
    ));
    assert!(
        message.contains(
            "the number 99999999999999999999 is out of range: expected a whole number from 0 to 9223372036854775807"
        ),
        "{message}"
    );
    assert!(!message.contains("u128"), "{message}");
}

#[test]
fn forward_needs_the_jwt_scheme_and_identity_headers_are_checked() {
    let env = [
        (
            "A2A_GATEWAY_UPSTREAM__URL",
            "http://127.0.0.1:9/invocations",
        ),
        ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "forward"),
    ];
    let (msg, err) = load_err(sources(None, &env));
    assert_eq!(invalid_parts(&err).0, "upstream.auth.kind", "{msg}");
    assert!(msg.contains("jwt"), "{msg}");
    for (key, value, why) in [
        (
            "CALLER_HEADER",
            "Bad Header",
            "not a valid HTTP header name",
        ),
        (
            "CALLER_HEADER",
            "Authorization",
            "set by the gateway itself",
        ),
        ("TENANT_HEADER", "traceparent", "set by the gateway itself"),
        (
            "TENANT_HEADER",
            "x-amzn-bedrock-agentcore-runtime-custom-CALLER",
            "must differ",
        ),
    ] {
        let var = format!("A2A_GATEWAY_UPSTREAM__{key}");
        let (msg, err) = load_err(sources(None, &[(var.as_str(), value)]));
        assert_eq!(
            invalid_parts(&err).0,
            format!("upstream.{}", key.to_lowercase()),
            "{msg}"
        );
        assert!(msg.contains(why), "{msg}");
    }
    let (_dir, path) = file("[upstream]\ncaller_header = \"\"\ntenant_header = \"\"\n");
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    assert_eq!(agentcore(&config).caller_header, "");
    assert_eq!(agentcore(&config).tenant_header, "");
}

#[test]
fn upstream_kind_defaults_to_agentcore_and_an_unknown_kind_is_named() {
    // Absent, in the file, or from the environment: the one kind today.
    let (_dir, path) = file("[upstream]\nmax_retries = 2\n");
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    assert_eq!(config.upstream.kind(), UpstreamKind::AgentCore);
    assert_eq!(agentcore(&config).max_retries, 2);
    let (_dir, path) = file("[upstream]\nmax_retries = 2\nkind = \"agentcore\"\n");
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    assert_eq!(agentcore(&config).max_retries, 2);
    let env = [("A2A_GATEWAY_UPSTREAM__KIND", "agentcore")];
    let config = Config::load(sources(None, &env)).unwrap();
    assert_eq!(config.upstream.kind(), UpstreamKind::AgentCore);
    // The effective config names its kind, and reads back.
    let toml = config.redacted_toml();
    assert!(toml.contains("kind = \"agentcore\""), "{toml}");

    let (_dir, path) = file("[upstream]\nkind = \"mcp\"\n");
    let err = Config::load(sources(Some(&path), &[])).unwrap_err();
    let msg = err.to_string();
    assert_eq!(invalid_parts(&err).0, "upstream.kind", "{msg}");
    assert!(msg.contains("agentcore"), "{msg}");
    // A key after `kind` still names itself and its line.
    let (_dir, path) = file("[upstream]\nkind = \"agentcore\"\nmax_retries = \"3\"\n");
    let err = Config::load(sources(Some(&path), &[])).unwrap_err();
    assert_eq!(invalid_parts(&err).0, "upstream.max_retries");
    assert!(err.to_string().contains("line 3"), "{err}");
}

#[test]
fn upstream_kind_a2a_reads_its_keys() {
    let (_dir, path) = file(
        "[upstream]\nurl = \"http://127.0.0.1:9000/agent\"\nprotocol_version = \"0.3\"\nmax_retries = 1\nkind = \"a2a\"\n[upstream.auth]\nkind = \"bearer\"\ntoken = \"very-secret-value\"\n",
    );
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    assert_eq!(config.upstream.kind(), UpstreamKind::A2a);
    let UpstreamConfig::A2a(c) = &config.upstream else {
        panic!("{:?}", config.upstream)
    };
    assert_eq!(c.protocol_version, crate::config::A2aProtocolVersion::V0_3);
    assert_eq!(c.connection.max_retries, 1);
    assert_eq!(
        c.base_url().unwrap().as_str(),
        "http://127.0.0.1:9000/agent/"
    );
    assert_eq!(
        c.card_url().unwrap().as_str(),
        "http://127.0.0.1:9000/agent/.well-known/agent-card.json"
    );
    assert!(!c.is_agentcore());
    let toml = config.redacted_toml();
    assert!(toml.contains("kind = \"a2a\""), "{toml}");
    assert!(toml.contains("protocol_version = \"0.3\""), "{toml}");
    assert!(!toml.contains("very-secret"), "{toml}");
    // An AgentCore A2A runtime: JSON-RPC below `invocations/`, its card below it.
    let env = [
        ("A2A_GATEWAY_UPSTREAM__KIND", "a2a"),
        (
            "A2A_GATEWAY_UPSTREAM__AGENT_RUNTIME_ARN",
            "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-1",
        ),
    ];
    let config = Config::load(sources(None, &env)).unwrap();
    let UpstreamConfig::A2a(c) = &config.upstream else {
        panic!("{:?}", config.upstream)
    };
    assert!(c.is_agentcore());
    let base = c.base_url().unwrap().to_string();
    assert!(base.ends_with("/invocations/?qualifier=DEFAULT"), "{base}");
    let card = c.card_url().unwrap().to_string();
    assert!(
        card.ends_with("/invocations/.well-known/agent-card.json?qualifier=DEFAULT"),
        "{card}"
    );
    assert!(
        c.stop_session_url()
            .unwrap()
            .as_str()
            .contains("/stopruntimesession")
    );
    // `protocol_version` belongs to the a2a kind; a bad value names its key.
    let (_dir, path) = file("[upstream]\nprotocol_version = \"1.0\"\n");
    let msg = Config::load(sources(Some(&path), &[]))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("protocol_version"), "{msg}");
    let (_dir, path) = file("[upstream]\nkind = \"a2a\"\nprotocol_version = \"2.0\"\n");
    let err = Config::load(sources(Some(&path), &[])).unwrap_err();
    assert_eq!(invalid_parts(&err).0, "upstream.protocol_version", "{err}");
    // The binding: auto by default, JSONRPC or HTTP+JSON.
    let env = [
        ("A2A_GATEWAY_UPSTREAM__KIND", "a2a"),
        ("A2A_GATEWAY_UPSTREAM__URL", "http://127.0.0.1:9/"),
        ("A2A_GATEWAY_UPSTREAM__PROTOCOL_BINDING", "HTTP+JSON"),
    ];
    let config = Config::load(sources(None, &env)).unwrap();
    let UpstreamConfig::A2a(c) = &config.upstream else {
        panic!("{:?}", config.upstream)
    };
    assert_eq!(
        c.protocol_binding,
        crate::config::A2aProtocolBinding::HttpJson
    );
    let (_dir, path) = file("[upstream]\nkind = \"a2a\"\nprotocol_binding = \"grpc\"\n");
    let err = Config::load(sources(Some(&path), &[])).unwrap_err();
    assert_eq!(invalid_parts(&err).0, "upstream.protocol_binding", "{err}");
    let (_dir, path) = file("[upstream]\nprotocol_binding = \"JSONRPC\"\n");
    let msg = Config::load(sources(Some(&path), &[]))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("protocol_binding"), "{msg}");
}

/// `[upstream]` of kind `a2a`: an unknown key lists that kind's keys; a key of
/// `agentcore` only is refused; neither `url` nor `agent_runtime_arn` names the key and
/// the line of `kind`.
#[test]
fn upstream_kind_a2a_messages_name_its_own_keys() {
    let (_dir, path) = file("[upstream]\nkind = \"a2a\"\nurl = \"http://h/\"\nfoo = 1\n");
    let (message, err) = load_err(sources(Some(&path), &[]));
    assert_eq!(invalid_parts(&err).0, "upstream.foo", "{message}");
    assert!(message.contains("line 4"), "{message}");
    for key in ["kind", "protocol_version", "protocol_binding", "url"] {
        assert!(message.contains(key), "{message}");
    }
    assert!(!message.contains("include_message"), "{message}");
    let (_dir, path) = file("[upstream]\nfoo = 1\nurl = \"http://h/invocations\"\n");
    let (message, _) = load_err(sources(Some(&path), &[]));
    assert!(message.contains("include_message"), "{message}");
    assert!(!message.contains("protocol_version"), "{message}");
    for key in ["include_message = true", "user_id = \"caller\""] {
        let (_dir, path) = file(&format!(
            "[upstream]\nkind = \"a2a\"\nurl = \"http://h/\"\n{key}\n"
        ));
        let (message, _) = load_err(sources(Some(&path), &[]));
        let name = key.split(' ').next().unwrap();
        assert!(
            message.contains(&format!(
                "upstream.{name} applies to kind = \"agentcore\" only"
            )),
            "{message}"
        );
    }
    let (_dir, path) = file("[upstream]\nkind = \"a2a\"\n");
    let (message, err) = load_err(sources(Some(&path), &[]));
    let (key, origin) = invalid_parts(&err);
    assert_eq!(key, "upstream.url", "{message}");
    assert_eq!(
        origin,
        &ConfigOrigin::File {
            path: path.clone(),
            line: Some(2)
        }
    );
    assert!(message.contains("base URL"), "{message}");
    assert!(!message.contains("invocation URL"), "{message}");
}

/// `kind = "a2a"` with an ARN and a host-only https `url` (a VPC endpoint): the
/// runtime's path is derived below that host; a `url` with a path, or a plain-http one
/// (the container run locally), is taken as it is.
#[test]
fn upstream_kind_a2a_host_only_url_beside_an_arn_gets_the_runtimes_path() {
    let arn = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-1";
    let load = |url: &str| {
        let env = [
            ("A2A_GATEWAY_UPSTREAM__KIND", "a2a"),
            ("A2A_GATEWAY_UPSTREAM__AGENT_RUNTIME_ARN", arn),
            ("A2A_GATEWAY_UPSTREAM__URL", url),
        ];
        let config = Config::load(sources(None, &env)).unwrap();
        let UpstreamConfig::A2a(c) = config.upstream else {
            panic!("{:?}", config.upstream)
        };
        c
    };
    let encoded = "arn%3Aaws%3Abedrock-agentcore%3Aus-west-2%3A123456789012%3Aruntime%2Fagent-1";
    let c = load("https://vpce-1.example.com");
    assert_eq!(
        c.base_url().unwrap().as_str(),
        format!("https://vpce-1.example.com/runtimes/{encoded}/invocations/?qualifier=DEFAULT")
    );
    assert_eq!(
        c.card_url().unwrap().as_str(),
        format!(
            "https://vpce-1.example.com/runtimes/{encoded}/invocations/.well-known/agent-card.json?qualifier=DEFAULT"
        )
    );
    assert_eq!(
        c.stop_session_url().unwrap().as_str(),
        format!(
            "https://vpce-1.example.com/runtimes/{encoded}/stopruntimesession?qualifier=DEFAULT"
        )
    );
    let c = load("http://127.0.0.1:9000/agent");
    assert_eq!(
        c.base_url().unwrap().as_str(),
        "http://127.0.0.1:9000/agent/"
    );
    // Plain http, host-only: the container run locally, serving A2A at `/`.
    let c = load("http://127.0.0.1:9000");
    assert_eq!(c.base_url().unwrap().as_str(), "http://127.0.0.1:9000/");
}

/// `[upstream]` of kind `a2a`: the resume bounds and the card's refresh floor are read
/// (defaults 300, 30, 30), checked against their ranges (`submitted_stall_secs` at most
/// `resume_secs`), and refused under `kind = "agentcore"`.
#[test]
fn upstream_kind_a2a_resume_keys() {
    let (_dir, path) = file("[upstream]\nkind = \"a2a\"\nurl = \"http://h/\"\n");
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    let UpstreamConfig::A2a(c) = &config.upstream else {
        panic!("{:?}", config.upstream)
    };
    assert_eq!(
        (
            c.resume_secs,
            c.submitted_stall_secs,
            c.card_min_refresh_secs
        ),
        (300, 30, 30)
    );
    let env = [
        ("A2A_GATEWAY_UPSTREAM__RESUME_SECS", "60"),
        ("A2A_GATEWAY_UPSTREAM__SUBMITTED_STALL_SECS", "5"),
        ("A2A_GATEWAY_UPSTREAM__CARD_MIN_REFRESH_SECS", "2"),
    ];
    let config = Config::load(sources(Some(&path), &env)).unwrap();
    let UpstreamConfig::A2a(c) = &config.upstream else {
        panic!("{:?}", config.upstream)
    };
    assert_eq!(
        (
            c.resume_secs,
            c.submitted_stall_secs,
            c.card_min_refresh_secs
        ),
        (60, 5, 2)
    );
    assert!(config.redacted_toml().contains("resume_secs = 60"));
    for (key, bad, why) in [
        ("resume_secs", "0", "1 to 86400"),
        ("resume_secs", "86401", "1 to 86400"),
        (
            "submitted_stall_secs",
            "301",
            "at most upstream.resume_secs",
        ),
        ("submitted_stall_secs", "0", "1 to 300"),
        ("card_min_refresh_secs", "3601", "1 to 3600"),
    ] {
        let (_dir, path) = file(&format!(
            "[upstream]\nkind = \"a2a\"\nurl = \"http://h/\"\n{key} = {bad}\n"
        ));
        let (message, err) = load_err(sources(Some(&path), &[]));
        assert_eq!(
            invalid_parts(&err).0,
            format!("upstream.{key}"),
            "{message}"
        );
        assert!(message.contains(why), "{message}");
    }
    for key in [
        "resume_secs",
        "submitted_stall_secs",
        "card_min_refresh_secs",
    ] {
        let (_dir, path) = file(&format!(
            "[upstream]\nurl = \"http://h/invocations\"\n{key} = 5\n"
        ));
        let (message, _) = load_err(sources(Some(&path), &[]));
        assert!(
            message.contains(&format!("upstream.{key} applies to kind = \"a2a\" only")),
            "{message}"
        );
    }
}
