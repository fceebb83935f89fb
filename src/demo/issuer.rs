//! A LOCAL STAND-IN OAuth 2.0 token issuer (client-credentials grant, RFC 6749
//! §4.4) at `POST /oauth2/token`, as Amazon Cognito's token endpoint answers it:
//! HTTP Basic client authentication (or `client_id`/`client_secret` form fields),
//! `{"access_token", "token_type": "Bearer", "expires_in"}`. Tokens are random and
//! short-lived so that refreshes show in the gateway's log; the stand-in runtime
//! checks them with [`TokenIssuer::is_valid`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Form, Json, Router};
use base64::Engine;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;
use tokio::time::Instant;

/// The token endpoint path.
pub const TOKEN_PATH: &str = "/oauth2/token";

/// The issuer: one client, its secret, and the tokens handed out.
pub struct TokenIssuer {
    client_id: String,
    client_secret: SecretString,
    lifetime: Duration,
    /// Issued tokens and when each expires.
    tokens: Mutex<HashMap<String, Instant>>,
    issued: AtomicU64,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenIssuer")
            .field("client_id", &self.client_id)
            .field("lifetime", &self.lifetime)
            .field("issued", &self.issued())
            .finish_non_exhaustive()
    }
}

impl TokenIssuer {
    /// An issuer for one client whose tokens live `lifetime`.
    pub fn new(
        client_id: impl Into<String>,
        client_secret: SecretString,
        lifetime: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            client_id: client_id.into(),
            client_secret,
            lifetime,
            tokens: Mutex::new(HashMap::new()),
            issued: AtomicU64::new(0),
        })
    }

    /// How many tokens were issued so far.
    pub fn issued(&self) -> u64 {
        self.issued.load(Ordering::Relaxed)
    }

    /// Whether `token` was issued here and has not expired.
    pub fn is_valid(&self, token: &str) -> bool {
        let now = Instant::now();
        let mut tokens = self.tokens.lock().expect("issuer lock");
        tokens.retain(|_, exp| *exp > now);
        tokens.contains_key(token)
    }

    /// The router serving [`TOKEN_PATH`].
    pub fn router(self: Arc<Self>) -> Router {
        Router::new()
            .route(TOKEN_PATH, post(token))
            .with_state(self)
    }

    fn client_ok(&self, id: &str, secret: &str) -> bool {
        id == self.client_id && secret == self.client_secret.expose_secret()
    }
}

#[derive(Deserialize)]
struct TokenForm {
    grant_type: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
}

fn oauth_error(status: StatusCode, error: &str) -> Response {
    (status, Json(json!({ "error": error }))).into_response()
}

fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    Some((id.to_owned(), secret.to_owned()))
}

async fn token(
    State(issuer): State<Arc<TokenIssuer>>,
    headers: HeaderMap,
    Form(form): Form<TokenForm>,
) -> Response {
    if form.grant_type.as_deref() != Some("client_credentials") {
        return oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type");
    }
    let creds =
        basic_credentials(&headers).or_else(|| Some((form.client_id?, form.client_secret?)));
    let Some((id, secret)) = creds else {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
    };
    if !issuer.client_ok(&id, &secret) {
        tracing::warn!(client_id = %id, "stand-in token issuer: wrong client credentials");
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
    }
    let access_token = format!("demo-{}", uuid::Uuid::new_v4().simple());
    issuer
        .tokens
        .lock()
        .expect("issuer lock")
        .insert(access_token.clone(), Instant::now() + issuer.lifetime);
    let n = issuer.issued.fetch_add(1, Ordering::Relaxed) + 1;
    tracing::info!(
        token_number = n,
        expires_in_secs = issuer.lifetime.as_secs(),
        "stand-in token issuer: issued an access token"
    );
    Json(json!({
        "access_token": access_token,
        "token_type": "Bearer",
        "expires_in": issuer.lifetime.as_secs(),
    }))
    .into_response()
}
