//! Bounded decoding of the runtime's `text/event-stream` reply into event data.
//!
//! The SSE grammar (WHATWG HTML, "event stream interpretation") is parsed by the
//! `sse-stream` crate: linear in the input, CR, LF and CRLF line endings (a CR at
//! the end of one read and its LF at the start of the next are one line break),
//! a leading BOM, UTF-8 split at any byte. What this module adds around it:
//!
//! - **One event is bounded.** The bytes received since the previous event (its
//!   fields, comments and blank lines) may not exceed `max_event_bytes`
//!   (`upstream.max_event_bytes`); crossing it ends the stream with
//!   [`UpstreamError::EventTooLarge`]. Input is handed to the parser in slices of at
//!   most [`FEED_SLICE`] bytes, so the count is exact to within one slice and the
//!   parser never holds more than `max_event_bytes + FEED_SLICE` bytes: with the
//!   one network read waiting to be sliced, that bounds the whole stream's buffered
//!   bytes too.
//! - **The whole stream is bounded.** The body's bytes in total may not exceed
//!   `max_stream_bytes` (`upstream.max_stream_bytes`): the parser gets the body up to
//!   that many bytes exactly (every event that ends within them is delivered), and a
//!   byte beyond them ends the stream with [`UpstreamError::StreamTooLarge`]. Every
//!   event's text is kept (in the task's artifact and its stored checkpoint), so this
//!   bounds what one streamed task can make the gateway hold.
//! - **The end of the body.** The format discards an event the body ends in before
//!   its blank line; a gateway must not report such a reply COMPLETED without that
//!   text. At the end of the body two LFs are fed to the parser, which dispatches
//!   any such event. It is **delivered** when its last line ended with a line break
//!   (only the blank line is missing: every field is whole); when the body ended in
//!   the middle of a line the event is not trustworthy and the stream ends with
//!   [`UpstreamError::Truncated`]. (The HTTP layer has already verified that the
//!   body itself ended cleanly.)
//! - Blocks without a `data` field (`event:`/`id:`/`retry:` alone) carry nothing and
//!   are skipped; comments are ignored.
//!
//! (`eventsource-stream`, used before, re-parses its whole buffer on every read, so
//! an unterminated line cost time quadratic in its length without any limit, it
//! loses a CR-terminated line at the end of a read, and it drops a final event
//! without a blank line.)

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};

use crate::upstream::errors::UpstreamError;

/// Default of `upstream.max_event_bytes`: 4 MiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;
/// Default of `upstream.max_stream_bytes`: 100 MiB (104857600 bytes), above the
/// runtime's own limit of 100 MB on a whole response (contract §1.4), so no reply the
/// runtime can send is refused.
pub const DEFAULT_MAX_STREAM_BYTES: u64 = 100 * 1024 * 1024;
/// The largest piece of input handed to the parser at once.
pub const FEED_SLICE: usize = 8 * 1024;
/// Fed after the last byte of the body: ends a pending line and dispatches a pending
/// event (two LFs suffice whether the body ended after a CR, an LF or neither).
const END_OF_BODY: &[u8] = b"\n\n";

/// What the feeding side and the reading side share about the input.
#[derive(Debug, Default)]
struct Feed {
    /// Bytes handed to the parser since the last event came out of it.
    since_event: usize,
    /// The last byte of the real body (not of [`END_OF_BODY`]).
    last_byte: Option<u8>,
    /// [`END_OF_BODY`] was handed out: what the parser dispatches now, it
    /// dispatches because the body ended.
    at_end: bool,
}

struct Input {
    body: BoxStream<'static, Result<Bytes, UpstreamError>>,
    pending: Bytes,
    feed: Arc<Mutex<Feed>>,
    max_event_bytes: usize,
    /// Bytes of the body handed out so far, and the most there may be.
    total: u64,
    max_stream_bytes: u64,
    done: bool,
}

impl Input {
    /// Ends the input with `e` as its last item (what is pending is dropped).
    fn fail(mut self, e: UpstreamError) -> Option<(Result<Bytes, UpstreamError>, Self)> {
        self.done = true;
        self.pending = Bytes::new();
        Some((Err(e), self))
    }
}

/// The body as slices of at most [`FEED_SLICE`] bytes, counted against the event
/// and the stream bounds, then [`END_OF_BODY`]. Ends after the first error.
fn input(
    body: BoxStream<'static, Result<Bytes, UpstreamError>>,
    feed: Arc<Mutex<Feed>>,
    max_event_bytes: usize,
    max_stream_bytes: u64,
) -> BoxStream<'static, Result<Bytes, UpstreamError>> {
    let state = Input {
        body,
        pending: Bytes::new(),
        feed,
        max_event_bytes,
        total: 0,
        max_stream_bytes,
        done: false,
    };
    stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        loop {
            if !st.pending.is_empty() {
                // Up to the stream bound exactly, so that every event that ends
                // within it is parsed and delivered before the bound fails the stream.
                let room = st.max_stream_bytes - st.total;
                if room == 0 {
                    let limit = st.max_stream_bytes;
                    return st.fail(UpstreamError::StreamTooLarge { limit });
                }
                let n = st
                    .pending
                    .len()
                    .min(FEED_SLICE)
                    .min(usize::try_from(room).unwrap_or(usize::MAX));
                st.total += n as u64;
                let slice = st.pending.split_to(n);
                let mut f = st.feed.lock().expect("feed lock");
                f.since_event += n;
                if f.since_event > st.max_event_bytes {
                    drop(f);
                    let limit = st.max_event_bytes as u64;
                    return st.fail(UpstreamError::EventTooLarge { limit });
                }
                f.last_byte = slice.last().copied();
                drop(f);
                return Some((Ok(slice), st));
            }
            match st.body.next().await {
                Some(Ok(chunk)) => st.pending = chunk,
                Some(Err(e)) => return st.fail(e),
                None => {
                    st.done = true;
                    st.feed.lock().expect("feed lock").at_end = true;
                    return Some((Ok(Bytes::from_static(END_OF_BODY)), st));
                }
            }
        }
    })
    .boxed()
}

/// Decodes an SSE body into the `data` of each event (its `data:` lines joined with
/// LF), in order, ending after the first error. One event may take at most
/// `max_event_bytes` of the body, the whole body at most `max_stream_bytes`.
///
/// # Errors (as items)
/// The body's own errors (transport, timeouts); [`UpstreamError::EventTooLarge`];
/// [`UpstreamError::StreamTooLarge`]; [`UpstreamError::Truncated`];
/// [`UpstreamError::Malformed`] for a field that is not UTF-8.
pub fn event_data(
    body: BoxStream<'static, Result<Bytes, UpstreamError>>,
    max_event_bytes: usize,
    max_stream_bytes: u64,
) -> BoxStream<'static, Result<String, UpstreamError>> {
    let feed = Arc::new(Mutex::new(Feed::default()));
    let decoder = sse_stream::SseByteStream::new(input(
        body,
        feed.clone(),
        max_event_bytes,
        max_stream_bytes,
    ));
    decoder
        .filter_map(move |item| {
            let out = match item {
                Ok(block) => {
                    let mut f = feed.lock().expect("feed lock");
                    f.since_event = 0;
                    let unterminated =
                        f.at_end && !matches!(f.last_byte, None | Some(b'\n' | b'\r'));
                    drop(f);
                    match block.data {
                        None => None,
                        Some(_) if unterminated => Some(Err(UpstreamError::Truncated)),
                        Some(data) => Some(Ok(data)),
                    }
                }
                Err(sse_stream::Error::Body(e)) => Some(Err(match e.downcast::<UpstreamError>() {
                    Ok(e) => *e,
                    Err(other) => UpstreamError::Broken {
                        bytes: 0,
                        reason: other.to_string(),
                    },
                })),
                Err(sse_stream::Error::Utf8Parse(_)) => Some(Err(UpstreamError::Malformed(
                    "the event stream is not UTF-8".into(),
                ))),
                Err(_) => Some(Err(UpstreamError::Malformed(
                    "the event stream is not valid SSE".into(),
                ))),
            };
            futures::future::ready(out)
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn decode(parts: &[&[u8]], max: usize) -> Vec<Result<String, String>> {
        let chunks: Vec<Result<Bytes, UpstreamError>> = parts
            .iter()
            .map(|p| Ok(Bytes::copy_from_slice(p)))
            .collect();
        event_data(stream::iter(chunks).boxed(), max, u64::MAX)
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
            .await
    }

    #[tokio::test]
    async fn the_stream_bound_delivers_every_event_that_ends_within_it() {
        // 100 events of 100 bytes, in one read of 10,000 bytes (parsed in 8 KiB slices).
        let event = format!("data: {}\n\n", "x".repeat(92));
        let body = Bytes::from(event.repeat(100));
        for limit in [99u64, 100, 8_191, 8_192, 8_250, 9_999, 10_000] {
            let got: Vec<_> = event_data(stream::iter([Ok(body.clone())]).boxed(), 1 << 20, limit)
                .collect()
                .await;
            let delivered = got.iter().take_while(|r| r.is_ok()).count() as u64;
            assert_eq!(delivered, limit / 100, "limit {limit}");
            if limit < 10_000 {
                assert!(
                    matches!(got.last(), Some(Err(UpstreamError::StreamTooLarge { limit: l })) if *l == limit),
                    "limit {limit}: {:?}",
                    got.last()
                );
                assert_eq!(
                    got.len() as u64,
                    delivered + 1,
                    "limit {limit}: nothing after the error"
                );
            } else {
                assert_eq!(got.len(), 100);
            }
        }
    }

    #[tokio::test]
    async fn line_endings_cr_lf_crlf_and_split_crlf() {
        let want = vec![Ok("Hello, ".to_owned()), Ok("world!".to_owned())];
        for body in [
            &b"data: Hello, \n\ndata: world!\n\n"[..],
            b"data: Hello, \r\rdata: world!\r\r",
            b"data: Hello, \r\n\r\ndata: world!\r\n\r\n",
        ] {
            assert_eq!(decode(&[body], 1024).await, want, "{body:?}");
            // Split at every byte: the same events.
            let bytes: Vec<&[u8]> = body.chunks(1).collect();
            assert_eq!(decode(&bytes, 1024).await, want, "{body:?} bytewise");
        }
        // A CR at the end of one read and its LF at the start of the next: one break.
        assert_eq!(
            decode(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"], 1024).await,
            vec![Ok("a\nb".to_owned())]
        );
    }

    #[tokio::test]
    async fn final_event_without_blank_line() {
        // Whole lines, no blank line: delivered.
        for body in [&b"data: a\n\ndata: last\n"[..], b"data: a\r\rdata: last\r"] {
            assert_eq!(
                decode(&[body], 1024).await,
                vec![Ok("a".to_owned()), Ok("last".to_owned())]
            );
        }
        // Ended in the middle of a line: truncated, never delivered.
        let r = decode(&[b"data: a\n\ndata: {\"text\": \"Hel"], 1024).await;
        assert_eq!(r[0], Ok("a".to_owned()));
        assert!(r[1].as_ref().unwrap_err().contains("middle of"), "{r:?}");
        assert_eq!(r.len(), 2);
        // A trailing unterminated comment or metadata line carries no data.
        assert_eq!(
            decode(&[b"data: a\n\n: keep-alive"], 1024).await,
            vec![Ok("a".to_owned())]
        );
        assert_eq!(
            decode(&[b"data: a\n\nevent: x"], 1024).await,
            vec![Ok("a".to_owned())]
        );
    }

    #[tokio::test]
    async fn one_event_is_bounded() {
        let big = vec![b'x'; 64 * 1024];
        let mut parts: Vec<&[u8]> = vec![b"data: "];
        parts.extend(std::iter::repeat_n(&big[..], 8));
        let r = decode(&parts, 100 * 1024).await;
        assert_eq!(r.len(), 1);
        assert!(r[0].as_ref().unwrap_err().contains("102400 bytes"), "{r:?}");
        // Many events of which each is within the bound pass.
        let ev = format!("data: {}\n\n", "y".repeat(50 * 1024));
        let parts: Vec<&[u8]> = std::iter::repeat_n(ev.as_bytes(), 20).collect();
        let r = decode(&parts, 100 * 1024).await;
        assert_eq!(r.len(), 20);
        assert!(
            r.iter()
                .all(|e| e.as_ref().is_ok_and(|d| d.len() == 50 * 1024))
        );
    }

    #[tokio::test]
    async fn not_utf8_is_malformed() {
        let r = decode(&[b"data: \xff\xfe\n\n"], 1024).await;
        assert!(r[0].as_ref().unwrap_err().contains("not UTF-8"), "{r:?}");
    }
}
