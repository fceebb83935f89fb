//! `a2a-gateway health`: the container health check. Reads the configuration as
//! `serve` does and asks the gateway's own `/healthz` on the configured
//! `server.listen` port (loopback when it listens on every interface), so the check
//! follows the port the mounted config file sets. Exit 0 when it answers 200, 1
//! otherwise, with the reason on stderr.
//!
//! With TLS configured it speaks HTTPS without verifying the certificate: it only
//! asks whether the local process answers, and sends nothing secret.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use reqwest::Url;

use super::CliError;
use crate::config::{Config, ConfigSources};

/// Arguments of `health`.
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// TOML config file (same discovery as `serve`).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Ask this gateway instead of the one derived from `server.listen`: its base URL
    /// (`/healthz` is added) or the full `/healthz` URL.
    #[arg(long, value_name = "URL")]
    pub url: Option<Url>,
    /// Give up after this long.
    #[arg(long, value_name = "SECS", default_value_t = 3)]
    pub timeout_secs: u64,
}

/// The `/healthz` URL of the gateway `config` describes, as seen from this host.
pub fn health_url(config: &Config) -> Url {
    let listen = config.server.listen;
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let scheme = if config.server.tls_enabled() {
        "https"
    } else {
        "http"
    };
    let addr = SocketAddr::new(ip, listen.port());
    Url::parse(&format!("{scheme}://{addr}/healthz")).expect("a socket address makes a URL")
}

/// `url` as the gateway's `/healthz`: a base URL (path `/` or ending in `/`) gets
/// `healthz` appended, so `--url` takes the same base URL as the client commands and a
/// check never passes on whatever page the base URL serves.
fn healthz_of(url: Url) -> Url {
    if url.path().ends_with('/') {
        url.join("healthz").unwrap_or(url)
    } else {
        url
    }
}

/// Runs `health`.
pub(super) async fn run(args: HealthArgs) -> Result<ExitCode, CliError> {
    let url = match args.url {
        Some(u) => healthz_of(u),
        None => health_url(&Config::load(ConfigSources::discover(args.config))?),
    };
    let shown = crate::config::LogUrl(url.as_str());
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(args.timeout_secs.max(1)))
        .danger_accept_invalid_certs(true)
        .build()?;
    let resp = client
        .get(url.clone())
        .send()
        .await
        .map_err(|e| format!("{shown}: {}", super::client::why(&e)))?;
    if resp.status().is_success() {
        outln!("ok: {shown}");
        Ok(ExitCode::SUCCESS)
    } else {
        Err(format!("{shown} answered HTTP {}", resp.status().as_u16()).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_gets_healthz() {
        let u = |s: &str| healthz_of(Url::parse(s).unwrap()).to_string();
        assert_eq!(u("http://127.0.0.1:8080/"), "http://127.0.0.1:8080/healthz");
        assert_eq!(u("http://127.0.0.1:8080"), "http://127.0.0.1:8080/healthz");
        assert_eq!(u("http://h/gw/"), "http://h/gw/healthz");
        assert_eq!(u("http://h/healthz"), "http://h/healthz");
    }
}
