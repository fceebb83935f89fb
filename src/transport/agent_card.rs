//! `GET /.well-known/agent-card.json` (spec §8.2): the card rendered ahead of requests,
//! served with `Cache-Control`, a content-hash `ETag` that honours `If-None-Match`, and
//! `Last-Modified` (when the card was rendered: process start, or when it was rendered
//! again) that honours `If-Modified-Since` (RFC 9110 §13.1.3: only when
//! `If-None-Match` is absent). The rendering in use is a [`LiveCard`]: swapped whole
//! when the card changes while serving (an upstream A2A agent's card changed), read by
//! each request with one uncontended lock and an `Arc` clone.
//!
//! One URL, two generations of the card. A request that declares `A2A-Version: 1.0`
//! (header, or `?A2A-Version=1.0`; any 1.0.x) gets the card exactly as the 1.0 schema
//! has it. A request without a version (what A2A 0.3 clients send) gets the same card
//! plus the 0.3 discovery fields (`url`, `preferredTransport`, `protocolVersion`,
//! `additionalInterfaces`, derived from the card's 0.3 JSON-RPC interface by
//! [`super::compat03::response::card_fields`]) and its security schemes in both
//! shapes ([`super::compat03::response::render_card`]), so a 0.3 client finds the
//! JSON-RPC endpoint; 1.0 clients read `supportedInterfaces` and ignore the rest.
//! Both answers carry `Vary: A2A-Version`, and each variant has its own ETag.
//!
//! The extended card (`GET /extendedAgentCard` on HTTP+JSON, [`extended_response`]) gets the
//! same validators and `Cache-Control: private` with `Vary: Authorization`: it is served
//! to authenticated callers only, so no shared cache may keep it.

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::AppState;
use super::operations::{self, ProtocolVersion};
use crate::protocol::AgentCard;

/// Seconds clients may cache the card.
pub const CARD_MAX_AGE_SECS: u64 = 300;

/// One rendering of the card: its JSON and the quoted content-hash ETag of it.
#[derive(Debug, Clone)]
struct Rendered {
    json: bytes::Bytes,
    etag: String,
}

impl Rendered {
    fn of(value: &serde_json::Value) -> Self {
        let json = serde_json::to_vec(value).expect("a JSON value always serializes");
        let digest = Sha256::digest(&json);
        Self {
            etag: format!("\"{}\"", hex16(&digest[..16])),
            json: json.into(),
        }
    }
}

/// A card rendered to JSON in its two variants, each with its ETag (see the module
/// docs).
#[derive(Debug, Clone)]
pub struct CardDocument {
    /// The card.
    pub card: AgentCard,
    /// The answer to a request without `A2A-Version`: with the 0.3 fields, or the
    /// 1.0 card when they are turned off.
    unversioned: Rendered,
    /// The answer to a request that declares `A2A-Version: 1.0`.
    v1: Rendered,
    /// When it was rendered, whole seconds (HTTP dates have no fraction).
    modified: SystemTime,
    last_modified: String,
    /// Whether the 0.3 discovery fields are added to the unversioned variant.
    v03_fields: bool,
}

impl CardDocument {
    /// Renders `card`, with the 0.3 discovery fields added, modified now.
    pub fn new(card: AgentCard) -> Self {
        Self::modified_at(card, SystemTime::now())
    }

    /// Renders `card` (with the 0.3 discovery fields) with `Last-Modified` at `when`
    /// (truncated to whole seconds).
    pub fn modified_at(card: AgentCard, when: SystemTime) -> Self {
        Self::render(card, when, true)
    }

    /// Renders `card` with `Last-Modified` at `when` (truncated to whole seconds): the
    /// 1.0 variant, and for requests without a version the A2A 0.3 discovery fields
    /// added when `v03_fields` is true (the 1.0 card otherwise).
    pub fn render(card: AgentCard, when: SystemTime, v03_fields: bool) -> Self {
        let pure = serde_json::to_value(&card).expect("an AgentCard always serializes");
        let v1 = Rendered::of(&pure);
        let unversioned = if v03_fields {
            let both = super::compat03::response::render_card(&card)
                .expect("an AgentCard always serializes");
            Rendered::of(&both)
        } else {
            v1.clone()
        };
        let secs = when.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let modified = UNIX_EPOCH + Duration::from_secs(secs);
        Self {
            card,
            unversioned,
            v1,
            modified,
            last_modified: httpdate::fmt_http_date(modified),
            v03_fields,
        }
    }

    /// The variant served to a request that declares `A2A-Version: 1.0` (`v1`) or
    /// none: its JSON (a cheap clone) and quoted ETag.
    pub fn variant(&self, v1: bool) -> (bytes::Bytes, &str) {
        let r = if v1 { &self.v1 } else { &self.unversioned };
        (r.json.clone(), &r.etag)
    }

    /// `Last-Modified` in IMF-fixdate (`Tue, 01 Dec 2026 13:31:22 GMT`).
    pub fn last_modified(&self) -> &str {
        &self.last_modified
    }

    /// The quoted ETag of the variant served to requests without `A2A-Version`.
    pub fn etag(&self) -> &str {
        &self.unversioned.etag
    }
}

/// The card an agent of the gateway serves now: a [`CardDocument`], replaced whole by
/// [`set`](Self::set).
#[derive(Debug)]
pub struct LiveCard(RwLock<Arc<CardDocument>>);

impl LiveCard {
    /// Serves `doc`.
    pub fn new(doc: CardDocument) -> Self {
        Self(RwLock::new(Arc::new(doc)))
    }

    /// The rendering served now.
    pub fn get(&self) -> Arc<CardDocument> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Serves `card` from now on, rendered as the one served so far was (with or
    /// without the 0.3 fields), modified now; when that is the second the served one
    /// was modified in, the second after, so `If-Modified-Since` never takes the new
    /// card for the old one. Returns whether the card differs from the one served.
    pub fn set(&self, card: AgentCard) -> bool {
        let mut held = self.0.write().unwrap_or_else(|p| p.into_inner());
        if held.card == card {
            return false;
        }
        let after = held.modified + Duration::from_secs(1);
        let when = SystemTime::now().max(after);
        *held = Arc::new(CardDocument::render(card, when, held.v03_fields));
        true
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

/// Whether a document with `etag`, last modified at `modified`, is unchanged for the
/// request's validators (see [`handle`]).
fn unchanged(headers: &HeaderMap, etag: &str, modified: SystemTime) -> bool {
    if headers.contains_key(header::IF_NONE_MATCH) {
        return matches_etag(headers, etag);
    }
    headers
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v.trim()).ok())
        .is_some_and(|since| modified <= since)
}

/// The answer to `GET /extendedAgentCard` whose card rendered to `json` (served as
/// `media`): 200 with it, or `304 Not Modified` (no body) when the request's validators
/// match, as for the public card. Headers: a content-hash `ETag`, `Last-Modified` of the
/// public card (both cards are rendered together),
/// `Cache-Control: private, max-age=300` and `Vary: Authorization`.
pub fn extended_response(
    headers: &HeaderMap,
    media: &'static str,
    json: String,
    public: &CardDocument,
) -> Response {
    let digest = Sha256::digest(json.as_bytes());
    let etag = format!("\"{}\"", hex16(&digest[..16]));
    let validators = [
        (
            header::ETAG,
            HeaderValue::from_str(&etag).expect("hex etag is a valid header"),
        ),
        (
            header::CACHE_CONTROL,
            HeaderValue::from_str(&format!("private, max-age={CARD_MAX_AGE_SECS}"))
                .expect("valid header"),
        ),
        (
            header::LAST_MODIFIED,
            HeaderValue::from_str(public.last_modified()).expect("an HTTP date is a valid header"),
        ),
        (header::VARY, HeaderValue::from_static("authorization")),
    ];
    if unchanged(headers, &etag, public.modified) {
        return (StatusCode::NOT_MODIFIED, validators).into_response();
    }
    let mut resp = (StatusCode::OK, validators, json).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    resp
}

/// Serves the card variant the request's `A2A-Version` asks for (see the module docs);
/// `304 Not Modified` when the request's validators match that variant: `If-None-Match`
/// names its ETag, or, without `If-None-Match`, `If-Modified-Since` (an HTTP date; an
/// unreadable one is ignored) is not before `Last-Modified`. A version the gateway does
/// not speak gets the unversioned variant: the card is how a client learns what it
/// may ask for.
pub async fn handle(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let doc = state.card.get();
    let requested = operations::requested_version(&headers, query.as_deref());
    let v1 = matches!(
        operations::negotiate_version(requested.as_deref()),
        Ok(Some(ProtocolVersion::V1_0))
    );
    let (json, etag) = doc.variant(v1);
    let validators = [
        (
            header::ETAG,
            HeaderValue::from_str(etag).expect("hex etag is a valid header"),
        ),
        (
            header::CACHE_CONTROL,
            HeaderValue::from_str(&format!("public, max-age={CARD_MAX_AGE_SECS}"))
                .expect("valid header"),
        ),
        (
            header::LAST_MODIFIED,
            HeaderValue::from_str(doc.last_modified()).expect("an HTTP date is a valid header"),
        ),
        (header::VARY, HeaderValue::from_static("A2A-Version")),
    ];
    if unchanged(&headers, etag, doc.modified) {
        return (StatusCode::NOT_MODIFIED, validators).into_response();
    }
    let mut resp = (StatusCode::OK, validators, json).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(name: &str) -> AgentCard {
        crate::server::simple_card(name, "d", "http://127.0.0.1:1/", vec![])
    }

    /// The same card leaves the rendering as it is; another is rendered again, in both
    /// variants, with the 0.3 fields as before and a `Last-Modified` after the old one
    /// even within the same second.
    #[test]
    fn a_live_card_is_rendered_again_only_when_it_changes() {
        let live = LiveCard::new(CardDocument::new(card("one")));
        let before = live.get();
        assert!(!live.set(card("one")));
        assert!(Arc::ptr_eq(&before, &live.get()));
        assert!(live.set(card("two")));
        let after = live.get();
        assert_eq!(after.card.name, "two");
        assert_ne!(after.etag(), before.etag());
        assert_ne!(after.variant(true).1, before.variant(true).1);
        assert_ne!(after.etag(), after.variant(true).1, "0.3 fields kept");
        assert!(after.modified > before.modified);
        assert_ne!(after.last_modified(), before.last_modified());
        let plain = LiveCard::new(CardDocument::render(card("one"), SystemTime::now(), false));
        plain.set(card("two"));
        let doc = plain.get();
        assert_eq!(doc.etag(), doc.variant(true).1, "no 0.3 fields, as before");
    }
}
