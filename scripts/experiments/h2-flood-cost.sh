#!/usr/bin/env bash
# What an HTTP/2 flood costs a benign client of `vodlab serve`: h2load's
# throughput (h2c, C connections, M streams each, 1 MiB file) alone and
# while one flood of scripts/h2probe/h2probe.py repeats against the same
# server in a loop; median of ROUNDS rounds each, as a ratio to alone.
#
#   scripts/experiments/h2-flood-cost.sh [VODLAB_BIN]
#   env: ROUNDS=3 N=1000 C=4 M=10 THREADS=1 FLOODS="rapid_reset ..."
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-target/release/vodlab}
rounds=${ROUNDS:-3}
n=${N:-1000}
c=${C:-4}
m=${M:-10}
floods=${FLOODS:-"rapid_reset continuation_flood settings_flood ping_flood window_update_flood small_data_flood"}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/root"
head -c $((1 << 20)) /dev/urandom > "$work/root/seg.m4s"
head -c 1000 /dev/urandom > "$work/root/small.bin"
head -c $((16 << 20)) /dev/zero > "$work/root/big.bin"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" serve --root "$work/root" --listen "127.0.0.1:$port" --threads "${THREADS:-1}" --stats-interval 0 2>"$work/err" &
pids+=($!)
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done

benign() { # MB/s of one h2load run
  h2load -n "$n" -c "$c" -m "$m" -p h2c "http://127.0.0.1:$port/seg.m4s" 2>&1 |
    awk '/^finished in/ {v=$3; sub(/,$/,"",v); if (v ~ /ms$/) {sub(/ms$/,"",v); v=v/1000} else sub(/s$/,"",v); s=v}
         /^traffic:/ {d=$0; sub(/.*\(/,"",d); sub(/\) data.*/,"",d)}
         END {printf "%.1f\n", d/s/1e6}'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

alone=$(for _ in $(seq "$rounds"); do benign; done | median)
echo "alone: $alone MB/s (median of $rounds)"
for f in $floods; do
  ( while true; do /usr/bin/python3 "$here/scripts/h2probe/h2probe.py" 127.0.0.1 "$port" "$f" >/dev/null 2>&1 || true; done ) &
  fp=$!
  pids+=("$fp")
  sleep 0.5
  with=$(for _ in $(seq "$rounds"); do benign; done | median)
  kill "$fp" 2>/dev/null || true
  wait "$fp" 2>/dev/null || true
  floods_done=$(curl -s "http://127.0.0.1:$port/vodlab/stats" | python3 -c "import json,sys; print(json.load(sys.stdin)['h2']['$f'])" 2>/dev/null || echo "?")
  echo "$f: $with MB/s = $(awk -v a="$with" -v b="$alone" 'BEGIN{printf "%.3f", a/b}') of alone (connections closed for it so far: $floods_done)"
done
