//! Why a credential was refused, in words a client can act on (RFC 6750 §3.1) and a
//! bounded label for metrics and logs. Never the credential itself.

/// What was wrong with a presented JWT (or API key). Each maps to a fixed
/// `error_description`, so nothing a client sent is echoed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenProblem {
    /// Not a bearer credential this gateway accepts (an unknown API key, a token that is
    /// not a JWT when only JWTs are accepted, two `Authorization` headers, not `Bearer`).
    NotAccepted,
    /// Not three base64url parts with a JSON header and payload.
    Malformed,
    /// Longer than the gateway reads (16 KiB).
    TooLong,
    /// `alg` not in the allowed list (`none` is never allowed), or not the key's.
    Algorithm,
    /// No key with the token's `kid` in the issuer's JWKS, even after a refetch.
    UnknownKey,
    /// The signature does not verify.
    Signature,
    /// `exp` is past (beyond the leeway).
    Expired,
    /// `nbf` is in the future (beyond the leeway).
    NotYetValid,
    /// `iat` is in the future (beyond the leeway) or not a number.
    IssuedInFuture,
    /// `iss` is not the configured issuer.
    Issuer,
    /// `aud` names none of the configured audiences.
    Audience,
    /// A required claim (`exp`, `iss`, `aud`, the caller claim, the tenant claim when
    /// present) is missing, not a string / number as it must be, or (the caller) not a
    /// valid caller name ([`crate::config::caller_name_problem`]).
    MissingClaim,
}

impl TokenProblem {
    /// The metric label and log field.
    pub fn label(self) -> &'static str {
        match self {
            TokenProblem::NotAccepted => "invalid",
            TokenProblem::Malformed => "malformed",
            TokenProblem::TooLong => "too_long",
            TokenProblem::Algorithm => "algorithm",
            TokenProblem::UnknownKey => "unknown_kid",
            TokenProblem::Signature => "signature",
            TokenProblem::Expired => "expired",
            TokenProblem::NotYetValid => "not_yet_valid",
            TokenProblem::IssuedInFuture => "iat",
            TokenProblem::Issuer => "issuer",
            TokenProblem::Audience => "audience",
            TokenProblem::MissingClaim => "claim",
        }
    }

    /// The `error_description` of the challenge.
    pub fn description(self) -> &'static str {
        match self {
            TokenProblem::NotAccepted => "the credential is not accepted",
            TokenProblem::Malformed => "the token is not a well-formed JWT",
            TokenProblem::TooLong => "the token is too long",
            TokenProblem::Algorithm => "the token's signing algorithm is not accepted",
            TokenProblem::UnknownKey => "the token's signing key (kid) is not known",
            TokenProblem::Signature => "the token's signature is invalid",
            TokenProblem::Expired => "the token has expired",
            TokenProblem::NotYetValid => "the token is not valid yet (nbf)",
            TokenProblem::IssuedInFuture => "the token's issue time (iat) is in the future",
            TokenProblem::Issuer => "the token's issuer (iss) is not accepted",
            TokenProblem::Audience => "the token's audience (aud) is not this gateway",
            TokenProblem::MissingClaim => {
                "a required claim of the token is missing or unusable (of the wrong type, or a caller claim that is not a valid caller name: see the caller-name rule in the README)"
            }
        }
    }
}

/// Why a request was refused before its operation ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No `Authorization` header: HTTP 401, gRPC `UNAUTHENTICATED`.
    Missing,
    /// A credential that was presented but not accepted: HTTP 401
    /// (`error="invalid_token"`), gRPC `UNAUTHENTICATED`.
    Invalid(TokenProblem),
    /// A valid token without a required scope: HTTP 403 (`error="insufficient_scope"`),
    /// gRPC `PERMISSION_DENIED`.
    InsufficientScope,
    /// A valid credential whose tenant is not the one the request names: HTTP 403,
    /// gRPC `PERMISSION_DENIED`.
    TenantNotAllowed,
    /// A valid credential whose caller is not among the `callers` of the agent the
    /// request is addressed to (`[agents.<id>] callers`): HTTP 403, gRPC
    /// `PERMISSION_DENIED`.
    AgentNotAllowed,
    /// A valid token without the tenant claim it must carry (`[server.auth.jwt]
    /// require_tenant_claim`; the claim named by `[server.auth] tenant_claim`, held
    /// here), or with an empty one: HTTP 403, gRPC `PERMISSION_DENIED`.
    TenantClaimMissing(&'static str),
    /// The token could not be checked: it is a JWT with an asymmetric algorithm and no
    /// JWKS key set was ever fetched (the issuer was unreachable since start). Not the
    /// caller's fault: HTTP 503 with `Retry-After`, gRPC `UNAVAILABLE`, as
    /// [`A2aError::Unavailable`](crate::error::A2aError::Unavailable); no challenge.
    KeysUnavailable,
}

impl AuthFailure {
    /// The metric label and log field (`missing`, `invalid`, `expired`, ...,
    /// `insufficient_scope`, `tenant`, `tenant_claim`, `agent`).
    pub fn reason(self) -> &'static str {
        match self {
            AuthFailure::Missing => "missing",
            AuthFailure::Invalid(p) => p.label(),
            AuthFailure::InsufficientScope => "insufficient_scope",
            AuthFailure::TenantNotAllowed => "tenant",
            AuthFailure::AgentNotAllowed => "agent",
            AuthFailure::TenantClaimMissing(_) => "tenant_claim",
            AuthFailure::KeysUnavailable => "keys_unavailable",
        }
    }

    /// Whether the refusal is 403 (authenticated, not allowed) rather than 401.
    pub fn is_forbidden(self) -> bool {
        matches!(
            self,
            AuthFailure::InsufficientScope
                | AuthFailure::TenantNotAllowed
                | AuthFailure::AgentNotAllowed
                | AuthFailure::TenantClaimMissing(_)
        )
    }

    /// The HTTP status: 401, 403, or 503 for [`AuthFailure::KeysUnavailable`].
    pub fn http_status(self) -> u16 {
        match self {
            AuthFailure::KeysUnavailable => 503,
            _ if self.is_forbidden() => 403,
            _ => 401,
        }
    }

    /// Whether the failure is the gateway's, not the credential's
    /// ([`AuthFailure::KeysUnavailable`]): answered as `UNAVAILABLE`, without a challenge.
    pub fn is_unavailable(self) -> bool {
        self == AuthFailure::KeysUnavailable
    }

    /// The client-facing message (also the gRPC status message). For
    /// [`AuthFailure::TenantClaimMissing`] it names the claim (a configured name, never
    /// anything the client sent).
    pub fn message(self) -> std::borrow::Cow<'static, str> {
        if let AuthFailure::TenantClaimMissing(claim) = self {
            return format!(
                "the token has no tenant claim \"{claim}\" (or an empty one), which this gateway requires"
            )
            .into();
        }
        self.fixed_message().into()
    }

    fn fixed_message(self) -> &'static str {
        match self {
            AuthFailure::Missing => "authentication required",
            AuthFailure::Invalid(p) => p.description(),
            AuthFailure::InsufficientScope => "the token lacks a required scope",
            AuthFailure::TenantNotAllowed => {
                "the credential does not allow the tenant this request names"
            }
            AuthFailure::AgentNotAllowed => "this caller may not use this agent",
            AuthFailure::TenantClaimMissing(_) => "the token has no tenant claim",
            AuthFailure::KeysUnavailable => {
                "the token cannot be checked yet: the issuer's signing keys (JWKS) have not \
                 been fetched; retry later"
            }
        }
    }

    /// The `WWW-Authenticate` challenge (RFC 6750 §3) for `realm`, with `scope` listing the
    /// required scopes for `insufficient_scope` (the bare `Bearer realm` for
    /// [`AuthFailure::KeysUnavailable`], which the bindings answer without a challenge).
    pub fn challenge(self, realm: &str, scope: &[String]) -> String {
        match self {
            AuthFailure::Missing | AuthFailure::KeysUnavailable => {
                format!("Bearer realm=\"{realm}\"")
            }
            AuthFailure::Invalid(p) => format!(
                "Bearer realm=\"{realm}\", error=\"invalid_token\", error_description=\"{}\"",
                p.description()
            ),
            AuthFailure::InsufficientScope => {
                let mut c = format!(
                    "Bearer realm=\"{realm}\", error=\"insufficient_scope\", error_description=\"{}\"",
                    self.message()
                );
                let scope: Vec<&str> = scope
                    .iter()
                    .map(String::as_str)
                    .filter(|s| s.bytes().all(|b| b.is_ascii_graphic() && b != b'"'))
                    .collect();
                if !scope.is_empty() {
                    c.push_str(&format!(", scope=\"{}\"", scope.join(" ")));
                }
                c
            }
            AuthFailure::TenantNotAllowed
            | AuthFailure::AgentNotAllowed
            | AuthFailure::TenantClaimMissing(_) => format!(
                "Bearer realm=\"{realm}\", error=\"insufficient_scope\", error_description=\"{}\"",
                // Fixed words: a quoted-string holds no configured name.
                self.fixed_message()
            ),
        }
    }
}
