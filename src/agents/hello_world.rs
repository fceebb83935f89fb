//! The hello-world executor of the seed documents.

use async_trait::async_trait;

use crate::executor::{AgentExecutor, EventQueue, ExecutorError, RequestContext, TaskUpdater};
use crate::protocol::Part;

/// The text of the WORKING status message.
pub const WORKING_TEXT: &str = "Processing request...";

/// The name of the artifact carrying the answer.
pub const ARTIFACT_NAME: &str = "result";

/// The answer to `user_request` (the seeds' `HelloWorldAgent.invoke`).
pub fn answer(user_request: &str) -> String {
    if user_request.is_empty() {
        "No text input is provided!".to_owned()
    } else {
        format!("Hello, World! I have received your request ({user_request})")
    }
}

/// Answers every message in one short task: the Task (SUBMITTED), WORKING with
/// "Processing request...", one text artifact named `result` with
/// "Hello, World! I have received your request (<text>)", then COMPLETED.
///
/// Cancel is not supported beyond the handler's default (the task ends CANCELED if
/// it is still running).
#[derive(Debug, Clone, Copy, Default)]
pub struct HelloWorldAgentExecutor;

impl HelloWorldAgentExecutor {
    /// A new executor.
    pub fn new() -> Self {
        Self
    }
}

#[async_trait]
impl AgentExecutor for HelloWorldAgentExecutor {
    async fn execute(
        &self,
        context: RequestContext,
        queue: EventQueue,
    ) -> Result<(), ExecutorError> {
        let updater = TaskUpdater::from_context(&context, queue);
        if context.current_task.is_none() {
            updater.submit().await?;
        }
        updater
            .start_work(Some(updater.new_agent_text(WORKING_TEXT)))
            .await?;
        let result = answer(&context.user_input());
        updater
            .add_artifact(
                vec![Part::text(result)],
                None,
                Some(ARTIFACT_NAME.to_owned()),
                false,
                true,
            )
            .await?;
        updater.complete(None).await?;
        Ok(())
    }
}
