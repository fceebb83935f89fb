//! Connection-level limits of the inbound listener: how long a connection may take to send a
//! request head, how long it may sit idle, and how many are served at once.

use std::time::Duration;

use crate::config::ServerConfig;

/// Highest default for [`ConnectionLimits::max_connections`]: a larger open-file limit does not
/// raise the default further (set `server.max_connections` explicitly to go higher).
pub const DEFAULT_MAX_CONNECTIONS_CEILING: usize = 65_536;

/// Most connections answered in the refusal lane beyond `max_connections` (see
/// [`ConnectionLimits::refusal_lane`]).
const REFUSAL_LANE_CEILING: usize = 64;

/// The limits every accepted connection lives under (`[server]` keys `header_timeout_secs`,
/// `idle_timeout_secs`, `max_connections`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// From accept to a complete first request head (TLS handshake and HTTP/2 preface
    /// included), and from the first byte of a later HTTP/1.1 head to its end. A connection
    /// that misses it is closed without an answer.
    pub header_timeout: Duration,
    /// How long a connection with no request in flight stays open after its last response
    /// (HTTP/1.1 keep-alive, or HTTP/2 with no open stream: it then gets a GOAWAY).
    pub idle_timeout: Duration,
    /// Connections served at once. The next [`refusal_lane`](Self::refusal_lane) ones get one
    /// answer each (`/healthz` and `/readyz` as usual, anything else `503` with
    /// `Retry-After`) and are closed; beyond those, new connections are closed at once.
    pub max_connections: usize,
    /// Interval of the server's HTTP/2 PING frames on a connection that has sent nothing
    /// for that long (gRPC and every other HTTP/2 client); `None`: no pings. With
    /// [`http2_keepalive_timeout`](Self::http2_keepalive_timeout) it finds peers that
    /// vanished without closing, so their open streams (a `SubscribeToTask`, an SSE
    /// stream over HTTP/2) end instead of waiting forever.
    pub http2_keepalive_interval: Option<Duration>,
    /// How long a PING may go unanswered before the connection is closed.
    pub http2_keepalive_timeout: Duration,
}

/// Default [`ConnectionLimits::http2_keepalive_interval`]: 20 s.
pub const HTTP2_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(20);
/// Default [`ConnectionLimits::http2_keepalive_timeout`]: 20 s.
pub const HTTP2_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

impl Default for ConnectionLimits {
    /// 30 s header timeout, 75 s idle timeout, [`default_max_connections`], HTTP/2 pings
    /// every 20 s of silence answered within 20 s.
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(75),
            max_connections: default_max_connections(),
            http2_keepalive_interval: Some(HTTP2_KEEPALIVE_INTERVAL),
            http2_keepalive_timeout: HTTP2_KEEPALIVE_TIMEOUT,
        }
    }
}

impl ConnectionLimits {
    /// The limits `[server]` sets; `max_connections` unset means [`default_max_connections`].
    pub fn from_config(server: &ServerConfig) -> Self {
        Self {
            header_timeout: server.header_timeout(),
            idle_timeout: server.idle_timeout(),
            max_connections: server
                .max_connections
                .unwrap_or_else(default_max_connections),
            http2_keepalive_interval: Some(HTTP2_KEEPALIVE_INTERVAL),
            http2_keepalive_timeout: HTTP2_KEEPALIVE_TIMEOUT,
        }
    }

    /// How many connections beyond `max_connections` are still accepted to be answered once
    /// (probes served, the rest `503`): an eighth of `max_connections`, between 1 and 64.
    pub fn refusal_lane(&self) -> usize {
        (self.max_connections / 8).clamp(1, REFUSAL_LANE_CEILING)
    }
}

/// The soft open-file limit (`RLIMIT_NOFILE`) of this process; `None` when unlimited or not
/// known (non-Unix).
pub fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The default `server.max_connections` for this process: [`max_connections_for`] its
/// [`open_file_limit`].
pub fn default_max_connections() -> usize {
    max_connections_for(open_file_limit())
}

/// The default `server.max_connections` under a soft open-file limit of `soft` descriptors:
/// half of it (the other half stays for the refusal lane, the task store's pool, upstream
/// connections, log files and the listener), at least 1, at most
/// [`DEFAULT_MAX_CONNECTIONS_CEILING`]; the ceiling when there is no limit.
pub fn max_connections_for(soft: Option<u64>) -> usize {
    match soft {
        Some(n) => usize::try_from(n / 2)
            .unwrap_or(usize::MAX)
            .clamp(1, DEFAULT_MAX_CONNECTIONS_CEILING),
        None => DEFAULT_MAX_CONNECTIONS_CEILING,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_half_the_file_limit_within_bounds() {
        assert_eq!(max_connections_for(Some(1024)), 512);
        assert_eq!(max_connections_for(Some(1)), 1);
        assert_eq!(max_connections_for(Some(0)), 1);
        assert_eq!(max_connections_for(Some(1 << 20)), 65_536);
        assert_eq!(max_connections_for(None), 65_536);
    }

    #[test]
    fn refusal_lane_is_an_eighth_between_1_and_64() {
        let lane = |max| {
            ConnectionLimits {
                max_connections: max,
                ..ConnectionLimits::default()
            }
            .refusal_lane()
        };
        assert_eq!(lane(1), 1);
        assert_eq!(lane(80), 10);
        assert_eq!(lane(512), 64);
        assert_eq!(lane(65_536), 64);
    }
}
