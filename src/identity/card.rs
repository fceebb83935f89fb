//! The security the agent card declares (spec §4.5, `securitySchemes` and
//! `securityRequirements`): one scheme per configured `[server.auth]` scheme, and one
//! requirement per scheme (any one of them satisfies a request).
//!
//! - `api_key` → `apiKey`, an HTTP `Bearer` scheme (the key is sent as a bearer token);
//! - `jwt` with `discovery_url` → `oidc`, `openIdConnect` with the discovery URL;
//! - `jwt` with `token_url` → `oauth2`, the client-credentials flow with its token URL
//!   and the required scopes;
//! - `jwt` with neither → `jwt`, an HTTP `Bearer` scheme with `bearerFormat: JWT`.
//!
//! The JWT requirement lists the required scopes.

use std::collections::BTreeMap;

use serde_json::json;

use crate::config::{ServerAuthConfig, ServerAuthKind};
use crate::protocol::{SecurityRequirement, SecurityScheme, StringList};

/// Name of the API-key scheme in the card.
pub const API_KEY_SCHEME: &str = "apiKey";

/// The card's `securitySchemes` and `securityRequirements` for `config` (empty without
/// authentication).
pub fn security(
    config: &ServerAuthConfig,
) -> (BTreeMap<String, SecurityScheme>, Vec<SecurityRequirement>) {
    let mut schemes = BTreeMap::new();
    let mut requirements = Vec::new();
    let mut require = |name: &str, scopes: Vec<String>| {
        requirements.push(SecurityRequirement {
            schemes: [(name.to_owned(), StringList { list: scopes })].into(),
        });
    };
    for kind in config.effective_schemes() {
        match kind {
            ServerAuthKind::ApiKey => {
                schemes.insert(
                    API_KEY_SCHEME.to_owned(),
                    SecurityScheme::HttpAuthSecurityScheme(json!({
                        "scheme": "Bearer",
                        "description": "A static API key issued by the gateway's operator, sent as `Authorization: Bearer <key>` on every A2A request (JSON-RPC and HTTP+JSON as a header, gRPC as `authorization` metadata).",
                    })),
                );
                require(API_KEY_SCHEME, vec![]);
            }
            ServerAuthKind::Jwt => {
                let Some(jwt) = &config.jwt else { continue };
                let scopes = jwt.required_scopes.clone();
                let (name, scheme) = if let Some(discovery) = &jwt.discovery_url {
                    (
                        "oidc",
                        SecurityScheme::OpenIdConnectSecurityScheme(json!({
                            "openIdConnectUrl": discovery.as_str(),
                            "description": "An OAuth 2.0 access token (JWT) from this OpenID provider, sent as `Authorization: Bearer <token>`.",
                        })),
                    )
                } else if let Some(token_url) = &jwt.token_url {
                    let scope_map: serde_json::Map<String, serde_json::Value> = scopes
                        .iter()
                        .map(|s| (s.clone(), json!("required by this agent")))
                        .collect();
                    (
                        "oauth2",
                        SecurityScheme::Oauth2SecurityScheme(json!({
                            "description": "An OAuth 2.0 client-credentials access token (JWT), sent as `Authorization: Bearer <token>`.",
                            "flows": {"clientCredentials": {
                                "tokenUrl": token_url.as_str(),
                                "scopes": scope_map,
                            }},
                        })),
                    )
                } else {
                    (
                        "jwt",
                        SecurityScheme::HttpAuthSecurityScheme(json!({
                            "scheme": "Bearer",
                            "bearerFormat": "JWT",
                            "description": format!("A JWT issued by {}, sent as `Authorization: Bearer <token>`.", jwt.issuer),
                        })),
                    )
                };
                schemes.insert(name.to_owned(), scheme);
                require(name, scopes);
            }
            ServerAuthKind::None => {}
        }
    }
    (schemes, requirements)
}
