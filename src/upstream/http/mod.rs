//! What every HTTP runtime kind shares: the client and its per-phase time limits
//! ([`client`]), the retry policy and `Retry-After` ([`retry`]), and bounded SSE
//! decoding ([`sse`]).

pub mod client;
pub mod retry;
pub mod sse;

pub use client::{HttpVersion, SendTimeouts, USER_AGENT, build_client, send, send_request};
pub use retry::{RetryPolicy, parse_retry_after};
