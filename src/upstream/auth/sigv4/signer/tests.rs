//! The signer against the AWS SigV4 test-suite vectors that apply (a request with no
//! headers but `host` and `x-amz-date`, a query to sort, a session token), and against
//! an `InvokeAgentRuntime` request botocore signed (the path encoded twice, the body
//! hashed, the runtime headers signed, tracing headers not). Every signing here is done
//! twice, by [`Signer`] and by the crate's whole `sign` ([`sign_with_crate`]), and the
//! two must agree byte for byte.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;

use super::{SERVICE, Scope, Signer, sign_with_crate};
use crate::upstream::auth::TokenError;

const KEY: &str = "AKIDEXAMPLE";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const SUITE_TOKEN: &str = "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==";
/// 2015-08-30T12:36:00Z, the suite's time.
const SUITE_TIME: u64 = 1_440_938_160;
/// 2026-01-02T03:04:05Z.
const AGENTCORE_TIME: u64 = 1_767_323_045;

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn creds(token: Option<&str>) -> Credentials {
    Credentials::new(KEY, SECRET, token.map(str::to_owned), None, "test")
}

/// Signs `r` with a new [`Signer`] and a copy of it with [`sign_with_crate`]; both must
/// agree (same outcome, same signature headers).
fn sign(
    r: &mut reqwest::Request,
    c: &Credentials,
    scope: Scope<'_>,
    time: SystemTime,
) -> Result<(), TokenError> {
    sign_with(&Signer::new(), r, c, scope, time)
}

/// As [`sign`], with `signer` (and its cached key).
fn sign_with(
    signer: &Signer,
    r: &mut reqwest::Request,
    c: &Credentials,
    scope: Scope<'_>,
    time: SystemTime,
) -> Result<(), TokenError> {
    let reference = r.try_clone();
    let out = signer.sign(r, c, scope, time);
    if let Some(mut reference) = reference {
        let expected = sign_with_crate(&mut reference, c, scope, time);
        assert_eq!(out.is_ok(), expected.is_ok(), "{out:?} / {expected:?}");
        for name in ["authorization", "x-amz-date", "x-amz-security-token"] {
            assert_eq!(
                r.headers().get(name),
                reference.headers().get(name),
                "{name}"
            );
        }
    }
    out
}

fn header<'a>(r: &'a reqwest::Request, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .unwrap_or_else(|| panic!("{name} is set"))
        .to_str()
        .unwrap()
}

fn suite(method: reqwest::Method, url: &str, token: Option<&str>) -> reqwest::Request {
    let mut r = reqwest::Request::new(method, url.parse().unwrap());
    let scope = Scope {
        region: "us-east-1",
        service: "service",
    };
    sign(&mut r, &creds(token), scope, at(SUITE_TIME)).unwrap();
    r
}

#[test]
fn aws_test_suite_vectors() {
    for (name, method, url, token, signed, signature) in [
        (
            "get-vanilla",
            reqwest::Method::GET,
            "https://example.amazonaws.com/",
            None,
            "host;x-amz-date",
            "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        ),
        (
            "post-vanilla",
            reqwest::Method::POST,
            "https://example.amazonaws.com/",
            None,
            "host;x-amz-date",
            "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
        ),
        (
            "get-vanilla-query-order-key-case",
            reqwest::Method::GET,
            "https://example.amazonaws.com/?Param2=value2&Param1=value1",
            None,
            "host;x-amz-date",
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
        ),
        (
            "post-sts-header-before",
            reqwest::Method::POST,
            "https://example.amazonaws.com/",
            Some(SUITE_TOKEN),
            "host;x-amz-date;x-amz-security-token",
            "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead",
        ),
    ] {
        let r = suite(method, url, token);
        assert_eq!(
            header(&r, "authorization"),
            format!(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
                 SignedHeaders={signed}, Signature={signature}"
            ),
            "{name}"
        );
        assert_eq!(header(&r, "x-amz-date"), "20150830T123600Z", "{name}");
        assert_eq!(
            r.headers()
                .get("x-amz-security-token")
                .map(|v| v.to_str().unwrap()),
            token,
            "{name}"
        );
    }
}

/// The `InvokeAgentRuntime` request of `tests/python/test_aws_doubles.py`, whose
/// signature botocore computed (`AGENTCORE_VECTOR`).
fn agentcore_request() -> reqwest::Request {
    let url = "https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fmy_agent-AbC123/invocations?qualifier=DEFAULT";
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header(
            "x-amzn-bedrock-agentcore-runtime-session-id",
            "a2a-0123456789abcdef0123456789abcdef",
        )
        .header("x-amzn-bedrock-agentcore-runtime-user-id", "alice")
        .body(&br#"{"prompt":"hello"}"#[..])
        .build()
        .unwrap()
}

const AGENTCORE_AUTH: &str = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/bedrock-agentcore/aws4_request, \
     SignedHeaders=content-type;host;x-amz-date;x-amzn-bedrock-agentcore-runtime-session-id;x-amzn-bedrock-agentcore-runtime-user-id, \
     Signature=fe009da986373d2b7d5ee0bb71f5f3d10e0dc4657a711d67cc7c143d2d6499fb";

fn agentcore_scope() -> Scope<'static> {
    Scope {
        region: "us-east-1",
        service: SERVICE,
    }
}

#[test]
fn an_invocation_is_signed_as_botocore_signs_it() {
    let mut r = agentcore_request();
    sign(&mut r, &creds(None), agentcore_scope(), at(AGENTCORE_TIME)).unwrap();
    assert_eq!(header(&r, "authorization"), AGENTCORE_AUTH);
    assert!(
        r.headers().get("x-amz-content-sha256").is_none(),
        "the body hash is in the canonical request only"
    );
}

#[test]
fn tracing_and_transport_headers_are_not_signed() {
    let mut r = agentcore_request();
    for (name, value) in [
        (
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ),
        ("tracestate", "a=b"),
        ("baggage", "k=v"),
        ("user-agent", "a2a-gateway/0"),
        ("accept", "text/event-stream, application/json"),
    ] {
        r.headers_mut().insert(name, value.parse().unwrap());
    }
    sign(&mut r, &creds(None), agentcore_scope(), at(AGENTCORE_TIME)).unwrap();
    assert_eq!(header(&r, "authorization"), AGENTCORE_AUTH);
}

#[test]
fn a_changed_body_or_runtime_header_changes_the_signature() {
    let mut r = agentcore_request();
    *r.body_mut() = Some(reqwest::Body::from(&br#"{"prompt":"hellO"}"#[..]));
    sign(&mut r, &creds(None), agentcore_scope(), at(AGENTCORE_TIME)).unwrap();
    assert_ne!(header(&r, "authorization"), AGENTCORE_AUTH);

    let mut r = agentcore_request();
    r.headers_mut().insert(
        "x-amzn-bedrock-agentcore-runtime-user-id",
        "bob".parse().unwrap(),
    );
    sign(&mut r, &creds(None), agentcore_scope(), at(AGENTCORE_TIME)).unwrap();
    assert_ne!(header(&r, "authorization"), AGENTCORE_AUTH);
}

#[test]
fn signing_again_replaces_the_signature_and_secrets_stay_out_of_debug() {
    let mut r = agentcore_request();
    sign(
        &mut r,
        &creds(Some("the-session-token")),
        agentcore_scope(),
        at(AGENTCORE_TIME - 60),
    )
    .unwrap();
    sign(
        &mut r,
        &creds(Some("the-session-token")),
        agentcore_scope(),
        at(AGENTCORE_TIME),
    )
    .unwrap();
    assert_eq!(r.headers().get_all("authorization").iter().count(), 1);
    assert_eq!(r.headers().get_all("x-amz-date").iter().count(), 1);
    assert_eq!(header(&r, "x-amz-date"), "20260102T030405Z");
    let signed = header(&r, "authorization");
    assert!(signed.contains("x-amz-security-token"), "{signed}");
    let debug = format!("{:?}", r.headers());
    assert!(!debug.contains("the-session-token"), "{debug}");
    assert!(!debug.contains("Signature="), "{debug}");
}

#[test]
fn a_streamed_body_is_refused_not_signed_unsigned() {
    let mut r = agentcore_request();
    let stream = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"{}"))]);
    *r.body_mut() = Some(reqwest::Body::wrap_stream(stream));
    let e = sign(&mut r, &creds(None), agentcore_scope(), at(AGENTCORE_TIME)).unwrap_err();
    assert!(e.reason().contains("stream"), "{e}");
    assert!(r.headers().get("authorization").is_none());
}

#[test]
fn the_daily_key_is_derived_again_for_a_new_day_secret_or_region() {
    let signer = Signer::new();
    let other = Credentials::new(KEY, "another/secret", None, None, "test");
    let west = Scope {
        region: "us-west-2",
        service: SERVICE,
    };
    for (c, scope, time) in [
        (creds(None), agentcore_scope(), AGENTCORE_TIME),
        (creds(None), agentcore_scope(), AGENTCORE_TIME + 60),
        (creds(None), agentcore_scope(), AGENTCORE_TIME + 86_400),
        (other.clone(), agentcore_scope(), AGENTCORE_TIME + 86_400),
        (other, west, AGENTCORE_TIME + 86_400),
        (creds(None), agentcore_scope(), AGENTCORE_TIME),
    ] {
        let mut r = agentcore_request();
        sign_with(&signer, &mut r, &c, scope, at(time)).unwrap();
    }
    let mut r = agentcore_request();
    sign_with(
        &signer,
        &mut r,
        &creds(None),
        agentcore_scope(),
        at(AGENTCORE_TIME),
    )
    .unwrap();
    assert_eq!(header(&r, "authorization"), AGENTCORE_AUTH);
}
