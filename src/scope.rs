//! The caller boundary: every task, push config and lease is stored under the [`Scope`]
//! of the caller that made it, and read back only by that scope. A task of another
//! caller is indistinguishable from a missing one.
//!
//! A scope is made in two places only: [`crate::executor::CallContext::scope`] for the
//! caller of a request, and [`Scope::new`] for a row a store reads back. Adding a part
//! to the key (the agent a task belongs to, once one gateway serves several) is a field
//! here and an argument of those two.

use serde::{Deserialize, Serialize};

/// The caller boundary every store operation is confined to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Scope {
    /// Tenant (`""` for the default tenant).
    pub tenant: String,
    /// Caller identity.
    pub owner: String,
}

impl Scope {
    /// The scope of `tenant` and `owner`.
    pub fn new(tenant: impl Into<String>, owner: impl Into<String>) -> Self {
        Self {
            tenant: tenant.into(),
            owner: owner.into(),
        }
    }
}

/// A task's key: the scope of the caller it belongs to, and its id. Every map of tasks
/// (the handler's drivers, the cluster's leases, a store's write batch) is keyed by it.
/// A pair, so that code takes its parts as `key.0` and `key.1` and builds it as
/// `(scope, id)`.
pub type TaskKey = (Scope, String);
