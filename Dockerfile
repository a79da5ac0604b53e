# syntax=docker/dockerfile:1
#
# `vox serve` in a container: the workspace daemon and its HTTP gateway in one process, run as
# a non-root user, with the workspace (and its state, `.vox/`) on a volume.
#
#   docker build -t vox .
#   docker run -d --name vox -p 127.0.0.1:3921:3921 -v vox-workspace:/workspace \
#     -e VOX_MCP_HTTP_BEARER_TOKEN="$(openssl rand -hex 24)" vox
#
# docs/operations.md ("Docker") says what the image holds and how to change the profile, the
# port and the workspace; docs/http-gateway.md ("TLS") puts a reverse proxy in front of it.

# The toolchain the workspace asks for (`rust-version` in Cargo.toml) and the Debian release of
# both stages: the binaries link with packed relative relocations (DT_RELR), which need the
# glibc (2.36 or later) of the build's own Debian at run time.
ARG RUST_VERSION=1.95
ARG DEBIAN=trixie

FROM rust:${RUST_VERSION}-${DEBIAN} AS build
WORKDIR /src
COPY . .
# Symbol names stay (a panic's backtrace names its functions); the line tables the release
# profile keeps are dropped, which takes `vox` from about 270 MiB to about 57 MiB.
ENV CARGO_PROFILE_RELEASE_STRIP=debuginfo
# The registry and the target directory are BuildKit caches, so a rebuild after a source change
# compiles only what changed; the binaries are copied out of the cache in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p vox-cli --bin vox --bin vox-orchestrator-d \
 && install -D -m 0755 -t /out target/release/vox target/release/vox-orchestrator-d

FROM debian:${DEBIAN}-slim
# curl: the HEALTHCHECK below (vox has no health subcommand); git: the repo-read tools run the
# git CLI; tini: PID 1 reaps the processes vox starts (upstream MCP servers, git, agents) and
# passes SIGTERM on, so `docker stop` drains in-flight calls; ca-certificates: HTTPS to model
# providers, webhooks and upstream servers.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl git tini \
 && rm -rf /var/lib/apt/lists/*
# A fixed uid, so a host directory mounted as the workspace can be given to it
# (`chown -R 10001:10001 <dir>`).
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/vox \
      --shell /usr/sbin/nologin vox \
 && install -d -o vox -g vox -m 0750 /workspace
COPY --from=build /out/vox /out/vox-orchestrator-d /usr/local/bin/

USER vox
WORKDIR /workspace
# The workspace is the volume, whatever the command's working directory. The port is read by
# `vox serve` and by the HEALTHCHECK alike, so change it here (`-e VOX_MCP_HTTP_PORT=…`), not
# with `--port`.
ENV VOX_WORKSPACE=/workspace \
    VOX_MCP_HTTP_PORT=3921
VOLUME ["/workspace"]
EXPOSE 3921

# Liveness, no token needed: 200 while the gateway answers (`"status": "degraded"` included;
# /ready is the readiness probe). The Host header (127.0.0.1:port) is a loopback name, which
# the gateway always accepts.
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
  CMD curl -fsS -o /dev/null "http://127.0.0.1:${VOX_MCP_HTTP_PORT}/health" || exit 1

ENTRYPOINT ["/usr/bin/tini", "--", "vox"]
# 0.0.0.0 on purpose: inside the container, loopback is unreachable from the published port.
# Off loopback the gateway refuses to start without a token (VOX_MCP_HTTP_BEARER_TOKEN and/or
# VOX_MCP_HTTP_READ_BEARER_TOKEN, 16 characters or more); VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED=1
# is refused on this address.
CMD ["serve", "--profile", "knowledge", "--host", "0.0.0.0"]
