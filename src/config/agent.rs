//! `[agent]`: what the agent card says about the agent behind the gateway.

use std::collections::HashSet;

use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::error::Invalid;
use super::serde_util::{http_url, http_url_opt};

/// `[agent]`: the agent card's description of the agent. The defaults make a valid card, so
/// the gateway runs with no file; a real deployment describes its agent here.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// Human-readable agent name. Default `a2a-gateway`.
    pub name: String,
    /// What the agent does, for people and for other agents choosing it.
    pub description: String,
    /// Version of the agent (not of the protocol). Default: the gateway's version.
    pub version: String,
    /// The organization that provides the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<AgentProviderConfig>,
    /// Where the agent's documentation lives.
    #[serde(
        default,
        with = "http_url_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub documentation_url: Option<Url>,
    /// Media types the agent accepts unless a skill says otherwise. Default `["text/plain"]`.
    pub default_input_modes: Vec<String>,
    /// Media types the agent produces unless a skill says otherwise. Default `["text/plain"]`.
    pub default_output_modes: Vec<String>,
    /// The agent's skills. A file that sets `[[agent.skills]]` replaces the default skill.
    pub skills: Vec<SkillConfig>,
    /// Offer SendStreamingMessage and SubscribeToTask (`capabilities.streaming`).
    /// Default `true`; with `false` both answer `UnsupportedOperationError` (-32004).
    pub streaming: bool,
    /// `[[agent.extensions]]`: the A2A extensions the agent supports
    /// (`capabilities.extensions`, spec §4.6). Default none.
    pub extensions: Vec<ExtensionConfig>,
    /// Also put the A2A 0.3 discovery fields (`url`, `preferredTransport`,
    /// `protocolVersion`, `additionalInterfaces`, `supportsAuthenticatedExtendedCard`,
    /// 0.3 security-scheme shapes) on the public card served to requests without
    /// `A2A-Version` (what 0.3 clients send), so 0.3 clients find the gateway; a
    /// request declaring `A2A-Version: 1.0` gets the pure 1.0 card either way.
    /// Default `true`; `false` leaves them out of every answer.
    pub v03_card_fields: bool,
    /// `[agent.extended]`: the extended agent card (spec §3.1.11) only authenticated
    /// callers get from GetExtendedAgentCard; `capabilities.extendedAgentCard` is then
    /// true. Needs `[server.auth]`. Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extended: Option<ExtendedCardConfig>,
}

/// `[agent.extended]`: what the extended card adds to the public one.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExtendedCardConfig {
    /// Replaces `agent.description` on the extended card.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `[[agent.extended.skills]]`: skills listed after the public ones, for
    /// authenticated callers only. Ids must differ from the public skills'.
    pub skills: Vec<SkillConfig>,
}

/// One `[[agent.extensions]]` entry: an A2A extension the agent supports (spec §4.6).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExtensionConfig {
    /// The extension's URI, as clients list it in `A2A-Extensions`.
    pub uri: String,
    /// What the extension does for this agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Clients must activate it: a task operation whose `A2A-Extensions` does not
    /// list it is refused with `ExtensionSupportRequiredError` (-32008). Default `false`.
    #[serde(default)]
    pub required: bool,
    /// Extension parameters, published as the card's `params` object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<serde_json::Map<String, serde_json::Value>>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            name: "a2a-gateway".to_owned(),
            description: "An agent hosted on Amazon Bedrock AgentCore Runtime, reached over A2A \
                          through a2a-gateway."
                .to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            provider: None,
            documentation_url: None,
            default_input_modes: vec!["text/plain".to_owned()],
            default_output_modes: vec!["text/plain".to_owned()],
            skills: vec![SkillConfig::default()],
            streaming: true,
            extensions: Vec::new(),
            v03_card_fields: true,
            extended: None,
        }
    }
}

/// `[agent.provider]`: who provides the agent.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentProviderConfig {
    /// Organization name.
    pub organization: String,
    /// Organization website.
    #[serde(with = "http_url")]
    pub url: Url,
}

/// One `[[agent.skills]]` entry of the agent card.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SkillConfig {
    /// Unique identifier of the skill.
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// What the skill does.
    pub description: String,
    /// Keywords describing the skill.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Example prompts.
    #[serde(default)]
    pub examples: Vec<String>,
    /// Accepted media types; unset means `agent.default_input_modes`. A message part
    /// whose media type no skill and no default accepts is refused (see
    /// [`crate::handler::InputModes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_modes: Option<Vec<String>>,
    /// Produced media types; unset means `agent.default_output_modes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_modes: Option<Vec<String>>,
}

impl Default for SkillConfig {
    fn default() -> Self {
        SkillConfig {
            id: "chat".to_owned(),
            name: "Chat".to_owned(),
            description: "Answers a text message; the reply streams as it is produced.".to_owned(),
            tags: vec!["chat".to_owned()],
            examples: vec!["Hello! What can you do?".to_owned()],
            input_modes: None,
            output_modes: None,
        }
    }
}

impl AgentConfig {
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        if let Some(ext) = &self.extended {
            if ext
                .description
                .as_ref()
                .is_some_and(|d| d.trim().is_empty())
            {
                return Err(Invalid::new(
                    "agent.extended.description",
                    "must not be empty",
                ));
            }
            for (i, skill) in ext.skills.iter().enumerate() {
                if self.skills.iter().any(|s| s.id == skill.id)
                    || ext.skills[..i].iter().any(|s| s.id == skill.id)
                {
                    return Err(Invalid::new(
                        format!("agent.extended.skills.{i}.id"),
                        format!("skill id {:?} is already used", skill.id),
                    ));
                }
            }
        }
        for (key, value) in [
            ("agent.name", &self.name),
            ("agent.description", &self.description),
            ("agent.version", &self.version),
        ] {
            if value.trim().is_empty() {
                return Err(Invalid::new(key, "must not be empty"));
            }
        }
        for (key, modes) in [
            ("agent.default_input_modes", &self.default_input_modes),
            ("agent.default_output_modes", &self.default_output_modes),
        ] {
            if modes.is_empty() {
                return Err(Invalid::new(key, "must list at least one media type"));
            }
        }
        let skill_modes = self.skills.iter().enumerate().flat_map(|(i, s)| {
            [
                ("input_modes", &s.input_modes),
                ("output_modes", &s.output_modes),
            ]
            .into_iter()
            .filter_map(move |(f, m)| m.as_ref().map(|m| (format!("agent.skills.{i}.{f}"), m)))
        });
        for (key, modes) in [
            (
                "agent.default_input_modes".to_owned(),
                &self.default_input_modes,
            ),
            (
                "agent.default_output_modes".to_owned(),
                &self.default_output_modes,
            ),
        ]
        .into_iter()
        .chain(skill_modes)
        {
            for (j, m) in modes.iter().enumerate() {
                super::parse_media_range(m)
                    .map_err(|why| Invalid::new(format!("{key}.{j}"), why))?;
            }
        }
        let mut uris = HashSet::new();
        for (i, ext) in self.extensions.iter().enumerate() {
            let key = format!("agent.extensions.{i}.uri");
            let uri = ext.uri.trim();
            if uri.is_empty() || uri != ext.uri || uri.contains(',') {
                return Err(Invalid::new(
                    key,
                    "must be a non-empty URI without spaces or commas (clients list it in A2A-Extensions)",
                ));
            }
            if !uris.insert(uri) {
                return Err(Invalid::new(key, format!("duplicate extension {uri:?}")));
            }
        }
        let mut ids = HashSet::new();
        for (i, skill) in self.skills.iter().enumerate() {
            for (field, value) in [
                ("id", &skill.id),
                ("name", &skill.name),
                ("description", &skill.description),
            ] {
                if value.trim().is_empty() {
                    return Err(Invalid::new(
                        format!("agent.skills.{i}.{field}"),
                        "must not be empty",
                    ));
                }
            }
            if !ids.insert(skill.id.as_str()) {
                return Err(Invalid::new(
                    format!("agent.skills.{i}.id"),
                    format!("duplicate skill id {:?}", skill.id),
                ));
            }
        }
        Ok(())
    }
}
