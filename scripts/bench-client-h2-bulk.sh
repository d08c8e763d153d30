#!/usr/bin/env bash
# One 100 MB download over HTTP/2 against HTTP/1.1: `vodlab run` fetches one
# cached 100 MB file (one session, one request for the whole file) over h1,
# h2c, https and h2, from `vodlab serve` (h1 and h2c on one port; https and
# h2 by ALPN on a second, self-signed) and from nginx (h1 port, h2c port,
# TLS port with ALPN h2/http/1.1; skipped when SERVERS=vodlab), on loopback
# and with the client's link emulation set to DELAY_MS of one-way delay;
# the median throughput of ROUNDS runs of each, and the ratios h2c/h1,
# h2/h1 and h2/https. Rounds are interleaved: each round fetches every
# server, protocol and delay once.
#
#   scripts/bench-client-h2-bulk.sh            # release binary target/release/vodlab
#   VODLAB=path/to/vodlab ROUNDS=3 DELAY_MS=33 SIZE_MB=100 SERVERS="vodlab nginx" scripts/bench-client-h2-bulk.sh
#   H2_ARGS="--h2-window-bits 16" scripts/bench-client-h2-bulk.sh  # extra `vodlab run` flags on h2c/h2
#   BASE=path/to/old/vodlab SERVERS="vodlab base" scripts/bench-client-h2-bulk.sh  # old server binary as a third server
#
# Throughput is body bytes over the request's response time (request issued
# to last byte, so with a delay it includes the emulated 2 x DELAY_MS).
# Beside it, each fetch's CPU time: the client's (perf stat task-clock, when
# perf is there) and the server's (the run time of all its threads, from
# /proc/PID/task/*/schedstat).
# The delay is vodlab's in-process emulation (src/link.rs): the request
# leaves DELAY_MS after it is issued and the response's bytes count as
# arrived DELAY_MS after they are read; the kernel still sees loopback, so
# neither TCP's nor HTTP/2's flow-control windows meet a real round trip
# (this kernel has no netem). The workload is a `vodlab gen` directory whose
# one client class has no rate limit and DELAY_MS of delay.
set -euo pipefail
VODLAB=${VODLAB:-target/release/vodlab}
ROUNDS=${ROUNDS:-3}
DELAY_MS=${DELAY_MS:-33}
SIZE_MB=${SIZE_MB:-100}
SERVERS=${SERVERS:-vodlab nginx}
H2_ARGS=${H2_ARGS:-}
BASE=${BASE:-}
[ -x "$VODLAB" ] || { echo "no vodlab binary at $VODLAB (cargo build --release -p vodlab)" >&2; exit 1; }
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
mkdir -p "$dir/root"
head -c $((SIZE_MB * 1000000)) /dev/urandom > "$dir/root/bulk"
cat "$dir/root/bulk" > /dev/null # in the page cache
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
waitport() { for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.05; done; echo "nothing listens on $1" >&2; exit 1; }

# workloads: one session, one request for the whole file, class with delay d
for d in 0 "$DELAY_MS"; do
  "$VODLAB" gen --preset youtube-2011-unchunked --sessions 1 --titles 10 -o "$dir/wl$d" >/dev/null 2>&1
  python3 - "$dir/wl$d" "$d" <<'PY'
import sys
wl, d = sys.argv[1], float(sys.argv[2])
p = f"{wl}/spec.toml"
s = open(p).read()
i, j = s.index("[[clients]]"), s.index("[measurement]")
s = s[:i] + f'[[clients]]\nname = "bulk"\nshare = 1.0\ndown_kbps = 0.0\nup_kbps = 0.0\ndelay_ms = {d}\n\n' + s[j:]
open(p, "w").write(s)
open(f"{wl}/sessions/shard-00.vsl", "w").write("#@session id=0 class=bulk\n/bulk timeout=600\n")
PY
done

# servers: name proto port
targets=()
# a vodlab binary as server NAME: h1 and h2c on one port, https and h2 on a second
start_vodlab() { # NAME BINARY
  local a b sa sb
  a=$(freeport); b=$(freeport)
  "$2" serve --root "$dir/root" --listen "127.0.0.1:$a" >"$dir/$1-1.log" 2>&1 & pids+=($!); sa=$!
  "$2" serve --root "$dir/root" --listen "127.0.0.1:$b" --tls-self-signed >"$dir/$1-2.log" 2>&1 & pids+=($!); sb=$!
  waitport "$a"; waitport "$b"
  targets+=("$1 h1 $a $sa" "$1 h2c $a $sa" "$1 https $b $sb" "$1 h2 $b $sb")
}
[[ " $SERVERS " == *" vodlab "* ]] && start_vodlab vodlab "$VODLAB"
if [[ " $SERVERS " == *" base "* ]]; then
  [ -x "$BASE" ] || { echo "SERVERS has base: BASE=path/to/vodlab needed" >&2; exit 1; }
  start_vodlab base "$BASE"
fi
if [[ " $SERVERS " == *" nginx "* ]] && [ -x /usr/sbin/nginx ]; then
  n1=$(freeport); n2=$(freeport); n3=$(freeport)
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost -addext basicConstraints=critical,CA:FALSE \
    -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
  cat > "$dir/nginx.conf" <<CONF
daemon off; master_process off; worker_processes 1; pid $dir/nginx.pid; error_log stderr warn;
events { worker_connections 1024; }
http { access_log off; sendfile on; keepalive_requests 1000000;
  client_body_temp_path $dir; proxy_temp_path $dir; fastcgi_temp_path $dir; uwsgi_temp_path $dir; scgi_temp_path $dir;
  server { listen 127.0.0.1:$n1; root $dir/root; }
  server { listen 127.0.0.1:$n2 http2; root $dir/root; }
  server { listen 127.0.0.1:$n3 ssl http2; ssl_certificate $dir/cert.pem; ssl_certificate_key $dir/key.pem; root $dir/root; } }
CONF
  /usr/sbin/nginx -c "$dir/nginx.conf" -p "$dir" 2>"$dir/nginx.log" & pids+=($!); sn=$!
  waitport "$n1"; waitport "$n2"; waitport "$n3"
  targets+=("nginx h1 $n1 $sn" "nginx h2c $n2 $sn" "nginx https $n3 $sn" "nginx h2 $n3 $sn")
fi

# a process's CPU time so far, ms (the run time of all its threads, ns in schedstat)
cpu_ms() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.1f\n", s / 1e6}'; }
# MB/s of one download (1 MB = 10^6 bytes), the client's and the server's CPU ms
fetch() { # proto port delay out server-pid
  local scheme=http extra=() s0
  s0=$(cpu_ms "$5")
  case $1 in https | h2) scheme=https; extra+=(--insecure) ;; esac
  case $1 in h2c | h2) [ -n "$H2_ARGS" ] && read -ra more <<<"$H2_ARGS" && extra+=("${more[@]}") ;; esac
  $PERF "$VODLAB" run "$dir/wl$3" --target "$scheme://127.0.0.1:$2" --protocol "$1" --rate 1 \
    --ramp-up 0 --ramp-down 0 --no-pacing --check-bytes 0 --quiet "${extra[@]}" -o "$4" >/dev/null 2>"$4.err" \
    || { cat "$4.err" >&2; exit 1; }
  python3 - "$4/results.json" "$4.err" "$s0" "$(cpu_ms "$5")" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["failed_sessions"] == 0 and r["completed_requests"] == 1, r["errors"]
cpu = [l.split(",")[0] for l in open(sys.argv[2]) if "task-clock" in l]
mbps = r["completed_bytes"] / (r["response_time_ms"]["max"] / 1000) / 1e6
print(mbps, cpu[0] if cpu else "nan", round(float(sys.argv[4]) - float(sys.argv[3]), 1))
PY
}
# the client's CPU time (all threads) when perf is there: steadier than
# throughput on a shared machine
PERF=""
command -v perf >/dev/null && perf stat -x, -e task-clock true 2>/dev/null && PERF="perf stat -x, -e task-clock --"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
declare -A vals cpus scpus
# rounds interleaved (every target and delay once per round), so that a
# change in the machine's load falls on all of them alike
for t in "${targets[@]}"; do
  read -r server proto port spid <<<"$t"
  for d in 0 "$DELAY_MS"; do
    fetch "$proto" "$port" "$d" "$dir/warm" "$spid" >/dev/null # warm up (connections, caches)
  done
done
for r in $(seq "$ROUNDS"); do
  echo "round $r, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  for t in "${targets[@]}"; do
    read -r server proto port spid <<<"$t"
    for d in 0 "$DELAY_MS"; do
      read -r v c sc <<<"$(fetch "$proto" "$port" "$d" "$dir/o" "$spid")"
      k=$server.$proto.$d
      vals[$k]+="$v "; cpus[$k]+="$c "; scpus[$k]+="$sc "
    done
  done
done
declare -A med cpu scpu
for t in "${targets[@]}"; do
  read -r server proto port spid <<<"$t"
  for d in 0 "$DELAY_MS"; do
    k=$server.$proto.$d
    med[$k]=$(printf "%s\n" ${vals[$k]} | median)
    cpu[$k]=$(printf "%s\n" ${cpus[$k]} | median)
    scpu[$k]=$(printf "%s\n" ${scpus[$k]} | median)
    echo "  $server $proto delay ${d} ms: ${vals[$k]}MB/s; client CPU ${cpus[$k]}ms; server CPU ${scpus[$k]}ms" >&2
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
printf "%-7s %9s %9s %9s %9s %9s %7s %7s %8s   %s   %s\n" server "delay ms" "h1 MB/s" "h2c MB/s" "https" "h2 MB/s" "h2c/h1" "h2/h1" "h2/https" "client CPU ms h1/h2c/https/h2" "server CPU ms"
for server in vodlab base nginx; do
  [ -n "${med[$server.h1.0]:-}" ] || continue
  for d in 0 "$DELAY_MS"; do
    h1=${med[$server.h1.$d]}; h2c=${med[$server.h2c.$d]}; hs=${med[$server.https.$d]}; h2=${med[$server.h2.$d]}
    printf "%-7s %9s %9.0f %9.0f %9.0f %9.0f %7.3f %7.3f %8.3f   %s   %s\n" "$server" "$d" "$h1" "$h2c" "$hs" "$h2" \
      "$(echo "$h2c / $h1" | bc -l)" "$(echo "$h2 / $h1" | bc -l)" "$(echo "$h2 / $hs" | bc -l)" \
      "${cpu[$server.h1.$d]}/${cpu[$server.h2c.$d]}/${cpu[$server.https.$d]}/${cpu[$server.h2.$d]}" \
      "${scpu[$server.h1.$d]}/${scpu[$server.h2c.$d]}/${scpu[$server.https.$d]}/${scpu[$server.h2.$d]}"
  done
done
