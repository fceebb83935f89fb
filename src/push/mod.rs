//! Push notifications (spec §4.3, §3.1.7-3.1.10): webhook configs registered per task,
//! and every task event (the Task, status and artifact updates) POSTed to each of them
//! from a durable outbox, at least once and in order per (task, config), signed with
//! [Standard Webhooks] v1, and never to an address the SSRF guard refuses.
//!
//! - [`crate::store::push`]: what the task stores keep for it (configs, outbox rows
//!   written in the transaction of their events, the signing key); each task store
//!   implements it in its own folder.
//! - [`ssrf`]: the address policy and the HTTP client's guarded DNS resolver.
//! - [`sign`]: `webhook-signature` (v1a Ed25519 with a JWKS, or v1 HMAC).
//! - [`sender`]: claims, attempts, retries, give-ups, metrics.
//! - `coalesce`: consecutive chunks of one artifact pending for a webhook, as one POST.
//! - `fair`: which due delivery may start now (global, per-host and per-caller slots).
//! - [`PushService`]: the above assembled from `[push]`; the handler validates and
//!   stores configs through it ([`PushService::check_config`]).
//!
//! [Standard Webhooks]: https://www.standardwebhooks.com/

pub(crate) mod coalesce;
pub(crate) mod fair;
pub(crate) mod ready;
pub mod sender;
pub mod sign;
pub mod ssrf;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::config::{PushConfig, SignatureScheme};
use crate::error::A2aError;
use crate::protocol::{AuthenticationInfo, TaskPushNotificationConfig};
use crate::store::TaskStore;
use crate::store::push::{DeliveryKey, StoredPushConfig};
use sign::Signer;
use ssrf::{AddressPolicy, GuardedResolver};

/// The path of the signing keys' JWKS (v1a).
pub const JWKS_PATH: &str = "/.well-known/jwks.json";

/// The URI of the card extension that names the webhook signature scheme and the JWKS.
pub const SIGNATURE_EXTENSION: &str = "https://www.standardwebhooks.com/#signature";

/// Longest accepted webhook URL, in bytes.
pub const MAX_URL_BYTES: usize = 2048;

/// Longest accepted token, scheme or credentials, in bytes.
pub const MAX_SECRET_BYTES: usize = 4096;

/// The `webhook-id` of a delivery: the same on every attempt of one event to one config
/// (and across restarts and instances), different for any other pair.
pub fn webhook_id(key: &DeliveryKey) -> String {
    range_webhook_id(key, key.seq)
}

/// The `webhook-id` of a coalesced POST of the events `key.seq..=last` to one config:
/// [`webhook_id`] of the head when `last` is the head itself; otherwise it also names
/// `last`, so one range has one id on every attempt and any other range another.
pub fn range_webhook_id(key: &DeliveryKey, last: u64) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    for part in [
        key.scope.id_key().as_bytes(),
        key.scope.owner.as_bytes(),
        key.task_id.as_bytes(),
        key.config_id.as_bytes(),
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.update(key.seq.to_be_bytes());
    if last != key.seq {
        h.update(b"..");
        h.update(last.to_be_bytes());
    }
    let digest = h.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("msg_{hex}")
}

/// Push notifications as `[push]` configures them: validation of configs, the HTTP
/// client with its SSRF guard, the signer and the sender loop.
pub struct PushService {
    pub(crate) config: PushConfig,
    pub(crate) policy: Arc<AddressPolicy>,
    pub(crate) signer: Signer,
    pub(crate) client: reqwest::Client,
    pub(crate) wake: Notify,
    /// Whether [`wake`](Self::wake) wakes the sender: false on a store only this
    /// process uses ([`PushStore::single_process`]) until it holds an enabled config
    /// (found at open, or registered since), so that a gateway whose callers never
    /// ask for push does not read the outbox after every commit. The sender's own
    /// poll (`[push] poll_interval_ms`) runs either way.
    armed: AtomicBool,
    /// How many configs this process has deleted (see [`forget`](Self::forget)): the
    /// sender drops the heads it holds in memory when this moved since it read them.
    pub(crate) forgotten: AtomicU64,
    pub(crate) store: Arc<dyn TaskStore>,
}

impl std::fmt::Debug for PushService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushService")
            .field("signer", &self.signer)
            .field("allow_http", &self.config.allow_http)
            .finish_non_exhaustive()
    }
}

fn read_file(path: &std::path::Path, key: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{key} {}: {e}", path.display()))
}

impl PushService {
    /// Builds the service over `store`: reads the signing keys (`signing_key_file` and
    /// `extra_signing_key_files`, or the key kept in the store, generated on first use),
    /// or the `v1` secret.
    ///
    /// # Errors
    /// A message naming the key or file when a key cannot be read, the store keeps no
    /// push state, or the HTTP client cannot be built.
    pub async fn open(config: &PushConfig, store: Arc<dyn TaskStore>) -> Result<Arc<Self>, String> {
        Self::open_with_hosts(config, store, HashMap::new()).await
    }

    /// [`open`](Self::open), resolving the names in `hosts` to the given addresses
    /// instead of asking DNS (tests: a name that resolves to a refused address).
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_with_hosts(
        config: &PushConfig,
        store: Arc<dyn TaskStore>,
        hosts: HashMap<String, Vec<IpAddr>>,
    ) -> Result<Arc<Self>, String> {
        let push_store = store
            .push_store()
            .ok_or("this task store keeps no push notification state")?;
        let signer = match config.signature {
            SignatureScheme::V1 => {
                let path = config
                    .hmac_secret_file
                    .as_deref()
                    .ok_or("push.hmac_secret_file is required with signature = \"v1\"")?;
                let text = String::from_utf8(read_file(path, "push.hmac_secret_file")?)
                    .map_err(|_| "push.hmac_secret_file is not text".to_owned())?;
                Signer::v1(&text).map_err(|e| format!("push.hmac_secret_file: {e}"))?
            }
            SignatureScheme::V1a => {
                let mut keys = Vec::new();
                match &config.signing_key_file {
                    Some(path) => {
                        let bytes = read_file(path, "push.signing_key_file")?;
                        keys.push(
                            sign::parse_ed25519(&bytes, &path.display().to_string())
                                .map_err(|e| format!("push.signing_key_file {e}"))?,
                        );
                    }
                    None => {
                        let kept = push_store
                            .signing_key(&sign::generate_pkcs8())
                            .await
                            .map_err(|e| format!("the signing key kept in the store: {e}"))?;
                        keys.push(
                            sign::parse_ed25519(&kept, "the signing key kept in the store")
                                .map_err(|e| e.to_string())?,
                        );
                    }
                }
                for path in &config.extra_signing_key_files {
                    let bytes = read_file(path, "push.extra_signing_key_files")?;
                    keys.push(
                        sign::parse_ed25519(&bytes, &path.display().to_string())
                            .map_err(|e| format!("push.extra_signing_key_files {e}"))?,
                    );
                }
                Signer::v1a(keys)
            }
        };
        let policy = Arc::new(AddressPolicy::from_config(&config.allow_cidrs)?);
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(GuardedResolver::new(policy.clone(), hosts)))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(Duration::from_secs(config.timeout_secs))
            .connect_timeout(Duration::from_secs(config.timeout_secs.min(10)))
            .pool_idle_timeout(Duration::from_secs(30))
            .user_agent(concat!(
                "a2a-gateway/",
                env!("CARGO_PKG_VERSION"),
                " (push)"
            ))
            .build()
            .map_err(|e| format!("the webhook HTTP client: {e}"))?;
        // Several processes may write configs to a shared store: always armed there.
        let armed = !push_store.single_process()
            || push_store.has_configs().await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot tell whether the store holds push configs; waking the push sender after every commit");
                true
            });
        Ok(Arc::new(Self {
            config: config.clone(),
            policy,
            signer,
            client,
            wake: Notify::new(),
            armed: AtomicBool::new(armed),
            forgotten: AtomicU64::new(0),
            store,
        }))
    }

    /// Records that a config was deleted (after the delete is stored): the sender
    /// starts none of the heads it read before and holds in memory without reading
    /// them again, so nothing is sent for the config once the delete returns (an
    /// attempt already started may still complete).
    pub fn forget(&self) {
        self.forgotten.fetch_add(1, Ordering::AcqRel);
    }

    /// Wakes the sender (new events were stored, and with them any outbox rows),
    /// when the store may hold configs (see [`arm`](Self::arm)); otherwise nothing
    /// can have been queued and the sender is left asleep.
    pub fn wake(&self) {
        if self.armed.load(Ordering::Acquire) {
            self.wake.notify_one();
        }
    }

    /// Records that a config is being stored, so that [`wake`](Self::wake) wakes the
    /// sender from now on (called before the config is written, so that any commit
    /// whose outbox rows the config produced finds the wake-ups armed).
    pub fn arm(&self) {
        self.armed.store(true, Ordering::Release);
    }

    /// The signing keys' JWKS (`None` with `signature = "v1"`).
    pub fn jwks(&self) -> Option<serde_json::Value> {
        self.signer.jwks()
    }

    /// The signature scheme.
    pub fn signature(&self) -> SignatureScheme {
        self.config.signature
    }

    /// Starts the sender loop; it ends after `stop` is cancelled.
    pub fn spawn(self: &Arc<Self>, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        tokio::spawn(sender::run(self.clone(), stop))
    }

    /// Checks a config a client registers and turns it into what the store keeps: the
    /// URL is absolute `https` (or `http` with `allow_http`), without credentials in it,
    /// at most [`MAX_URL_BYTES`], and not an IP literal the SSRF guard refuses; token,
    /// scheme and credentials hold no CR, LF or other control characters (they become
    /// header values) and are at most [`MAX_SECRET_BYTES`].
    ///
    /// # Errors
    /// [`A2aError::InvalidParams`] naming the field (never echoing a secret).
    pub fn check_config(
        &self,
        task_id: &str,
        id: &str,
        cfg: &TaskPushNotificationConfig,
    ) -> Result<StoredPushConfig, A2aError> {
        let bad = |m: String| A2aError::InvalidParams(m);
        if cfg.url.is_empty() {
            return Err(bad("url is required".into()));
        }
        if cfg.url.len() > MAX_URL_BYTES {
            return Err(bad(format!("url is longer than {MAX_URL_BYTES} bytes")));
        }
        let url = reqwest::Url::parse(&cfg.url)
            .map_err(|e| bad(format!("url is not an absolute URL: {e}")))?;
        match url.scheme() {
            "https" => {}
            "http" if self.config.allow_http => {}
            "http" => {
                return Err(bad(
                    "url must use https (this gateway does not send webhooks over plain http)"
                        .into(),
                ));
            }
            s => return Err(bad(format!("url scheme {s:?} is not https"))),
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad("url has no host".into()));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad(
                "url must not carry credentials; use authentication or token".into(),
            ));
        }
        self.policy
            .check_url(&url)
            .map_err(|why| bad(format!("url refused: {why}")))?;
        let header_safe = |field: &str, v: &str| -> Result<(), A2aError> {
            if v.len() > MAX_SECRET_BYTES {
                return Err(bad(format!(
                    "{field} is longer than {MAX_SECRET_BYTES} bytes"
                )));
            }
            if v.chars().any(|c| c.is_control()) {
                return Err(bad(format!(
                    "{field} contains CR, LF or another control character"
                )));
            }
            Ok(())
        };
        if let Some(t) = &cfg.token {
            header_safe("token", t)?;
        }
        let (scheme, credentials) = match &cfg.authentication {
            None => (None, None),
            Some(AuthenticationInfo {
                scheme,
                schemes,
                credentials,
            }) => {
                let scheme = if scheme.is_empty() {
                    schemes.first().cloned().unwrap_or_default()
                } else {
                    scheme.clone()
                };
                if scheme.is_empty() {
                    return Err(bad("authentication.scheme is required".into()));
                }
                if !scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
                {
                    return Err(bad(
                        "authentication.scheme must be an HTTP auth scheme token (e.g. Bearer)"
                            .into(),
                    ));
                }
                if let Some(c) = credentials {
                    header_safe("authentication.credentials", c)?;
                }
                (Some(scheme), credentials.clone().filter(|c| !c.is_empty()))
            }
        };
        Ok(StoredPushConfig {
            task_id: task_id.to_owned(),
            id: id.to_owned(),
            url: cfg.url.clone(),
            token: cfg.token.clone().filter(|t| !t.is_empty()),
            auth_scheme: scheme,
            auth_credentials: credentials,
            enabled: true,
            failures: 0,
            last_error: None,
            created_ms: crate::protocol::time::now().timestamp_millis(),
        })
    }
}

/// A stored config as Get and List answer it: `token` and `authentication.credentials`
/// redacted (present as `"***"` when set, so a client sees that one is set).
pub fn redacted(tenant: &str, c: &StoredPushConfig) -> TaskPushNotificationConfig {
    const REDACTED: &str = "***";
    TaskPushNotificationConfig {
        tenant: (!tenant.is_empty()).then(|| tenant.to_owned()),
        id: c.id.clone(),
        task_id: c.task_id.clone(),
        url: c.url.clone(),
        token: c.token.as_ref().map(|_| REDACTED.to_owned()),
        authentication: c.auth_scheme.as_ref().map(|s| AuthenticationInfo {
            scheme: s.clone(),
            schemes: Vec::new(),
            credentials: c.auth_credentials.as_ref().map(|_| REDACTED.to_owned()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::PushService;
    use crate::config::PushConfig;
    use crate::scope::Scope;
    use crate::store::{MemoryTaskStore, TaskStore};

    /// Whether the sender would wake now: a pending `notify_one` permit.
    async fn woken(svc: &PushService) -> bool {
        tokio::time::timeout(Duration::from_millis(10), svc.wake.notified())
            .await
            .is_ok()
    }

    /// On a store only this process uses, commits wake the sender only once a config
    /// exists: none at open leaves it asleep until one is registered.
    #[tokio::test(start_paused = true)]
    async fn wake_is_armed_by_the_first_config() {
        let store: Arc<dyn TaskStore> = Arc::new(MemoryTaskStore::new());
        let svc = PushService::open(&PushConfig::default(), store)
            .await
            .unwrap();
        svc.wake();
        assert!(!woken(&svc).await, "no config: nothing can be queued");
        svc.arm();
        svc.wake();
        assert!(woken(&svc).await);
    }

    /// A config already in the store at open arms the wake-ups at once.
    #[tokio::test(start_paused = true)]
    async fn a_kept_config_arms_at_open() {
        let store: Arc<dyn TaskStore> = Arc::new(MemoryTaskStore::new());
        let push = store.push_store().unwrap();
        let config = super::StoredPushConfig {
            task_id: "t".into(),
            id: "c".into(),
            url: "https://receiver.example/".into(),
            token: None,
            auth_scheme: None,
            auth_credentials: None,
            enabled: true,
            failures: 0,
            last_error: None,
            created_ms: 0,
        };
        push.put_config(&Scope::new("", "alice"), &config)
            .await
            .unwrap();
        let svc = PushService::open(&PushConfig::default(), store)
            .await
            .unwrap();
        svc.wake();
        assert!(woken(&svc).await);
    }
}
