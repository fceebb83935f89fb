//! Serde helpers shared by the config sections: URLs and redacted secrets.

use reqwest::Url;
use secrecy::SecretString;
use serde::{Deserialize, Deserializer, Serializer};

/// What every secret renders as in serialized (and therefore printed) config.
pub(crate) const REDACTED: &str = "***";

/// Parses an absolute `http` or `https` URL with a host.
pub(crate) fn parse_http_url(raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|e| format!("invalid URL {raw:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "invalid URL {raw:?}: scheme must be http or https, found {:?}",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("invalid URL {raw:?}: no host"));
    }
    Ok(url)
}

/// The URL as text with a password in its user-info, and the values of secret-looking
/// query parameters, shown as `***` (serialization only prints the effective
/// configuration; see [`crate::telemetry::log_url`]).
fn shown(url: &Url) -> String {
    crate::telemetry::log_url::masked(url)
}

/// `Url` fields: parsed and checked (http/https) on the way in, plain strings (any
/// password as `***`) on the way out.
pub(crate) mod http_url {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(url: &Url, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&shown(url))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Url, D::Error> {
        let raw = String::deserialize(d)?;
        parse_http_url(&raw).map_err(serde::de::Error::custom)
    }
}

/// `Option<Url>` fields; use with `#[serde(default, with = "http_url_opt")]`.
pub(crate) mod http_url_opt {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(url: &Option<Url>, s: S) -> Result<S::Ok, S::Error> {
        match url {
            Some(url) => s.serialize_some(&shown(url)),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Url>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|raw| parse_http_url(&raw).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// `Option<SecretString>` fields: deserialized normally, always serialized as `***`.
///
/// Serialization is only used to print the effective configuration, so a secret can never
/// reach a log or a terminal through it.
pub(crate) mod secret_opt {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        secret: &Option<SecretString>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match secret {
            Some(_) => s.serialize_some(REDACTED),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<SecretString>, D::Error> {
        Option::<SecretString>::deserialize(d)
    }
}

/// `Option<String>` fields that must not be printed (such as a key hash): deserialized
/// normally, always serialized as `***`.
pub(crate) mod secret_string_opt {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        value: &Option<String>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(_) => s.serialize_some(REDACTED),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Option::<String>::deserialize(d)
    }
}
