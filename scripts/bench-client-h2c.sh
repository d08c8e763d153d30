#!/usr/bin/env bash
# Client HTTP/2 (h2c) request throughput: `vodlab run --protocol h2c` against
# `h2load -p h2c` with the same connections and concurrent streams, both
# against one nginx (HTTP/2 module) on loopback serving a cached 1 KiB and a
# cached 512 KiB file; the median of ROUNDS rounds of each, and their ratio.
#
#   scripts/bench-client-h2c.sh            # release binary target/release/vodlab
#   VODLAB=path/to/vodlab CONNS=8 STREAMS=4 ROUNDS=3 scripts/bench-client-h2c.sh
#   BASE=path/to/older/vodlab scripts/bench-client-h2c.sh   # a before/after in the same run
#
# vodlab's side, two shapes of CONNS sessions started at once, each with
# STREAMS logical connections carried as STREAMS streams of one HTTP/2
# connection (pacing, shaping and byte checks off):
#   - in-flight (h2load's shape): one burst per session holding all of its
#     requests, request i on logical connection i mod STREAMS; each logical
#     connection sends its next request when its previous response ended, so
#     STREAMS requests stay in flight per HTTP/2 connection, as h2load -m;
#   - bursts (a player's shape): bursts of STREAMS requests, one per logical
#     connection, the next burst when all STREAMS responses ended.
# vodlab's requests/s is completed requests over the measured window (first
# session start to last session end); h2load's is requests over its run
# (-c CONNS -m STREAMS). Needs nginx-light and nghttp2-client
# (scripts/install-test-deps.sh). Prints the load average before and after.
#
# nginx runs with `sendfile off`: with sendfile its HTTP/2 module writes a
# response's frame headers and its file body in two writes, and Nagle holds
# the second until the client's delayed ACK (40 ms) whenever the client has
# nothing else to send (h2load -c 1 -m 1: 44 ms a request; vodlab's bursts:
# the last response of each burst), which measured the server, not the client.
set -euo pipefail
VODLAB=${VODLAB:-target/release/vodlab}
CONNS=${CONNS:-8}
STREAMS=${STREAMS:-4}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-$(nproc)}
[ "$THREADS" -le "$CONNS" ] || THREADS=$CONNS
[ -x "$VODLAB" ] || { echo "no vodlab binary at $VODLAB (cargo build --release -p vodlab)" >&2; exit 1; }
dir=$(mktemp -d)
nginx_pid=""
cleanup() { [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
mkdir -p "$dir/root"
head -c 1024 /dev/urandom > "$dir/root/1k"
head -c 524288 /dev/urandom > "$dir/root/512k"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$dir/nginx.conf" <<CONF
daemon off; master_process off; worker_processes 1; pid $dir/nginx.pid; error_log stderr warn;
worker_rlimit_nofile 65536;
events { worker_connections 4096; }
http { access_log off; sendfile off; keepalive_requests 1000000;
  client_body_temp_path $dir; proxy_temp_path $dir; fastcgi_temp_path $dir; uwsgi_temp_path $dir; scgi_temp_path $dir;
  server { listen 127.0.0.1:$port http2; root $dir/root; } }
CONF
/usr/sbin/nginx -c "$dir/nginx.conf" -p "$dir" &
nginx_pid=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done

# a session of BURSTS bursts (shape `bursts`: STREAMS requests each, request
# k on connection k) or of one burst of BURSTS x STREAMS requests (shape
# `inflight`: request i on connection i mod STREAMS)
script() { # file shape bursts path
  python3 - "$@" "$CONNS" "$STREAMS" <<'PY'
import sys
f, shape, bursts, path, conns, streams = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
with open(f, "w") as out:
    for s in range(conns):
        for i in range(bursts * streams):
            first = i % streams == 0 if shape == "bursts" else i == 0
            out.write(("" if first else "  ") + f"{path} conn={i % streams}\n")
        out.write("\n")
PY
}

# requests/s of one `vodlab run` of script $1 (results in $2; binary $3, else $VODLAB)
vodlab_rps() {
  "${3:-$VODLAB}" run "$1" --target "http://127.0.0.1:$port" --protocol h2c --rate 1000000 \
    --arrivals constant --no-pacing --no-shaping --check-bytes 0 --quiet -o "$2" >/dev/null
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["failed_sessions"] == 0, r["errors"]
w = r["measured_window_s"]
print(r["completed_requests"] / (w[1] - w[0]))' "$2/results.json"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
printf "%-6s %6s %8s %9s %12s %12s %12s %9s %9s" body conns streams requests "h2load r/s" "in-flight" "bursts" "ratio in" "ratio b"
[ -n "${BASE:-}" ] && printf " %12s %12s %9s %9s" "base in" "base b" "base r in" "base r b"
echo
for spec in "1k 40000" "512k 4000"; do
  set -- $spec
  path=/$1; n=$2
  bursts=$(( n / CONNS / STREAMS )); n=$(( bursts * CONNS * STREAMS ))
  script "$dir/b.vsl" bursts "$bursts" "$path"
  script "$dir/i.vsl" inflight "$bursts" "$path"
  inflight=(); burst=(); theirs=(); binf=(); bbur=()
  h2load -p h2c -c "$CONNS" -m "$STREAMS" -n "$n" -t "$THREADS" "http://127.0.0.1:$port$path" >/dev/null # warm up
  for r in $(seq "$ROUNDS"); do
    out=$(h2load -p h2c -c "$CONNS" -m "$STREAMS" -n "$n" -t "$THREADS" "http://127.0.0.1:$port$path")
    echo "$out" | grep -q "succeeded, 0 failed\|$n succeeded" || { echo "$out" >&2; exit 1; }
    theirs+=("$(echo "$out" | sed -n 's/.*finished in .*, \([0-9.]*\) req\/s.*/\1/p')")
    inflight+=("$(vodlab_rps "$dir/i.vsl" "$dir/i$r")")
    burst+=("$(vodlab_rps "$dir/b.vsl" "$dir/b$r")")
    echo "  round $r $1: h2load ${theirs[-1]}, vodlab in-flight ${inflight[-1]}, bursts ${burst[-1]} req/s" >&2
    if [ -n "${BASE:-}" ]; then
      binf+=("$(vodlab_rps "$dir/i.vsl" "$dir/bi$r" "$BASE")")
      bbur+=("$(vodlab_rps "$dir/b.vsl" "$dir/bb$r" "$BASE")")
      echo "  round $r $1: base in-flight ${binf[-1]}, bursts ${bbur[-1]} req/s" >&2
    fi
  done
  mt=$(printf "%s\n" "${theirs[@]}" | median)
  mi=$(printf "%s\n" "${inflight[@]}" | median)
  mb=$(printf "%s\n" "${burst[@]}" | median)
  printf "%-6s %6d %8d %9d %12.0f %12.0f %12.0f %9.3f %9.3f" "$1" "$CONNS" "$STREAMS" "$n" "$mt" "$mi" "$mb" \
    "$(echo "$mi / $mt" | bc -l)" "$(echo "$mb / $mt" | bc -l)"
  if [ -n "${BASE:-}" ]; then
    mbi=$(printf "%s\n" "${binf[@]}" | median)
    mbb=$(printf "%s\n" "${bbur[@]}" | median)
    printf " %12.0f %12.0f %9.3f %9.3f" "$mbi" "$mbb" "$(echo "$mbi / $mt" | bc -l)" "$(echo "$mbb / $mt" | bc -l)"
  fi
  echo
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
