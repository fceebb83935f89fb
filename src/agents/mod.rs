//! Example executors shared by the examples, the tests and the benchmarks.
//!
//! - [`HelloWorldAgentExecutor`]: the seeds' hello-world agent (task, WORKING,
//!   one `result` artifact answering the user's text, COMPLETED).
//! - [`ReleaseReviewAgentExecutor`]: the seeds' release-review agent (asks for a
//!   `service@1.2.3` reference with INPUT_REQUIRED, reviews it, can be canceled).

pub mod hello_world;
pub mod release_review;

pub use hello_world::HelloWorldAgentExecutor;
pub use release_review::{ReleaseReference, ReleaseReviewAgentExecutor, parse_release_reference};
