//! How a runtime kind authenticates its requests, whatever the kind: the
//! [`Credentials`] trait and its implementations ([`credentials`], [`sigv4`]), built
//! from the settings ([`settings`]) by [`build`]; the bearer-token cache with single-flight refresh
//! ([`token`]) and the OAuth client-credentials source ([`oauth`]); AWS SigV4 with the
//! standard credential chain ([`sigv4`]); one value per distinct credential shared by the
//! agents of a gateway ([`pool`]).

pub mod build;
pub mod credentials;
pub mod oauth;
pub mod pool;
pub mod settings;
pub mod sigv4;
pub mod token;

pub use build::from_settings;
pub use credentials::{
    CachedToken, Credentials, ForwardCaller, NO_FORWARDABLE_TOKEN, NoCredentials, StaticBearer,
};
pub use pool::{CredentialKey, CredentialPool};
pub use settings::{
    AssumeRoleSettings, AuthSettings, OAuth2Settings, SigV4Settings, TokenEndpoint,
};
pub use sigv4::SigV4;
pub use token::{TokenCache, TokenError, TokenSource};
