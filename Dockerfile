# The gateway's container image: build Caddy with this module in the
# official Go image, then copy the binary into the official Caddy runtime
# image. Build from the repository root:
#
#   docker build -t caddy-llm-gateway .
#   docker run --rm -p 8787:8787 -e GATEWAY_API_KEY=dev-key \
#     -e OPENAI_API_KEY=sk-... caddy-llm-gateway
#
# The runtime image carries the Caddy version go.mod pins and the builder
# the Go version go.mod names (deploy_test.go checks both).

# The base images are build arguments so a registry mirror or a digest pin
# can be given without editing this file, e.g.
#   --build-arg GO_IMAGE=golang:1.26.8-alpine@sha256:<digest>
#   --build-arg CADDY_IMAGE=caddy:2.11.9@sha256:<digest>
# (the digests your registry serves for these tags: `docker buildx
# imagetools inspect golang:1.26.8-alpine`). deploy_test.go checks the tags
# follow go.mod.
ARG GO_IMAGE=golang:1.26.8-alpine
ARG CADDY_IMAGE=caddy:2.11.9

FROM ${GO_IMAGE} AS builder
# The builder image's own Go, which go.mod's go line names: no toolchain
# is downloaded during the build.
ENV GOTOOLCHAIN=local CGO_ENABLED=0
WORKDIR /src
# Modules first, so a source change reuses the downloaded modules' layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# cmd/caddy/main.go is exactly the program `xcaddy build --with
# github.com/caddy-llm-gateway/caddy-llm-gateway=.` generates (Caddy's
# standard modules plus this module), and go.mod pins the Caddy version, so
# this is the binary the tests ran against.
RUN go build -trimpath -o /usr/bin/caddy ./cmd/caddy \
 && /usr/bin/caddy list-modules | grep -q '^http.handlers.llm_gateway$'

FROM ${CADDY_IMAGE}
COPY --from=builder /usr/bin/caddy /usr/bin/caddy
# The example gateway: the Caddyfile where the image's default command
# reads it, and the saved configs and prompt files it names by relative
# path, under the image's working directory /srv.
COPY examples/Caddyfile /etc/caddy/Caddyfile
COPY examples/configs /srv/examples/configs
COPY examples/prompts /srv/examples/prompts
WORKDIR /srv

# Run as an unprivileged user. The gateway listens on 8787, so it needs no
# capability to bind; /data (Caddy's storage: policies, prompts, keys,
# the SQLite ledger when no PostgreSQL is given) and /config (autosaved
# config) are the only places it writes.
RUN addgroup -S -g 10001 gateway \
 && adduser -S -D -H -u 10001 -G gateway gateway \
 && mkdir -p /data /config \
 && chown -R gateway:gateway /data /config
USER gateway:gateway
ENV XDG_DATA_HOME=/data XDG_CONFIG_HOME=/config GATEWAY_PORT=8787
VOLUME ["/data", "/config"]
EXPOSE 8787

# Liveness: the examples' Caddyfile answers /healthz (llm_health live) and
# /readyz (llm_health ready). wget is part of the alpine runtime image.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD wget -q -O /dev/null "http://127.0.0.1:${GATEWAY_PORT}/healthz" || exit 1

# Caddy stops on SIGTERM: readiness turns 503 at once, and streams in
# flight finish within the Caddyfile's grace_period (docs/deploy.md); give
# `docker stop --time` (or compose's stop_grace_period) at least as long.
STOPSIGNAL SIGTERM
CMD ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]
