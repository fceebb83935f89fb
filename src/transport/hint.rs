//! What a request that is not an A2A call gets: `GET /` and unknown paths answer with a
//! short plain-text hint naming where the bindings and the agent card are, instead of
//! an empty 405 or 404 (a method a route outside the HTTP+JSON binding does not take,
//! such as `PUT /`, gets a 405 with its `Allow` header and the hint).

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::config::Binding;

/// The hint text for the bindings `state` serves: one line each, then the card's path.
pub fn text(state: &AppState) -> String {
    let mut out = String::from("This is an A2A 1.0 gateway (a2a-gateway).\n");
    if state.config.serves(Binding::Jsonrpc) {
        out.push_str("JSON-RPC: POST / with a JSON-RPC 2.0 request (e.g. method SendMessage).\n");
    }
    if state.config.serves(Binding::Rest) {
        out.push_str(&format!(
            "HTTP+JSON: under {} (e.g. POST {}/message:send).\n",
            super::rest::REST_PATH,
            super::rest::REST_PATH
        ));
    }
    if state.config.serves(Binding::Grpc) {
        out.push_str("gRPC: lf.a2a.v1.A2AService (see the card for its address).\n");
    }
    out.push_str("The agent card is at /.well-known/agent-card.json.\n");
    out
}

fn answer(status: StatusCode, state: &AppState) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text(state),
    )
        .into_response()
}

/// `GET /`: 200 with the hint.
pub async fn root(State(state): State<AppState>) -> Response {
    answer(StatusCode::OK, &state)
}

/// Any path no route takes: 404 with the hint.
pub async fn unknown(State(state): State<AppState>) -> Response {
    answer(StatusCode::NOT_FOUND, &state)
}

/// A method a route outside the HTTP+JSON binding does not take (`PUT /`, `POST` of the
/// agent card): 405 with the hint (axum adds the route's `Allow` header).
pub async fn wrong_method(State(state): State<AppState>) -> Response {
    answer(StatusCode::METHOD_NOT_ALLOWED, &state)
}
