//! AgentCard and its parts (spec §4.4, §8).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The self-description an agent publishes at `/.well-known/agent-card.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    /// Agent name.
    pub name: String,
    /// What the agent does.
    pub description: String,
    /// Interfaces, preferred first.
    #[serde(alias = "supported_interfaces")]
    pub supported_interfaces: Vec<AgentInterface>,
    /// Who runs the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AgentProvider>,
    /// The agent's own version (not the protocol version).
    pub version: String,
    /// Documentation link.
    #[serde(
        default,
        alias = "documentation_url",
        skip_serializing_if = "Option::is_none"
    )]
    pub documentation_url: Option<String>,
    /// Optional capabilities.
    pub capabilities: AgentCapabilities,
    /// Security schemes by name.
    #[serde(
        default,
        alias = "security_schemes",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub security_schemes: BTreeMap<String, SecurityScheme>,
    /// Alternatives of required scheme sets.
    #[serde(
        default,
        alias = "security_requirements",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub security_requirements: Vec<SecurityRequirement>,
    /// Media types accepted by default.
    #[serde(alias = "default_input_modes")]
    pub default_input_modes: Vec<String>,
    /// Media types produced by default.
    #[serde(alias = "default_output_modes")]
    pub default_output_modes: Vec<String>,
    /// What the agent can do.
    pub skills: Vec<AgentSkill>,
    /// Icon link.
    #[serde(default, alias = "icon_url", skip_serializing_if = "Option::is_none")]
    pub icon_url: Option<String>,
}

/// One way to reach the agent (spec §4.4.6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    /// Absolute URL of the endpoint.
    pub url: String,
    /// `JSONRPC`, `GRPC` or `HTTP+JSON`.
    #[serde(alias = "protocol_binding")]
    pub protocol_binding: String,
    /// Protocol `Major.Minor`, e.g. `1.0`.
    #[serde(alias = "protocol_version")]
    pub protocol_version: String,
    /// Tenant clients must send with every request on this interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// The organisation behind the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentProvider {
    /// Organisation URL.
    pub url: String,
    /// Organisation name.
    pub organization: String,
}

/// Optional protocol features (spec §4.4.3). Absent booleans mean false.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// SendStreamingMessage and SubscribeToTask are offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    /// Push notifications are offered.
    #[serde(
        default,
        alias = "push_notifications",
        skip_serializing_if = "Option::is_none"
    )]
    pub push_notifications: Option<bool>,
    /// Supported extensions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<AgentExtension>,
    /// An extended card is offered to authenticated callers.
    #[serde(
        default,
        alias = "extended_agent_card",
        skip_serializing_if = "Option::is_none"
    )]
    pub extended_agent_card: Option<bool>,
}

/// A protocol extension the agent supports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentExtension {
    /// Extension URI.
    pub uri: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Clients must activate it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// Extension parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<serde_json::Value>,
}

/// One skill of the agent (spec §4.4.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    /// Unique id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Keywords.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Example prompts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// Accepted media types, overriding the card default.
    #[serde(default, alias = "input_modes", skip_serializing_if = "Vec::is_empty")]
    pub input_modes: Vec<String>,
    /// Produced media types, overriding the card default.
    #[serde(default, alias = "output_modes", skip_serializing_if = "Vec::is_empty")]
    pub output_modes: Vec<String>,
}

/// A security scheme: a proto `oneof` wrapper, e.g. `{"httpAuthSecurityScheme":{…}}`
/// (spec §4.5). Inner objects are kept as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SecurityScheme {
    /// API key in a header, query or cookie.
    ApiKeySecurityScheme(serde_json::Value),
    /// HTTP authentication such as Bearer.
    HttpAuthSecurityScheme(serde_json::Value),
    /// OAuth 2.0 flows.
    Oauth2SecurityScheme(serde_json::Value),
    /// OpenID Connect discovery.
    OpenIdConnectSecurityScheme(serde_json::Value),
    /// Mutual TLS.
    MtlsSecurityScheme(serde_json::Value),
}

/// One alternative set of required schemes: `{"schemes":{"name":{"list":[scopes]}}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecurityRequirement {
    /// Scheme name to required scopes.
    pub schemes: BTreeMap<String, StringList>,
}

/// The proto `StringList` wrapper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StringList {
    /// The strings.
    #[serde(default)]
    pub list: Vec<String>,
}
