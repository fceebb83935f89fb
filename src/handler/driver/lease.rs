//! A driver's part in several instances on one store (see [`crate::cluster`]): it
//! takes the task's lease before it acts on a command, refuses the command when
//! another instance holds it, and gives it up when it goes idle. Without a cluster
//! every function here returns at once.

use super::command::{Command, TaskKey};
use crate::cluster::Cluster;
use crate::error::A2aError;

/// What a driver's lease claim decided.
pub(super) enum Claim {
    /// No cluster, or the lease was already held here: go on.
    Kept,
    /// Newly taken: re-read the task (other instances may have written it).
    Fresh,
    /// Another instance holds it (or the store failed): refuse the command with this.
    Refused(String),
}

/// Takes the task's lease for the driver (see [`Claim`]).
pub(super) async fn claim(cluster: Option<&Cluster>, key: &TaskKey) -> Claim {
    let Some(c) = cluster else {
        return Claim::Kept;
    };
    match c.claim(key).await {
        Ok(true) => Claim::Fresh,
        Ok(false) => Claim::Kept,
        Err(Ok(holder)) => Claim::Refused(format!(
            "task {} is being processed by gateway instance {holder}; retry",
            key.1
        )),
        Err(Err(e)) => {
            tracing::warn!(task.id = %key.1, error = %e, "cannot take the task's lease");
            Claim::Refused(format!(
                "the lease of task {} cannot be taken now; retry",
                key.1
            ))
        }
    }
}

/// Answers a command the driver may not act on (another instance holds the lease).
pub(super) fn refuse(cmd: Command, why: String) {
    match cmd {
        Command::Run(mut run) => {
            if let Some(tx) = run.reply.take() {
                let _ = tx.send(Err(A2aError::Unavailable(why)));
            }
        }
        Command::Cancel(reply) => {
            let _ = reply.send(Err(A2aError::Unavailable(why)));
        }
        // Busy elsewhere: not abandoned.
        Command::Expire(x) => {
            let _ = x.reply.send(Ok(false));
        }
    }
}

/// Gives up the driver's lease (it has nothing left to do).
pub(super) async fn release(cluster: Option<&Cluster>, key: &TaskKey) {
    if let Some(c) = cluster {
        c.release(key).await;
    }
}
