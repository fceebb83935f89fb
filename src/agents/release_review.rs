//! The release-review executor of the seed documents (seed 002).

use std::time::Duration;

use async_trait::async_trait;

use crate::executor::{AgentExecutor, EventQueue, ExecutorError, RequestContext, TaskUpdater};
use crate::protocol::{Part, Role};

/// The INPUT_REQUIRED question asked when no release is named.
pub const ASK_TEXT: &str = "State the release as service@1.2.3.";

/// The name of the artifact carrying the review.
pub const ARTIFACT_NAME: &str = "review";

/// A release named as `service@major.minor.patch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseReference {
    /// The service name (`[a-z][a-z0-9-]*`).
    pub service: String,
    /// The version (`\d+\.\d+\.\d+`).
    pub version: String,
}

impl std::fmt::Display for ReleaseReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.service, self.version)
    }
}

/// The first release reference in `text`: a match of
/// `[a-z][a-z0-9-]*@\d+\.\d+\.\d+`, leftmost first, as that regular expression
/// would find it (so `Foo-svc@1.2.3` names `oo-svc`).
pub fn parse_release_reference(text: &str) -> Option<ReleaseReference> {
    let bytes = text.as_bytes();
    for (at, _) in text.match_indices('@') {
        // The service: the longest run of [a-z0-9-] before '@' that starts with [a-z].
        let mut start = at;
        while start > 0 && matches!(bytes[start - 1], b'a'..=b'z' | b'0'..=b'9' | b'-') {
            start -= 1;
        }
        while start < at && !bytes[start].is_ascii_lowercase() {
            start += 1;
        }
        if start == at {
            continue;
        }
        // The version: exactly three dot-separated numbers.
        let mut end = at + 1;
        let mut ok = true;
        for i in 0..3 {
            let digits = bytes[end..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            if digits == 0 {
                ok = false;
                break;
            }
            end += digits;
            if i < 2 {
                if bytes.get(end) != Some(&b'.') {
                    ok = false;
                    break;
                }
                end += 1;
            }
        }
        if ok {
            return Some(ReleaseReference {
                service: text[start..at].to_owned(),
                version: text[at + 1..end].to_owned(),
            });
        }
    }
    None
}

/// Reviews a release named as `service@1.2.3`.
///
/// Without a reference in the user's text the task goes INPUT_REQUIRED with
/// "State the release as service@1.2.3."; a follow-up message on the same task
/// continues it. With one, it goes WORKING "Reviewing service@1.2.3.", waits
/// `review_delay` (the "review"; it observes `context.cancellation()` meanwhile),
/// publishes a `review` artifact and COMPLETES. CancelTask ends the task CANCELED.
#[derive(Debug, Clone, Default)]
pub struct ReleaseReviewAgentExecutor {
    review_delay: Duration,
}

impl ReleaseReviewAgentExecutor {
    /// An executor that reviews instantly.
    pub fn new() -> Self {
        Self::default()
    }

    /// An executor whose review takes `review_delay` (to make cancel observable).
    pub fn with_review_delay(review_delay: Duration) -> Self {
        Self { review_delay }
    }

    /// How long a review takes.
    pub fn review_delay(&self) -> Duration {
        self.review_delay
    }
}

#[async_trait]
impl AgentExecutor for ReleaseReviewAgentExecutor {
    async fn execute(
        &self,
        context: RequestContext,
        queue: EventQueue,
    ) -> Result<(), ExecutorError> {
        let updater = TaskUpdater::from_context(&context, queue);
        if context.current_task.is_none() {
            updater.submit().await?;
        }
        // The newest message first; a follow-up may also build on earlier user text.
        let reference = parse_release_reference(&context.user_input()).or_else(|| {
            context.current_task.as_ref().and_then(|t| {
                t.history()
                    .iter()
                    .rev()
                    .filter(|m| m.role == Role::User)
                    .find_map(|m| {
                        parse_release_reference(&crate::executor::get_message_text(m, "\n"))
                    })
            })
        });
        let Some(reference) = reference else {
            updater
                .requires_input(Some(updater.new_agent_text(ASK_TEXT)))
                .await?;
            return Ok(());
        };
        updater
            .start_work(Some(
                updater.new_agent_text(format!("Reviewing {reference}.")),
            ))
            .await?;
        tokio::select! {
            _ = context.cancellation().cancelled() => {
                // CancelTask (or shutdown): the handler records the final state.
                return Ok(());
            }
            _ = tokio::time::sleep(self.review_delay) => {}
        }
        updater
            .add_artifact(
                vec![Part::text(format!(
                    "Release {reference} reviewed: no blocking issues found."
                ))],
                None,
                Some(ARTIFACT_NAME.to_owned()),
                false,
                true,
            )
            .await?;
        updater
            .complete(Some(
                updater.new_agent_text(format!("Review of {reference} complete.")),
            ))
            .await?;
        Ok(())
    }

    async fn cancel(
        &self,
        context: RequestContext,
        queue: EventQueue,
    ) -> Result<(), ExecutorError> {
        let updater = TaskUpdater::new(queue, &context.task_id, &context.context_id);
        updater
            .cancel(Some(updater.new_agent_text("Release review canceled.")))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::parse_release_reference;

    #[test]
    fn parses_references() {
        let r = parse_release_reference("please review billing-api@2.10.3 today").unwrap();
        assert_eq!(r.to_string(), "billing-api@2.10.3");
        assert_eq!(parse_release_reference("svc@1.2.3").unwrap().service, "svc");
        assert_eq!(
            parse_release_reference("Foo-svc@1.2.3").unwrap().service,
            "oo-svc"
        );
        assert!(parse_release_reference("svc@1.2").is_none());
        assert!(parse_release_reference("@1.2.3").is_none());
        assert!(parse_release_reference("9-@1.2.3").is_none());
        assert!(parse_release_reference("no release here").is_none());
        assert_eq!(
            parse_release_reference("a@b x@1.2.3").unwrap().to_string(),
            "x@1.2.3"
        );
    }
}
