//! Property tests of the upstream reply translator (issue 15, fuzzing): SSE
//! decoding with control objects and the JSON reply classifier.
//!
//! - A generated event stream (text, JSON strings, control objects, comments,
//!   `event:`/`id:` lines, any of LF / CR / CRLF line endings) gives the same events
//!   however its bytes are split across reads, and the events it was built from.
//! - Arbitrary bytes, split anywhere, never panic, and nothing longer than the event
//!   bound comes out of them.
//! - Arbitrary JSON (with and without `a2a_control`) never panics the classifiers.
//!
//! The cases are bounded (256 per property), so this runs in `cargo test`; the
//! cargo-fuzz target `fuzz/fuzz_targets/upstream_reply.rs` runs the same code for
//! longer.

use a2a_gateway::upstream::UpstreamError;
use a2a_gateway::upstream::http::sse::FEED_SLICE;
use a2a_gateway::upstream::reply::{
    FrameState, UpstreamEvent, classify_frame, classify_json_reply, sse_events,
};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Decodes `body` delivered in pieces cut at `cuts` (positions, any order).
fn decode(
    body: &[u8],
    cuts: &[usize],
    max_event_bytes: usize,
) -> Vec<Result<UpstreamEvent, String>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut pieces = Vec::new();
    let mut at = 0;
    for c in cuts.into_iter().chain([body.len()]) {
        if c > at {
            pieces.push(Ok::<_, UpstreamError>(Bytes::copy_from_slice(&body[at..c])));
            at = c;
        }
    }
    futures::executor::block_on(
        sse_events(stream::iter(pieces).boxed(), max_event_bytes, u64::MAX)
            .map(|r| r.map_err(|e| e.to_string()))
            .collect(),
    )
}

/// One event of a generated stream, and the data it carries.
#[derive(Debug, Clone)]
enum Frame {
    /// A JSON string (what `yield "…"` produces).
    Json(String),
    /// A control object.
    Status(String),
    /// A comment line only (no event).
    Comment(String),
}

/// Text without line breaks (a `data:` value cannot hold them).
fn line_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<char>(), 0..40).prop_map(|cs| {
        cs.into_iter()
            .filter(|c| *c != '\n' && *c != '\r')
            .collect()
    })
}

fn frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        line_text().prop_map(Frame::Json),
        line_text().prop_map(Frame::Status),
        line_text().prop_map(Frame::Comment),
    ]
}

fn eol() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("\n"), Just("\r"), Just("\r\n")]
}

/// The stream's bytes and the events it must decode to.
fn render(frames: &[(Frame, &str, bool)]) -> (Vec<u8>, Vec<UpstreamEvent>) {
    let mut body = String::new();
    let mut want = Vec::new();
    for (f, eol, with_id) in frames {
        match f {
            Frame::Comment(t) => {
                body.push_str(&format!(":{t}{eol}"));
                continue;
            }
            Frame::Json(t) => {
                let data = serde_json::to_string(t).unwrap();
                if *with_id {
                    body.push_str(&format!("event: message{eol}id: 7{eol}"));
                }
                body.push_str(&format!("data: {data}{eol}{eol}"));
                want.push(UpstreamEvent::Text(t.clone()));
            }
            Frame::Status(t) => {
                let data = json!({"a2a_control": "status", "text": t}).to_string();
                body.push_str(&format!("data:{data}{eol}{eol}"));
                want.push(UpstreamEvent::Control(
                    a2a_gateway::upstream::reply::control::Control::Status { text: t.clone() },
                ));
            }
        }
    }
    (body.into_bytes(), want)
}

/// Arbitrary JSON, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        line_text().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        let key = prop_oneof![
            Just("a2a_control".to_owned()),
            Just("text".to_owned()),
            Just("data".to_owned()),
            Just("parts".to_owned()),
            Just("name".to_owned()),
            Just("artifact_id".to_owned()),
            Just("append".to_owned()),
            Just("last_chunk".to_owned()),
            Just("message".to_owned()),
            Just("content".to_owned()),
            Just("result".to_owned()),
            Just("event".to_owned()),
            Just("error".to_owned()),
            Just("error_type".to_owned()),
            line_text(),
        ];
        let kind = prop_oneof![
            Just(Value::from("status")),
            Just(Value::from("artifact")),
            Just(Value::from("data")),
            Just(Value::from("input_required")),
            Just(Value::from("auth_required")),
            Just(Value::from("reject")),
            Just(Value::from("fail")),
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((key, inner.clone()), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            (kind, proptest::collection::vec((line_text(), inner), 0..4)).prop_map(|(k, kv)| {
                let mut o: serde_json::Map<String, Value> = kv.into_iter().collect();
                o.insert("a2a_control".into(), k);
                Value::Object(o)
            }),
        ]
    })
}

/// Multiplies every property's case count: `A2A_GATEWAY_PROPTEST_SCALE` (default 1), so
/// `bench/properties.sh` can run the same properties far longer than `cargo test` does.
fn scaled(cases: u32) -> u32 {
    std::env::var("A2A_GATEWAY_PROPTEST_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .filter(|&n| n > 0)
        .map_or(cases, |n| cases.saturating_mul(n))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(scaled(256)))]

    #[test]
    fn any_split_of_a_stream_gives_its_events(
        frames in proptest::collection::vec((frame(), eol(), any::<bool>()), 0..12),
        cuts in proptest::collection::vec(any::<usize>(), 0..24),
    ) {
        let (body, want) = render(&frames);
        let whole = decode(&body, &[], 1 << 20);
        let split = decode(&body, &cuts, 1 << 20);
        let want: Vec<Result<UpstreamEvent, String>> = want.into_iter().map(Ok).collect();
        prop_assert_eq!(&whole, &want);
        prop_assert_eq!(&split, &want);
    }

    #[test]
    fn random_bytes_never_panic_and_stay_within_the_event_bound(
        // Half the bytes from the SSE alphabet, half anything.
        body in proptest::collection::vec(any::<u8>(), 0..4096).prop_map(|v| {
            v.into_iter()
                .map(|b| if b < 128 { b"\n\r: d\"a{}"[usize::from(b) % 9] } else { b })
                .collect::<Vec<u8>>()
        }),
        prefix in prop_oneof![Just(&b""[..]), Just(&b"data: "[..]), Just(&b"data:{\"a2a_control\":"[..])],
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
        max in 1usize..2048,
    ) {
        let mut input = prefix.to_vec();
        input.extend_from_slice(&body);
        let events = decode(&input, &cuts, max);
        // At most one error, and it is the last item.
        let errors = events.iter().filter(|e| e.is_err()).count();
        prop_assert!(errors <= 1);
        if errors == 1 {
            prop_assert!(events.last().unwrap().is_err());
        }
        for e in events.iter().flatten() {
            let len = match e {
                UpstreamEvent::Text(t) | UpstreamEvent::FinalText(t) => t.len(),
                UpstreamEvent::Data(v) | UpstreamEvent::Usage(v) => v.to_string().len(),
                UpstreamEvent::Control(_) | UpstreamEvent::Done => 0,
            };
            prop_assert!(len <= max + FEED_SLICE, "{} > {} + {}", len, max, FEED_SLICE);
        }
    }

    #[test]
    fn arbitrary_json_never_panics_the_classifiers(v in json_value()) {
        let _ = classify_json_reply(v.clone());
        let mut st = FrameState::default();
        let _ = classify_frame(&v.to_string(), &mut st);
    }

    #[test]
    fn arbitrary_text_frames_never_panic(s in line_text()) {
        let mut st = FrameState::default();
        let _ = classify_frame(&s, &mut st);
    }
}
