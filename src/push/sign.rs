//! [Standard Webhooks] v1 signatures of webhook calls.
//!
//! Every call carries `webhook-id` (one per event and config, the same on every retry),
//! `webhook-timestamp` (Unix seconds of the attempt) and `webhook-signature`, a
//! space-separated list of `<version>,<base64 signature>` over the signed content
//! `{webhook-id}.{webhook-timestamp}.{body}`:
//!
//! - `v1a` (default): Ed25519 with each signing key (two during a rotation). Receivers
//!   verify with the public keys of the gateway's JWKS (`/.well-known/jwks.json`, keys of
//!   type `OKP`, curve `Ed25519`; the card names it): no shared secret.
//! - `v1`: HMAC-SHA256 keyed with the base64-decoded part of a `whsec_` secret, which
//!   the receiver holds too (the symmetric mode of the Standard Webhooks libraries).
//!
//! [Standard Webhooks]: https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::signature::{Ed25519KeyPair, KeyPair as _};
use serde_json::{Value, json};

/// Why a signing key could not be loaded (names the file, never shows the key).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(pub String);

/// One Ed25519 signing key with its JWKS key id.
struct Ed25519Key {
    kid: String,
    pair: Ed25519KeyPair,
}

enum Scheme {
    V1a(Vec<Ed25519Key>),
    V1(ring::hmac::Key),
}

/// Signs webhook calls (see the module docs). `Debug` shows the key ids only.
pub struct Signer {
    scheme: Scheme,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.scheme {
            Scheme::V1a(keys) => f
                .debug_struct("Signer")
                .field("scheme", &"v1a")
                .field("kids", &keys.iter().map(|k| &k.kid).collect::<Vec<_>>())
                .finish(),
            Scheme::V1(_) => f.debug_struct("Signer").field("scheme", &"v1").finish(),
        }
    }
}

/// A new Ed25519 key as PKCS#8 bytes (for the store to keep).
///
/// # Panics
/// Only if the system random source fails.
pub fn generate_pkcs8() -> Vec<u8> {
    Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new())
        .expect("the system random source works")
        .as_ref()
        .to_vec()
}

fn key_id(public: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(public);
    URL_SAFE_NO_PAD.encode(&digest[..12])
}

fn ed25519(pair: Ed25519KeyPair) -> Ed25519Key {
    Ed25519Key {
        kid: key_id(pair.public_key().as_ref()),
        pair,
    }
}

/// Reads an Ed25519 key: PKCS#8 DER bytes, a PEM `PRIVATE KEY`, or `whsk_` followed by
/// the base64 of the 32-byte seed (or of seed and public key, 64 bytes).
///
/// # Errors
/// [`KeyError`] when it is none of these (`what` names the source).
pub fn parse_ed25519(bytes: &[u8], what: &str) -> Result<Ed25519KeyPair, KeyError> {
    let bad = |why: &str| KeyError(format!("{what}: not an Ed25519 signing key ({why})"));
    let text = std::str::from_utf8(bytes).map(str::trim);
    if let Ok(t) = text
        && let Some(b64) = t.strip_prefix("whsk_")
    {
        let raw = STANDARD
            .decode(b64)
            .map_err(|_| bad("whsk_ is not base64"))?;
        if raw.len() != 32 && raw.len() != 64 {
            return Err(bad("a whsk_ key holds 32 or 64 bytes"));
        }
        return Ed25519KeyPair::from_seed_unchecked(&raw[..32]).map_err(|_| bad("bad seed"));
    }
    if let Ok(t) = text
        && t.starts_with("-----BEGIN")
    {
        let mut reader = t.as_bytes();
        let der = rustls_pemfile::private_key(&mut reader)
            .ok()
            .flatten()
            .ok_or_else(|| bad("no PRIVATE KEY block"))?;
        return Ed25519KeyPair::from_pkcs8_maybe_unchecked(der.secret_der())
            .map_err(|_| bad("PKCS#8 of another algorithm"));
    }
    Ed25519KeyPair::from_pkcs8_maybe_unchecked(bytes).map_err(|_| bad("unknown format"))
}

impl Signer {
    /// A `v1a` signer with `keys` (the first is the current one; all sign).
    ///
    /// # Panics
    /// When `keys` is empty.
    pub fn v1a(keys: Vec<Ed25519KeyPair>) -> Self {
        assert!(!keys.is_empty(), "a v1a signer needs a key");
        Self {
            scheme: Scheme::V1a(keys.into_iter().map(ed25519).collect()),
        }
    }

    /// A `v1` signer with a `whsec_...` secret (the prefix is optional).
    ///
    /// # Errors
    /// [`KeyError`] when the rest is not base64 or is empty.
    pub fn v1(secret: &str) -> Result<Self, KeyError> {
        let s = secret.trim();
        let s = s.strip_prefix("whsec_").unwrap_or(s);
        let key = STANDARD
            .decode(s)
            .ok()
            .filter(|k| !k.is_empty())
            .ok_or_else(|| KeyError("the v1 secret must be whsec_ followed by base64".into()))?;
        Ok(Self {
            scheme: Scheme::V1(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key)),
        })
    }

    /// The `webhook-signature` value for one call.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut content = Vec::with_capacity(id.len() + body.len() + 24);
        content.extend_from_slice(id.as_bytes());
        content.push(b'.');
        content.extend_from_slice(timestamp.to_string().as_bytes());
        content.push(b'.');
        content.extend_from_slice(body);
        match &self.scheme {
            Scheme::V1a(keys) => keys
                .iter()
                .map(|k| format!("v1a,{}", STANDARD.encode(k.pair.sign(&content))))
                .collect::<Vec<_>>()
                .join(" "),
            Scheme::V1(key) => format!(
                "v1,{}",
                STANDARD.encode(ring::hmac::sign(key, &content).as_ref())
            ),
        }
    }

    /// The public keys as a JWKS (RFC 7517; OKP keys, RFC 8037), `None` for `v1`.
    pub fn jwks(&self) -> Option<Value> {
        let Scheme::V1a(keys) = &self.scheme else {
            return None;
        };
        let keys: Vec<Value> = keys
            .iter()
            .map(|k| {
                json!({
                    "kty": "OKP",
                    "crv": "Ed25519",
                    "x": URL_SAFE_NO_PAD.encode(k.pair.public_key().as_ref()),
                    "kid": k.kid,
                    "use": "sig",
                    "alg": "EdDSA",
                })
            })
            .collect();
        Some(json!({ "keys": keys }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_matches_the_standard_webhooks_example() {
        // The example of the Standard Webhooks specification.
        let s = Signer::v1("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            s.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn v1a_signatures_verify_with_the_jwks_key() {
        let pkcs8 = generate_pkcs8();
        let a = parse_ed25519(&pkcs8, "test").unwrap();
        let b = parse_ed25519(&generate_pkcs8(), "test").unwrap();
        let s = Signer::v1a(vec![a, b]);
        let header = s.sign("msg_1", 42, b"{}");
        let jwks = s.jwks().unwrap();
        let sigs: Vec<&str> = header.split(' ').collect();
        assert_eq!(sigs.len(), 2, "both keys sign during a rotation");
        for (sig, key) in sigs.iter().zip(jwks["keys"].as_array().unwrap()) {
            let raw = STANDARD.decode(sig.strip_prefix("v1a,").unwrap()).unwrap();
            let public = URL_SAFE_NO_PAD.decode(key["x"].as_str().unwrap()).unwrap();
            ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, public)
                .verify(b"msg_1.42.{}", &raw)
                .unwrap();
        }
        assert!(!format!("{s:?}").contains(&STANDARD.encode(&pkcs8)));
    }

    #[test]
    fn whsk_and_bad_keys() {
        let seed = STANDARD.encode([7u8; 32]);
        parse_ed25519(format!("whsk_{seed}").as_bytes(), "f").unwrap();
        let e = parse_ed25519(b"hello", "key.pem").err().unwrap();
        assert!(e.to_string().starts_with("key.pem:"), "{e}");
        assert!(Signer::v1("whsec_!!!").is_err());
    }
}
