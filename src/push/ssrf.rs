//! The SSRF guard: which addresses a webhook may reach, checked where the connection is
//! made. Every address a webhook's host name resolves to is checked by
//! [`GuardedResolver`] (the HTTP client's DNS resolver) before any connection; a URL
//! whose host is an IP literal (which the client does not resolve) is checked by
//! [`AddressPolicy::check_url`] before each attempt and at config creation.
//!
//! Refused by default: loopback, private (RFC 1918, IPv6 ULA `fc00::/7`), link-local
//! (`169.254/16` with the cloud metadata address `169.254.169.254`, `fe80::/10`), CGNAT
//! `100.64/10`, unspecified, multicast, broadcast, the reserved and benchmarking IPv4
//! ranges, and the IPv4-mapped, IPv4-compatible, NAT64 and 6to4 IPv6 forms of every
//! refused IPv4 address; and whatever the address inside them, Teredo (`2001::/32`),
//! NAT64 local use (`64:ff9b:1::/48`), IPv4-translated SIIT (`::ffff:0:0:0/96`) and
//! discard-only `100::/64`. `[push] allow_cidrs` opens exact ranges.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use crate::config::Cidr;

fn v4_refusal(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    Some(if ip.is_loopback() {
        "loopback"
    } else if ip.is_private() {
        "private (RFC 1918)"
    } else if ip.is_link_local() {
        "link-local (cloud metadata lives here)"
    } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
        "shared address space (CGNAT 100.64.0.0/10)"
    } else if ip.is_unspecified() || o[0] == 0 {
        "unspecified (\"this network\")"
    } else if ip.is_multicast() {
        "multicast"
    } else if ip.is_broadcast() || o[0] >= 240 {
        "reserved"
    } else if o[0] == 192 && o[1] == 0 && o[2] == 0 {
        "IETF protocol assignments (192.0.0.0/24)"
    } else if o[0] == 198 && (o[1] & 0xfe) == 18 {
        "benchmarking (198.18.0.0/15)"
    } else if ip.is_documentation() {
        "documentation"
    } else {
        return None;
    })
}

fn v6_refusal(ip: Ipv6Addr) -> Option<String> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_refusal(v4).map(|r| format!("IPv4-mapped {r}"));
    }
    let s = ip.segments();
    let embedded = |v4: Ipv4Addr, form: &str| v4_refusal(v4).map(|r| format!("{form} {r}"));
    if ip.is_loopback() {
        return Some("loopback".into());
    }
    if ip.is_unspecified() {
        return Some("unspecified".into());
    }
    if ip.is_multicast() {
        return Some("multicast".into());
    }
    if (s[0] & 0xfe00) == 0xfc00 {
        return Some("unique local (fc00::/7)".into());
    }
    if (s[0] & 0xffc0) == 0xfe80 || (s[0] & 0xffc0) == 0xfec0 {
        return Some("link-local".into());
    }
    // Forms that tunnel or translate to addresses this guard cannot see, or that
    // discard: never a webhook.
    if s[0] == 0x2001 && s[1] == 0 {
        return Some("Teredo (2001::/32)".into());
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        return Some("NAT64 local use (64:ff9b:1::/48)".into());
    }
    if s[..4] == [0; 4] && s[4] == 0xffff && s[5] == 0 {
        return Some("IPv4-translated (SIIT, ::ffff:0:0:0/96)".into());
    }
    if s[0] == 0x0100 && s[1..4] == [0; 3] {
        return Some("discard-only (100::/64)".into());
    }
    let low = Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    if s[..6] == [0; 6] {
        return embedded(low, "IPv4-compatible").or(Some("reserved (::/96)".into()));
    }
    if s[0] == 0x64 && s[1] == 0xff9b {
        return embedded(low, "NAT64");
    }
    if s[0] == 0x2002 {
        let v4 = Ipv4Addr::from((u32::from(s[1]) << 16) | u32::from(s[2]));
        return embedded(v4, "6to4");
    }
    if s[0] == 0x2001 && s[1] == 0x0db8 {
        return Some("documentation".into());
    }
    None
}

/// Which addresses webhooks may reach: everything public, plus `allow`.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    allow: Vec<Cidr>,
}

impl AddressPolicy {
    /// The default policy opened by `allow` (see the module docs).
    pub fn new(allow: Vec<Cidr>) -> Self {
        Self { allow }
    }

    /// Reads `[push] allow_cidrs`.
    ///
    /// # Errors
    /// The first entry that is not a range.
    pub fn from_config(allow: &[String]) -> Result<Self, String> {
        allow
            .iter()
            .map(|c| Cidr::parse(c))
            .collect::<Result<_, _>>()
            .map(Self::new)
    }

    /// `Ok` when a webhook may connect to `ip`; otherwise why not.
    ///
    /// # Errors
    /// A reason such as `"127.0.0.1 is loopback"`.
    pub fn check(&self, ip: IpAddr) -> Result<(), String> {
        if self.allow.iter().any(|c| c.contains(ip)) {
            return Ok(());
        }
        let why = match ip {
            IpAddr::V4(v4) => v4_refusal(v4).map(str::to_owned),
            IpAddr::V6(v6) => v6_refusal(v6),
        };
        match why {
            None => Ok(()),
            Some(why) => Err(format!(
                "{ip} is {why}: webhooks may not reach it (open it with [push] allow_cidrs)"
            )),
        }
    }

    /// Checks the host of `url` when it is an IP literal (host names are checked when
    /// they are resolved).
    ///
    /// # Errors
    /// As [`check`](Self::check).
    pub fn check_url(&self, url: &reqwest::Url) -> Result<(), String> {
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.check(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => self.check(IpAddr::V6(ip)),
            _ => Ok(()),
        }
    }
}

/// The error a refused address fails a connection with (found again in the error chain
/// to tell it from a network failure: it is not retried).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// The HTTP client's DNS resolver: resolves with the system resolver (or `hosts`, fixed
/// answers for tests) and refuses the whole name when any address it resolves to is
/// refused, so no connection to a refused address is ever opened.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    policy: Arc<AddressPolicy>,
    hosts: Arc<HashMap<String, Vec<IpAddr>>>,
}

impl GuardedResolver {
    /// A resolver enforcing `policy`; `hosts` answers for the names it holds instead of
    /// the system resolver.
    pub fn new(policy: Arc<AddressPolicy>, hosts: HashMap<String, Vec<IpAddr>>) -> Self {
        Self {
            policy,
            hosts: Arc::new(hosts),
        }
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let fixed = self.hosts.get(name.as_str()).cloned();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = match fixed {
                Some(ips) => ips.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect(),
                None => tokio::net::lookup_host((host.as_str(), 0)).await?.collect(),
            };
            if addrs.is_empty() {
                return Err(format!("{host} resolves to no address").into());
            }
            for a in &addrs {
                if let Err(why) = policy.check(a.ip()) {
                    return Err(Box::new(Refused(format!("{host} resolves to {why}")))
                        as Box<dyn std::error::Error + Send + Sync>);
                }
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(p: &AddressPolicy, ip: &str) -> bool {
        p.check(ip.parse().unwrap()).is_err()
    }

    #[test]
    fn defaults_refuse_internal_ranges() {
        let p = AddressPolicy::default();
        for ip in [
            "127.0.0.1",
            "127.8.9.10",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.100.100.200",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd00:ec2::254",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
            // Issue 43, item 10: tunnels, translations and discard.
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001::1",
            "64:ff9b:1::808:808",
            "::ffff:0:808:808",
            "100::1",
        ] {
            assert!(refused(&p, ip), "{ip} must be refused");
        }
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(!refused(&p, ip), "{ip} must be allowed");
        }
    }

    #[test]
    fn allow_cidrs_open_exact_ranges() {
        let p = AddressPolicy::from_config(&["127.0.0.1/32".into(), "fd00::/8".into()]).unwrap();
        assert!(!refused(&p, "127.0.0.1"));
        assert!(!refused(&p, "::ffff:127.0.0.1"));
        assert!(refused(&p, "127.0.0.2"));
        assert!(!refused(&p, "fd12::1"));
        assert!(refused(&p, "::1"));
        assert!(AddressPolicy::from_config(&["10.0.0.0/33".into()]).is_err());
        assert!(AddressPolicy::from_config(&["nope".into()]).is_err());
    }

    #[test]
    fn ip_literal_urls_are_checked() {
        let p = AddressPolicy::default();
        for u in [
            "https://127.0.0.1/x",
            "https://[::1]/x",
            "https://10.0.0.1/",
            "https://169.254.169.254/latest/meta-data",
            "https://[::ffff:127.0.0.1]/",
        ] {
            assert!(p.check_url(&u.parse().unwrap()).is_err(), "{u}");
        }
        assert!(
            p.check_url(&"https://example.com/".parse().unwrap())
                .is_ok()
        );
    }

    #[tokio::test]
    async fn resolver_refuses_a_name_resolving_to_loopback() {
        use reqwest::dns::Resolve;
        let r = GuardedResolver::new(
            Arc::new(AddressPolicy::default()),
            [("evil.test".to_owned(), vec!["127.0.0.1".parse().unwrap()])].into(),
        );
        let err = match r.resolve("evil.test".parse().unwrap()).await {
            Ok(_) => panic!("resolved"),
            Err(e) => e,
        };
        assert!(err.downcast_ref::<Refused>().is_some(), "{err}");
        assert!(err.to_string().contains("127.0.0.1 is loopback"), "{err}");
    }
}
