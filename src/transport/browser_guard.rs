//! Which requests a web browser may make to the A2A routes: a request whose `Origin`
//! is not allowed, or whose `Host` names the gateway by a name it does not know, is
//! refused with `403 Forbidden` before anything else reads it.
//!
//! Why: without inbound authentication (the default `kind = "none"`, or `demo`) anyone
//! who reaches the gateway runs prompts with its upstream credentials, and a web page
//! makes its visitor's browser reach addresses the page cannot, `127.0.0.1` included.
//! - Browsers send `Origin` on cross-origin requests; programs (SDK clients, curl)
//!   send none. So a request with an `Origin` is refused unless `[server]
//!   allowed_origins` lists it.
//! - DNS rebinding points a name the page controls at the gateway's address, so the
//!   browser treats the gateway as same-origin (no `Origin` sent) but still sends the
//!   page's name as `Host`. So `Host` must be the public URL's host, one of `[server]
//!   allowed_hosts`, or, on a loopback listener, a loopback name (`localhost`,
//!   `127.0.0.1`, `[::1]`), which rebinding cannot produce.
//!
//! The health, readiness and metrics endpoints are not guarded: probes name the
//! instance by its address.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use reqwest::Url;

/// The `Origin` and `Host` rules; see the module docs. Default: no origin allowed, no
/// `Host` check (what in-process routers get; `serve` builds it from `[server]` with
/// [`BrowserGuard::new`]).
#[derive(Debug, Clone, Default)]
pub struct BrowserGuard {
    /// Allowed origins, each as [`origin_of`] writes it (`https://app.example.com`).
    origins: Vec<String>,
    /// Allowed host names, lowercase, without port; `None`: `Host` is not checked.
    hosts: Option<Vec<String>>,
    /// Loopback names are allowed as `Host` too (the listener is on loopback).
    loopback: bool,
}

impl BrowserGuard {
    /// The guard for `allowed_origins` (URLs such as `https://app.example.com`; ones
    /// that are not are dropped: configuration validation refuses them first) and, when
    /// `hosts` is `Some`, a `Host` check against those names, plus loopback names when
    /// `loopback`.
    pub fn new(allowed_origins: &[String], hosts: Option<Vec<String>>, loopback: bool) -> Self {
        Self {
            origins: allowed_origins
                .iter()
                .filter_map(|o| origin_of(o))
                .collect(),
            hosts: hosts.map(|h| h.iter().map(|n| normalize_host(n)).collect()),
            loopback,
        }
    }

    /// Why the request with `headers` to `uri` is refused, if it is.
    pub fn refusal(&self, headers: &HeaderMap, uri: &Uri) -> Option<&'static str> {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let allowed = origin
                .to_str()
                .ok()
                .and_then(origin_of)
                .is_some_and(|o| self.origins.contains(&o));
            if !allowed {
                return Some(
                    "this Origin is not allowed: the gateway serves browsers only from the origins `[server] allowed_origins` lists (none by default)",
                );
            }
        }
        if let Some(hosts) = &self.hosts {
            let host = uri.authority().map(|a| a.host().to_owned()).or_else(|| {
                let h = headers.get(header::HOST)?.to_str().ok()?;
                Some(
                    h.parse::<axum::http::uri::Authority>()
                        .ok()?
                        .host()
                        .to_owned(),
                )
            });
            // HTTP/1.0 sends no Host: not a browser.
            if let Some(host) = host {
                let host = normalize_host(&host);
                let known = hosts.contains(&host) || (self.loopback && is_loopback_name(&host));
                if !known {
                    return Some(
                        "this Host is not a name of the gateway: use the public URL's host, or list the name in `[server] allowed_hosts`",
                    );
                }
            }
        }
        None
    }
}

/// `scheme://host[:port]` of `url` (lowercase, the scheme's default port left out), as
/// browsers write `Origin`; `None` when it is not an http(s) URL with a host.
pub fn origin_of(url: &str) -> Option<String> {
    let url = Url::parse(url.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return None;
    }
    Some(url.origin().ascii_serialization())
}

/// A host name as compared: lowercase, no trailing dot, brackets kept on IPv6.
fn normalize_host(host: &str) -> String {
    host.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// `localhost` (or a name under it, RFC 6761), or a loopback address.
fn is_loopback_name(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The middleware: `403 Forbidden` with the reason as text for a refused request,
/// else the route.
pub async fn guard(State(guard): State<Arc<BrowserGuard>>, req: Request, next: Next) -> Response {
    match guard.refusal(req.headers(), req.uri()) {
        Some(why) => (StatusCode::FORBIDDEN, format!("{why}\n")).into_response(),
        None => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn root() -> Uri {
        Uri::from_static("/")
    }

    #[test]
    fn an_origin_is_refused_unless_listed() {
        let none = BrowserGuard::default();
        assert!(
            none.refusal(&headers(&[]), &root()).is_none(),
            "no Origin: a program"
        );
        for o in ["https://evil.example", "null", "http://127.0.0.1:8080"] {
            assert!(
                none.refusal(&headers(&[("origin", o)]), &root()).is_some(),
                "{o}"
            );
        }
        let some = BrowserGuard::new(&["https://App.example.com:443/".into()], None, false);
        assert!(
            some.refusal(&headers(&[("origin", "https://app.example.com")]), &root())
                .is_none()
        );
        assert!(
            some.refusal(
                &headers(&[("origin", "https://app.example.com:8443")]),
                &root()
            )
            .is_some()
        );
    }

    #[test]
    fn host_is_the_public_name_a_listed_one_or_loopback_on_a_loopback_listener() {
        let g = BrowserGuard::new(&[], Some(vec!["agents.example.com".into()]), true);
        for ok in [
            "agents.example.com",
            "AGENTS.example.com.:443",
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
        ] {
            assert!(
                g.refusal(&headers(&[("host", ok)]), &root()).is_none(),
                "{ok}"
            );
        }
        assert!(
            g.refusal(&headers(&[("host", "rebind.evil.example:8080")]), &root())
                .is_some()
        );
        // HTTP/2 names it in the URI's authority.
        let h2 = Uri::from_static("http://rebind.evil.example:8080/");
        assert!(g.refusal(&headers(&[]), &h2).is_some());
        // Not a loopback listener: loopback names are not the gateway's.
        let wide = BrowserGuard::new(&[], Some(vec!["agents.example.com".into()]), false);
        assert!(
            wide.refusal(&headers(&[("host", "127.0.0.1:8080")]), &root())
                .is_some()
        );
        // No Host check configured.
        assert!(
            BrowserGuard::default()
                .refusal(&headers(&[("host", "rebind.evil.example")]), &root())
                .is_none()
        );
    }
}
