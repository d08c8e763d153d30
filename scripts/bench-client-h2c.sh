#!/usr/bin/env bash
# Client HTTP/2 (h2c) request throughput: `vodlab run --protocol h2c` against
# `h2load -p h2c` with the same connections and concurrent streams, both
# against one nginx (HTTP/2 module) on loopback serving a cached 1 KiB and a
# cached 512 KiB file; the median of ROUNDS rounds of each, and their ratio.
#
#   scripts/bench-client-h2c.sh            # release binary target/release/vodlab
#   VODLAB=path/to/vodlab CONNS=8 STREAMS=4 ROUNDS=3 scripts/bench-client-h2c.sh
#
# vodlab's side: CONNS sessions started at once, each with STREAMS logical
# connections carried as streams of one HTTP/2 connection, sending bursts of
# STREAMS requests back to back (pacing, shaping and byte checks off); its
# requests/s is completed requests over the measured window (first session
# start to last session end). h2load keeps STREAMS requests in flight per
# connection (-m) and reports requests over its run. Needs nginx-light and
# nghttp2-client (scripts/install-test-deps.sh).
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
http { access_log off; sendfile on; keepalive_requests 1000000; http2_max_requests 1000000;
  client_body_temp_path $dir; proxy_temp_path $dir; fastcgi_temp_path $dir; uwsgi_temp_path $dir; scgi_temp_path $dir;
  server { listen 127.0.0.1:$port http2; root $dir/root; } }
CONF
/usr/sbin/nginx -c "$dir/nginx.conf" -p "$dir" &
nginx_pid=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done

# a session: BURSTS bursts of STREAMS requests, request k of a burst on connection k
script() { # file bursts path
  python3 - "$@" "$CONNS" "$STREAMS" <<'PY'
import sys
f, bursts, path, conns, streams = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
with open(f, "w") as out:
    for s in range(conns):
        for b in range(bursts):
            for k in range(streams):
                out.write(("  " if k else "") + f"{path} conn={k}\n")
        out.write("\n")
PY
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

printf "%-6s %6s %8s %9s %12s %12s %7s\n" body conns streams requests "vodlab r/s" "h2load r/s" ratio
for spec in "1k 40000" "512k 4000"; do
  set -- $spec
  path=/$1; n=$2
  bursts=$(( n / CONNS / STREAMS )); n=$(( bursts * CONNS * STREAMS ))
  script "$dir/s.vsl" "$bursts" "$path"
  ours=(); theirs=()
  h2load -p h2c -c "$CONNS" -m "$STREAMS" -n "$n" -t "$THREADS" "http://127.0.0.1:$port$path" >/dev/null # warm up
  for r in $(seq "$ROUNDS"); do
    out=$(h2load -p h2c -c "$CONNS" -m "$STREAMS" -n "$n" -t "$THREADS" "http://127.0.0.1:$port$path")
    echo "$out" | grep -q "succeeded, 0 failed\|$n succeeded" || { echo "$out" >&2; exit 1; }
    theirs+=("$(echo "$out" | sed -n 's/.*finished in .*, \([0-9.]*\) req\/s.*/\1/p')")
    "$VODLAB" run "$dir/s.vsl" --target "http://127.0.0.1:$port" --protocol h2c --rate 1000000 \
      --arrivals constant --no-pacing --no-shaping --check-bytes 0 --quiet -o "$dir/out$r" >/dev/null
    ours+=("$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["failed_sessions"] == 0, r["errors"]
w = r["measured_window_s"]
print(r["completed_requests"] / (w[1] - w[0]))' "$dir/out$r/results.json")")
    echo "  round $r $1: vodlab ${ours[-1]} req/s, h2load ${theirs[-1]} req/s" >&2
  done
  mo=$(printf "%s\n" "${ours[@]}" | median); mt=$(printf "%s\n" "${theirs[@]}" | median)
  printf "%-6s %6d %8d %9d %12.0f %12.0f %7.3f\n" "$1" "$CONNS" "$STREAMS" "$n" "$mo" "$mt" "$(echo "$mo / $mt" | bc -l)"
done
