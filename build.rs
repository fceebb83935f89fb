//! Compiles `proto/a2a.proto` (the gRPC binding, spec §10) at build time with protox,
//! a protobuf compiler written in Rust, so no system `protoc` is needed. Writes the
//! prost messages and the tonic client and server to `OUT_DIR/lf.a2a.v1.rs`, and the
//! encoded `FileDescriptorSet` (with the well-known types it imports) to
//! `OUT_DIR/a2a_descriptor.bin`, which the gateway loads into a prost-reflect
//! descriptor pool to convert messages to and from ProtoJSON.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/a2a.proto");
    let fds = protox::compile(["proto/a2a.proto"], ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("a2a_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    let mut config = tonic_prost_build::Config::new();
    // `prost::Name` on every message: its full name finds its descriptor in the pool.
    config.enable_type_names();
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // The client's `connect` needs tonic's channel feature, which only tests enable.
        .build_transport(false)
        // prost's codec, except that an undecodable message is INVALID_ARGUMENT, not INTERNAL.
        .codec_path("crate::transport::grpc::codec::A2aCodec")
        .compile_fds_with_config(fds, config)?;
    Ok(())
}
