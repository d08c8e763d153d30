#!/usr/bin/env bash
# 100,000 concurrent paced viewers from one machine (issue 32, item 5).
#
# A process here may hold at most `ulimit -Hn` descriptors (20,000 in this
# sandbox), so the viewers are spread over client processes (`vodlab run
# --client-processes N`, merged exactly into one results.json) and the
# server over processes too: nginx with WORKERS workers (`listen ...
# reuseport`, worker_rlimit_nofile = the hard limit, worker_connections
# sized under it) and `vodlab serve --workers WORKERS` (SO_REUSEPORT).
# Over loopback one source address reaches one port from ~28,000
# ephemeral ports (ip_local_port_range), so the client opens its
# connections from several 127.0.0.x addresses in turn (--source-address).
#
# The workload (stated): SESSIONS sessions of REQUESTS range requests of
# 16 KiB each, one every PACE s (a 16 KiB chunk per PACE s of content),
# arriving at RATE/s (constant), so the arrivals take SESSIONS/RATE s and
# every session lasts (REQUESTS-1) x PACE s: with the defaults (1,000/s,
# 12 x 15 s) all 100,000 are running together from 100 s to 165 s. The
# client does not emulate access links (--no-shaping): low-rate viewers
# whose chunks arrive at once; the byte check of 1 % of the requests
# stays on (the file set is `vodlab fileset create`'s).
#
# Reported per server: sessions started/failed, the merged peak of
# concurrent sessions (the sum over the client processes of their active
# sessions in the busiest interval), request send lateness p50/p99/max
# (merged histograms), each client process's health (valid, peak, CPU,
# RSS), the server's CPU (% of a core over the run) and peak RSS (the sum
# of its processes' VmHWM), and the load average before and after.
#
#   scripts/bench-100k.sh                              # 100,000, both servers
#   SESSIONS=20000 SERVERS=vodlab scripts/bench-100k.sh  # a quick look
#   env: VODLAB=target/release/vodlab SESSIONS=100000 PROCS (client
#        processes; default: 16,000 sessions each) WORKERS (server
#        processes; default PROCS) RATE=1000 PACE=15 REQUESTS=12
#        SERVERS="nginx vodlab" PORT OUT=dir
#
# Loopback only. Needs nginx (nginx-light) for SERVERS=nginx. Writes
# OUT/work (the workload), OUT/root (its files), OUT/<server>/ (the run's
# results, the client processes' shard-I/, the server's statistics) and
# OUT/summary.md. Every process it starts is stopped by its PID.
set -euo pipefail

VODLAB=${VODLAB:-target/release/vodlab}
SESSIONS=${SESSIONS:-100000}
PROCS=${PROCS:-$(((SESSIONS + 15999) / 16000))}
WORKERS=${WORKERS:-$PROCS}
RATE=${RATE:-1000}
PACE=${PACE:-15}
REQUESTS=${REQUESTS:-12}
SERVERS=${SERVERS:-"nginx vodlab"}
OUT=${OUT:-results/bench-100k-$(date +%s)}
PORT=${PORT:-$((20000 + RANDOM % 20000))}

die() { echo "bench-100k: $*" >&2; exit 1; }
[ -x "$VODLAB" ] || die "$VODLAB: not built (cargo build --release -p vodlab)"
HARD=$(ulimit -Hn)
ulimit -n "$HARD"
# each client process and each server worker under the limit, with room
PER_PROC=$(((SESSIONS + PROCS - 1) / PROCS))
PER_WORKER=$(((SESSIONS + WORKERS - 1) / WORKERS))
[ $((PER_PROC + 500)) -le "$HARD" ] || die "$PER_PROC sessions per client process: more than $HARD descriptors; raise PROCS"
[ $((PER_WORKER + 500)) -le "$HARD" ] || die "$PER_WORKER connections per server worker: more than $HARD descriptors; raise WORKERS"
# memory: ~45 KiB per session in the client and ~30 KiB in the server, at most
AVAIL_KB=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
NEED_KB=$((SESSIONS * 75))
[ "$NEED_KB" -le "$AVAIL_KB" ] || die "$SESSIONS sessions need about $((NEED_KB / 1024)) MiB; $((AVAIL_KB / 1024)) MiB available"
# source addresses: connections from one address to the port use its
# ephemeral range; keep each address at a quarter of it (connect() looks
# for a free port from a random offset, so a fuller range costs more)
read -r LO HI < /proc/sys/net/ipv4/ip_local_port_range
PORTS=$((HI - LO + 1))
NSRC=${NSRC:-$(((SESSIONS * 4 + PORTS - 1) / PORTS))}
SRC=$(seq -s, 1 "$NSRC" | sed 's/\([0-9]*\)/127.0.0.\1/g')

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
KBPS=$(python3 -c "print(16384 * 8 / $PACE / 1000)")
cat > "$OUT/spec.toml" <<EOF
name = "bench-100k"
[catalog]
titles = 200
popularity = { kind = "zipf", alpha = 0.8 }
duration = { kind = "constant", value = $((REQUESTS * PACE)).0 }
representations = [{ name = "lo", bitrate_kbps = $KBPS }]   # 16 KiB per $PACE s
storage = { layout = "single" }
[sessions]
count = $SESSIONS
viewing_fraction = { kind = "constant", value = 1.0 }
request_s = $PACE.0
buffering_requests = 1
pacing_s = $PACE.0
timeout_s = 10.0
representation = { kind = "fixed", name = "lo" }
[[clients]]
name = "viewer"
share = 1.0
down_kbps = 2000.0
up_kbps = 500.0
delay_ms = 20.0
EOF
if [ ! -d "$OUT/work" ]; then
  "$VODLAB" gen --spec "$OUT/spec.toml" -o "$OUT/work" > /dev/null
  "$VODLAB" fileset create "$OUT/work" --root "$OUT/root" > /dev/null
fi
chmod -R a+rX "$OUT"

PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] && kill -TERM "$p" 2> /dev/null || true
  done
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] && wait "$p" 2> /dev/null || true
  done
  PIDS=()
}
trap cleanup EXIT

# CPU ticks (user + system) of the processes whose PIDs are given
ticks() {
  local t=0 p
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || continue
    t=$((t + $(awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$p/stat")))
  done
  echo "$t"
}
# the sum of the processes' peak RSS (VmHWM), MiB
hwm() {
  local k=0 p
  for p in "$@"; do
    [ -r "/proc/$p/status" ] || continue
    k=$((k + $(awk '/VmHWM/ {print $2}' "/proc/$p/status")))
  done
  echo $((k / 1024))
}
wait_port() {
  for _ in $(seq 200); do
    (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null && return 0
    sleep 0.1
  done
  die "nothing listens on port $1"
}

start_nginx() {
  local d=$OUT/nginx
  mkdir -p "$d"
  cat > "$d/nginx.conf" <<EOF
daemon off;
user root;
worker_processes $WORKERS;
worker_rlimit_nofile $HARD;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections $((HARD - 200)); accept_mutex off; }
http {
  access_log off;
  sendfile on;
  keepalive_timeout 300s;
  keepalive_requests 100000;
  client_body_temp_path $d; proxy_temp_path $d; fastcgi_temp_path $d;
  uwsgi_temp_path $d; scgi_temp_path $d;
  server { listen 127.0.0.1:$PORT reuseport backlog=4096; root $OUT/root; }
}
EOF
  nginx -c "$d/nginx.conf" -p "$d" &
  PIDS+=($!)
  SERVER_MAIN=$!
  wait_port "$PORT"
  sleep 0.5
  SERVER_PIDS=("$SERVER_MAIN" $(pgrep -P "$SERVER_MAIN" | tr '\n' ' '))
}

start_vodlab() {
  local d=$OUT/vodlab
  rm -rf "$d/workers"
  mkdir -p "$d"
  "$VODLAB" serve --root "$OUT/root" --listen "127.0.0.1:$PORT" --workers "$WORKERS" \
    --threads 1 --max-connections $((HARD - 200)) --keepalive 300 \
    --workers-dir "$d/workers" --stats-interval 30 2> "$d/serve.log" &
  PIDS+=($!)
  SERVER_MAIN=$!
  for _ in $(seq 300); do
    [ -s "$d/workers/workers.json" ] && break
    sleep 0.1
  done
  wait_port "$PORT"
  SERVER_PIDS=("$SERVER_MAIN" $(python3 -c 'import json, sys; print(" ".join(str(w["pid"]) for w in json.load(open(sys.argv[1]))["per_worker"]))' "$d/workers/workers.json"))
}

{
  echo "# bench-100k: $SESSIONS sessions, $PROCS client processes, $WORKERS server processes"
  echo
  echo "$(date -u +%FT%TZ), $(nproc) cores, descriptor limit $HARD, ports $LO-$HI, source addresses $SRC"
  echo "workload: $REQUESTS x 16 KiB every $PACE s per session, arrivals $RATE/s (constant), unshaped"
  echo
  echo "| server | started | failed | peak concurrent | send lateness p50 / p99 / max ms | client CPU mean (sum of processes) | client peak RSS (sum) | server CPU | server peak RSS | load before / after | valid |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
} > "$OUT/summary.md"

for server in $SERVERS; do
  case $server in
    nginx) command -v nginx > /dev/null || die "nginx not found (apt-get install nginx-light)"; start_nginx ;;
    vodlab) start_vodlab ;;
    *) die "SERVERS: nginx or vodlab, not $server" ;;
  esac
  load0=$(cut -d' ' -f1 /proc/loadavg)
  t0=$(ticks "${SERVER_PIDS[@]}")
  s0=$(date +%s.%N)
  set +e
  "$VODLAB" run "$OUT/work" --target "http://127.0.0.1:$PORT" --rate "$RATE" --arrivals constant \
    --no-shaping --client-processes "$PROCS" --source-address "$SRC" \
    -o "$OUT/$server/run" > "$OUT/$server/run.txt" 2> "$OUT/$server/run.err"
  rc=$?
  set -e
  s1=$(date +%s.%N)
  t1=$(ticks "${SERVER_PIDS[@]}")
  server_rss=$(hwm "${SERVER_PIDS[@]}")
  load1=$(cut -d' ' -f1 /proc/loadavg)
  cleanup
  hz=$(getconf CLK_TCK)
  server_cpu=$(python3 -c "print(f'{100 * ($t1 - $t0) / $hz / ($s1 - $s0):.1f} %')")
  r=$OUT/$server/run/results.json
  [ -s "$r" ] || die "$server: no results (exit $rc): $(tail -3 "$OUT/$server/run.err")"
  row=$(python3 - "$OUT/$server/run" "$PROCS" << 'EOF'
import json, sys, os
d, n = sys.argv[1], int(sys.argv[2])
m = json.load(open(os.path.join(d, "results.json")))
shards = [json.load(open(os.path.join(d, f"shard-{i}", "results.json"))) for i in range(n)]
# the merged peak: the busiest interval of the summed active sessions
peak = max((i["active_sessions"] for i in m["intervals"]), default=0)
cpu = sum(sum(i["cpu_pct"] for i in s["intervals"]) / max(len(s["intervals"]), 1) for s in shards)
rss = sum(s["health"]["peak_rss_mb"] for s in shards)
sl = m["health"]["send_lateness_ms"]
print(f'{m["started_sessions"]} | {m["failed_sessions"]} | {peak} | {sl["p50"]:.2f} / {sl["p99"]:.2f} / {sl["max"]:.1f} | {cpu:.0f} % of a core | {rss:.0f} MiB | ', end="")
print("valid" if m["valid"] else "INVALID: " + "; ".join(m["invalid_reasons"]))
EOF
  )
  valid=${row##*| }
  row=${row% | *}
  echo "| $server | $row | $server_cpu | $server_rss MiB | $load0 / $load1 | $valid |" >> "$OUT/summary.md"
  {
    echo
    echo "$server, each client process:"
    echo
    grep "client process" "$OUT/$server/run.txt" | sed 's/^ */- /'
  } >> "$OUT/summary.md.procs"
  echo "bench-100k: $server done (exit $rc)" >&2
done
cat "$OUT/summary.md.procs" >> "$OUT/summary.md" 2> /dev/null || true
rm -f "$OUT/summary.md.procs"
cat "$OUT/summary.md"
