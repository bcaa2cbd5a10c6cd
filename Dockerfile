# The gateway's container image, in Caddy's documented pattern for plugins:
# build Caddy with this module in the official builder image, then copy the
# binary into the official runtime image. Build from the repository root:
#
#   docker build -t caddy-llm-gateway .
#   docker run --rm -p 8787:8787 -e GATEWAY_API_KEY=dev-key \
#     -e OPENAI_API_KEY=sk-... caddy-llm-gateway
#
# Both images carry the Caddy version go.mod pins (deploy_test.go checks
# it), so the binary is the same Caddy the tests ran against.

FROM caddy:2.11.9-builder AS builder
# go.mod asks for a newer Go than the builder image may ship; "auto" lets
# the go command fetch that toolchain through the module proxy.
ENV GOTOOLCHAIN=auto
WORKDIR /src
COPY . .
# xcaddy builds Caddy's standard modules plus this module from the build
# context (the "=." replacement), as `go build ./cmd/caddy` does from a
# clone.
RUN xcaddy build v2.11.9 \
      --with github.com/caddy-llm-gateway/caddy-llm-gateway=. \
      --output /usr/bin/caddy \
 && /usr/bin/caddy list-modules | grep -q '^http.handlers.llm_gateway$'

FROM caddy:2.11.9
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
