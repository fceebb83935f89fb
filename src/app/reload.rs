//! `SIGHUP` for `serve`: the API keys are read again (the config file, the environment
//! captured at start, and every `key_file`) and replace the keys in use, so a key can be
//! added before an old one is removed (rotation with overlap) without a restart. Requests
//! in flight finish with the keys they started with. The agents of `[agents.<id>]` are
//! built again too ([`AgentReload::apply`]: added, changed, removed; `docs/agents.md`).
//! Nothing else of the configuration changes on `SIGHUP`.

use super::gateway::AgentReload;
use crate::config::{Config, ConfigSources};
use crate::transport::auth::Authenticator;

/// Spawns the task that answers every `SIGHUP` by reloading `auth`'s API keys from
/// `sources`, and with `agents` the agents of `[agents.<id>]`. A configuration that no
/// longer loads is logged and changes nothing: the keys and agents in use stay. Not on
/// non-Unix platforms (there is no `SIGHUP`).
pub fn spawn_key_reload(auth: Authenticator, sources: ConfigSources, agents: Option<AgentReload>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch SIGHUP; API keys load only at start");
                return;
            }
        };
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                let _ = reload(&auth, &sources, agents.as_ref());
            }
        });
    }
    #[cfg(not(unix))]
    let _ = (auth, sources, agents);
}

/// One reload: the number of keys now in use, or why the old ones stay.
fn reload(
    auth: &Authenticator,
    sources: &ConfigSources,
    agents: Option<&AgentReload>,
) -> Result<usize, String> {
    let config = match Config::load(sources.clone()) {
        Ok(c) => c,
        Err(e) => {
            let why = format!("the configuration does not load: {e}");
            tracing::warn!(reason = %why, "SIGHUP: API keys unchanged, agents unchanged");
            return Err(why);
        }
    };
    let outcome = auth.reload_keys(&config.server.auth);
    match &outcome {
        Ok(n) => tracing::info!(keys = n, "SIGHUP: API keys reloaded"),
        // No api_key scheme is a normal state: nothing to reload, nothing to warn about.
        Err(why) if auth.api_keys_configured() => {
            tracing::warn!(reason = %why, "SIGHUP: API keys unchanged")
        }
        Err(why) => tracing::debug!(reason = %why, "SIGHUP: no API keys to reload"),
    }
    if let Some(agents) = agents {
        match agents.apply(&config) {
            Ok(n) => {
                tracing::info!(agents = n, "SIGHUP: agents reloaded");
                warn_unknown_callers(&config);
            }
            Err(why) => tracing::warn!(reason = %why, "SIGHUP: agents unchanged"),
        }
    }
    outcome
}

/// Warns once per name in an agent's `callers` that no API key has and that is no JWT
/// owner of the configured issuer (a typo, or a key not added yet: its calls are refused
/// with 403): at start and after each `SIGHUP` reload of the agents.
pub fn warn_unknown_callers(config: &Config) {
    for (agent, caller) in config.unknown_callers() {
        tracing::warn!(
            agent = %agent,
            caller = %caller,
            "agents.{agent}.callers names a caller no API key has and no JWT owner of the configured issuer (jwt:<issuer>#<claim>) is: its calls are refused (403)"
        );
    }
}
