//! `[push]`: push notifications (webhooks) to the clients of long tasks (spec §4.3),
//! delivered from a durable outbox (see [`crate::push`]).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::error::{Invalid, nonzero};

/// How webhook calls are signed ([Standard Webhooks] v1).
///
/// [Standard Webhooks]: https://www.standardwebhooks.com/
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SignatureScheme {
    /// `v1a`: Ed25519 with the gateway's signing key; receivers verify with the public
    /// keys of `/.well-known/jwks.json` (no shared secret).
    #[default]
    V1a,
    /// `v1`: HMAC-SHA256 with the `whsec_` secret of `hmac_secret_file`.
    V1,
}

/// `[push]`: push notifications.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PushConfig {
    /// Offer push notifications (`capabilities.pushNotifications`) and run the sender.
    /// Default true.
    pub enabled: bool,
    /// Accept `http://` webhook URLs (default false: `https` only). For tests and
    /// private networks.
    pub allow_http: bool,
    /// Address ranges (CIDR, e.g. `127.0.0.1/32`, `10.1.0.0/16`) that webhooks may reach
    /// although the SSRF guard refuses them by default (loopback, private, link-local,
    /// CGNAT, ...). Default none.
    pub allow_cidrs: Vec<String>,
    /// Attempts of one delivery before it is given up. Default 10.
    pub max_attempts: u32,
    /// Seconds after the event was stored after which a delivery is given up rather than
    /// retried. Default 10800 (three hours).
    pub max_age_secs: u64,
    /// Seconds one attempt may take (connect, send, answer). Default 15.
    pub timeout_secs: u64,
    /// First retry delay in milliseconds; each further retry doubles it (with jitter),
    /// up to `max_backoff_secs`. Default 1000.
    pub initial_backoff_ms: u64,
    /// Longest delay between two attempts, in seconds (also caps `Retry-After`).
    /// Default 1800.
    pub max_backoff_secs: u64,
    /// Deliveries in flight at once, over all webhooks; while deliveries of several
    /// tenants (callers) wait, shared equally between them. Default 64.
    pub concurrency: usize,
    /// Deliveries in flight at once to one host (host and port): the most, halved
    /// (down to 1) by each attempt that times out or cannot connect and doubled back
    /// by each answered one. Default 8.
    pub per_host_concurrency: usize,
    /// Consecutive given-up deliveries after which a config is disabled (it stays
    /// visible as such in `push-status`). Default 5.
    pub disable_after_failures: u32,
    /// Seconds a claimed delivery stays reserved for the instance that claimed it;
    /// after that another instance takes it over. Must exceed `timeout_secs`. Default 60.
    /// (PostgreSQL. On the memory and SQLite stores claims are kept in memory, and this
    /// is only how long deliveries whose settlement could not be stored wait before
    /// they are tried again.)
    pub lease_secs: u64,
    /// Milliseconds between two looks for due deliveries when nothing wakes the sender
    /// (retries, other instances' events). Default 500.
    pub poll_interval_ms: u64,
    /// Send consecutive artifact-update events of one artifact that are pending for one
    /// webhook as one POST (one `artifactUpdate` with all their parts, in order), so a
    /// slow receiver gets few large POSTs instead of a backlog of one per chunk; only
    /// what is already pending is coalesced (nothing waits for more). Default true.
    pub coalesce: bool,
    /// Events in one coalesced POST at most. Default 256.
    pub max_coalesce_events: usize,
    /// Bytes of event JSON in one coalesced POST at most (a single larger event is
    /// still sent alone). Default 1048576 (1 MiB).
    pub max_coalesce_bytes: usize,
    /// Signature scheme: `"v1a"` (Ed25519, default) or `"v1"` (HMAC-SHA256).
    pub signature: SignatureScheme,
    /// The Ed25519 signing key (PKCS#8 PEM, or `whsk_` followed by the base64 32-byte
    /// seed). Unset: a key is generated once and kept in the task store.
    pub signing_key_file: Option<PathBuf>,
    /// Keys that also sign during a rotation (same formats); all are published in the
    /// JWKS.
    pub extra_signing_key_files: Vec<PathBuf>,
    /// File holding the `whsec_...` secret for `signature = "v1"`.
    pub hmac_secret_file: Option<PathBuf>,
}

impl Default for PushConfig {
    fn default() -> Self {
        PushConfig {
            enabled: true,
            allow_http: false,
            allow_cidrs: Vec::new(),
            max_attempts: 10,
            max_age_secs: 10_800,
            timeout_secs: 15,
            initial_backoff_ms: 1_000,
            max_backoff_secs: 1_800,
            concurrency: 64,
            per_host_concurrency: 8,
            disable_after_failures: 5,
            lease_secs: 60,
            poll_interval_ms: 500,
            coalesce: true,
            max_coalesce_events: 256,
            max_coalesce_bytes: 1 << 20,
            signature: SignatureScheme::V1a,
            signing_key_file: None,
            extra_signing_key_files: Vec::new(),
            hmac_secret_file: None,
        }
    }
}

impl PushConfig {
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        nonzero("push.max_attempts", self.max_attempts.into())?;
        nonzero("push.max_age_secs", self.max_age_secs)?;
        nonzero("push.timeout_secs", self.timeout_secs)?;
        nonzero("push.initial_backoff_ms", self.initial_backoff_ms)?;
        nonzero("push.max_backoff_secs", self.max_backoff_secs)?;
        nonzero("push.concurrency", self.concurrency as u64)?;
        nonzero(
            "push.per_host_concurrency",
            self.per_host_concurrency as u64,
        )?;
        nonzero(
            "push.disable_after_failures",
            self.disable_after_failures.into(),
        )?;
        nonzero("push.poll_interval_ms", self.poll_interval_ms)?;
        nonzero("push.max_coalesce_events", self.max_coalesce_events as u64)?;
        nonzero("push.max_coalesce_bytes", self.max_coalesce_bytes as u64)?;
        if self.lease_secs <= self.timeout_secs {
            return Err(Invalid::new(
                "push.lease_secs",
                format!(
                    "must be greater than push.timeout_secs ({}): a lease must outlive its attempt",
                    self.timeout_secs
                ),
            ));
        }
        for c in &self.allow_cidrs {
            super::Cidr::parse(c).map_err(|e| Invalid::new("push.allow_cidrs", e))?;
        }
        if self.enabled && self.signature == SignatureScheme::V1 && self.hmac_secret_file.is_none()
        {
            return Err(Invalid::new(
                "push.hmac_secret_file",
                "signature = \"v1\" needs the whsec_ secret in a file",
            ));
        }
        Ok(())
    }
}
