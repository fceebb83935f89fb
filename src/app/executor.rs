//! The executor `[upstream]` describes: today the AgentCore executor, with its
//! readiness check ("a token is obtainable").

use std::sync::Arc;

use super::AppError;
use crate::config::Config;
use crate::executor::AgentExecutor;
use crate::server::ReadinessCheck;
use crate::upstream::{AgentCoreExecutor, AgentCoreSettings};

/// Builds the executor for `[upstream]`, plus a readiness check ("a token is
/// obtainable") when it has one.
///
/// # Errors
/// No upstream configured, or settings the executor refuses.
pub fn build_executor(
    config: &Config,
) -> Result<(Arc<dyn AgentExecutor>, Option<ReadinessCheck>), AppError> {
    let settings = AgentCoreSettings::try_from(&config.upstream)?;
    let executor = AgentCoreExecutor::new(settings)?;
    let probe = executor.clone();
    let ready: ReadinessCheck = Arc::new(move || {
        let probe = probe.clone();
        Box::pin(async move { probe.token_ready().await })
    });
    Ok((Arc::new(executor), Some(ready)))
}
