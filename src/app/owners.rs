//! The owner step at start (migration 0008, docs/authentication.md#owner-namespaces):
//! what `[server.auth]` decides about the owners of rows written before owners were
//! namespaced, executed once per database by the store ([`crate::store::owners`]).
//!
//! - The jwt scheme with `owner = "namespaced"` (the default): every row whose owner is
//!   not a configured API-key caller, not `anonymous`, and not already of the
//!   configured issuer's form is taken to be a JWT caller's and gets the owner
//!   `jwt:<issuer>#<bare owner>`. A name that is both a key's caller and a JWT's
//!   subject stays the key's: the shared namespace was the bug, and the key is the
//!   configured owner.
//! - No jwt scheme: nothing is rewritten, and the decision is recorded all the same:
//!   the rows then belong to keys or to `anonymous`, and a jwt scheme configured later
//!   must not take the rows of keys removed meanwhile.
//! - `owner = "claim"`: nothing is rewritten and nothing is recorded (the namespace is
//!   shared on purpose); a later switch to `namespaced` decides then.

use crate::config::{Config, JWT_OWNER_PREFIX, OwnerForm, ServerAuthKind, jwt_owner_prefix};
use crate::executor::CallContext;
use crate::store::TaskStore;
use crate::store::owners::{OwnerOutcome, OwnerPlan, OwnerRewrite};

use super::AppError;

/// The decision recorded when the jwt scheme is not configured.
pub const NO_JWT: &str = "no jwt: owners are API-key callers or anonymous";

/// What the owner step would do with `config` on a database where nothing was decided:
/// `None` when it decides nothing (`owner = "claim"`).
pub fn owner_plan(config: &Config) -> Option<OwnerPlan> {
    let auth = &config.server.auth;
    let jwt = auth.jwt.as_ref().filter(|_| auth.uses(ServerAuthKind::Jwt));
    let Some(jwt) = jwt else {
        return Some(OwnerPlan {
            decision: NO_JWT.to_owned(),
            rewrite: None,
        });
    };
    if jwt.owner == OwnerForm::Claim {
        return None;
    }
    let prefix = jwt_owner_prefix(&jwt.issuer);
    let mut keep: Vec<String> = Vec::new();
    if auth.uses(ServerAuthKind::ApiKey) {
        for k in &auth.keys {
            if !keep.contains(&k.caller) {
                keep.push(k.caller.clone());
            }
        }
    }
    keep.push(CallContext::ANONYMOUS.to_owned());
    Some(OwnerPlan {
        decision: format!("namespaced: JWT owners are {prefix}<claim>"),
        rewrite: Some(OwnerRewrite { prefix, keep }),
    })
}

/// Runs the owner step on `store` for `config` (at `serve` and `migrate`), and logs
/// what it did once: the rows rewritten and the tasks kept by key callers, or
/// the earlier decision when it differs from what this configuration would decide
/// (an issuer changed since: the earlier issuer's tasks are not this issuer's). Returns
/// that line (`None` when there was nothing to say), for `migrate` to print.
///
/// # Errors
/// The store failed; nothing was changed then.
pub async fn namespace_owners(
    config: &Config,
    store: &dyn TaskStore,
) -> Result<Option<String>, AppError> {
    let Some(plan) = owner_plan(config) else {
        return Ok(None);
    };
    let outcome = store
        .namespace_owners(&plan)
        .await
        .map_err(|e| format!("owner namespaces (migration 0008): {e}"))?;
    let said = match outcome {
        OwnerOutcome::Decided { rows, kept_tasks } => match &plan.rewrite {
            Some(rewrite) => {
                let line = format!(
                    "owner namespaces: rows of JWT callers now owned by {}<claim>: {rows} rows \
                     moved; {kept_tasks} tasks of configured API-key callers and of anonymous \
                     kept their owner (where a JWT subject had the name of a key caller, its \
                     tasks among them stay the key's: that subject no longer reads them)",
                    rewrite.prefix
                );
                tracing::info!(rows, kept_tasks, "{line}");
                line
            }
            None => {
                let line = "owner namespaces: no jwt scheme, owners unchanged; recorded, so a \
                            jwt scheme configured later takes no existing rows"
                    .to_owned();
                tracing::info!("{line}");
                line
            }
        },
        OwnerOutcome::AlreadyDecided(decision) if decision != plan.decision => {
            let line = format!(
                "owner namespaces were decided by an earlier start ({decision}); nothing \
                 rewritten: tasks of JWT callers of another issuer are not visible to this \
                 one's (owners starting with {JWT_OWNER_PREFIX:?} name their issuer)"
            );
            tracing::info!(configured = %plan.decision, "{line}");
            line
        }
        OwnerOutcome::AlreadyDecided(_) | OwnerOutcome::NotPersistent => return Ok(None),
    };
    Ok(Some(said))
}
