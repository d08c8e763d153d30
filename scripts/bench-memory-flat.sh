#!/usr/bin/env bash
# Is the load client's memory flat over a long run? (issue 18: "memory of a
# 1-hour run is flat (bounded statistics)").
#
# Generates a youtube-2011 workload with enough sessions for MINUTES of
# arrivals at RATE sessions/s, writes its file set, serves it with
# `vodlab serve` on loopback and replays it with `vodlab run` for MINUTES,
# sampling the client's (and the server's) resident memory every SAMPLE_S
# seconds from /proc. Prints the samples and a verdict: the client's RSS
# growth per hour over the second half of the run (after the concurrency
# has settled) against its RSS at the half-way mark. The statistics the
# client keeps are HdrHistograms and fixed-width interval series, so the
# growth should be a small fraction; a per-request record kept in memory
# would grow linearly with the requests served.
#
#   scripts/bench-memory-flat.sh                 # 60 minutes (the issue's hour)
#   MINUTES=5 scripts/bench-memory-flat.sh       # a quick look
#   env: VODLAB=target/release/vodlab RATE=2 TITLES=100 SAMPLE_S=10 OUT=dir
#
# Writes OUT/memory.csv (t_s, client_rss_kib, server_rss_kib,
# client_sessions_started) and OUT/run/ (the run's results). Loopback only.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
VODLAB=${VODLAB:-$here/target/release/vodlab}
MINUTES=${MINUTES:-60}
RATE=${RATE:-2}
TITLES=${TITLES:-100}
SAMPLE_S=${SAMPLE_S:-10}
[ -x "$VODLAB" ] || { echo "no vodlab binary at $VODLAB (cargo build --release -p vodlab)" >&2; exit 1; }
work=$(mktemp -d)
OUT=${OUT:-$work/out}
mkdir -p "$OUT"
server_pid=""
client_pid=""
cleanup() {
  for p in $client_pid $server_pid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work/w" "$work/files"
}
trap cleanup EXIT

duration=$((MINUTES * 60))
# enough sessions for the whole run, plus 5 %
sessions=$(python3 -c "import math; print(math.ceil($RATE * $duration * 1.05) + 10)")
"$VODLAB" gen --preset youtube-2011 --titles "$TITLES" --sessions "$sessions" --shards 1 \
  -o "$work/w" >/dev/null
"$VODLAB" fileset create --root "$work/files" "$work/w" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$VODLAB" serve --root "$work/files" --listen "127.0.0.1:$port" --stats-interval 0 \
  2>"$OUT/serve.err" &
server_pid=$!
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
"$VODLAB" run "$work/w" --target "http://127.0.0.1:$port" --rate "$RATE" \
  --duration "$duration" --interval 5 -q -o "$OUT/run" 2>"$OUT/run.err" &
client_pid=$!

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
echo "t_s,client_rss_kib,server_rss_kib" > "$OUT/memory.csv"
start=$(date +%s)
printf '%8s %14s %14s\n' t_s client_KiB server_KiB
while kill -0 "$client_pid" 2>/dev/null; do
  t=$(( $(date +%s) - start ))
  c=$(rss "$client_pid"); s=$(rss "$server_pid")
  [ "$c" = 0 ] && break
  echo "$t,$c,$s" >> "$OUT/memory.csv"
  if (( t % 60 < SAMPLE_S )); then printf '%8d %14d %14d\n' "$t" "$c" "$s"; fi
  # bounded: the run stops itself at --duration; never wait past it + 5 min
  (( t > duration + 300 )) && { echo "client still running after $t s: killing it" >&2; kill "$client_pid"; break; }
  sleep "$SAMPLE_S"
done
wait "$client_pid" || true
client_pid=""

python3 - "$OUT/memory.csv" "$OUT/run/results.json" <<'EOF'
import csv, json, sys
rows = [(float(r["t_s"]), int(r["client_rss_kib"]), int(r["server_rss_kib"]))
        for r in csv.DictReader(open(sys.argv[1]))]
if len(rows) < 4:
    sys.exit("too few samples")
try:
    res = json.load(open(sys.argv[2]))
except Exception as e:  # an interrupted run still reports memory
    res = {"valid": f"no results ({e})", "intervals": []}
iv = res.get("intervals") or []
w = iv[1]["t_s"] - iv[0]["t_s"] if len(iv) > 1 else 5.0
def active(t):
    i = min(int(t // w), len(iv) - 1)
    seg = iv[max(0, i - 1): i + 1]
    return sum(x["active_sessions"] for x in seg) / len(seg)
def slope(pts):
    # least-squares slope of (x, y) points
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts) or 1.0
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx
end = rows[-1][0]
half = [r for r in rows if r[0] >= end / 2]
slope_h = slope([(r[0] / 3600, r[1] / 1024) for r in half])  # MiB per hour
at_half = half[0][1] / 1024
peak = max(r[1] for r in rows) / 1024
print(f"run: {end:.0f} s, sessions started {res.get('started_sessions')}, "
      f"requests {res.get('completed_requests')}, valid {res.get('valid')}")
print(f"client RSS: {rows[0][1]/1024:.1f} MiB at {rows[0][0]:.0f} s, {at_half:.1f} MiB at "
      f"{half[0][0]:.0f} s, {rows[-1][1]/1024:.1f} MiB at {end:.0f} s, peak {peak:.1f} MiB")
print(f"client RSS growth over the second half: {slope_h:+.2f} MiB per hour "
      f"({100*slope_h/at_half:+.1f} % of the half-way RSS per hour)")
if iv:
    act = [active(r[0]) for r in half]
    act_slope = slope([(r[0] / 3600, a) for r, a in zip(half, act)])
    print(f"active sessions over the second half: {min(act):.0f}-{max(act):.0f}, "
          f"trend {act_slope:+.0f} per hour")
print(f"server RSS: {rows[0][2]/1024:.1f} MiB -> {rows[-1][2]/1024:.1f} MiB")
EOF
