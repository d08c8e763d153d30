#!/usr/bin/env bash
# Next-object prefetch against the chain policies, in trace-driven
# simulation (issue "Players and servers that talk": `nor` measured against
# the chain policies; docs/experiments.md, "Next object or chains").
#
# The thesis's YouTube-like workload (preset youtube-2011: 7,200 paced
# sessions, 0.5 MB chunk requests every 10 s) in its two layouts:
#   chunked     one 0.5 MB file per chunk (each chain is one chunk)
#   unchunked   one file per title (a session's chunks form one chain)
# replayed by `vodlab simulate --prefetch --trace-workload` with a shared
# page cache, each policy once without and (chunked only: in the unchunked
# layout the next chunk is the same file, never a next object) once with
# `--prefetch-next-object` (the trace's next chain of the session standing
# for the player's CMCD `nor`; docs/simulate.md, "Model").
#
#   scripts/experiments/next-object-sim.sh [OUT_DIR]
#   env: VODLAB (target/release/vodlab), HOURS (2: the sessions arrive over
#        this many hours), CACHE (8G), POLICIES ("fixed:2M fixed:8M
#        first-grow-sr:16M auto"), SEED (1)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-target/experiments/next-object-sim}
VODLAB=${VODLAB:-target/release/vodlab}
HOURS=${HOURS:-2}
CACHE=${CACHE:-8G}
POLICIES=${POLICIES:-"fixed:2M fixed:8M first-grow-sr:16M auto"}
SEED=${SEED:-1}
[ -x "$VODLAB" ] || cargo build --release -q -p vodlab
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
args=()
for p in $POLICIES; do args+=(--policy "$p"); done
for preset in youtube-2011 youtube-2011-unchunked; do
  "$VODLAB" gen --preset "$preset" --seed "$SEED" -o "$WORK/$preset" >/dev/null
done
{
  echo "# $(date -u +%FT%TZ) next-object-sim.sh: youtube-2011, sessions over $HOURS h, page cache $CACHE, seed $SEED"
  for run in chunked chunked-next-object unchunked; do
    case $run in
      chunked) w=youtube-2011; extra=() ;;
      chunked-next-object) w=youtube-2011; extra=(--prefetch-next-object) ;;
      unchunked) w=youtube-2011-unchunked; extra=() ;;
    esac
    echo "## $run"
    "$VODLAB" simulate --prefetch --trace-workload "$WORK/$w" --trace-hours "$HOURS" --page-cache "$CACHE" \
      "${args[@]}" "${extra[@]}" -o "$OUT/$run" 2>&1
  done
} | tee "$OUT/table.txt"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
out = sys.argv[1]
print("%-20s %-18s %9s %9s %8s %10s %9s %9s" % ("layout", "policy", "peak util", "device GB", "seeks", "resident %", "max wait s", "peak mem GB"))
for run in ("chunked", "chunked-next-object", "unchunked"):
    for r in json.load(open(f"{out}/{run}/results.json")):
        print("%-20s %-18s %8.1f%% %9.2f %8d %9.1f%% %9.2f %9.3f" % (
            run, r["spec"], 100 * r["peak_utilisation"], r["device_bytes"] / 1e9, r["prefetches"],
            100 * r["hits"] / max(1, r["decisions"]), r["max_wait_s"], r["peak_memory_bytes"] / 1e9))
PY
