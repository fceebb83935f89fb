//! Responses given before the request body was read (a refused authentication, 401; a
//! body over the limit, 413) end the HTTP/1.1 connection: hyper closes it rather than
//! read a body nobody wants. Without `Connection: close` a client that reuses the
//! connection sees "server disconnected" on its next request; with it, the client
//! knows to open a new one. HTTP/2 streams are independent, so nothing changes there.

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, Version, header};
use axum::middleware::Next;
use axum::response::Response;

/// The middleware: adds `Connection: close` to a 401 or 413 answer on HTTP/1.x.
pub async fn close_after_refusal(req: Request, next: Next) -> Response {
    let http1 = matches!(req.version(), Version::HTTP_10 | Version::HTTP_11);
    let mut resp = next.run(req).await;
    if http1
        && matches!(
            resp.status(),
            StatusCode::UNAUTHORIZED | StatusCode::PAYLOAD_TOO_LARGE
        )
    {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}
