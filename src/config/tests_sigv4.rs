//! Tests of the `sigv4` upstream auth keys and `upstream.user_id`: what loads, and the
//! load-time refusals with the key they name.

use super::tests::{ARN, agentcore, file, invalid_parts, load_err, sources};
use super::*;

const API_KEY_AUTH: &str = "[server.auth]\nkind = \"api_key\"\n[[server.auth.keys]]\ncaller = \"team-a\"\nsha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n";

#[test]
fn sigv4_takes_the_region_from_the_arn_and_defaults_its_refresh_margin() {
    let (_dir, path) = file(&format!(
        "[upstream]\nagent_runtime_arn = \"{ARN}\"\n[upstream.auth]\nkind = \"sigv4\"\n"
    ));
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    let c = agentcore(&config);
    assert_eq!(c.auth.kind, AuthKind::SigV4);
    assert_eq!(c.signing_region(), Some("us-east-1"));
    assert_eq!(c.auth.credentials_refresh_secs, 300);
    assert_eq!(c.user_id, UserId::None);

    // A URL override keeps the ARN's region; an explicit region is used without an ARN.
    let env = [
        (
            "A2A_GATEWAY_UPSTREAM__URL",
            "http://127.0.0.1:9/invocations",
        ),
        ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "sigv4"),
        ("A2A_GATEWAY_UPSTREAM__AUTH__REGION", "eu-central-1"),
        (
            "A2A_GATEWAY_UPSTREAM__AUTH__ASSUME_ROLE_ARN",
            "arn:aws:iam::123456789012:role/a2a-invoker",
        ),
        ("A2A_GATEWAY_UPSTREAM__AUTH__EXTERNAL_ID", "ext-42"),
        ("A2A_GATEWAY_UPSTREAM__AUTH__CREDENTIALS_REFRESH_SECS", "60"),
    ];
    let config = Config::load(sources(None, &env)).unwrap();
    let c = agentcore(&config);
    assert_eq!(c.signing_region(), Some("eu-central-1"));
    assert_eq!(c.auth.credentials_refresh().as_secs(), 60);
    assert_eq!(c.auth.external_id.as_deref(), Some("ext-42"));
}

#[test]
fn sigv4_without_arn_needs_a_region_and_one_that_agrees_with_the_arn() {
    let (message, err) = load_err(sources(
        None,
        &[
            (
                "A2A_GATEWAY_UPSTREAM__URL",
                "http://127.0.0.1:9/invocations",
            ),
            ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "sigv4"),
        ],
    ));
    assert_eq!(invalid_parts(&err).0, "upstream.auth.region");
    assert!(message.contains("agent_runtime_arn"), "{message}");

    let (message, err) = load_err(sources(
        None,
        &[
            ("A2A_GATEWAY_UPSTREAM__AGENT_RUNTIME_ARN", ARN),
            ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "sigv4"),
            ("A2A_GATEWAY_UPSTREAM__AUTH__REGION", "eu-west-1"),
        ],
    ));
    assert_eq!(invalid_parts(&err).0, "upstream.auth.region");
    assert!(message.contains("us-east-1"), "{message}");

    let (_, err) = load_err(sources(
        None,
        &[
            ("A2A_GATEWAY_UPSTREAM__AGENT_RUNTIME_ARN", ARN),
            ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "sigv4"),
            ("A2A_GATEWAY_UPSTREAM__AUTH__REGION", "US EAST"),
        ],
    ));
    assert_eq!(invalid_parts(&err).0, "upstream.auth.region");
}

#[test]
fn sigv4_keys_are_checked_and_refused_for_other_kinds() {
    let arn = ("A2A_GATEWAY_UPSTREAM__AGENT_RUNTIME_ARN", ARN);
    for (env, key, says) in [
        (
            vec![("A2A_GATEWAY_UPSTREAM__AUTH__REGION", "us-east-1")],
            "upstream.auth.region",
            "\"sigv4\"",
        ),
        (
            vec![
                ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "sigv4"),
                ("A2A_GATEWAY_UPSTREAM__AUTH__EXTERNAL_ID", "ext-42"),
            ],
            "upstream.auth.external_id",
            "assume_role_arn",
        ),
        (
            vec![
                ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "sigv4"),
                (
                    "A2A_GATEWAY_UPSTREAM__AUTH__ASSUME_ROLE_ARN",
                    "arn:aws:s3:::bucket",
                ),
            ],
            "upstream.auth.assume_role_arn",
            "IAM role ARN",
        ),
        (
            vec![
                ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "sigv4"),
                (
                    "A2A_GATEWAY_UPSTREAM__AUTH__ASSUME_ROLE_ARN",
                    "arn:aws:iam::123456789012:role/r",
                ),
                ("A2A_GATEWAY_UPSTREAM__AUTH__SESSION_NAME", "a b"),
            ],
            "upstream.auth.session_name",
            "2-64",
        ),
        (
            vec![
                ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "sigv4"),
                ("A2A_GATEWAY_UPSTREAM__AUTH__TOKEN", "t"),
            ],
            "upstream.auth.token",
            "\"bearer\"",
        ),
        (
            vec![
                ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "sigv4"),
                ("A2A_GATEWAY_UPSTREAM__AUTH__CREDENTIALS_REFRESH_SECS", "0"),
            ],
            "upstream.auth.credentials_refresh_secs",
            "greater than 0",
        ),
    ] {
        let mut env = env;
        env.push(arn);
        let (message, err) = load_err(sources(None, &env));
        assert_eq!(invalid_parts(&err).0, key, "{message}");
        assert!(message.contains(says), "{message}");
    }
}

#[test]
fn user_id_caller_needs_sigv4_and_inbound_auth() {
    // With a bearer kind: refused, naming why.
    let (_dir, path) = file(&format!(
        "{API_KEY_AUTH}[upstream]\nagent_runtime_arn = \"{ARN}\"\nuser_id = \"caller\"\n[upstream.auth]\nkind = \"bearer\"\ntoken = \"t\"\n"
    ));
    let (message, err) = load_err(sources(Some(&path), &[]));
    assert_eq!(invalid_parts(&err).0, "upstream.user_id");
    assert!(
        message.contains("sigv4") && message.contains("InvokeAgentRuntimeForUser"),
        "{message}"
    );

    // Without inbound auth: refused (every caller would be the same anonymous user).
    let (_dir, path) = file(&format!(
        "[upstream]\nagent_runtime_arn = \"{ARN}\"\nuser_id = \"caller\"\n[upstream.auth]\nkind = \"sigv4\"\n"
    ));
    let (message, err) = load_err(sources(Some(&path), &[]));
    assert_eq!(invalid_parts(&err).0, "upstream.user_id");
    assert!(message.contains("[server.auth]"), "{message}");

    // Both: loads.
    let (_dir, path) = file(&format!(
        "{API_KEY_AUTH}[upstream]\nagent_runtime_arn = \"{ARN}\"\nuser_id = \"caller\"\n[upstream.auth]\nkind = \"sigv4\"\n"
    ));
    let config = Config::load(sources(Some(&path), &[])).unwrap();
    assert_eq!(agentcore(&config).user_id, UserId::Caller);

    // The user-id header is the gateway's own: not a configurable identity header.
    let (_, err) = load_err(sources(
        None,
        &[(
            "A2A_GATEWAY_UPSTREAM__CALLER_HEADER",
            "X-Amzn-Bedrock-AgentCore-Runtime-User-Id",
        )],
    ));
    assert_eq!(invalid_parts(&err).0, "upstream.caller_header");
}
