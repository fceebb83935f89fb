# syntax=docker/dockerfile:1
# a2a-gateway: multi-stage build from the official Rust image to a small Debian runtime.
#
#   docker build -t a2a-gateway .
#   docker run -p 8080:8080 \
#     -v $PWD/a2a-gateway.toml:/etc/a2a-gateway/a2a-gateway.toml:ro \
#     -e A2A_GATEWAY_UPSTREAM__AUTH__CLIENT_SECRET=... \
#     -v a2a-gateway-data:/var/lib/a2a-gateway \
#     a2a-gateway
#
# Config comes from /etc/a2a-gateway/a2a-gateway.toml (A2A_GATEWAY_CONFIG): the image's
# default (docker/default-config.toml: listen on 0.0.0.0:8080) or the file mounted over it,
# then any A2A_GATEWAY_* variables you pass (see config.example.toml). The image sets no
# such variable itself, so the mounted file's keys, server.listen included, apply as
# written; keep 0.0.0.0 in server.listen inside a container. The health check runs
# `a2a-gateway health`, which reads the same config and asks /healthz on its port.
# The working directory is the data volume, so the default store
# `sqlite://a2a-gateway.db` lives in /var/lib/a2a-gateway.

ARG RUST_VERSION=1.94
FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# Everything .dockerignore lets through: Cargo.toml, Cargo.lock, src/, migrations/, …
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin a2a-gateway \
 && install -m 0755 target/release/a2a-gateway /usr/local/bin/a2a-gateway

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 a2a \
 && useradd --system --uid 10001 --gid a2a --home-dir /var/lib/a2a-gateway --shell /usr/sbin/nologin a2a \
 && mkdir -p /var/lib/a2a-gateway /etc/a2a-gateway \
 && chown a2a:a2a /var/lib/a2a-gateway
COPY --from=build /usr/local/bin/a2a-gateway /usr/local/bin/a2a-gateway
COPY config.example.toml /etc/a2a-gateway/config.example.toml
COPY docker/default-config.toml /etc/a2a-gateway/a2a-gateway.toml
ENV A2A_GATEWAY_CONFIG=/etc/a2a-gateway/a2a-gateway.toml
WORKDIR /var/lib/a2a-gateway
VOLUME ["/var/lib/a2a-gateway"]
USER 10001:10001
EXPOSE 8080
# The port comes from the config (server.listen), not from this file.
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/a2a-gateway", "health"]
# SIGTERM (docker stop) starts a graceful shutdown: give it server.shutdown_grace_secs
# (default 30 s) plus a little, e.g. `docker stop -t 40`.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/a2a-gateway"]
CMD ["serve"]
