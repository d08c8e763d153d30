#!/usr/bin/env bash
# How many closed-loop players one `vodlab run` process carries (issue 17's
# scale benchmark: >= 10,000 players, <= 64 KiB each, scheduler lateness
# p99 < 10 ms, client CPU per 1,000 players).
#
# The workload (stated, not a preset): a dash-vod-like spec with a
# low-bit-rate ladder (LADDER, kbit/s; 4 s segments, one file each),
# TITLES titles of TITLE_S seconds, every session watching the whole
# title (viewing fraction 1), one client class whose link is DOWN_KBPS
# down with DELAY_MS one-way delay (DOWN_KBPS=0: no link emulation).
# Players: --player dash --abr ABR --max-buffer BUFFER_S
# --max-segments SEGMENTS, arriving at RATE/s (constant), so the
# arrivals take PLAYERS/RATE s and each player lasts about
# SEGMENTS x 4 s - BUFFER_S: with the defaults every player overlaps
# the others for a while and most of the time they wait on a full
# buffer. `vodlab serve` (default settings) on loopback serves the file
# set from the page cache; server and client share the machine.
#
# Per round: players, peak active, wall time, client CPU (user+sys from
# /usr/bin/time), CPU per 1,000 players (client CPU seconds over the
# active player-seconds / 1,000, in % of one core), peak RSS and RSS per
# player at the peak (process: peak RSS / peak active, what a user's machine
# pays; and (peak RSS - 20 MiB) / peak active, an upper bound of the
# players' own share, as the RSS holds the loaded workload too) and at the
# margin (the RSS
# difference between the baseline and the big run over their peak
# active difference),
# session-start lateness p50/p99/max (health.start_lateness_ms: the
# dispatcher's timers, the only scheduled events of a player run), failed
# and rebuffered sessions, mean bit rate, server CPU, the client threads'
# run-queue wait (/proc schedstat: runnable, but the CPU was another
# process's), the load average. Then
# the median of the rounds. Each round runs BASE_PLAYERS players first (the
# baseline, same workload and arrival rate), then PLAYERS.
#
#   scripts/bench-players.sh                        # 10,000 players, 3 rounds
#   PLAYERS=2000 ROUNDS=1 scripts/bench-players.sh  # a quick look
#   env: VODLAB=target/release/vodlab LADDER="50 75 100 150 200" DOWN_KBPS=120
#        DELAY_MS=20 RATE=250 SEGMENTS=20 BUFFER_S=8 ABR=dynamic TITLES=4
#        TITLE_S=120 OUT=dir PERF=1 (perf record the client, round 1)
#
# Loopback only. Writes OUT/rI-N/ (results of round I with N players) and
# OUT/rounds.tsv.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
VODLAB=${VODLAB:-$here/target/release/vodlab}
PLAYERS=${PLAYERS:-10000}
RATE=${RATE:-250}
SEGMENTS=${SEGMENTS:-20}
BUFFER_S=${BUFFER_S:-8}
ABR=${ABR:-dynamic}
LADDER=${LADDER:-50 75 100 150 200}
DOWN_KBPS=${DOWN_KBPS:-120}
DELAY_MS=${DELAY_MS:-20}
TITLES=${TITLES:-4}
TITLE_S=${TITLE_S:-120}
ROUNDS=${ROUNDS:-3}
# a smaller run in the same round, the baseline (0: none)
BASE_PLAYERS=${BASE_PLAYERS:-1000}
PERF=${PERF:-0}
[ -x "$VODLAB" ] || { echo "no vodlab binary at $VODLAB (cargo build --release -p vodlab)" >&2; exit 1; }
work=$(mktemp -d)
OUT=${OUT:-$work/out}
mkdir -p "$OUT"
# a copy: a rebuild of target/ during the rounds must not change the binary
cp "$VODLAB" "$work/vodlab"
VODLAB=$work/vodlab
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work/w" "$work/files" "$work/vodlab"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"

# the spec: dash-vod's layout with the low ladder and whole-title viewing
{
  cat <<EOF
name = "players-bench"
description = "bench-players.sh: a low-bit-rate ladder ($LADDER kbit/s), 4 s segments, whole titles of $TITLE_S s"
[catalog]
titles = $TITLES
median_duration_top = 1
placement = "random"
ladder = "nested"
popularity = { kind = "uniform" }
storage = { layout = "chunked", chunk_s = 4.0 }
manifests = { dash = true, hls = true, init_bytes = 1024 }
[catalog.duration]
kind = "constant"
value = $TITLE_S
EOF
  i=0
  for r in $LADDER; do
    printf '[[catalog.representations]]\nname = "r%d"\nbitrate_kbps = %s\n' "$i" "$r.0"
    i=$((i + 1))
  done
  cat <<EOF
[sessions]
count = $PLAYERS
request_s = 4.0
buffering_requests = 2
pacing_s = 4.0
timeout_s = 4.0
representation = { kind = "rule", headroom = 0.8 }
[sessions.viewing_fraction]
kind = "constant"
value = 1.0
[sessions.start]
kind = "beginning"
[[clients]]
name = "low"
share = 1.0
EOF
  # DOWN_KBPS=0: the class's link is not emulated (--no-shaping)
  k=$DOWN_KBPS
  [ "$k" = 0 ] && k=1000000
  printf 'down_kbps = %s\nup_kbps = %s\ndelay_ms = %s\n' "$k.0" "$k.0" "$DELAY_MS.0"
  cat <<EOF
[measurement]
ramp_up_sessions = 0
ramp_down_sessions = 0
shard_sessions = $PLAYERS
seed = 1
EOF
} >"$work/spec.toml"
"$VODLAB" gen --spec "$work/spec.toml" -o "$work/w" >/dev/null
"$VODLAB" fileset create --root "$work/files" "$work/w" >/dev/null
du -sh "$work/files" | awk '{print "file set: " $1}'
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$VODLAB" serve --root "$work/files" --listen "127.0.0.1:$port" --stats-interval 0 \
  2>"$OUT/serve.err" &
server_pid=$!
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
# warm the page cache: every file once
find "$work/files" -type f -exec cat {} + >/dev/null

cpu_of() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
shaping=()
[ "$DOWN_KBPS" = 0 ] && shaping=(--no-shaping)
printf 'round\tplayers\tpeak_active\twall_s\tclient_cpu_s\tcpu_pct_per_1000\tpeak_rss_mib\tprocess_kib_per_player\trss_kib_per_player\tstart_late_p50_ms\tstart_late_p99_ms\tstart_late_max_ms\tfailed\trebuffered\tmean_kbps\tserver_cpu_s\tclient_runq_wait_s\tload1\n' >"$OUT/rounds.tsv"
for r in $(seq 1 "$ROUNDS"); do
 for n in $BASE_PLAYERS $PLAYERS; do
  [ "$n" = 0 ] && continue
  tag="$r-$n"
  load=$(cut -d' ' -f1 /proc/loadavg)
  s0=$(cpu_of "$server_pid")
  pre=()
  if [ "$PERF" = 1 ] && [ "$r" = 1 ] && [ "$n" = "$PLAYERS" ]; then
    pre=(perf record -e cpu-clock -F 499 -g -o "$OUT/perf.data" --)
  fi
  /usr/bin/time -f '%e %U %S %M' -o "$OUT/time$tag" "${pre[@]}" "$VODLAB" run "$work/w" --sessions "$n" \
    --target "http://127.0.0.1:$port" --rate "$RATE" --arrivals constant \
    --player dash --abr "$ABR" --max-buffer "$BUFFER_S" --max-segments "$SEGMENTS" \
    "${shaping[@]}" --check-bytes 0 --ramp-up 0 --ramp-down 0 --interval 1 -q \
    -o "$OUT/r$tag" >/dev/null 2>"$OUT/run$tag.err" &
  timer_pid=$!
  # the client's threads' run-queue wait (schedstat field 2, ns): time its
  # threads were runnable but another process had the CPU
  wait_ns=0
  while kill -0 "$timer_pid" 2>/dev/null; do
    c=$(pgrep -P "$timer_pid" -x vodlab | head -1 || true)
    if [ -n "$c" ]; then
      w=$(cat /proc/"$c"/task/*/schedstat 2>/dev/null | awk '{s += $2} END {printf "%.0f\n", s}')
      [ "${w:-0}" -gt "$wait_ns" ] && wait_ns=$w
    fi
    sleep 1
  done
  wait "$timer_pid" || true
  echo "$wait_ns" >"$OUT/runq_wait_ns$tag"
  s1=$(cpu_of "$server_pid")
  python3 - "$OUT/r$tag/results.json" "$OUT/time$tag" "$r" "$load" "$(echo "$s1 - $s0" | bc)" "$wait_ns" \
    >>"$OUT/rounds.tsv" <<'EOF'
import json, sys
res, timef, r, load, server_cpu, wait_ns = sys.argv[1:7]
v = json.load(open(res))
wall, user, sys_, maxrss_kib = open(timef).read().split()[-4:]
cpu = float(user) + float(sys_)
h = v["health"]
# active player-seconds from the per-interval peaks (1 s intervals)
ps = sum(i["active_sessions"] * 1.0 for i in v["intervals"])
peak = h["peak_active_sessions"]
rss_mib = float(maxrss_kib) / 1024
# an idle client (runtime, workload, histograms) holds about 20 MiB: what
# is above it at the peak is the players'
per_player_kib = max(rss_mib - 20.0, 0) * 1024 / max(peak, 1)
p = v["players"]["overall"]
l = h["start_lateness_ms"]
print("\t".join(str(x) for x in [
    r, p["sessions"], peak, wall, round(cpu, 1),
    round(100 * cpu / max(ps / 1000, 1e-9), 1),
    round(rss_mib, 1), round(rss_mib * 1024 / max(peak, 1), 1), round(per_player_kib, 1),
    round(l["p50"], 2), round(l["p99"], 2), round(l["max"], 2),
    p["failed"], p["rebuffered_sessions"], round(p["mean_bitrate_kbps"]["mean"], 1),
    server_cpu, round(int(wait_ns) / 1e9, 1), load]))
EOF
  tail -1 "$OUT/rounds.tsv"
 done
done
column -t "$OUT/rounds.tsv"
python3 - "$OUT/rounds.tsv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
for n in sorted({x["players"] for x in rows}, key=int):
    rs = [x for x in rows if x["players"] == n]
    print("%s players, median of %d round(s):" % (n, len(rs)))
    for k in rs[0]:
        if k in ("round", "players"):
            continue
        print("  %-20s %s" % (k, statistics.median(float(x[k]) for x in rs)))
# memory per player at the margin: the baseline and the big run load the
# same workload (every session's script), so their difference is players
sizes = sorted({int(x["players"]) for x in rows})
if len(sizes) == 2:
    med = lambda n, k: statistics.median(float(x[k]) for x in rows if int(x["players"]) == n)
    lo, hi = sizes
    d_rss = med(hi, "peak_rss_mib") - med(lo, "peak_rss_mib")
    d_act = med(hi, "peak_active") - med(lo, "peak_active")
    print("marginal RSS per player (%d over %d): %.1f KiB" % (hi, lo, d_rss * 1024 / max(d_act, 1)))
EOF
echo "results: $OUT"
