//! The caller boundary: every task, push config and lease is stored under the [`Scope`]
//! of the caller that made it, and read back only by that scope. A task of another
//! caller, or of another agent of the same gateway, is indistinguishable from a missing
//! one.
//!
//! A scope is made in two places only: [`crate::executor::CallContext::scope`] for the
//! caller of a request, and [`Scope::new`] with [`Scope::with_agent`] for a row a store
//! reads back.
//!
//! # How the agent is stored
//!
//! The SQL stores key every row by `(agent, tenant, owner, task id)`: the agent a task
//! belongs to (`[agents.<id>]`, `docs/agents.md`) has a column of its own, `agent`, in
//! every table keyed by a scope and in its primary key; `""` is the agent at `/`.
//! Migration 0007 added it: rows written before it belong to the agent at `/`, except
//! rows whose tenant column held `"<agent>\u{1f}<tenant>"` (how releases between the
//! agents feature and that migration stored a named agent's rows), which it split into
//! their agent and tenant.
//!
//! Ids derived from a scope by hashing (push `webhook-id`s, cluster notification tags)
//! hash [`Scope::id_key`], which is that former stored form, so that an id derived
//! before the migration (a push delivery being retried across the upgrade) stays the
//! same.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// Separates the agent from the tenant in [`Scope::id_key`] (U+001F UNIT SEPARATOR),
/// and did so in the stored tenant column before migration 0007. It cannot occur in an
/// agent id (path-safe) and the handler refuses it in a tenant, so the key is
/// unambiguous.
pub const AGENT_SEPARATOR: char = '\u{1f}';

/// The caller boundary every store operation is confined to. Build it with
/// [`Scope::new`] and [`Scope::with_agent`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Scope {
    /// Tenant (`""` for the default tenant).
    pub tenant: String,
    /// Caller identity.
    pub owner: String,
    /// The agent of the gateway (`[agents.<id>]`), `""` for the agent at `/`. Absent
    /// from the serialized form for the agent at `/` (as scopes were written before
    /// agents existed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub agent: String,
}

impl Scope {
    /// The scope of `tenant` and `owner`, of the agent at `/`.
    pub fn new(tenant: impl Into<String>, owner: impl Into<String>) -> Self {
        Self {
            tenant: tenant.into(),
            owner: owner.into(),
            agent: String::new(),
        }
    }

    /// This scope in `agent` (`""`: the agent at `/`).
    pub fn with_agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = agent.into();
        self
    }

    /// The agent and tenant as one string, for ids hashed from a scope (see the module
    /// docs): the tenant for the agent at `/`, else `"<agent>\u{1f}<tenant>"`. Never a
    /// storage key.
    pub fn id_key(&self) -> Cow<'_, str> {
        if self.agent.is_empty() {
            Cow::Borrowed(&self.tenant)
        } else {
            Cow::Owned(format!("{}{AGENT_SEPARATOR}{}", self.agent, self.tenant))
        }
    }
}

/// A task's key: the scope of the caller it belongs to, and its id. Every map of tasks
/// (the handler's drivers, the cluster's leases, a store's write batch) is keyed by it.
/// A pair, so that code takes its parts as `key.0` and `key.1` and builds it as
/// `(scope, id)`.
pub type TaskKey = (Scope, String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_key_keeps_the_former_stored_form_and_serde_omits_the_root_agent() {
        let root = Scope::new("acme", "alice");
        assert_eq!(root.id_key(), "acme");
        let a = Scope::new("acme", "alice").with_agent("reviewer");
        assert_eq!(a.id_key(), "reviewer\u{1f}acme");
        assert_ne!(a, root);
        assert_eq!(Scope::new("", "bob").with_agent("x").id_key(), "x\u{1f}");
        // Serialized with the agent only when it is not the root agent; old JSON (no
        // agent) reads as the root agent.
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(
            json,
            r#"{"tenant":"acme","owner":"alice","agent":"reviewer"}"#
        );
        assert_eq!(serde_json::from_str::<Scope>(&json).unwrap(), a);
        assert_eq!(
            serde_json::to_string(&root).unwrap(),
            r#"{"tenant":"acme","owner":"alice"}"#
        );
        let old: Scope = serde_json::from_str(r#"{"tenant":"acme","owner":"alice"}"#).unwrap();
        assert_eq!(old, root);
    }
}
