//! `GET /.well-known/agent-card.json` (spec §8.2): the card rendered once, served
//! with `Cache-Control` and a content-hash `ETag` that honours `If-None-Match`.
//! The rendered card also carries the A2A 0.3 discovery fields (`url`,
//! `preferredTransport`, `protocolVersion`, `additionalInterfaces`, derived from
//! `supportedInterfaces` by [`super::compat03::response::card_fields`]) and its
//! security schemes in both shapes ([`super::compat03::response::render_card`]), so a
//! 0.3 client finds the JSON-RPC endpoint; 1.0 clients read `supportedInterfaces`.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::AppState;
use crate::protocol::AgentCard;

/// Seconds clients may cache the card.
pub const CARD_MAX_AGE_SECS: u64 = 300;

/// A card rendered to JSON with its ETag.
#[derive(Debug, Clone)]
pub struct CardDocument {
    /// The card.
    pub card: AgentCard,
    json: bytes::Bytes,
    etag: String,
}

impl CardDocument {
    /// Renders `card`, with the 0.3 discovery fields added.
    pub fn new(card: AgentCard) -> Self {
        let value =
            super::compat03::response::render_card(&card).expect("an AgentCard always serializes");
        let json = serde_json::to_vec(&value).expect("a JSON value always serializes");
        let digest = Sha256::digest(&json);
        let etag = format!("\"{}\"", hex16(&digest[..16]));
        Self {
            card,
            json: json.into(),
            etag,
        }
    }

    /// The quoted ETag.
    pub fn etag(&self) -> &str {
        &self.etag
    }
}

fn hex16(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn matches_etag(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .map(str::trim)
                .any(|t| t == "*" || t == etag || t.strip_prefix("W/") == Some(etag))
        })
}

/// Serves the card; `304 Not Modified` when `If-None-Match` names its ETag.
pub async fn handle(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let doc = &state.card;
    let etag = HeaderValue::from_str(doc.etag()).expect("hex etag is a valid header");
    let cache = HeaderValue::from_str(&format!("public, max-age={CARD_MAX_AGE_SECS}"))
        .expect("valid header");
    if matches_etag(&headers, doc.etag()) {
        return (
            StatusCode::NOT_MODIFIED,
            [(header::ETAG, etag), (header::CACHE_CONTROL, cache)],
        )
            .into_response();
    }
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::ETAG, etag),
            (header::CACHE_CONTROL, cache),
        ],
        doc.json.clone(),
    )
        .into_response()
}
