//! The caller boundary: every task, push config and lease is stored under the [`Scope`]
//! of the caller that made it, and read back only by that scope. A task of another
//! caller, or of another agent of the same gateway, is indistinguishable from a missing
//! one.
//!
//! A scope is made in two places only: [`crate::executor::CallContext::scope`] for the
//! caller of a request, and [`Scope::from_stored`] (or [`Scope::new`]) for a row a store
//! reads back.
//!
//! # How the agent is stored
//!
//! The SQL stores key every row by `(tenant, owner, task id)`. The agent a task belongs
//! to (`[agents.<id>]`, `docs/agents.md`) is the first part of the stored tenant column,
//! [`Scope::tenant_key`]: `"<agent>\u{1f}<tenant>"`, or the tenant alone for the agent at
//! `/` (agent `""`). So rows written before agents existed belong to the agent at `/`
//! without a rewrite, and every primary key and index keeps its shape. The separator
//! (U+001F) cannot occur in an agent id (path-safe) nor in a tenant (the handler refuses
//! control characters in it), so the stored key is unambiguous.

use serde::{Deserialize, Serialize};

/// Separates the agent from the tenant in [`Scope::tenant_key`] (U+001F UNIT SEPARATOR).
pub const AGENT_SEPARATOR: char = '\u{1f}';

/// The caller boundary every store operation is confined to. Read its fields; build it
/// with [`Scope::new`], [`Scope::with_agent`] or [`Scope::from_stored`] (the stored key
/// is derived from the fields when it is built).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "ScopeFields", into = "ScopeFields")]
#[non_exhaustive]
pub struct Scope {
    /// Tenant (`""` for the default tenant).
    pub tenant: String,
    /// Caller identity.
    pub owner: String,
    /// The agent of the gateway (`[agents.<id>]`), `""` for the agent at `/`.
    pub agent: String,
    /// [`Scope::tenant_key`], derived from `agent` and `tenant`.
    key: String,
}

/// The serialized form of a [`Scope`] (its fields without the derived key; `agent`
/// absent for the agent at `/`, as scopes were written before agents existed).
#[derive(Serialize, Deserialize)]
struct ScopeFields {
    tenant: String,
    owner: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    agent: String,
}

impl From<ScopeFields> for Scope {
    fn from(f: ScopeFields) -> Self {
        Scope::new(f.tenant, f.owner).with_agent(f.agent)
    }
}

impl From<Scope> for ScopeFields {
    fn from(s: Scope) -> Self {
        ScopeFields {
            tenant: s.tenant,
            owner: s.owner,
            agent: s.agent,
        }
    }
}

impl Scope {
    /// The scope of `tenant` and `owner`, of the agent at `/`.
    pub fn new(tenant: impl Into<String>, owner: impl Into<String>) -> Self {
        let tenant = tenant.into();
        Self {
            key: tenant.clone(),
            tenant,
            owner: owner.into(),
            agent: String::new(),
        }
    }

    /// This scope in `agent` (`""`: the agent at `/`).
    pub fn with_agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = agent.into();
        self.key = if self.agent.is_empty() {
            self.tenant.clone()
        } else {
            format!("{}{AGENT_SEPARATOR}{}", self.agent, self.tenant)
        };
        self
    }

    /// The scope of a stored row: `tenant_key` as [`Scope::tenant_key`] wrote it, and
    /// `owner`.
    pub fn from_stored(tenant_key: impl Into<String>, owner: impl Into<String>) -> Self {
        let tenant_key = tenant_key.into();
        match tenant_key.split_once(AGENT_SEPARATOR) {
            Some((agent, tenant)) => Scope::new(tenant, owner).with_agent(agent),
            None => Scope::new(tenant_key, owner),
        }
    }

    /// The tenant column a store keys this scope's rows by: the tenant for the agent at
    /// `/`, else `"<agent>\u{1f}<tenant>"` (see the module docs).
    pub fn tenant_key(&self) -> &str {
        &self.key
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
    fn stored_key_round_trips_and_keeps_old_rows_at_the_root_agent() {
        let root = Scope::new("acme", "alice");
        assert_eq!(root.tenant_key(), "acme");
        assert_eq!(Scope::from_stored("acme", "alice"), root);
        let a = Scope::new("acme", "alice").with_agent("reviewer");
        assert_eq!(a.tenant_key(), "reviewer\u{1f}acme");
        assert_eq!(Scope::from_stored(a.tenant_key(), "alice"), a);
        assert_ne!(a, root);
        let empty_tenant = Scope::new("", "bob").with_agent("x");
        assert_eq!(
            Scope::from_stored(empty_tenant.tenant_key(), "bob"),
            empty_tenant
        );
        // Serialized without the derived key; old JSON (no agent) reads as the root agent.
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(
            json,
            r#"{"tenant":"acme","owner":"alice","agent":"reviewer"}"#
        );
        assert_eq!(serde_json::from_str::<Scope>(&json).unwrap(), a);
        let old: Scope = serde_json::from_str(r#"{"tenant":"acme","owner":"alice"}"#).unwrap();
        assert_eq!(old, root);
    }
}
