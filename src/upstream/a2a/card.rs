//! [`UpstreamCard`]: what the gateway reads from the agent's card (1.0 or 0.3 shape):
//! the JSON-RPC endpoint and version it speaks to, whether it streams, the extensions it
//! declares, and the fields the gateway's own card takes from it.

use serde_json::Value;

use super::settings::{A2aSettings, BindingChoice, VersionChoice};
use super::wire::{Binding, WireVersion};
use crate::protocol::AgentSkill;

/// The agent's card as the gateway uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamCard {
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: String,
    /// `version` (the agent's own).
    pub version: String,
    /// `skills` (those that read as skills).
    pub skills: Vec<AgentSkill>,
    /// `defaultInputModes`.
    pub default_input_modes: Vec<String>,
    /// `defaultOutputModes`.
    pub default_output_modes: Vec<String>,
    /// `capabilities.streaming`.
    pub streaming: bool,
    /// The URIs of `capabilities.extensions`.
    pub extensions: Vec<String>,
    /// The endpoint the gateway calls (JSON-RPC URL, or HTTP+JSON base URL).
    pub endpoint: String,
    /// The binding it calls it over.
    pub binding: Binding,
    /// The version the gateway speaks there.
    pub wire: WireVersion,
}

/// One interface a card lists: (URL, binding, version).
type Interface = (String, String, String);

/// The interfaces of a 1.0 card (`supportedInterfaces`) and of a 0.3 card (`url`,
/// `preferredTransport`, `additionalInterfaces`, `protocolVersion`), in card order.
fn interfaces(card: &Value) -> Vec<Interface> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut out = Vec::new();
    if let Some(Value::Array(items)) = card.get("supportedInterfaces") {
        for i in items {
            if let (Some(url), Some(binding)) = (s(i, "url"), s(i, "protocolBinding")) {
                let version = s(i, "protocolVersion").unwrap_or_else(|| "1.0".into());
                out.push((url, binding, version));
            }
        }
    }
    let v03 = s(card, "protocolVersion").unwrap_or_else(|| "0.3".into());
    if let Some(url) = s(card, "url") {
        let binding = s(card, "preferredTransport").unwrap_or_else(|| "JSONRPC".into());
        out.push((url, binding, v03.clone()));
    }
    if let Some(Value::Array(items)) = card.get("additionalInterfaces") {
        for i in items {
            if let (Some(url), Some(binding)) = (s(i, "url"), s(i, "transport")) {
                out.push((url, binding, v03.clone()));
            }
        }
    }
    out
}

/// Why no interface of `all` can be used with `settings`: what was asked (the keys
/// that are not `auto`) and what the card offers.
fn unusable(all: &[Interface], settings: &A2aSettings) -> String {
    let mut offered: Vec<String> = Vec::new();
    for (_, binding, version) in all {
        let binding = match binding.to_ascii_uppercase().as_str() {
            "JSONRPC" => "JSON-RPC".to_owned(),
            "GRPC" => "gRPC".to_owned(),
            _ => binding.clone(),
        };
        let version = if is_v03(version) { "0.3" } else { version };
        let one = format!("A2A {version} ({binding})");
        if !offered.contains(&one) {
            offered.push(one);
        }
    }
    let offers = if offered.is_empty() {
        "its card lists no interface".to_owned()
    } else {
        format!("its card offers {}", offered.join(", "))
    };
    let mut asked = Vec::new();
    match settings.protocol_version {
        VersionChoice::V1_0 => asked.push(r#"upstream.protocol_version = "1.0""#),
        VersionChoice::V0_3 => asked.push(r#"upstream.protocol_version = "0.3""#),
        VersionChoice::Auto => {}
    }
    match settings.protocol_binding {
        BindingChoice::JsonRpc => asked.push(r#"upstream.protocol_binding = "JSONRPC""#),
        BindingChoice::HttpJson => asked.push(r#"upstream.protocol_binding = "HTTP+JSON""#),
        BindingChoice::Auto => {}
    }
    if asked.is_empty() {
        format!(
            "lists no JSON-RPC or HTTP+JSON interface of A2A 1.0 or 0.3 in its card (gRPC agents are not supported yet): {offers}"
        )
    } else {
        format!(
            "offers no interface that fits {}: {offers}",
            asked.join(" and ")
        )
    }
}

fn is_v1(version: &str) -> bool {
    version == "1" || version.starts_with("1.")
}

fn is_v03(version: &str) -> bool {
    version == "0.3" || version.starts_with("0.3.")
}

impl UpstreamCard {
    /// Reads `card` for the agent `settings` describe. The endpoint: for an AgentCore
    /// runtime always `settings.base_url`; else the card's first JSON-RPC interface of
    /// the version chosen (`auto`: 1.0 when there is one, else 0.3).
    ///
    /// # Errors
    /// A readable reason when `card` is not an object, or lists no JSON-RPC interface
    /// of the version asked for.
    pub fn read(card: &Value, settings: &A2aSettings) -> Result<Self, String> {
        if !card.is_object() {
            return Err("served a card that is not a JSON object".into());
        }
        let all = interfaces(card);
        let of = |binding: &str| -> Vec<Interface> {
            all.iter()
                .filter(|(_, b, _)| b.eq_ignore_ascii_case(binding))
                .cloned()
                .collect()
        };
        let (jsonrpc, rest) = (of("JSONRPC"), of("HTTP+JSON"));
        let first = |list: &[Interface], pick: fn(&str) -> bool| {
            list.iter()
                .find(|(_, _, v)| pick(v))
                .map(|(u, _, _)| u.clone())
        };
        let (endpoint, binding, wire) = if settings.agentcore {
            let wire = match settings.protocol_version {
                VersionChoice::V1_0 => WireVersion::V1_0,
                VersionChoice::Auto | VersionChoice::V0_3 => WireVersion::V0_3,
            };
            (settings.base_url.clone(), Binding::JsonRpc, wire)
        } else {
            let over_jsonrpc = match settings.protocol_version {
                VersionChoice::V1_0 => first(&jsonrpc, is_v1).map(|u| (u, WireVersion::V1_0)),
                VersionChoice::V0_3 => first(&jsonrpc, is_v03).map(|u| (u, WireVersion::V0_3)),
                VersionChoice::Auto => first(&jsonrpc, is_v1)
                    .map(|u| (u, WireVersion::V1_0))
                    .or_else(|| first(&jsonrpc, is_v03).map(|u| (u, WireVersion::V0_3))),
            }
            .map(|(u, v)| (u, Binding::JsonRpc, v));
            // HTTP+JSON is spoken in 1.0 only.
            let over_rest = (settings.protocol_version != VersionChoice::V0_3)
                .then(|| first(&rest, is_v1))
                .flatten()
                .map(|u| (u, Binding::HttpJson, WireVersion::V1_0));
            let chosen = match settings.protocol_binding {
                BindingChoice::Auto => over_jsonrpc.or(over_rest),
                BindingChoice::JsonRpc => over_jsonrpc,
                BindingChoice::HttpJson => over_rest,
            };
            chosen.ok_or_else(|| unusable(&all, settings))?
        };
        let text = |k: &str| card.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let strings = |k: &str| -> Vec<String> {
            card.get(k)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let caps = card.get("capabilities");
        Ok(Self {
            name: text("name"),
            description: text("description"),
            version: text("version"),
            skills: card
                .get("skills")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| serde_json::from_value(s.clone()).ok())
                        .collect()
                })
                .unwrap_or_default(),
            default_input_modes: strings("defaultInputModes"),
            default_output_modes: strings("defaultOutputModes"),
            streaming: caps
                .and_then(|c| c.get("streaming"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            extensions: caps
                .and_then(|c| c.get("extensions"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|e| e.get("uri").and_then(Value::as_str).map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            endpoint,
            binding,
            wire,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn picks_the_jsonrpc_interface_of_the_version() {
        let s = A2aSettings::for_url("http://h/");
        let card = json!({"name": "n", "description": "d", "version": "2",
            "capabilities": {"streaming": true, "extensions": [{"uri": "urn:x"}]},
            "skills": [{"id": "s", "name": "S", "description": "D", "tags": ["t"]}, {"bad": 1}],
            "supportedInterfaces": [
                {"url": "http://h/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
                {"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}]});
        let c = UpstreamCard::read(&card, &s).unwrap();
        assert_eq!(
            (c.endpoint.as_str(), c.wire),
            ("http://h/", WireVersion::V1_0)
        );
        assert!(c.streaming);
        assert_eq!(c.skills.len(), 1);
        assert_eq!(c.extensions, vec!["urn:x".to_owned()]);
        let card03 = json!({"name": "n", "url": "http://h/03", "protocolVersion": "0.3.0",
            "preferredTransport": "JSONRPC", "capabilities": {}});
        let c = UpstreamCard::read(&card03, &s).unwrap();
        assert_eq!(
            (c.endpoint.as_str(), c.wire),
            ("http://h/03", WireVersion::V0_3)
        );
        assert!(!c.streaming);
        let mut v1 = s.clone();
        v1.protocol_version = VersionChoice::V1_0;
        let e = UpstreamCard::read(&card03, &v1).unwrap_err();
        assert_eq!(
            e,
            r#"offers no interface that fits upstream.protocol_version = "1.0": its card offers A2A 0.3 (JSON-RPC)"#
        );
        let mut rest03 = v1.clone();
        rest03.protocol_version = VersionChoice::V0_3;
        rest03.protocol_binding = BindingChoice::HttpJson;
        let e = UpstreamCard::read(&card, &rest03).unwrap_err();
        assert_eq!(
            e,
            r#"offers no interface that fits upstream.protocol_version = "0.3" and upstream.protocol_binding = "HTTP+JSON": its card offers A2A 1.0 (HTTP+JSON), A2A 1.0 (JSON-RPC), A2A 0.3 (JSON-RPC)"#
        );
        let grpc = json!({"name": "n", "supportedInterfaces": [
            {"url": "http://h/", "protocolBinding": "GRPC", "protocolVersion": "1.0"}]});
        let e = UpstreamCard::read(&grpc, &s).unwrap_err();
        assert!(e.contains("gRPC agents are not supported yet"), "{e}");
        assert!(e.ends_with("its card offers A2A 1.0 (gRPC)"), "{e}");
        let mut rest = s.clone();
        rest.protocol_binding = BindingChoice::HttpJson;
        let c = UpstreamCard::read(&card, &rest).unwrap();
        assert_eq!(
            (c.endpoint.as_str(), c.binding),
            ("http://h/rest", Binding::HttpJson)
        );
        assert!(UpstreamCard::read(&json!([1]), &s).is_err());
        let mut ac = s.clone();
        ac.agentcore = true;
        let c = UpstreamCard::read(&card, &ac).unwrap();
        assert_eq!(
            (c.endpoint.as_str(), c.wire),
            ("http://h/", WireVersion::V0_3)
        );
    }
}
