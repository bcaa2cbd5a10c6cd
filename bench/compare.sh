#!/usr/bin/env bash
# compare.sh: the gateway against stock Caddy's reverse_proxy, in separate
# processes, on this machine. It builds the project's Caddy (cmd/caddy),
# stock Caddy of the same version (from the Go module proxy), the mock
# provider and the load generator; starts the mock; then for each mode
# (json, stream) and concurrency runs the same load against plain Caddy
# and against the gateway on examples/Caddyfile, interleaved REPEAT times,
# and prints a table with medians.
#
# With two or more cores the server under test is pinned to core 1 and the
# mock and load generator to core 0, so both servers get one same core.
#
# Run from the repository root:  bench/compare.sh
# Knobs: CONC ("16 64"), MODES ("json stream"), DUR (10s), WARMUP (2s),
# REPEAT (1), MOCK_LATENCY (0s, e.g. 20ms to measure below saturation),
# CHUNK_DELAY (0s), OUT (/tmp/llmgw-compare).
set -euo pipefail
cd "$(dirname "$0")/.."

CONC=${CONC:-"16 64"}
MODES=${MODES:-"json stream"}
DUR=${DUR:-10s}
WARMUP=${WARMUP:-2s}
REPEAT=${REPEAT:-1}
MOCK_LATENCY=${MOCK_LATENCY:-0s}
CHUNK_DELAY=${CHUNK_DELAY:-0s}
OUT=${OUT:-/tmp/llmgw-compare}
MOCK_PORT=${MOCK_PORT:-9101}
CADDY_PORT=${CADDY_PORT:-9102}
GW_PORT=${GW_PORT:-9103}
mkdir -p "$OUT"

echo "== building" >&2
version=$(go list -m -f '{{.Version}}' github.com/caddyserver/caddy/v2)
go build -o "$OUT/llmgw" ./cmd/caddy
go build -o "$OUT/mockprovider" ./bench/mockprovider
go build -o "$OUT/load" ./bench/load
if [ ! -x "$OUT/caddy-stock-$version" ]; then
  stock=$(mktemp -d)
  cat > "$stock/main.go" <<'GO'
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func main() { caddycmd.Main() }
GO
  (cd "$stock" && go mod init stockcaddy >/dev/null 2>&1 && go get "github.com/caddyserver/caddy/v2@$version" >/dev/null 2>&1 \
    && go mod tidy >/dev/null 2>&1 && go build -o "$OUT/caddy-stock-$version" .)
  rm -rf "$stock"
fi

pin_harness=(); pin_server=(); procs=""
if [ "$(nproc)" -ge 2 ]; then
  pin_harness=(taskset -c 0); pin_server=(taskset -c 1); procs=1
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

wait_port() {
  for _ in $(seq 100); do
    (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "port $1 did not open" >&2; return 1
}

GOMAXPROCS=${procs:-0} "${pin_harness[@]}" "$OUT/mockprovider" -addr "127.0.0.1:$MOCK_PORT" \
  -latency "$MOCK_LATENCY" -chunk-delay "$CHUNK_DELAY" 2>/dev/null &
pids+=($!); wait_port "$MOCK_PORT"

# Plain Caddy logs every request as JSON to stdout, as examples/Caddyfile does.
cat > "$OUT/plain.Caddyfile" <<CF
{
	admin off
	auto_https off
	log {
		output stdout
		format json
	}
}
:$CADDY_PORT {
	log {
		output stdout
		format json
	}
	reverse_proxy 127.0.0.1:$MOCK_PORT
}
CF
GOMAXPROCS=${procs:-0} "${pin_server[@]}" "$OUT/caddy-stock-$version" run --config "$OUT/plain.Caddyfile" --adapter caddyfile >/dev/null 2>&1 &
caddy_pid=$!; pids+=($caddy_pid); wait_port "$CADDY_PORT"

GATEWAY_PORT=$GW_PORT GATEWAY_ADMIN_PORT=$((GW_PORT + 1)) GATEWAY_API_KEY=bench-key-0123456789 \
  GOMAXPROCS=${procs:-0} "${pin_server[@]}" "$OUT/llmgw" run --config examples/Caddyfile --adapter caddyfile >/dev/null 2>&1 &
gw_pid=$!; pids+=($gw_pid); wait_port "$GW_PORT"

gw_headers=(-H "x-gateway-api-key: bench-key-0123456789" -H "x-gateway-provider: openai"
  -H "x-gateway-custom-host: http://127.0.0.1:$MOCK_PORT/v1" -H "Authorization: Bearer sk-mock")

results="$OUT/results.tsv"; : > "$results"
for rep in $(seq "$REPEAT"); do
  for mode in $MODES; do
    stream=false; [ "$mode" = stream ] && stream=true
    for c in $CONC; do
      echo "== run $rep: $mode c=$c" >&2
      "${pin_harness[@]}" "$OUT/load" -label "caddy $mode $c" -url "http://127.0.0.1:$CADDY_PORT/v1/chat/completions" \
        -c "$c" -d "$DUR" -warmup "$WARMUP" -stream=$stream -pid "$caddy_pid" -H "Authorization: Bearer sk-mock" >> "$results"
      "${pin_harness[@]}" "$OUT/load" -label "llmgw $mode $c" -url "http://127.0.0.1:$GW_PORT/v1/chat/completions" \
        -c "$c" -d "$DUR" -warmup "$WARMUP" -stream=$stream -pid "$gw_pid" "${gw_headers[@]}" >> "$results"
    done
  done
done

# Medians per row, then the gateway against plain Caddy.
echo
echo "Caddy $version, $(nproc) cores, pinned: $([ -n "$procs" ] && echo yes || echo no), mock latency $MOCK_LATENCY, $DUR per run, $REPEAT repeat(s)"
awk -F'\t' '
function median(arr, n,   i, j, t) {
  for (i = 2; i <= n; i++) { t = arr[i]; for (j = i - 1; j >= 1 && arr[j] > t; j--) arr[j+1] = arr[j]; arr[j+1] = t }
  return (n % 2) ? arr[(n+1)/2] : (arr[n/2] + arr[n/2+1]) / 2
}
{ k = $1; n[k]++; for (f = 2; f <= 7; f++) v[k, f, n[k]] = $f; if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
END {
  printf "%-18s %9s %9s %9s %10s %6s %11s %9s %9s\n", "target mode c", "req/s", "p50 ms", "p99 ms", "ttfb p50", "errors", "cpu ms/req", "rps/caddy", "+cpu us"
  for (i = 1; i <= m; i++) {
    k = order[i]
    for (f = 2; f <= 7; f++) { for (r = 1; r <= n[k]; r++) a[r] = v[k, f, r]; med[k, f] = median(a, n[k]) }
  }
  for (i = 1; i <= m; i++) {
    k = order[i]; split(k, p, " "); base = "caddy " p[2] " " p[3]
    ratio = (med[base, 2] > 0) ? sprintf("%.2f", med[k, 2] / med[base, 2]) : "-"
    addcpu = sprintf("%.1f", (med[k, 7] - med[base, 7]) * 1000)
    printf "%-18s %9.0f %9.3f %9.3f %10.3f %6d %11.4f %9s %9s\n", k, med[k, 2], med[k, 3], med[k, 4], med[k, 5], med[k, 6], med[k, 7], ratio, addcpu
  }
}' "$results"
