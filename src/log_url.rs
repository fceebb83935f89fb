//! URLs as they may appear in logs: no password, no secret-looking query value.
//!
//! Operators put credentials into URLs more often than they should
//! (`https://user:pass@host/...`, `...?client_secret=...`). Every URL the gateway logs
//! goes through [`LogUrl`], so "secrets are never logged" holds for them too.

use std::fmt;

use reqwest::Url;

/// What a hidden part of a URL is shown as.
const HIDDEN: &str = "***";

/// Query parameter names (compared lower-case, as substrings) whose values are hidden.
const SECRET_PARAMS: &[&str] = &[
    "secret",
    "token",
    "key",
    "password",
    "passwd",
    "pwd",
    "sig",
    "signature",
    "credential",
    "auth",
    "code",
    "assertion",
];

/// `Display` for a URL with the user-info password and the values of secret-looking
/// query parameters (names containing `secret`, `token`, `key`, `password`, `sig`,
/// `auth`, `code`, ...) shown as `***`. A bare `host:port` (the form of a gRPC interface
/// URL) is shown as it is; other text that does not parse as a URL is shown as
/// `[unparsable URL]`, since it might be anything.
pub struct LogUrl<'a>(pub &'a str);

impl fmt::Display for LogUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Before parsing: `localhost:50051` parses, as the scheme `localhost` with the
        // path `50051`.
        if is_host_port(self.0) {
            return f.write_str(self.0);
        }
        match Url::parse(self.0) {
            Ok(url) => f.write_str(&masked(&url)),
            Err(_) => f.write_str("[unparsable URL]"),
        }
    }
}

/// Whether `text` is just `host:port` (a name, IPv4 or bracketed IPv6 address, and a
/// port number): nothing in it can be a secret.
fn is_host_port(text: &str) -> bool {
    let Some((host, port)) = text.rsplit_once(':') else {
        return false;
    };
    let host_ok = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        v6.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    };
    host_ok && port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok()
}

/// `url` as text with its password and secret-looking query values replaced by `***`.
pub fn masked(url: &Url) -> String {
    let mut shown = url.clone();
    if shown.password().is_some() {
        let _ = shown.set_password(Some(HIDDEN));
    }
    if url.query().is_some() {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| {
                let lower = k.to_ascii_lowercase();
                let secret = SECRET_PARAMS.iter().any(|s| lower.contains(s));
                (
                    k.into_owned(),
                    if secret {
                        HIDDEN.to_owned()
                    } else {
                        v.into_owned()
                    },
                )
            })
            .collect();
        shown.query_pairs_mut().clear().extend_pairs(pairs);
    }
    shown.as_str().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_secret_query_values_are_hidden() {
        let shown = LogUrl("http://tokuser:TOKPASS@127.0.0.1:2/oauth2/token?secret=QSECRET&x=1")
            .to_string();
        assert_eq!(
            shown,
            "http://tokuser:***@127.0.0.1:2/oauth2/token?secret=***&x=1"
        );
        for name in [
            "client_secret",
            "access_token",
            "api_key",
            "X-Amz-Signature",
            "code",
        ] {
            let raw = format!("https://h/p?{name}=S3CR3T");
            let shown = LogUrl(&raw).to_string();
            assert!(!shown.contains("S3CR3T"), "{shown}");
        }
    }

    #[test]
    fn ordinary_urls_are_unchanged() {
        let raw = "https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/arn/invocations?qualifier=DEFAULT";
        assert_eq!(LogUrl(raw).to_string(), raw);
        assert_eq!(LogUrl("not a url").to_string(), "[unparsable URL]");
    }

    #[test]
    fn a_grpc_host_and_port_is_shown_as_it_is() {
        for raw in [
            "127.0.0.1:50051",
            "localhost:50051",
            "agent.example.com:443",
            "[::1]:9",
        ] {
            assert_eq!(LogUrl(raw).to_string(), raw);
        }
        for raw in [":1", "a b:1", "1.2.3.4:99999", "[::1:9"] {
            assert_eq!(LogUrl(raw).to_string(), "[unparsable URL]", "{raw}");
        }
    }
}
