#!/usr/bin/env bash
# vodlab serve against nginx (OpenSSL, http2) under h2load on loopback:
# bytes per second of wall time and bytes per CPU-second of the server
# (= bytes/s per core), for h1, h2c, https (HTTP/1.1 over TLS) and h2 (over
# TLS), median of ROUNDS rounds. Both servers: one worker thread/process,
# the same ECDSA P-256 certificate, the same file from the page cache.
#
#   scripts/experiments/h2-serve-bench.sh [VODLAB_BIN]
#   env: ROUNDS=3 SIZE_MB=1 N=2000 C=4 M=10 VARIANTS="h1 h2c https h2" OUT=file.json
#        SERVE_ARGS="--io asap" (more flags for vodlab serve)
#        PIN=1  both servers on CPU 0 and h2load on CPU 1 (taskset), so that
#        neither server shares a CPU with the client for part of a run and
#        the other not: on loopback, who shares a CPU moves the kernel's TCP
#        work between the processes (docs/benchmarks.md, "Plain HTTP/1.1").
#        CC=cubic|bbr|...  run everything in a private network namespace whose
#        TCP congestion control is CC (root; the namespace is removed at the
#        end). The host's default may be BBR, which paces TCP inside the
#        kernel without an fq qdisc; see docs/benchmarks.md, "Plain HTTP/1.1".
#        RMEM="MIN DEFAULT MAX"  (with CC) the namespace's net.ipv4.tcp_rmem:
#        a fixed receive buffer (DEFAULT = MAX) takes the client's receive
#        autotuning out of the comparison; how far h2load's windows grow
#        decides whose context transmits under BBR (docs/benchmarks.md,
#        "Plain HTTP/1.1 under BBR: the client's receive window decides").
#
# Besides the server's CPU, each run records h2load's CPU (user + system,
# from /usr/bin/time) and the whole machine's busy time (/proc/stat): on
# loopback, part of a sender's TCP work runs in the receiver's context and
# softirqs are charged to whichever task is running, so the server's CPU
# alone can move work between the two processes.
#
# Prints one line per server and protocol and writes the rounds as JSON to
# $OUT (default: a temporary file, named at the end). Needs nginx-light,
# nghttp2-client (h2load), openssl.
set -euo pipefail
if [ -n "${RMEM:-}" ] && [ -z "${CC:-}" ]; then
  echo "RMEM= needs CC= (it is set in the bench's own network namespace)" >&2; exit 1
fi
if [ -n "${CC:-}" ] && [ -z "${VODLAB_BENCH_NETNS:-}" ]; then
  ns="vodlab-bench-$$"
  ip netns add "$ns"
  trap 'ip netns del "$ns" 2>/dev/null || true' EXIT
  ip -n "$ns" link set lo up
  # nsenter, not `ip netns exec`: only the network namespace changes, so
  # /sys (the cgroups below) stays the host's
  nsenter --net="/run/netns/$ns" sysctl -q -w net.ipv4.tcp_congestion_control="$CC"
  if [ -n "${RMEM:-}" ]; then
    nsenter --net="/run/netns/$ns" sysctl -q -w net.ipv4.tcp_rmem="$RMEM"
    echo "network namespace $ns: tcp_rmem $(nsenter --net="/run/netns/$ns" sysctl -n net.ipv4.tcp_rmem)"
  fi
  echo "network namespace $ns: congestion control $(nsenter --net="/run/netns/$ns" sysctl -n net.ipv4.tcp_congestion_control)"
  rc=0
  VODLAB_BENCH_NETNS=$ns nsenter --net="/run/netns/$ns" "$0" "$@" || rc=$?
  exit $rc
fi
bin=${1:-target/release/vodlab}
for t in h2load nginx openssl /usr/bin/time; do
  command -v "$t" >/dev/null || { echo "$t missing (nghttp2-client, nginx-light, openssl, time)" >&2; exit 1; }
done
rounds=${ROUNDS:-3}
size_mb=${SIZE_MB:-1}
n=${N:-2000}
c=${C:-4}
m=${M:-10}
variants=${VARIANTS:-"h1 h2c https h2"}
pin_server=(); pin_client=()
if [ "${PIN:-0}" = 1 ]; then
  command -v taskset >/dev/null || { echo "PIN=1 needs taskset (util-linux)" >&2; exit 1; }
  [ "$(nproc)" -ge 2 ] || { echo "PIN=1 needs 2 CPUs" >&2; exit 1; }
  pin_server=(taskset -c 0); pin_client=(taskset -c 1)
fi
work=$(mktemp -d)
out=${OUT:-$work/h2-serve-bench.json}
pids=()
cg=""
cleanup() {
  for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "$cg" ] && rmdir "$cg/vodlab" "$cg/nginx" "$cg" 2>/dev/null || true
  [ -n "${OUT:-}" ] && rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/root" "$work/nginx"
head -c $((size_mb << 20)) /dev/urandom > "$work/root/seg.m4s"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

. "$(dirname "$0")/bench-lib.sh"
# the machine's busy ticks: user, nice, system, irq, softirq, steal
busy() { awk '/^cpu / {printf "%.0f\n", $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }

vport=$(free_port)
"${pin_server[@]}" "$bin" serve --root "$work/root" --listen "127.0.0.1:$vport" --threads 1 --stats-interval 0 \
  --tls-cert "$work/cert.pem" --tls-key "$work/key.pem" ${SERVE_ARGS:-} 2>"$work/vodlab.err" &
vpid=$!; pids+=("$vpid")
n1=$(free_port); n2=$(free_port); n3=$(free_port)
nginx_conf "$work/nginx" "$work/root" "  ssl_certificate $work/cert.pem;
  ssl_certificate_key $work/key.pem;
  http2_max_requests 1000000;" "listen 127.0.0.1:$n1;" "listen 127.0.0.1:$n2 http2;" "listen 127.0.0.1:$n3 ssl http2;"
"${pin_server[@]}" nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" 2>"$work/nginx.err" &
npid=$!; pids+=("$npid")
wait_port "$vport"; wait_port "$n1"; wait_port "$n2"; wait_port "$n3"
# the servers' CPU in nanoseconds from a cpuacct cgroup each (cgroup v1,
# root), all threads counted, exited ones too; else 10 ms ticks from /proc
cpu_source=proc_ticks
if [ -w /sys/fs/cgroup/cpuacct ]; then
  cpu_source=cpuacct_ns
  cg=/sys/fs/cgroup/cpuacct/vodlab-bench-$$
  mkdir -p "$cg/vodlab" "$cg/nginx"
  echo "$vpid" > "$cg/vodlab/cgroup.procs"
  echo "$npid" > "$cg/nginx/cgroup.procs"
fi
cpu_s() { # server pid -> CPU seconds so far
  if [ -n "$cg" ]; then awk '{printf "%.6f", $1 / 1e9}' "$cg/$1/cpuacct.usage"
  else awk -v t="$(getconf CLK_TCK)" '{printf "%.6f", ($14 + $15) / t}' "/proc/$2/stat"; fi
}

url() { # server proto -> URL and h2load flags
  local s=$1 p=$2 host
  case "$s:$p" in
    vodlab:h1|vodlab:h2c) host="http://127.0.0.1:$vport" ;;
    vodlab:https|vodlab:h2) host="https://127.0.0.1:$vport" ;;
    nginx:h1) host="http://127.0.0.1:$n1" ;;
    nginx:h2c) host="http://127.0.0.1:$n2" ;;
    nginx:https|nginx:h2) host="https://127.0.0.1:$n3" ;;
  esac
  case "$p" in
    h1|https) echo "--h1 -m 1 $host/seg.m4s" ;;
    h2c) echo "-p h2c -m $m $host/seg.m4s" ;;
    h2) echo "-m $m $host/seg.m4s" ;;
  esac
}

json_open "$out"
for r in $(seq "$rounds"); do
  for p in $variants; do
    for s in vodlab nginx; do
      pid=$vpid; [ "$s" = nginx ] && pid=$npid
      # shellcheck disable=SC2046
      "${pin_client[@]}" h2load -n 100 -c "$c" $(url "$s" "$p") >/dev/null 2>&1 # warm: page cache, sessions
      t0=$(cpu_s "$s" "$pid"); m0=$(busy)
      # shellcheck disable=SC2046
      res=$(/usr/bin/time -f 'client_cpu %U %S' "${pin_client[@]}" h2load -n "$n" -c "$c" $(url "$s" "$p") 2>&1) \
        || { echo "h2load against $s over $p failed: $res" >&2; exit 1; }
      t1=$(cpu_s "$s" "$pid"); m1=$(busy)
      ccpu=$(echo "$res" | awk '/^client_cpu/ {print $2 + $3}')
      # "finished in 1.23s," or "... 812.5ms,"
      secs=$(echo "$res" | h2load_secs)
      ok=$(echo "$res" | sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p')
      data=$(echo "$res" | sed -n 's/^traffic: .*(\([0-9]*\)) data.*/\1/p')
      json_row "$out" "{\"round\": $r, \"server\": \"$s\", \"proto\": \"$p\", \"seconds\": $secs, \"succeeded\": $ok, \"data_bytes\": $data, \"server_cpu_s\": $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.6f", b - a}'), \"client_cpu_s\": $ccpu, \"machine_busy_ticks\": $((m1 - m0)), \"clk_tck\": $(getconf CLK_TCK), \"cpu_source\": \"$cpu_source\", \"pinned\": ${PIN:-0}, \"cc\": \"$(sysctl -n net.ipv4.tcp_congestion_control)\", \"rmem\": \"$(sysctl -n net.ipv4.tcp_rmem | tr '\t' ' ')\", \"loadavg\": $(cut -d' ' -f1 /proc/loadavg)}"
    done
  done
done
json_close "$out"
python3 - "$out" <<'EOF'
import json, statistics, sys
rows = json.load(open(sys.argv[1]))
res = {}
for r in rows:
    cpu = r["server_cpu_s"] if "server_cpu_s" in r else r["server_cpu_ticks"] / r["clk_tck"]
    k = (r["server"], r["proto"])
    ccpu = r.get("client_cpu_s", 0.0)
    mach = r.get("machine_busy_ticks", 0) / r["clk_tck"]
    res.setdefault(k, []).append((r["data_bytes"] / r["seconds"], r["data_bytes"] / max(cpu, 1e-9), r["succeeded"],
                                  r["data_bytes"] / max(cpu + ccpu, 1e-9), r["data_bytes"] / max(mach, 1e-9)))
# medians; "per server core" is the issue's figure (bytes per CPU-second of
# the server); the two after it count the client's CPU, then the machine's
print("server proto  MB/s(wall)  MB/s per server core  per server+client core  per machine core  rounds  succeeded")
med = lambda v, i: statistics.median(x[i] for x in v) / 1e6
for (s, p), v in sorted(res.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print("%-6s %-5s %10.0f %20.0f %23.0f %17.0f %7d %10s" % (s, p, med(v, 0), med(v, 1), med(v, 3), med(v, 4),
          len(v), ",".join(str(x[2]) for x in v)))
EOF
echo "rounds: $out"
