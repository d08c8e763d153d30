#!/usr/bin/env bash
# Where the CPU of plain HTTP/1.1 on loopback is spent, and in whose name
# (docs/benchmarks.md, "Plain HTTP/1.1: whose context runs the loopback
# receive"). The row of h2-serve-bench.sh that the issue "the second
# architecture step" asks to raise (vodlab serve >= 1.0x nginx per server
# core) is measured with the client on the same loopback; this script
# profiles the whole machine during each h2load run and splits every sample
# by the task it was charged to (the server, h2load, idle, other) and by
# what the kernel was doing: net_rx_action (the receive path of loopback
# packets, run in the softirq of whichever task sent them or re-enabled
# bottom halves), sendfile, tcp_recvmsg. It also says on which CPUs server
# and client ran: tasks that share a CPU and tasks that keep one each leave
# the receive path in different hands.
#
#   scripts/experiments/h1-where-cpu.sh [VODLAB_BIN]
#   env: ROUNDS=3 N=2000 C=4 FREQ=20000 OUT=file.json
#
# CPU seconds are sample counts / FREQ (perf's cpu-clock software event:
# this VM has no PMU), over the whole h2load run. Root (perf -a), perf,
# h2load (nghttp2-client), nginx-light. Run on a quiet machine.
set -euo pipefail
bin=${1:-target/release/vodlab}
for t in perf h2load nginx python3; do
  command -v "$t" >/dev/null || { echo "$t missing (linux-perf, nghttp2-client, nginx-light)" >&2; exit 1; }
done
rounds=${ROUNDS:-3}
n=${N:-2000}
c=${C:-4}
freq=${FREQ:-20000}
work=$(mktemp -d)
out=${OUT:-$work/h1-where-cpu.json}
pids=()
cleanup() {
  for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/root" "$work/nginx"
head -c $((1 << 20)) /dev/urandom > "$work/root/seg.m4s"
. "$(dirname "$0")/bench-lib.sh"

vport=$(free_port); lport=$(free_port); nport=$(free_port)
"$bin" serve --root "$work/root" --listen "127.0.0.1:$vport" --threads 1 --stats-interval 0 2>"$work/v.err" &
vpid=$!; pids+=("$vpid")
"$bin" serve --root "$work/root" --listen "127.0.0.1:$lport" --threads 1 --stats-interval 0 \
  --notsent-lowat 0 2>"$work/l.err" &
lpid=$!; pids+=("$lpid")
nginx_conf "$work/nginx" "$work/root" "" "listen 127.0.0.1:$nport;"
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" 2>"$work/nginx.err" &
npid=$!; pids+=("$npid")
wait_port "$vport"; wait_port "$lport"; wait_port "$nport"

json_open "$out"
for r in $(seq "$rounds"); do
  for s in vodlab vodlab-lowat0 nginx; do
    case $s in
      vodlab) p=$vport; pid=$vpid ;;
      vodlab-lowat0) p=$lport; pid=$lpid ;;
      nginx) p=$nport; pid=$npid ;;
    esac
    h2load -n 100 -c "$c" --h1 -m 1 "http://127.0.0.1:$p/seg.m4s" >/dev/null 2>&1
    res=$(perf record -q -o "$work/p.data" -e cpu-clock -F "$freq" -a -g -- \
      h2load -n "$n" -c "$c" --h1 -m 1 "http://127.0.0.1:$p/seg.m4s" 2>&1) \
      || { echo "h2load against $s failed: $res" >&2; exit 1; }
    secs=$(echo "$res" | h2load_secs)
    row=$(perf script -i "$work/p.data" -F comm,pid,cpu,ip,sym 2>/dev/null | python3 -c '
import collections, json, sys
server, freq = int(sys.argv[1]), float(sys.argv[2])
tot = collections.Counter(); part = collections.defaultdict(collections.Counter); cpus = collections.defaultdict(collections.Counter)
keys = ("net_rx_action", "sendfile", "tcp_recvmsg")
def role(comm, pid):
    if pid == server: return "server"
    if comm == "h2load": return "client"
    if pid == 0: return "idle"
    return "other"
for blk in sys.stdin.read().split("\n\n"):
    lines = [l for l in blk.split("\n") if l.strip()]
    if not lines: continue
    head = lines[0].split()
    # "comm pid [cpu]" (a comm may hold spaces: take pid and cpu from the end)
    cpu = int(head[-1].strip("[]:")); pid = int(head[-2]); comm = " ".join(head[:-2])
    who = role(comm, pid)
    syms = [l.split()[-1] for l in lines[1:]]
    tot[who] += 1; cpus[who][cpu] += 1
    for k in keys:
        if any(x.startswith(k) or x.startswith("__x64_sys_" + k) for x in syms): part[who][k] += 1
s = lambda n: round(n / freq, 4)
client_cpu = cpus["client"].most_common(1)[0][0] if cpus["client"] else -1
print(json.dumps({
    "cpu_s": {w: s(n) for w, n in tot.items()},
    "in": {w: {k: s(v) for k, v in part[w].items()} for w in part},
    "server_on_client_cpu": round(cpus["server"][client_cpu] / max(tot["server"], 1), 3),
}))' "$pid" "$freq")
    json_row "$out" "{\"round\": $r, \"server\": \"$s\", \"seconds\": $secs, \"bytes\": $((n << 20)), \"loadavg\": $(cut -d' ' -f1 /proc/loadavg), \"profile\": $row}"
    echo "round $r $s: ${secs} s" >&2
  done
done
json_close "$out"
python3 - "$out" <<'EOF'
import json, statistics, sys
rows = json.load(open(sys.argv[1]))
by = {}
for r in rows:
    by.setdefault(r["server"], []).append(r)
med = lambda v: statistics.median(v)
print("| server | wall s | server CPU-s | of it net_rx_action | client CPU-s | of it net_rx_action | idle CPU-s | server+client CPU-s | server's samples on the client's CPU | rounds |")
print("|---|---|---|---|---|---|---|---|---|---|")
for s, v in by.items():
    g = lambda w: [x["profile"]["cpu_s"].get(w, 0.0) for x in v]
    rx = lambda w: [x["profile"]["in"].get(w, {}).get("net_rx_action", 0.0) for x in v]
    both = [a + b for a, b in zip(g("server"), g("client"))]
    print("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f %% | %d |" % (
        s, med([x["seconds"] for x in v]), med(g("server")), med(rx("server")), med(g("client")),
        med(rx("client")), med(g("idle")), med(both),
        100 * med([x["profile"]["server_on_client_cpu"] for x in v]), len(v)))
EOF
echo "rounds: $out"
