#!/usr/bin/env bash
# The README's first command as users run it, to a valid answer:
#   1. `vodlab bench` as an unprivileged user (nobody): the cached path, the
#      one every non-root user gets (it once failed at once for them);
#   2. `vodlab bench --cached --start 32` as root (the run as nobody walked the
#      low rates from 4/s already; starting higher keeps CI under 30 minutes).
# Each must exit 0, write a capacity.json whose search found a capacity with
# valid client points, and print the answer in one sentence with new
# sessions/s, concurrent viewers and Gbit/s. Everything goes to a temporary
# directory that is removed at the end; nothing is installed or changed.
# Usage: scripts/ci-bench.sh [path/to/vodlab]   (default target/release/vodlab)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/vodlab}"
[ -x "$bin" ] || { echo "ci-bench: $bin missing: cargo build --release first" >&2; exit 2; }
tmp="$(mktemp -d /tmp/vodlab-ci-bench.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
# a copy the unprivileged user can run whatever the checkout's permissions
install -m 755 "$bin" "$tmp/vodlab"

check() { # NAME DIR LOG
  local name="$1" dir="$2" log="$3"
  grep -E 'served (at least )?[0-9.]+ new sessions/s without a failed session: [0-9.]+ concurrent viewers on average \(peak [0-9]+\), [0-9.]+ Gbit/s delivered' "$log" >/dev/null \
    || { echo "ci-bench: $name: no answer sentence with sessions/s, viewers and Gbit/s:" >&2; tail -30 "$log" >&2; return 1; }
  python3 - "$dir/capacity.json" "$name" <<'EOF'
import json, sys
path, name = sys.argv[1], sys.argv[2]
c = json.load(open(path))
cap = c["answer"]["capacity"]
assert cap is not None and cap > 0, f"{name}: no capacity: {c['answer']}"
at = c.get("at_capacity") or {}
assert at.get("rate") == cap, f"{name}: at_capacity is not the capacity's point: {at}"
assert (at.get("mean_active_sessions") or 0) > 0, f"{name}: no concurrent viewers: {at}"
assert at.get("delivered_gbit_s", 0) > 0, f"{name}: no Gbit/s: {at}"
assert c.get("bitrate_mix"), f"{name}: no bit-rate mix"
bad = [r for r in c["rows"] if not r["client_valid"] and r["rate"] <= cap]
assert not bad, f"{name}: invalid client points at or below the capacity: {bad}"
print(f"ci-bench: {name}: {cap:.2f} new sessions/s, {at['mean_active_sessions']:.1f} concurrent viewers, {at['delivered_gbit_s']:.3f} Gbit/s")
EOF
}

mkdir -m 777 "$tmp/nobody"
echo "ci-bench: vodlab bench as nobody" >&2
if ! (cd "$tmp/nobody" && TMPDIR="$tmp/nobody" setpriv --reuid=nobody --regid=nogroup --clear-groups \
    env HOME="$tmp/nobody" "$tmp/vodlab" bench -o "$tmp/nobody/out") >"$tmp/nobody.log" 2>&1; then
  echo "ci-bench: vodlab bench as nobody failed:" >&2; tail -40 "$tmp/nobody.log" >&2; exit 1
fi
check "bench as nobody" "$tmp/nobody/out" "$tmp/nobody.log"

echo "ci-bench: vodlab bench --cached --start 32 as root" >&2
if ! (cd "$tmp" && "$tmp/vodlab" bench --cached --start 32 -o "$tmp/root") >"$tmp/root.log" 2>&1; then
  echo "ci-bench: vodlab bench --cached failed:" >&2; tail -40 "$tmp/root.log" >&2; exit 1
fi
check "bench --cached as root" "$tmp/root" "$tmp/root.log"
