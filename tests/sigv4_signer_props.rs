//! The SigV4 signer's fast path (our canonical request, the crate's key derivation and
//! HMAC, the daily key cached) against `aws_sigv4::http_request::sign` whole, for random
//! requests: paths with odd characters, dot and empty segments and percent-encoded
//! ARNs; queries to decode, encode and sort; signed, unsigned and repeated headers with
//! runs of spaces; bodies; session tokens; times from 1970 to 2100; regions and services.
//! The two must produce byte-identical `Authorization`, `X-Amz-Date` and
//! `X-Amz-Security-Token` headers, or both refuse the request. One signer serves every
//! case, so its cached key is checked as secrets, dates and scopes change.
//! `bench/properties.sh` runs them longer.

use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use a2a_gateway::upstream::auth::sigv4::canonical;
use a2a_gateway::upstream::auth::sigv4::signer::{Scope, Signer, sign_with_crate};
use aws_credential_types::Credentials;
use proptest::prelude::*;

/// Shared by every case: its daily-key cache sees all of them.
static SIGNER: LazyLock<Signer> = LazyLock::new(Signer::new);

/// Multiplies every property's case count: `A2A_GATEWAY_PROPTEST_SCALE` (default 1), so
/// `bench/properties.sh` can run them far longer.
fn scaled(cases: u32) -> u32 {
    std::env::var("A2A_GATEWAY_PROPTEST_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(1)
        .saturating_mul(cases)
}

const ARN: &str =
    "arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fmy_agent-AbC123";

/// A path segment of the gateway's kind: RFC 3986 characters, `%`-escapes, dots.
fn plain_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9._~%:@!$&'()*+,;=-]{0,8}",
        Just(ARN.to_owned()),
        Just("invocations".to_owned()),
        Just(".".to_owned()),
        Just("..".to_owned()),
        Just(String::new()),
    ]
}

/// Any path segment: also spaces, brackets, quotes, `|`, `^`, non-ASCII.
fn any_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        plain_segment(),
        "[a-zA-Z0-9._~%:@!$&'()*+,;= \\[\\]{}|^`\"<>é€-]{0,8}",
    ]
}

/// A query (without `?`): `name=value`, `name` alone, empty pairs, `+`, escapes, and
/// names from a small set so that repeated names with different values are common
/// (sorted by value too).
fn query(segment: &'static str) -> impl Strategy<Value = Option<String>> {
    let pair = prop_oneof![
        (segment, segment).prop_map(|(k, v)| format!("{k}={v}")),
        ("[ab]", "[a-c%+]{0,2}").prop_map(|(k, v)| format!("{k}={v}")),
        segment.prop_map(|k| k.to_owned()),
        Just("qualifier=DEFAULT".to_owned()),
        Just(String::new()),
    ];
    proptest::option::of(prop::collection::vec(pair, 0..5).prop_map(|p| p.join("&")))
}

/// Request headers, signed and not, some repeated.
fn headers() -> impl Strategy<Value = Vec<(&'static str, Vec<u8>)>> {
    let name = prop_oneof![
        Just("content-type"),
        Just("x-amzn-bedrock-agentcore-runtime-session-id"),
        Just("x-amzn-bedrock-agentcore-runtime-user-id"),
        Just("x-amzn-bedrock-agentcore-runtime-custom-tenant"),
        Just("x-amz-target"),
        Just("x-amz-meta-a"),
        Just("x-amz-date"),
        Just("x-amz-security-token"),
        Just("authorization"),
        Just("traceparent"),
        Just("user-agent"),
        Just("accept"),
        Just("x-amzn-trace-id"),
    ];
    let value = prop_oneof![
        8 => "[ -~\t]{0,24}".prop_map(String::into_bytes),
        2 => "( {0,3}[a-z]{0,4}){0,4} {0,3}".prop_map(String::into_bytes),
        1 => prop::collection::vec(any::<u8>(), 0..8)
            .prop_filter("a header value", |v| http::HeaderValue::from_bytes(v).is_ok()),
    ];
    prop::collection::vec((name, value), 0..8)
}

/// What the signer is given besides the request.
#[derive(Debug, Clone)]
struct Signing {
    credentials: Credentials,
    region: String,
    service: String,
    time: SystemTime,
}

fn signing() -> impl Strategy<Value = Signing> {
    (
        prop_oneof![Just("AKIDEXAMPLE".to_owned()), "[A-Z0-9]{4,20}"],
        prop_oneof![
            Just("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".to_owned()),
            "[A-Za-z0-9+/]{1,40}",
        ],
        proptest::option::of("[A-Za-z0-9+/=]{1,300}"),
        prop_oneof![Just("us-east-1".to_owned()), "[a-z0-9-]{1,14}"],
        prop_oneof![Just("bedrock-agentcore".to_owned()), "[a-z0-9-]{1,14}"],
        prop_oneof![
            0u64..4_102_444_800,
            Just(1_767_323_045u64),
            Just(1_767_311_999u64),
        ],
        0u32..1_000_000_000,
    )
        .prop_map(
            |(key, secret, token, region, service, secs, nanos)| Signing {
                credentials: Credentials::new(key, secret, token, None, "props"),
                region,
                service,
                time: UNIX_EPOCH + Duration::new(secs, nanos),
            },
        )
}

/// A request from its parts, or `None` when they make no URL.
fn request(
    method: &str,
    authority: &str,
    segments: &[String],
    query: Option<&str>,
    headers: &[(&'static str, Vec<u8>)],
    body: Option<&[u8]>,
) -> Option<reqwest::Request> {
    let mut url = format!("{authority}/{}", segments.join("/"));
    if let Some(q) = query {
        url.push('?');
        url.push_str(q);
    }
    let url = url::Url::parse(&url).ok()?;
    let mut r = reqwest::Request::new(method.parse().unwrap(), url);
    for (name, value) in headers {
        r.headers_mut()
            .append(*name, http::HeaderValue::from_bytes(value).unwrap());
    }
    if let Some(body) = body {
        *r.body_mut() = Some(reqwest::Body::from(body.to_vec()));
    }
    Some(r)
}

/// Signs `r` both ways and compares.
fn agree(r: reqwest::Request, s: &Signing) -> Result<(), TestCaseError> {
    let scope = Scope {
        region: &s.region,
        service: &s.service,
    };
    let mut ours = r.try_clone().expect("a bytes body");
    let mut reference = r;
    let got = SIGNER.sign(&mut ours, &s.credentials, scope, s.time);
    let expected = sign_with_crate(&mut reference, &s.credentials, scope, s.time);
    prop_assert_eq!(
        got.is_ok(),
        expected.is_ok(),
        "ours {:?}, the crate's {:?}, url {}",
        got,
        expected,
        reference.url()
    );
    for name in ["authorization", "x-amz-date", "x-amz-security-token"] {
        prop_assert_eq!(
            ours.headers().get(name),
            reference.headers().get(name),
            "{} of {}",
            name,
            reference.url()
        );
    }
    Ok(())
}

fn method() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("POST"), Just("GET"), Just("PUT"), Just("DELETE")]
}

fn authority() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("https://bedrock-agentcore.us-east-1.amazonaws.com"),
        Just("https://bedrock-agentcore.us-east-1.amazonaws.com:443"),
        Just("http://127.0.0.1:8080"),
        Just("http://localhost:80"),
        Just("http://[::1]:9000"),
        Just("https://vpce-0123.bedrock-agentcore.eu-west-1.vpce.amazonaws.com:8443"),
        Just("http://user:pa55word@127.0.0.1:8080"),
        Just("https://user@bedrock-agentcore.us-east-1.amazonaws.com"),
    ]
}

fn body() -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::of(prop::collection::vec(any::<u8>(), 0..300))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: scaled(512), ..ProptestConfig::default() })]

    /// Requests of the gateway's shape take the fast path and sign as the crate does.
    #[test]
    fn plain_requests_sign_as_the_crate_does(
        method in method(),
        authority in authority(),
        segments in prop::collection::vec(plain_segment(), 0..6),
        query in query("[a-zA-Z0-9._~%:@!$'()*+,;=/?-]{0,6}"),
        headers in headers(),
        body in body(),
        s in signing(),
    ) {
        let r = request(method, authority, &segments, query.as_deref(), &headers, body.as_deref());
        prop_assume!(r.is_some());
        let r = r.unwrap();
        prop_assert!(canonical::applies(r.url()), "{}", r.url());
        agree(r, &s)?;
    }

    /// Any request signs as the crate does (or both refuse it).
    #[test]
    fn any_request_signs_as_the_crate_does(
        method in method(),
        authority in authority(),
        segments in prop::collection::vec(any_segment(), 0..6),
        query in query("[a-zA-Z0-9._~%:@!$'()*+,;=/? \\[\\]{}|^`\"<>é€-]{0,6}"),
        headers in headers(),
        body in body(),
        s in signing(),
    ) {
        let r = request(method, authority, &segments, query.as_deref(), &headers, body.as_deref());
        prop_assume!(r.is_some());
        agree(r.unwrap(), &s)?;
    }
}
