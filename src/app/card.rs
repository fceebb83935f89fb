//! The agent cards `[agent]` and `[server]` describe: the public card (its interfaces,
//! security schemes and, with push, the webhook signature extension) and the extended
//! card; and the handler settings that enforce them.

use std::sync::Arc;

use crate::config::{Config, ServerConfig};
use crate::handler::HandlerConfig;
use crate::protocol::{
    AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentProvider, AgentSkill,
};
use crate::push::PushService;
use crate::upstream::a2a::UpstreamCard;

/// Name of the security scheme the card declares with `[server.auth] kind = "api_key"`.
pub const API_KEY_SCHEME: &str = crate::identity::card::API_KEY_SCHEME;

/// The public agent card described by `config` (`[agent]`), declaring every binding of
/// `server.bindings` at `server.public_url` (see [`crate::transport::interfaces`]), and
/// every `[server.auth]` scheme in `securitySchemes` / `securityRequirements` (spec §4.5,
/// see [`crate::identity::card`]).
pub fn agent_card(config: &Config) -> AgentCard {
    let a = &config.agent;
    let (security_schemes, security_requirements) =
        crate::identity::card::security(&config.server.auth);
    AgentCard {
        name: a.name.clone(),
        description: a.description.clone(),
        supported_interfaces: interfaces(&config.server),
        provider: a.provider.as_ref().map(|p| AgentProvider {
            url: p.url.to_string(),
            organization: p.organization.clone(),
        }),
        version: a.version.clone(),
        documentation_url: a.documentation_url.as_ref().map(ToString::to_string),
        capabilities: AgentCapabilities {
            streaming: Some(a.streaming),
            push_notifications: Some(false),
            extensions: a
                .extensions
                .iter()
                .map(|e| AgentExtension {
                    uri: e.uri.clone(),
                    description: e.description.clone(),
                    required: e.required,
                    params: e.params.clone().map(serde_json::Value::Object),
                })
                .collect(),
            extended_agent_card: Some(a.extended.is_some()),
        },
        security_schemes,
        security_requirements,
        default_input_modes: a.default_input_modes.clone(),
        default_output_modes: a.default_output_modes.clone(),
        skills: a.skills.iter().map(skill).collect(),
        icon_url: None,
    }
}

/// `config` with the `[agent]` fields it leaves at their defaults taken from the
/// upstream A2A agent's `card`: name, description, version, skills, default input
/// and output modes, streaming. A field `[agent]` sets (to anything but its default)
/// stays; an empty value of the card is not taken.
pub fn with_upstream_card(config: &Config, card: &UpstreamCard) -> Config {
    let mut out = config.clone();
    let defaults = crate::config::AgentConfig::default();
    let a = &mut out.agent;
    if a.name == defaults.name && !card.name.is_empty() {
        a.name = card.name.clone();
    }
    if a.description == defaults.description && !card.description.is_empty() {
        a.description = card.description.clone();
    }
    if a.version == defaults.version && !card.version.is_empty() {
        a.version = card.version.clone();
    }
    if a.skills == defaults.skills && !card.skills.is_empty() {
        a.skills = card
            .skills
            .iter()
            .map(|s| crate::config::SkillConfig {
                id: s.id.clone(),
                name: s.name.clone(),
                description: s.description.clone(),
                tags: s.tags.clone(),
                examples: s.examples.clone(),
                input_modes: (!s.input_modes.is_empty()).then(|| s.input_modes.clone()),
                output_modes: (!s.output_modes.is_empty()).then(|| s.output_modes.clone()),
            })
            .collect();
    }
    if a.default_input_modes == defaults.default_input_modes && !card.default_input_modes.is_empty()
    {
        a.default_input_modes = card.default_input_modes.clone();
    }
    if a.default_output_modes == defaults.default_output_modes
        && !card.default_output_modes.is_empty()
    {
        a.default_output_modes = card.default_output_modes.clone();
    }
    if a.streaming == defaults.streaming {
        a.streaming = card.streaming;
    }
    out
}

fn skill(s: &crate::config::SkillConfig) -> AgentSkill {
    AgentSkill {
        id: s.id.clone(),
        name: s.name.clone(),
        description: s.description.clone(),
        tags: s.tags.clone(),
        examples: s.examples.clone(),
        input_modes: s.input_modes.clone().unwrap_or_default(),
        output_modes: s.output_modes.clone().unwrap_or_default(),
    }
}

/// The extended agent card (`[agent.extended]`, spec §3.1.11): the public `card` with
/// the extended description and the extended skills after the public ones. `None`
/// without `[agent.extended]`.
pub fn extended_agent_card(config: &Config, card: &AgentCard) -> Option<AgentCard> {
    let ext = config.agent.extended.as_ref()?;
    let mut extended = card.clone();
    if let Some(d) = &ext.description {
        extended.description = d.clone();
    }
    extended.skills.extend(ext.skills.iter().map(skill));
    Some(extended)
}

/// The card extension that tells receivers how webhook calls are signed: `signature`
/// (`v1a` or `v1`) and, for `v1a`, `jwksUri` (the public keys).
fn push_extension(config: &Config, push: &PushService) -> AgentExtension {
    let mut params = serde_json::Map::new();
    let (scheme, description) = match push.signature() {
        crate::config::SignatureScheme::V1a => {
            let jwks = config
                .server
                .public_url()
                .join(crate::push::JWKS_PATH.trim_start_matches('/'))
                .map(|u| u.to_string())
                .unwrap_or_default();
            params.insert("jwksUri".into(), jwks.into());
            (
                "v1a",
                "Push notifications are signed per Standard Webhooks v1a (Ed25519); verify webhook-signature with a key of jwksUri.",
            )
        }
        crate::config::SignatureScheme::V1 => (
            "v1",
            "Push notifications are signed per Standard Webhooks v1 (HMAC-SHA256 with a shared whsec_ secret).",
        ),
    };
    params.insert("signature".into(), scheme.into());
    AgentExtension {
        uri: crate::push::SIGNATURE_EXTENSION.to_owned(),
        description: Some(description.to_owned()),
        required: false,
        params: Some(serde_json::Value::Object(params)),
    }
}

/// The interfaces the card declares, in `server.bindings` order (see
/// [`crate::transport::interfaces`]); gRPC at [`ServerConfig::grpc_address`] when it has a
/// listener of its own.
pub fn interfaces(server: &ServerConfig) -> Vec<AgentInterface> {
    let grpc = server.grpc_listen.map(|_| server.grpc_address());
    crate::transport::interfaces::supported_interfaces(
        server.public_url().as_str(),
        &server.bindings,
        grpc.as_deref(),
    )
}

/// The handler settings and the public card of the agent `config` describes (its
/// `[agent]`, `[server]` limits and push), for agent `agent` (`""`: the agent at `/`).
pub(super) fn handler_config(
    config: &Config,
    push: Option<Arc<PushService>>,
    agent: &str,
) -> (HandlerConfig, AgentCard) {
    let mut card = agent_card(config);
    if let Some(p) = &push {
        card.capabilities.push_notifications = Some(true);
        card.capabilities.extensions.push(push_extension(config, p));
    }
    let hc = HandlerConfig {
        max_concurrent_tasks: config.server.max_concurrent_tasks,
        max_tasks_per_caller: config.server.max_tasks_per_caller,
        max_tasks_per_tenant: config.server.max_tasks_per_tenant,
        max_task_values: config.server.max_task_values,
        max_message_bytes_per_caller_per_minute: config
            .server
            .max_message_bytes_per_caller_per_minute,
        max_task_bytes: config.server.max_task_bytes,
        max_list_page_bytes: config.server.max_list_page_bytes,
        extended_agent_card: extended_agent_card(config, &card),
        extended_agent_card_enabled: config.agent.extended.is_some(),
        push,
        agent: agent.to_owned(),
        ..HandlerConfig::default()
    }
    .with_card(&card);
    (hc, card)
}
