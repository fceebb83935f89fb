//! Support for the cross-binding scenario table (`tests/bindings.rs`): one client trait
//! ([`client::Binding`]) with an implementation per binding, and a gateway on
//! 127.0.0.1:0 in front of a controllable executor ([`server`]).
//!
//! A binding's client takes the operation and its request message in ProtoJSON and
//! answers ProtoJSON, or a [`client::Failure`] carrying the `google.rpc.ErrorInfo`
//! reason and the binding's own code; so the same scenario runs on every binding and
//! their results can be compared.

#![allow(dead_code)]

pub mod client;
pub mod grpc;
pub mod jsonrpc;
pub mod rest;
pub mod server;
pub mod sse;
