//! What a request that is not an A2A call gets: `GET /` and unknown paths answer with a
//! short plain-text hint naming where the bindings and the agent card are, instead of
//! an empty 405 or 404 (a method a route outside the HTTP+JSON binding does not take,
//! such as `PUT /`, gets a 405 with its `Allow` header and the hint).

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::config::Binding;

/// The hint text for the bindings `state` serves: one line each, then the card's path,
/// all under the prefix of the agent the routes serve (`/` for the agent at `/`).
pub fn text(state: &AppState) -> String {
    let base = match state.config.agent.prefix.as_str() {
        "" => "/",
        prefix => prefix,
    };
    let mut out = String::from("This is an A2A 1.0 gateway (a2a-gateway).\n");
    if !state.config.agent.id.is_empty() {
        out.push_str(&format!(
            "This path is under the agent {} at {base}.\n",
            state.config.agent.id
        ));
    }
    if state.config.serves(Binding::Jsonrpc) {
        out.push_str(&format!(
            "JSON-RPC: POST {base} with a JSON-RPC 2.0 request (e.g. method SendMessage).\n"
        ));
    }
    if state.config.serves(Binding::Rest) {
        let rest = format!("{}{}", base.trim_end_matches('/'), super::rest::REST_PATH);
        out.push_str(&format!(
            "HTTP+JSON: under {rest} (e.g. POST {rest}/message:send).\n"
        ));
    }
    if state.config.serves(Binding::Grpc) {
        out.push_str("gRPC: lf.a2a.v1.A2AService (see the card for its address).\n");
    }
    out.push_str(&format!(
        "The agent card is at {base}.well-known/agent-card.json.\n"
    ));
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
