//! a2a-gateway library.
