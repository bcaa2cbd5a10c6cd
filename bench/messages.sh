#!/usr/bin/env bash
# messages.sh: the Messages API (/v1/messages) through the gateway against
# a plain reverse_proxy, in one process: the Go benchmarks
# BenchmarkMessages* in integration/messages_bench_test.go (one in-process
# Caddy serving both, one mock answering Anthropic's and OpenAI's formats
# with the same text, one request at a time), run COUNT interleaved rounds, reported as
# medians and as throughput ratios against plain Caddy (plain ns/op ÷
# gateway ns/op; ≥ 1 means the gateway was as fast).
#
# Run from the repository root:  bench/messages.sh
# Knobs: COUNT (5), BENCHTIME (2000x), MAX_LOAD (1.5: refuses to run while
# the 1-minute load average is higher, since a shared machine's other work
# moves the numbers more than the gateway does; FORCE=1 runs anyway).
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-2000x}
MAX_LOAD=${MAX_LOAD:-1.5}

load=$(cut -d' ' -f1 /proc/loadavg)
echo "load average (1 min) before: $load"
if [ "${FORCE:-0}" != 1 ] && awk -v l="$load" -v m="$MAX_LOAD" 'BEGIN{exit !(l > m)}'; then
  echo "load average $load is above $MAX_LOAD: not measuring (FORCE=1 to run anyway)" >&2
  exit 2
fi

out=$(mktemp /tmp/llmgw-messages-bench.XXXXXX)
go test -c -o /tmp/llmgw-messages-bench.test ./integration/
# Interleaved: each round runs every benchmark once, so a drift of the
# machine's load touches every row alike.
# A round that fails (a port another test run holds, say) is reported and
# left out; its finished rows still count.
round=$(mktemp /tmp/llmgw-messages-round.XXXXXX)
for i in $(seq "$COUNT"); do
  if ! (cd integration && /tmp/llmgw-messages-bench.test -test.run '^$' -test.bench '^BenchmarkMessages' \
    -test.benchtime "$BENCHTIME" -test.benchmem) >"$round" 2>"$round.err"; then
    echo "round $i failed: $(grep -h -m1 -E 'FAIL|Error|error|panic' "$round" "$round.err" | head -1 | cut -c1-200)" >&2
  fi
  grep '^BenchmarkMessages' "$round" | tee -a "$out" || true
done
rm -f "$round" "$round.err"
echo "load average (1 min) after: $(cut -d' ' -f1 /proc/loadavg)"

# Medians per benchmark, then each gateway row against plain Caddy's.
awk '
  { name=$1; sub(/-[0-9]+$/, "", name); sub(/^BenchmarkMessages/, "", name)
    ns[name]=ns[name] " " $3; al[name]=al[name] " " $7 }
  function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    printf "\n%-18s %12s %10s %14s\n", "request", "median ns/op", "allocs/op", "rps ÷ plain"
    split("PlainJSON NativeJSON TranslatedJSON PlainStream NativeStream TranslatedStream", order, " ")
    for (k = 1; k <= 6; k++) {
      n = order[k]; if (!(n in ns)) continue
      base = (n ~ /JSON$/) ? "PlainJSON" : "PlainStream"
      printf "%-18s %12.0f %10.0f %14.2f\n", n, median(ns[n]), median(al[n]), median(ns[base]) / median(ns[n])
    }
  }' "$out"
rm -f "$out" /tmp/llmgw-messages-bench.test
