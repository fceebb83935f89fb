//! Owner namespaces: the owner (the `owner` of a task's [`Scope`](crate::scope::Scope))
//! each scheme gives its callers, so that owners of different schemes, and of JWTs
//! from different issuers, never meet by accident (docs/authentication.md#owner-namespaces).
//!
//! - An API key's owner is its `caller`, as written in `[[server.auth.keys]]`. Such a
//!   name may not start with [`JWT_OWNER_PREFIX`] ([`key_caller_problem`]).
//! - A JWT's owner is `jwt:<issuer>#<claim value>` ([`jwt_owner`]), the issuer with
//!   `%` and `#` percent-encoded so that the first `#` ends it, unless
//!   `[server.auth.jwt] owner = "claim"` keeps the bare claim value ([`OwnerForm`]).
//! - Without authentication every caller is the owner `anonymous`.

use serde::{Deserialize, Serialize};

/// What every namespaced JWT owner starts with; an API key's `caller` may not.
pub const JWT_OWNER_PREFIX: &str = "jwt:";

/// `[server.auth.jwt] owner`: how a JWT's caller claim becomes the owner of its tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnerForm {
    /// `jwt:<issuer>#<claim value>` (the default): never the owner of an API key, nor
    /// of another issuer's token.
    #[default]
    Namespaced,
    /// The bare claim value, on purpose in one namespace with the API keys' callers (a
    /// token whose claim equals a key's `caller` owns that key's tasks) and with every
    /// earlier issuer's tokens.
    Claim,
}

/// The start of every owner of a token from `issuer` in the namespaced form:
/// `jwt:<issuer>#`, with `%` and `#` in the issuer percent-encoded (`%25`, `%23`), so
/// that two issuers never give the same prefix and the first `#` ends the issuer.
pub fn jwt_owner_prefix(issuer: &str) -> String {
    let mut out = String::with_capacity(JWT_OWNER_PREFIX.len() + issuer.len() + 1);
    out.push_str(JWT_OWNER_PREFIX);
    for c in issuer.chars() {
        match c {
            '%' => out.push_str("%25"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out.push('#');
    out
}

/// The owner of a token from `issuer` whose caller claim is `claim`, in `form`.
pub fn jwt_owner(form: OwnerForm, issuer: &str, claim: &str) -> String {
    match form {
        OwnerForm::Namespaced => jwt_owner_prefix(issuer) + claim,
        OwnerForm::Claim => claim.to_owned(),
    }
}

/// Why `name` cannot be an API key's `caller` (as [`caller_name_problem`] words it);
/// `None` when it can. The caller-name rule, and not starting with
/// [`JWT_OWNER_PREFIX`], which namespaced JWT owners start with.
///
/// [`caller_name_problem`]: super::caller_name_problem
pub fn key_caller_problem(name: &str) -> Option<String> {
    super::caller_name_problem(name).or_else(|| {
        name.starts_with(JWT_OWNER_PREFIX).then(|| {
            format!(
                "must not start with {JWT_OWNER_PREFIX:?}: the owners of JWT callers start \
                 with it (docs/authentication.md#owner-namespaces)"
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwt_owners_are_unambiguous_and_never_key_callers() {
        assert_eq!(
            jwt_owner(OwnerForm::Namespaced, "https://idp.example/", "team-a"),
            "jwt:https://idp.example/#team-a"
        );
        assert_eq!(
            jwt_owner(OwnerForm::Claim, "https://i/", "team-a"),
            "team-a"
        );
        // Issuer "a#b" with claim "c" and issuer "a" with claim "b#c" differ.
        assert_ne!(
            jwt_owner(OwnerForm::Namespaced, "a#b", "c"),
            jwt_owner(OwnerForm::Namespaced, "a", "b#c")
        );
        assert_eq!(jwt_owner_prefix("a%23#"), "jwt:a%2523%23#");
        let owner = jwt_owner(OwnerForm::Namespaced, "https://i/", "x");
        assert!(key_caller_problem(&owner).is_some());
        assert!(key_caller_problem("team-a").is_none());
        assert!(key_caller_problem("team:a").is_none());
        assert!(key_caller_problem(" a").is_some());
    }
}
