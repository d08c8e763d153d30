#!/usr/bin/env bash
# HTTP/3 benchmarks (issue "HTTP/3 over QUIC"): bytes per CPU-second of the
# client and of the server, over loopback, 0.5 MiB objects from the page
# cache, medians of ROUNDS interleaved rounds, ratios in the same run.
#
#   scripts/bench-h3.sh                    # release binary target/release/vodlab
#   VODLAB=path/to/vodlab ROUNDS=5 REQUESTS=1600 CONNS=4 STREAMS=4 scripts/bench-h3.sh
#
# Client (one `vodlab serve --threads 1 --h3` as the server):
#   - `vodlab run --protocol h3` against `vodlab run --protocol h2` (TLS):
#     CONNS sessions, each one connection with STREAMS requests in flight
#     (the in-flight shape of bench-client-h2c.sh), REQUESTS requests in all;
#     client CPU = user + system of the `vodlab run` process (bash's `time`,
#     milliseconds);
#   - ngtcp2's example client (`gtlsclient -n REQUESTS/CONNS`, CONNS
#     processes: its streams run at once, 100 at most per connection) and
#     aioquic's (scripts/h3probe/h3get.py --streams, the test venv's python,
#     an eighth of the requests; its interpreter start-up is in its CPU);
#     their bytes are what vodlab serve's statistics say it sent meanwhile;
# Server (the same `vodlab run --protocol h3` as the client):
#   - `vodlab serve --h3` against ngtcp2's example server (`gtlsserver -d`),
#     and `vodlab serve` over h2; server CPU from a cpuacct cgroup per server
#     (cgroup v1, root: nanoseconds), else utime + stime from /proc (10 ms
#     ticks); the output says which.
# Each line: the medians, then the ratio of the medians. Needs ngtcp2-client,
# ngtcp2-server, openssl, curl, bc and target/test-venv with aioquic
# (scripts/install-test-deps.sh). Prints the load average before and after.
set -euo pipefail
VODLAB=${VODLAB:-target/release/vodlab}
ROUNDS=${ROUNDS:-5}
REQUESTS=${REQUESTS:-1600}
CONNS=${CONNS:-4}
STREAMS=${STREAMS:-4}
PY=${PY:-target/test-venv/bin/python3}
[ -x "$VODLAB" ] || { echo "no vodlab binary at $VODLAB (cargo build --release -p vodlab)" >&2; exit 1; }
for t in gtlsclient gtlsserver openssl curl bc; do
  command -v "$t" >/dev/null || { echo "$t missing: scripts/install-test-deps.sh installs it" >&2; exit 1; }
done
"$PY" -c 'import aioquic' 2>/dev/null || { echo "aioquic missing in $PY: scripts/install-test-deps.sh" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
pids=()
cg=""
cleanup() {
  for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "$cg" ] && rmdir "$cg/serve" "$cg/ngtcp2" "$cg" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/root"
head -c 524288 /dev/urandom > "$dir/root/512k"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
udp_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# a server's CPU seconds so far: server name (serve, ngtcp2), PID
srv_cpu() {
  if [ -n "$cg" ]; then awk '{printf "%.6f", $1 / 1e9}' "$cg/$1/cpuacct.usage"
  else awk -v t="$(getconf CLK_TCK)" '{printf "%.6f", ($14 + $15) / t}' "/proc/$2/stat"; fi
}
# runs a command (its output to a file); prints its CPU seconds (user +
# system, its children included, milliseconds), or its errors and fails
cpu_of() {
  local TIMEFORMAT='%3U %3S' t
  t=$( { time "$@" >"$dir/cmd.out" 2>"$dir/cmd.err"; } 2>&1 ) \
    || { echo "failed: $*" >&2; tail -20 "$dir/cmd.err" >&2; return 1; }
  awk '{print $1 + $2}' <<<"$t"
}
mbps() { printf '%.0f' "$(echo "$1 / $2 / 1000000" | bc -l)"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -addext basicConstraints=critical,CA:FALSE \
  -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null

vport=$(port)
"$VODLAB" serve --root "$dir/root" --listen "127.0.0.1:$vport" --threads 1 --stats-interval 0 \
  --tls-cert "$dir/cert.pem" --tls-key "$dir/key.pem" --h3 2>"$dir/serve.err" &
vpid=$!; pids+=("$vpid")
gport=$(udp_port)
gtlsserver -q -d "$dir/root" 127.0.0.1 "$gport" "$dir/key.pem" "$dir/cert.pem" >/dev/null 2>&1 &
gpid=$!; pids+=("$gpid")
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$vport") 2>/dev/null && break; sleep 0.1; done
sleep 0.5
cpu_source="/proc ticks (10 ms)"
if [ -w /sys/fs/cgroup/cpuacct ]; then
  cg=/sys/fs/cgroup/cpuacct/vodlab-bench-h3-$$
  mkdir -p "$cg/serve" "$cg/ngtcp2"
  echo "$vpid" > "$cg/serve/cgroup.procs"
  echo "$gpid" > "$cg/ngtcp2/cgroup.procs"
  cpu_source="cpuacct cgroups (ns)"
fi

# the workload: CONNS sessions of REQUESTS/CONNS requests, STREAMS in flight
per=$(( REQUESTS / CONNS ))
# aioquic is a Python client, about 20x slower: an eighth of the requests
aper=$(( per / 8 > 0 ? per / 8 : 1 ))
python3 - "$dir/w.vsl" "$CONNS" "$per" "$STREAMS" <<'PY'
import sys
f, conns, per, streams = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with open(f, "w") as out:
    for s in range(conns):
        for i in range(per):
            out.write(("" if i == 0 else "  ") + f"/512k conn={i % streams}\n")
        out.write("\n")
PY

# one `vodlab run`: prints "client_cpu_s bytes server_cpu_s"
vrun() { # protocol port server-name server-pid
  local o="$dir/out-$1-$2" t0 t1 cpu
  rm -rf "$o"
  t0=$(srv_cpu "$3" "$4")
  cpu=$(cpu_of "$VODLAB" run "$dir/w.vsl" --target "https://localhost:$2" \
      --protocol "$1" --ca "$dir/cert.pem" --rate 1000000 --arrivals constant --no-pacing \
      --no-shaping --check-bytes 0 --quiet -o "$o")
  t1=$(srv_cpu "$3" "$4")
  python3 - "$o/results.json" "$cpu" "$t0" "$t1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["failed_sessions"] == 0 and r["completed_requests"] > 0, r["errors"]
print(sys.argv[2], r["completed_bytes"], float(sys.argv[4]) - float(sys.argv[3]))
PY
}

# the bytes of files vodlab serve has sent over h3 so far (its statistics)
served() {
  curl -s --cacert "$dir/cert.pem" "https://localhost:$vport/vodlab/stats" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["h3"]["bytes"])'
}

# ngtcp2's client: CONNS processes of REQUESTS/CONNS streams each; prints
# "cpu bytes" (bytes: what the server says it sent meanwhile)
gclient() {
  local b0 cpu
  b0=$(served)
  cpu=$(cpu_of bash -c '
      for i in $(seq '"$CONNS"'); do
        gtlsclient -q -n '"$per"' --exit-on-all-streams-close --timeout=30s \
          localhost '"$vport"' "https://localhost:'"$vport"'/512k" >/dev/null 2>&1 &
      done; wait')
  echo "$cpu $(( $(served) - b0 ))"
}

# aioquic's client, the same way
aclient() {
  local b0 cpu
  b0=$(served)
  cpu=$(cpu_of bash -c '
      for i in $(seq '"$CONNS"'); do
        "'"$PY"'" "'"$here"'/h3probe/h3get.py" localhost '"$vport"' /512k /dev/null \
          --ca "'"$dir"'/cert.pem" --streams '"$aper"' --timeout 120 >/dev/null &
      done; wait')
  echo "$cpu $(( $(served) - b0 ))"
}

# warm up: page cache, connections
vrun h3 "$vport" serve "$vpid" >/dev/null
vrun h2 "$vport" serve "$vpid" >/dev/null
vrun h3 "$gport" ngtcp2 "$gpid" >/dev/null

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
declare -A c s
for r in $(seq "$ROUNDS"); do
  read -r cc b sc < <(vrun h3 "$vport" serve "$vpid"); c[h3]+="$(mbps "$b" "$cc") "; s[vh3]+="$(mbps "$b" "$sc") "
  read -r cc b sc < <(vrun h2 "$vport" serve "$vpid"); c[h2]+="$(mbps "$b" "$cc") "; s[vh2]+="$(mbps "$b" "$sc") "
  read -r cc b sc < <(vrun h3 "$gport" ngtcp2 "$gpid"); s[ngtcp2]+="$(mbps "$b" "$sc") "
  read -r cc b < <(gclient); c[ngtcp2]+="$(mbps "$b" "$cc") "
  read -r cc b < <(aclient); c[aioquic]+="$(mbps "$b" "$cc") "
  v=${c[h3]% }; w=${c[h2]% }
  echo "  round $r: client MB per CPU-second h3 ${v##* }, h2 ${w##* }" >&2
done
m() { tr ' ' '\n' <<<"${1% }" | grep . | median; }
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "rounds: $ROUNDS; $REQUESTS x 0.5 MiB per run; $CONNS connections x $STREAMS streams (vodlab run)"
echo "client MB per client CPU-second (medians; each round's values after the colon)"
for k in h3 h2 ngtcp2 aioquic; do printf "  %-22s %8.0f : %s\n" "$k" "$(m "${c[$k]}")" "${c[$k]}"; done
printf "  ratio vodlab h3 / vodlab h2      %.3f (issue: >= 0.8)\n" "$(echo "$(m "${c[h3]}") / $(m "${c[h2]}")" | bc -l)"
printf "  ratio vodlab h3 / ngtcp2 client  %.3f\n" "$(echo "$(m "${c[h3]}") / $(m "${c[ngtcp2]}")" | bc -l)"
printf "  ratio vodlab h3 / aioquic client %.3f\n" "$(echo "$(m "${c[h3]}") / $(m "${c[aioquic]}")" | bc -l)"
echo "server MB per server CPU-second (medians; client: vodlab run; CPU from $cpu_source)"
printf "  %-22s %8.0f : %s\n" "vodlab serve h3" "$(m "${s[vh3]}")" "${s[vh3]}"
printf "  %-22s %8.0f : %s\n" "vodlab serve h2" "$(m "${s[vh2]}")" "${s[vh2]}"
printf "  %-22s %8.0f : %s\n" "ngtcp2-server h3" "$(m "${s[ngtcp2]}")" "${s[ngtcp2]}"
printf "  ratio serve h3 / ngtcp2-server   %.3f (issue: >= 1.5)\n" "$(echo "$(m "${s[vh3]}") / $(m "${s[ngtcp2]}")" | bc -l)"
printf "  ratio serve h3 / serve h2        %.3f\n" "$(echo "$(m "${s[vh3]}") / $(m "${s[vh2]}")" | bc -l)"
