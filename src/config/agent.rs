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
    /// Accepted media types; unset means `agent.default_input_modes`.
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
