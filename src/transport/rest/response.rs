//! Responses of the HTTP+JSON binding (spec §11.5, §11.6): the media type a request
//! asks for, JSON bodies, the `google.rpc.Status` error body with the HTTP status of
//! the one error table ([`A2aError::http_status`]), and the binding's 404 and 405.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::error::A2aError;

/// The A2A media type (spec v1.0.1 §11.5).
pub const A2A_JSON: &str = "application/a2a+json";

/// Plain JSON, what most clients send and expect.
pub const JSON: &str = "application/json";

/// Seconds a client is asked to wait (`Retry-After`) after HTTP 503.
pub const RETRY_AFTER_SECS: u64 = 1;

/// The media type of JSON responses: [`A2A_JSON`] when `Accept` names it (with a
/// non-zero `q`), [`JSON`] otherwise.
pub fn media_type(headers: &HeaderMap) -> &'static str {
    let asks = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|range| {
            let mut parts = range.split(';');
            let essence = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            essence.eq_ignore_ascii_case(A2A_JSON) && !refused
        });
    if asks { A2A_JSON } else { JSON }
}

/// A JSON response with `status`, served as `media`.
pub fn json(status: StatusCode, media: &'static str, body: String) -> Response {
    let mut resp = (status, body).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    resp
}

/// The error body for `err` with the HTTP status of the error table.
pub fn error(media: &'static str, err: &A2aError) -> Response {
    let status =
        StatusCode::from_u16(err.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    error_with(status, media, err)
}

/// The error body for `err` with HTTP `status` (its `error.code` follows), plus
/// `Retry-After` on 503. For refusals the table has no status for (413, 408, 405).
pub fn error_with(status: StatusCode, media: &'static str, err: &A2aError) -> Response {
    let mut body = err.to_http_error_body();
    body["error"]["code"] = Value::from(status.as_u16());
    let mut resp = json(status, media, body.to_string());
    if status == StatusCode::SERVICE_UNAVAILABLE {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    }
    resp
}

/// HTTP 404 for a path that is no route of the binding, with the error body
/// (`METHOD_NOT_FOUND`), never a bare text page.
pub fn not_found(media: &'static str, path: &str) -> Response {
    let shown: String = path.chars().take(128).collect();
    error_with(
        StatusCode::NOT_FOUND,
        media,
        &A2aError::MethodNotFound(format!("no HTTP+JSON route {shown}")),
    )
}

/// HTTP 405 for a route that exists but not for `method`, with `Allow` (when known) and
/// the error body (`METHOD_NOT_FOUND`).
pub fn method_not_allowed(media: &'static str, method: &str, allow: Option<&str>) -> Response {
    let shown: String = method.chars().take(16).collect();
    let mut resp = error_with(
        StatusCode::METHOD_NOT_ALLOWED,
        media,
        &A2aError::MethodNotFound(format!(
            "this route does not take {shown}{}",
            allow.map(|a| format!("; use {a}")).unwrap_or_default()
        )),
    );
    if let Some(allow) = allow.and_then(|a| HeaderValue::from_str(a).ok()) {
        resp.headers_mut().insert(header::ALLOW, allow);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, v.parse().unwrap());
        h
    }

    #[test]
    fn accept_picks_the_media_type() {
        assert_eq!(media_type(&HeaderMap::new()), JSON);
        assert_eq!(media_type(&accept("*/*")), JSON);
        assert_eq!(media_type(&accept("application/json")), JSON);
        assert_eq!(media_type(&accept("Application/A2A+JSON")), A2A_JSON);
        assert_eq!(
            media_type(&accept("text/event-stream, application/a2a+json;q=0.9")),
            A2A_JSON
        );
        assert_eq!(media_type(&accept("application/a2a+json;q=0")), JSON);
    }

    #[test]
    fn error_codes_follow_the_status() {
        let r = error(JSON, &A2aError::TaskNotFound("t".into()));
        assert_eq!(r.status(), 404);
        let r = error_with(
            StatusCode::PAYLOAD_TOO_LARGE,
            A2A_JSON,
            &A2aError::InvalidRequest("big".into()),
        );
        assert_eq!(r.status(), 413);
        assert_eq!(r.headers()[header::CONTENT_TYPE], A2A_JSON);
        let r = error(JSON, &A2aError::Unavailable("busy".into()));
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let r = method_not_allowed(JSON, "PUT", Some("GET"));
        assert_eq!(r.status(), 405);
        assert_eq!(r.headers()[header::ALLOW], "GET");
    }
}
