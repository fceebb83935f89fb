//! One turn of an executor, polled by its task's driver inside the driver's own tokio
//! task rather than spawned as a task of its own.
//!
//! The driver waits in one `select!` for the executor's events, for commands and for
//! the executor's end; the executor's future is one more branch of it. Polling it
//! there instead of in a spawned task changes what the driver sees, not what the
//! executor may do:
//!
//! - everything an executor queues in one poll (a short agent queues its whole reply
//!   at once) is ready when the driver looks, so it is one store write, not a write
//!   for the first event and another for the rest as when the executor ran on the
//!   other thread and the driver woke at its first event;
//! - a queued event costs no wake-up of another task (and often of another thread),
//!   and a running turn holds no tokio task of its own;
//! - a panic is caught here ([`RunEnd::Panicked`]) as tokio caught it in a spawned
//!   task, and [`ExecutorRun::abort`] drops the future as `JoinHandle::abort` did;
//! - while the driver writes a group of events it goes on polling the executor
//!   (`Driver::commit_reading_ahead`), so what the upstream sends meanwhile is read
//!   and queued (up to the queue's capacity) and goes into the next write as one
//!   group; when a run ends, the driver's last writes poll it no more.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::executor::{AgentExecutor, EventQueue, ExecutorError, RequestContext};

/// How a turn's executor run ended.
#[derive(Debug)]
pub(crate) enum RunEnd {
    /// `execute` returned.
    Returned(Result<(), ExecutorError>),
    /// `execute` panicked; the panic's message.
    Panicked(String),
    /// The run was aborted ([`ExecutorRun::abort`]) or had ended before this poll.
    Aborted,
}

type RunFuture = Pin<Box<dyn Future<Output = Result<(), ExecutorError>> + Send>>;

/// The executor's `execute` future for one turn (see the module docs). Resolves to
/// [`RunEnd`]; polling it again after that resolves to [`RunEnd::Aborted`].
pub(crate) struct ExecutorRun {
    run: Option<RunFuture>,
}

impl ExecutorRun {
    /// The run of `executor` on `ctx`, publishing to `queue`; nothing runs before
    /// the first poll. The context's box is freed as `execute` takes the context.
    pub(crate) fn start(
        executor: Arc<dyn AgentExecutor>,
        ctx: Box<RequestContext>,
        queue: EventQueue,
    ) -> Self {
        Self {
            run: Some(Box::pin(async move {
                executor.execute(unbox(ctx), queue).await
            })),
        }
    }

    /// Stops the run: its future is dropped where it waits (with its clones of the
    /// event queue and whatever upstream request it had open). A later poll resolves
    /// to [`RunEnd::Aborted`].
    pub(crate) fn abort(&mut self) {
        self.run = None;
    }
}

impl Future for ExecutorRun {
    type Output = RunEnd;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<RunEnd> {
        let Some(run) = self.run.as_mut() else {
            return Poll::Ready(RunEnd::Aborted);
        };
        // A panic inside the executor ends its run, not the driver: the future is
        // dropped and never polled again, so no state it left half-changed is used.
        let end = match std::panic::catch_unwind(AssertUnwindSafe(|| run.as_mut().poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(result)) => RunEnd::Returned(result),
            Err(payload) => RunEnd::Panicked(panic_message(payload.as_ref())),
        };
        self.run = None;
        Poll::Ready(end)
    }
}

/// Moves the value out of `b` and frees the box now.
#[allow(clippy::boxed_local)] // taking the box is the point: it is freed on return
pub(super) fn unbox<T>(b: Box<T>) -> T {
    *b
}

/// The text of a panic's payload (`"panic"` when it is not a string).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::{EventQueue, RequestContext};
    use async_trait::async_trait;

    struct Panics;

    #[async_trait]
    impl AgentExecutor for Panics {
        async fn execute(&self, _: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
            tokio::task::yield_now().await;
            if !queue.is_closed() {
                panic!("boom {}", 7);
            }
            Ok(())
        }
    }

    fn context() -> Box<RequestContext> {
        let message = crate::executor::new_user_text_message("hi");
        Box::new(RequestContext::new(
            message,
            "t".into(),
            "c".into(),
            crate::executor::CallContext::default(),
        ))
    }

    /// A panic after an await is caught at the poll that hits it and ends the run;
    /// polling on after the end, or after an abort, resolves to `Aborted`.
    #[tokio::test]
    async fn a_panic_ends_the_run_and_an_abort_drops_it() {
        let (queue, _rx) = EventQueue::bounded(4);
        let mut run = ExecutorRun::start(Arc::new(Panics), context(), queue);
        match (&mut run).await {
            RunEnd::Panicked(text) => assert_eq!(text, "boom 7"),
            other => panic!("expected a panic, got {other:?}"),
        }
        assert!(matches!((&mut run).await, RunEnd::Aborted));

        let (queue, rx) = EventQueue::bounded(4);
        let mut run = ExecutorRun::start(Arc::new(Panics), context(), queue);
        assert!(futures::poll!(&mut run).is_pending());
        run.abort();
        drop(rx);
        assert!(matches!((&mut run).await, RunEnd::Aborted));
    }
}
