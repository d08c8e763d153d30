#!/usr/bin/env bash
# What an HTTP/2 flood costs a benign client of `vodlab serve`.
#
# The server (`--threads 1`) is pinned to one CPU (SERVER_CPU), the benign
# client (h2load: h2c, C connections x M streams, N x 1 MiB) and the
# attacker (scripts/h2probe/h2probe.py --loop: one Python process,
# ATTACK_THREADS threads, each reconnecting and replaying one flood as fast
# as the socket takes it) to the other (CLIENT_CPU). For each flood a fresh
# server serves PAIRS pairs of rounds, one alone and one under the flood, in
# ABBA order (alone first in odd pairs, flood first in even ones). Per round:
#   - the benign throughput (h2load's DATA bytes / its elapsed time);
#   - the server's CPU time during the round (utime+stime of /proc/PID/stat,
#     all threads) per benign GB: the server's work on the attacker's behalf,
#     robust to other processes on the machine (they slow the round but do
#     not add server CPU per benign byte);
#   - the server's peak RSS (VmHWM of /proc/PID/status, reset before the
#     round by writing 5 to /proc/PID/clear_refs);
#   - the benign requests' p99 latency (h2load --log-file: each request's
#     microseconds from its start to the end of its response).
# Reported per flood: medians (MB/s and CPU/GB) alone and under the flood,
# their ratios, the median of the rounds' p99 latencies alone and under the
# flood and their ratio, the largest peak RSS of each kind of round, the attacker's
# connections/s, the server's extra CPU per attacker connection (median over
# the flood rounds of (CPU - DATA bytes x median alone CPU/byte) / (the
# attacker's connections/s x the round's duration)), and how many flood
# connections the server closed. `connect_only` (connect, preface and
# SETTINGS, close: no flood) is the floor any attack on new connections
# pays. `placebo` (FLOODS="placebo ...") starts the attacker's process and
# sends nothing: its "loss" is the measurement's own resolution (on a 2-CPU
# machine the attacker shares the benign client's CPU).
#
# The attacker connects from ATTACK_BIND (127.0.0.2; loopback takes all of
# 127/8) and h2load from 127.0.0.1, so the server's per-address penalty
# (`--h2-abuse-ban`, on by default) bans the attacker's address only.
# `closed` is the connections the server closed for the flood, `refused`
# those it reset at accept for the ban or probation. SERVE_ARGS="--h2-abuse-ban 0"
# measures without the penalty.
#
#   scripts/experiments/h2-flood-cost.sh [VODLAB_BIN]
#   env: PAIRS=5 N=2000 C=4 M=10 ATTACK_THREADS=2 SERVER_CPU=0 CLIENT_CPU=1
#        ATTACK_BIND=127.0.0.2
#        FLOODS="rapid_reset ..." SERVE_ARGS="" (extra `vodlab serve` flags)
#        ATTACK_ONLY=SECONDS: no benign client; per flood, the attacker alone
#        for SECONDS against one server: its connections/s, the server's CPU
#        per attacking connection and the share of its core it took
#        SETUP=shared (the above: loopback, one namespace) or separated
#        (root: a network lab, `vodlab lab up --name h2fl --clients 2`, with
#        the server on 10.77.0.1, h2load on client host 0 and the attacker on
#        client host 1, its own address; the attacker in a cgroup capped at
#        ATTACK_CORES (0.5) CPUs, pinned to ATTACK_CPU (CLIENT_CPU), so its
#        packets' kernel work is charged to its own CPU and quota; the lab is
#        removed at the end)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-target/release/vodlab}
pairs=${PAIRS:-5}
n=${N:-2000}
c=${C:-4}
m=${M:-10}
athreads=${ATTACK_THREADS:-2}
scpu=${SERVER_CPU:-0}
ccpu=${CLIENT_CPU:-1}
abind=${ATTACK_BIND:-127.0.0.2}
floods=${FLOODS:-"connect_only rapid_reset continuation_flood settings_flood ping_flood window_update_flood small_data_flood"}
py=${PYTHON:-/usr/bin/python3} # Debian's, with python3-h2's hpack
setup=${SETUP:-shared}
acpu=${ATTACK_CPU:-$ccpu}
acores=${ATTACK_CORES:-0.5}
case "$setup" in
  shared) in_srv=(); in_cli=(); in_atk=(); host=127.0.0.1 ;;
  separated)
    in_srv=(ip netns exec vl-h2fl-srv); in_cli=(ip netns exec vl-h2fl-c0); in_atk=(ip netns exec vl-h2fl-c1)
    host=10.77.0.1 ;;
  *) echo "h2-flood-cost: SETUP=$setup: give shared or separated" >&2; exit 2 ;;
esac
# an unknown flood name would leave the attacker dead and the round "alone"
for f in $floods; do
  if [ "$f" != connect_only ] && [ "$f" != placebo ] && ! grep -q "^def flood_$f(" "$here/scripts/h2probe/h2probe.py"; then
    echo "h2-flood-cost: unknown flood '$f'; floods: connect_only" \
      "$(sed -n 's/^def flood_\([a-z_]*\)(enc, a):.*/\1/p' "$here/scripts/h2probe/h2probe.py" | tr '\n' ' ')" >&2
    exit 2
  fi
done
hz=$(getconf CLK_TCK)
work=$(mktemp -d)
spid=""
apid=""
cg=""
cleanup() {
  [ -n "$apid" ] && kill "$apid" 2>/dev/null
  [ -n "$spid" ] && kill "$spid" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "$work"
  if [ "$setup" = separated ]; then
    "$bin" lab down --name h2fl >/dev/null 2>&1 || true
    [ -n "$cg" ] && rmdir "$cg" 2>/dev/null || true
  fi
}
trap cleanup EXIT
if [ "$setup" = separated ]; then
  "$bin" lab up --name h2fl --clients 2 >/dev/null
  # the attacker's CPU quota: cgroup v1's cpu controller, else v2's cpu.max
  quota=$(awk -v c="$acores" 'BEGIN {printf "%d", c * 100000}')
  if [ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    cg=/sys/fs/cgroup/cpu/vodlab-h2fl-$$
    mkdir "$cg"; echo 100000 >"$cg/cpu.cfs_period_us"; echo "$quota" >"$cg/cpu.cfs_quota_us"
  else
    echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
    cg=/sys/fs/cgroup/vodlab-h2fl-$$
    mkdir "$cg"; echo "$quota 100000" >"$cg/cpu.max"
  fi
fi
mkdir -p "$work/root"
head -c $((1 << 20)) /dev/urandom >"$work/root/seg.m4s"
head -c 1000 /dev/urandom >"$work/root/small.bin"
head -c $((16 << 20)) /dev/zero >"$work/root/big.bin"

start_server() {
  port=$($py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  # shellcheck disable=SC2086
  "${in_srv[@]}" taskset -c "$scpu" "$bin" serve --root "$work/root" --listen "$host:$port" --threads 1 \
    --stats-interval 0 ${SERVE_ARGS:-} 2>"$work/err" &
  spid=$!
  for _ in $(seq 100); do "${in_cli[@]}" bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null && break; sleep 0.1; done
}
stop_server() {
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  spid=""
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$spid/stat"; }
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$spid/status"; }

# the p99 of h2load's per-request log (its third column: microseconds from
# the request's start to the end of its response), in ms, nearest rank
p99_ms() { awk '{print $3}' "$1" | sort -g | awk '{a[NR]=$1} END {r=int(NR*0.99+0.999); if (r<1) r=1; printf "%.2f\n", (NR ? a[r] : 0)/1000}'; }
# one h2load run on CLIENT_CPU:
# "<MB/s> <DATA bytes> <server CPU s> <peak RSS kB> <requests ok> <p99 ms>"
round() {
  echo 5 >"/proc/$spid/clear_refs"
  local t0 out t1
  rm -f "$work/lat"
  t0=$(cpu_ticks)
  out=$("${in_cli[@]}" taskset -c "$ccpu" h2load -n "$n" -c "$c" -m "$m" -p h2c --log-file "$work/lat" \
    "http://$host:$port/seg.m4s" 2>&1)
  t1=$(cpu_ticks)
  awk -v cpu="$(((t1 - t0)))" -v hz="$hz" -v hwm="$(hwm_kb)" -v p99="$(p99_ms "$work/lat")" '
    /^finished in/ {v=$3; sub(/,$/,"",v); if (v ~ /ms$/) {sub(/ms$/,"",v); v=v/1000} else sub(/s$/,"",v); s=v}
    /^traffic:/ {d=$0; sub(/.*\(/,"",d); sub(/\) data.*/,"",d)}
    /^requests:/ {ok=$8}
    END {printf "%.1f %d %.2f %d %d %s\n", d/s/1e6, d, cpu/hz, hwm, ok, p99}' <<<"$out"
}
# the attacker's address: ATTACK_BIND on loopback, its own host in the lab
bind_args() { [ "$setup" = shared ] && echo --bind "$abind"; true; }
# `placebo`: the attacker's process, started, placed and stopped as for a
# flood (the same interpreter and imports), that sends nothing: the
# difference between "alone" and "flood" rounds that no attack causes
placebo_py='import hpack, json, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (print(json.dumps({"flood": "placebo", "connections_per_s": 0.0}), flush=True), sys.exit(0)))
time.sleep(3600)'
attack_start() {
  if [ "$1" = placebo ]; then
    "${in_atk[@]}" taskset -c "$acpu" $py -c "$placebo_py" >>"$work/attack" 2>/dev/null &
  else
    # shellcheck disable=SC2046
    "${in_atk[@]}" taskset -c "$acpu" $py "$here/scripts/h2probe/h2probe.py" "$host" "$port" \
      $(bind_args) --loop 3600 --threads "$athreads" "$1" >>"$work/attack" 2>/dev/null &
  fi
  apid=$!
  [ -n "$cg" ] && echo "$apid" >"$cg/cgroup.procs"
  sleep 0.3
}
attack_stop() {
  kill -TERM "$apid" 2>/dev/null || true
  wait "$apid" 2>/dev/null || true
  apid=""
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

if [ -n "${ATTACK_ONLY:-}" ]; then
  echo "# $(date -u +%FT%TZ) attacker alone ${ATTACK_ONLY} s per flood, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  start_server
  for f in $floods; do
    [ "$f" = placebo ] && continue # sends nothing: nothing to measure alone
    t0=$(cpu_ticks)
    # shellcheck disable=SC2046
    out=$("${in_atk[@]}" taskset -c "$acpu" $py "$here/scripts/h2probe/h2probe.py" "$host" "$port" \
      $(bind_args) --loop "$ATTACK_ONLY" --threads "$athreads" "$f")
    t1=$(cpu_ticks)
    $py -c 'import json,sys; d=json.loads(sys.argv[1]); t=int(sys.argv[2])/int(sys.argv[3])
print("%-20s conn/s %7.1f  server core %5.1f %%  us/conn %6.0f" % (d["flood"], d["connections_per_s"], 100*t/d["seconds"], 1e6*t/max(1, d["connections"])))' \
      "$out" "$((t1 - t0))" "$hz"
  done
  stop_server
  exit 0
fi
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# set-up $setup; server on CPU $scpu (--threads 1), h2load on CPU $ccpu, attacker on CPU $acpu$([ "$setup" = separated ] && echo " capped at $acores cores"); $pairs ABBA pairs;" \
  "h2load -n $n -c $c -m $m -p h2c 1 MiB; attacker: 1 Python process, $athreads threads"
printf '%-20s %9s %9s %6s %8s %8s %6s %11s %11s %6s %9s %9s %9s %8s %8s %8s\n' flood alone_MB/s flood_MB/s ratio \
  p99ms_a p99ms_f p99_x cpu_s/GB_a cpu_s/GB_f B/cpu kB_rss_a kB_rss_f atk_conn/s us/conn closed refused
for f in $floods; do
  start_server
  : >"$work/alone"
  : >"$work/flood"
  : >"$work/attack"
  round >/dev/null # warm the page cache and the server
  for i in $(seq "$pairs"); do
    if ((i % 2)); then
      round >>"$work/alone"
      attack_start "$f"; round >>"$work/flood"; attack_stop
    else
      attack_start "$f"; round >>"$work/flood"; attack_stop
      round >>"$work/alone"
    fi
  done
  read -r closed refused < <("${in_cli[@]}" curl -s "http://$host:$port/vodlab/stats" |
    $py -c "import json,sys; h=json.load(sys.stdin)['h2']; print(h.get('$f', '-'), h.get('refused_banned', 0) + h.get('refused_throttled', 0))" 2>/dev/null || echo "? ?")
  stop_server
  if [ -n "${KEEP:-}" ]; then cp "$work/alone" "$KEEP.$f.alone"; cp "$work/flood" "$KEEP.$f.flood"; cp "$work/attack" "$KEEP.$f.attack"; fi
  a_mbs=$(awk '{print $1}' "$work/alone" | median)
  f_mbs=$(awk '{print $1}' "$work/flood" | median)
  a_cpu=$(awk '{print $3 / ($2 / 1e9)}' "$work/alone" | median)
  f_cpu=$(awk '{print $3 / ($2 / 1e9)}' "$work/flood" | median)
  a_p99=$(awk '{print $6}' "$work/alone" | median)
  f_p99=$(awk '{print $6}' "$work/flood" | median)
  a_rss=$(awk '$4 > m {m = $4} END {print m}' "$work/alone")
  f_rss=$(awk '$4 > m {m = $4} END {print m}' "$work/flood")
  atk=$($py -c 'import json,sys; v=sorted(json.loads(l)["connections_per_s"] for l in sys.stdin if l.strip()); print(v[len(v)//2] if v else "?")' <"$work/attack")
  us=$($py -c 'import json,sys; print("\n".join(str(json.loads(l)["connections_per_s"]) for l in open(sys.argv[1]) if l.strip()))' "$work/attack" |
    paste -d' ' "$work/flood" - |
    awk -v a="$a_cpu" '{x = $3 - $2 / 1e9 * a; k = $7 * $2 / ($1 * 1e6); if (k > 0) print x / k * 1e6}' | median)
  printf '%-20s %9.1f %9.1f %6.3f %8.2f %8.2f %6.2f %11.3f %11.3f %6.3f %9d %9d %9s %8.0f %8s %8s\n' "$f" "$a_mbs" "$f_mbs" \
    "$(awk -v a="$a_mbs" -v b="$f_mbs" 'BEGIN{print b/a}')" "$a_p99" "$f_p99" \
    "$(awk -v a="$a_p99" -v b="$f_p99" 'BEGIN{print (a > 0) ? b/a : 0}')" "$a_cpu" "$f_cpu" \
    "$(awk -v a="$a_cpu" -v b="$f_cpu" 'BEGIN{print a/b}')" "$a_rss" "$f_rss" "$atk" "${us:-0}" "$closed" "$refused"
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# ratio = flood/alone benign MB/s; p99_x = flood/alone median of the rounds' benign p99 latency; B/cpu = benign bytes per server CPU-second, flood/alone"
