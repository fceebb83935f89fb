//! The agent card's `supportedInterfaces` (spec §4.4.6, §5): one entry per binding named
//! in `server.bindings`, in that order (the first is the preferred one).
//!
//! - JSON-RPC: the public URL itself (`POST /`).
//! - HTTP+JSON: the public URL followed by [`REST_PATH`](super::rest::REST_PATH)
//!   (`https://agents.example.com/a2a/rest`).
//! - gRPC: `host:port` (the gRPC listener, or the public URL's host and port when gRPC
//!   shares the HTTP port).
//!
//! When JSON-RPC is served, A2A 0.3 is served too (on JSON-RPC only, `docs/a2a-0.3.md`),
//! so one more entry, last, declares it: `protocolBinding` `JSONRPC`,
//! `protocolVersion` `0.3`, the JSON-RPC URL. A 1.0 client sees it, and picks the 1.0
//! entries before it; the card's 0.3 discovery fields are derived from it.

use reqwest::Url;

use super::operations::PROTOCOL_VERSION;

/// The `protocolVersion` of the card's A2A 0.3 interface.
pub const V03_PROTOCOL_VERSION: &str = "0.3";
use super::rest::REST_PATH;
use crate::config::Binding;
use crate::protocol::AgentInterface;

/// The HTTP+JSON interface URL for a gateway whose JSON-RPC URL is `public_url`:
/// `public_url` without its trailing `/`, then [`REST_PATH`].
pub fn rest_url(public_url: &str) -> String {
    format!("{}{REST_PATH}", public_url.trim_end_matches('/'))
}

/// `host:port` of `public_url` (the scheme's default port when it names none), the
/// address a gRPC client dials when gRPC shares the HTTP listener. `None` when
/// `public_url` is not an absolute URL with a host.
pub fn authority_of(public_url: &str) -> Option<String> {
    let url = Url::parse(public_url).ok()?;
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    Some(format!("{host}:{port}"))
}

/// One [`AgentInterface`] per binding in `bindings`, in order, for a gateway reachable at
/// `public_url`, then the A2A 0.3 JSON-RPC interface when `bindings` has JSON-RPC. The
/// gRPC entry names `grpc_authority` (`host:port`) when given, else the public URL's
/// host and port; it is left out when neither is known.
pub fn supported_interfaces(
    public_url: &str,
    bindings: &[Binding],
    grpc_authority: Option<&str>,
) -> Vec<AgentInterface> {
    let mut interfaces: Vec<AgentInterface> = bindings
        .iter()
        .filter_map(|&binding| {
            let url = match binding {
                Binding::Jsonrpc => public_url.to_owned(),
                Binding::Rest => rest_url(public_url),
                Binding::Grpc => grpc_authority
                    .map(str::to_owned)
                    .or_else(|| authority_of(public_url))?,
            };
            Some(AgentInterface {
                url,
                protocol_binding: binding.protocol_binding().into(),
                protocol_version: PROTOCOL_VERSION.into(),
                tenant: None,
            })
        })
        .collect();
    if bindings.contains(&Binding::Jsonrpc) {
        interfaces.push(AgentInterface {
            url: public_url.to_owned(),
            protocol_binding: Binding::Jsonrpc.protocol_binding().into(),
            protocol_version: V03_PROTOCOL_VERSION.into(),
            tenant: None,
        });
    }
    interfaces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_binding_in_order() {
        let ifs = supported_interfaces("https://agents.example.com/", &Binding::ALL, None);
        let got: Vec<(&str, &str)> = ifs
            .iter()
            .map(|i| (i.protocol_binding.as_str(), i.url.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("JSONRPC", "https://agents.example.com/"),
                ("HTTP+JSON", "https://agents.example.com/a2a/rest"),
                ("GRPC", "agents.example.com:443"),
                ("JSONRPC", "https://agents.example.com/"),
            ]
        );
        let versions: Vec<&str> = ifs.iter().map(|i| i.protocol_version.as_str()).collect();
        assert_eq!(versions, ["1.0", "1.0", "1.0", "0.3"]);
    }

    #[test]
    fn subset_and_grpc_listener() {
        let ifs = supported_interfaces(
            "http://127.0.0.1:8080/",
            &[Binding::Grpc, Binding::Rest],
            Some("10.0.0.1:50051"),
        );
        assert_eq!(ifs[0].url, "10.0.0.1:50051");
        assert_eq!(ifs[1].url, "http://127.0.0.1:8080/a2a/rest");
        assert_eq!(ifs.len(), 2);
        assert_eq!(
            authority_of("http://[::1]:9000/x").as_deref(),
            Some("[::1]:9000")
        );
    }
}
