//! Fuzzes the upstream reply translator: the input is an SSE body (decoded with a
//! small event bound, split into reads where the first bytes say) and, separately,
//! a JSON reply body. Nothing may panic, and nothing longer than the event bound
//! may come out of the SSE decoder.
//!
//! Run for a bounded time on the stable toolchain (from `fuzz/`):
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none -O upstream_reply -- -max_total_time=60`
#![no_main]

use a2a_gateway::upstream::UpstreamError;
use a2a_gateway::upstream::http::sse::FEED_SLICE;
use a2a_gateway::upstream::reply::{UpstreamEvent, classify_json_reply, sse_events};
use bytes::Bytes;
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&head, body)) = data.split_first() else {
        return;
    };
    // Reads of 1..=16 bytes; an event bound of 64..=4096 bytes.
    let read = usize::from(head & 0x0f) + 1;
    let max = 64usize << (head >> 4).min(6);
    let pieces: Vec<Result<Bytes, UpstreamError>> = body
        .chunks(read)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let events: Vec<_> =
        futures::executor::block_on(sse_events(futures::stream::iter(pieces).boxed(), max).collect());
    for e in events.iter().flatten() {
        if let UpstreamEvent::Text(t) | UpstreamEvent::FinalText(t) = e {
            assert!(t.len() <= max + FEED_SLICE, "an event above the bound came out");
        }
    }
    if let Ok(v) = serde_json::from_slice(body) {
        let _ = classify_json_reply(v);
    }
});
