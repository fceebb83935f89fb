//! The `lf.a2a.v1` messages, the `A2AService` server trait and its client, generated
//! by build.rs from `proto/a2a.proto` (prost and tonic). Every message implements
//! [`prost::Name`], whose full name finds its descriptor in [`super::json`]'s pool.
//!
//! A client for other Rust programs and tests: [`a2a_service_client::A2aServiceClient`]
//! over any tonic channel (`A2aServiceClient::new(channel)`).

// Generated code: its doc comments are the proto's comments, and it is not ours to lint.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.rs"));
