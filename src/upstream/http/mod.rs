//! What any HTTP runtime kind shares: the retry policy and `Retry-After`
//! ([`retry`]).

pub mod retry;

pub use retry::{RetryPolicy, parse_retry_after};
