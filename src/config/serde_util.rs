//! Serde helpers shared by the config sections: URLs and redacted secrets.

use reqwest::Url;
use secrecy::SecretString;
use serde::{Deserialize, Deserializer, Serializer};

/// What every secret renders as in serialized (and therefore printed) config.
pub(crate) const REDACTED: &str = "***";

/// Parses an absolute `http` or `https` URL with a host.
///
/// # Errors
/// Why it is not one, quoting the URL with any user-info password shown as `***` and,
/// when it does not parse, without its query and fragment (they may hold secrets).
pub(crate) fn parse_http_url(raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|e| format!("invalid URL {:?}: {e}", unparsed(raw)))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "invalid URL {:?}: scheme must be http or https, found {:?}",
            shown(&url),
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("invalid URL {:?}: no host", shown(&url)));
    }
    Ok(url)
}

/// Text that did not parse as a URL, to quote in an error: the user-info before an `@`
/// of the authority as `***`, the query and fragment cut (`?...`).
fn unparsed(raw: &str) -> String {
    let start = raw.find("://").map_or(0, |i| i + 3);
    let rest = &raw[start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let mut out = raw[..start].to_owned();
    match authority.rfind('@') {
        Some(at) => {
            out.push_str("***@");
            out.push_str(&authority[at + 1..]);
        }
        None => out.push_str(authority),
    }
    let tail = &rest[authority_end..];
    let path_end = tail.find(['?', '#']).unwrap_or(tail.len());
    out.push_str(&tail[..path_end]);
    if path_end < tail.len() {
        out.push_str("?...");
    }
    out
}

/// The URL as text with a password in its user-info, and the values of secret-looking
/// query parameters, shown as `***` (serialization only prints the effective
/// configuration; see [`crate::log_url`]).
fn shown(url: &Url) -> String {
    crate::log_url::masked(url)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A URL that does not parse, or has the wrong scheme, is quoted without its password
    /// or query.
    #[test]
    fn a_bad_url_is_quoted_without_its_password_or_query() {
        for raw in [
            "https://user:s3cretPW@host:99999/",
            "https://user:s3cretPW@exa mple.com/",
            "https://u:s3cretPW@[::1/x",
            "ftp://user:s3cretPW@host/",
            "https://host:99999/p?token=s3cretPW",
            "https://user:s3cretPW@/",
        ] {
            let err = parse_http_url(raw).unwrap_err();
            assert!(!err.contains("s3cretPW"), "{raw}: {err}");
            assert!(err.starts_with("invalid URL"), "{err}");
        }
        let err = parse_http_url("https://user:pw@host:99999/a").unwrap_err();
        assert!(err.contains("https://***@host:99999/a"), "{err}");
    }
}
