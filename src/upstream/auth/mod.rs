//! How a runtime kind authenticates its requests, whatever the kind: the
//! [`Credentials`] trait and its four implementations ([`credentials`]), built from
//! the settings ([`settings`]); the bearer-token cache with single-flight refresh
//! ([`token`]) and the OAuth client-credentials source ([`oauth`]).

pub mod credentials;
pub mod oauth;
pub mod settings;
pub mod token;

pub use credentials::{
    CachedToken, Credentials, ForwardCaller, NO_FORWARDABLE_TOKEN, NoCredentials, StaticBearer,
    from_settings,
};
pub use settings::{AuthSettings, OAuth2Settings, TokenEndpoint};
pub use token::{TokenCache, TokenError, TokenSource};
