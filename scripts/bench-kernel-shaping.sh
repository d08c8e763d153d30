#!/usr/bin/env bash
# What a shaped paced session costs the client when the kernel shapes its
# link instead of vodlab (issue 32, item 2): the same sessions in the same
# network lab, once shaped by the lab's htb class per connection (`vodlab
# lab run --flow-down RATE`, clients with --no-shaping: they read what
# arrives) and once by `vodlab run`'s own link emulation (in-process token
# buckets, HTTP/1.1 bodies read in batches), and optionally once more
# in-process with another build (BASELINE=path/to/vodlab) for a same-run
# before/after (BASELINE_MODES="inproc kernel": the other build in both
# arms). Rounds alternate the arms.
#
# The workload is client bench (b)'s: SESSIONS paced sessions of 12
# ranges of 16 KiB, one every 5 s, on 2 Mbit/s links (delay 0 in both
# arms: the lab has no netem, so neither arm delays), arriving within 5 s
# and lasting 55 s, against `vodlab serve` in the lab's server host. A
# host shapes at most FLOWS connections at once (default 256, a multiple
# of 256 up to 16384: `vodlab lab run --flows-per-host`; docs/lab.md), so
# the sessions are spread over HOSTS client hosts, one `vodlab run` shard
# each (started together with --start-at).
#
# Reported per arm and round: the client processes' CPU per 1,000
# concurrent sessions, the mean over the steady window (the intervals in
# which the summed active sessions are at least 95 % of their peak: the
# sum of the processes' cpu_pct over the sum of their sessions), the
# machine's busy CPU over the same window from /proc/stat (server, both
# kernels' softirq and everything else on the machine included), failed
# sessions, latency from schedule p99 (worst host: the response time included) and the results' shaping_mode.
# Medians over ROUNDS, and the ratios kernel / in-process.
#
#   scripts/bench-kernel-shaping.sh
#   ROUNDS=3 HOSTS=8 SESSIONS=2000 BASELINE=/tmp/vodlab-old scripts/bench-kernel-shaping.sh
#   HOSTS=2 FLOWS=5120 SESSIONS=10000 scripts/bench-kernel-shaping.sh   # part (b)'s scale
#   KERNEL_MTUS="1500 9000 65535" ...      # the kernel arm on larger frames too
#
# Needs root (network namespaces, tc). Writes OUT/ (default
# results/bench-kernel-shaping-<time>): the workload, each arm's hosts'
# results, cpu-*.txt samples and summary.md. The lab is removed by
# `vodlab lab run` at the end of each arm; this script starts no other
# long-lived process but its /proc/stat sampler, stopped by its PID.
set -euo pipefail

VODLAB=${VODLAB:-target/release/vodlab}
ROUNDS=${ROUNDS:-3}
HOSTS=${HOSTS:-8}
SESSIONS=${SESSIONS:-2000}
RATE=${RATE:-2mbit}
BASELINE=${BASELINE:-}
BASELINE_MODES=${BASELINE_MODES:-inproc}
# the kernel arm once per MTU of the lab's links (an arm kernel-mtuN for N
# != 1500; the in-process arms stay at 1500)
KERNEL_MTUS=${KERNEL_MTUS:-1500}
OUT=${OUT:-results/bench-kernel-shaping-$(date +%s)}

die() { echo "bench-kernel-shaping: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (network namespaces and tc)"
[ -x "$VODLAB" ] || die "$VODLAB: not built (cargo build --release -p vodlab)"
[ -z "$BASELINE" ] || [ -x "$BASELINE" ] || die "BASELINE=$BASELINE: not executable"
FLOWS=${FLOWS:-256}
PER_HOST=$(((SESSIONS + HOSTS - 1) / HOSTS))
[ "$PER_HOST" -le $((FLOWS - 6)) ] || die "$PER_HOST sessions per host: at most $((FLOWS - 6)) ($FLOWS shaped connections per host); raise HOSTS or FLOWS (a multiple of 256)"
KBPS=$(python3 -c "r='$RATE'.lower(); m={'kbit':1,'mbit':1000,'gbit':1000000}; u=[k for k in m if r.endswith(k)]; print(float(r[:-len(u[0])])*m[u[0]] if u else exit('RATE: e.g. 2mbit'))")
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
VODLAB=$(cd "$(dirname "$VODLAB")" && pwd)/$(basename "$VODLAB")

cat > "$OUT/spec.toml" << EOF
name = "bench-kernel-shaping"
[catalog]
titles = 1000
popularity = { kind = "zipf", alpha = 0.8 }
duration = { kind = "constant", value = 60.0 }
representations = [{ name = "lo", bitrate_kbps = 26.2144 }]   # 16 KiB per 5 s
storage = { layout = "single" }
[sessions]
count = $SESSIONS
viewing_fraction = { kind = "constant", value = 1.0 }
request_s = 5.0
buffering_requests = 1
pacing_s = 5.0
timeout_s = 10.0
representation = { kind = "fixed", name = "lo" }
[[clients]]
name = "link"
share = 1.0
down_kbps = $KBPS
up_kbps = 0.0
delay_ms = 0.0
EOF
"$VODLAB" gen --spec "$OUT/spec.toml" -o "$OUT/work" > /dev/null
rm -rf "$OUT/root"
"$VODLAB" fileset create "$OUT/work" --root "$OUT/root" > /dev/null

SAMPLER=
cleanup() { [ -n "$SAMPLER" ] && kill "$SAMPLER" 2> /dev/null || true; }
trap cleanup EXIT

# one arm: NAME BIN kernel|inproc ROUND [MTU]
arm() {
  local name=$1 bin=$2 mode=$3 round=$4 mtu=${5:-1500}
  local dir="$OUT/$name-r$round"
  rm -rf "$dir"
  mkdir -p "$dir"
  local start=$(($(date +%s) + 5))
  local shaping="" flow=()
  if [ "$mode" = kernel ]; then
    shaping="--no-shaping"
    flow=(--flow-down "$RATE" --flows-per-host "$FLOWS")
  fi
  # arrivals within 5 s in all: the aggregate rate, split over the shards
  local rate=$((SESSIONS / 5))
  (while :; do echo "$(date +%s.%N) $(head -1 /proc/stat)"; sleep 1; done) > "$dir/cpu.txt" &
  SAMPLER=$!
  "$VODLAB" lab run --name bks --clients "$HOSTS" --port 8080 --timeout 300 --mtu "$mtu" "${flow[@]}" \
    --server "exec $VODLAB serve --root $OUT/root --listen 10.77.0.1:8080 --stats-interval 0" \
    --client "exec $bin run $OUT/work --target http://\$VODLAB_LAB_SERVER:8080 --allow-remote \
      --rate $rate --shard \$VODLAB_LAB_CLIENT/$HOSTS --start-at $start --quiet $shaping \
      -o $dir/c\$VODLAB_LAB_CLIENT > $dir/c\$VODLAB_LAB_CLIENT.txt 2>&1" \
    > "$dir/lab.txt" 2>&1 || { cat "$dir/lab.txt" >&2; die "$name round $round: the lab run failed"; }
  kill "$SAMPLER" 2> /dev/null || true
  wait "$SAMPLER" 2> /dev/null || true
  SAMPLER=
  python3 - "$dir" "$HOSTS" "$start" "$name" "$round" >> "$OUT/rows.txt" << 'PY'
import json, sys
d, hosts, start, name, rnd = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
rs = [json.load(open(f"{d}/c{i}/results.json")) for i in range(hosts)]
n = max(len(r["intervals"]) for r in rs)
width = rs[0]["intervals"][1]["t_s"] - rs[0]["intervals"][0]["t_s"] if n > 1 else 1.0
act = [sum(r["intervals"][k]["active_sessions"] for r in rs if k < len(r["intervals"])) for k in range(n)]
cpu = [sum(r["intervals"][k]["cpu_pct"] for r in rs if k < len(r["intervals"])) for k in range(n)]
peak = max(act)
steady = [k for k in range(n) if act[k] >= 0.95 * peak]
mean_cpu = sum(cpu[k] for k in steady) / len(steady)
mean_act = sum(act[k] for k in steady) / len(steady)
# the machine's busy share over the steady window, from /proc/stat (all CPUs)
t0 = start + rs[0]["intervals"][steady[0]]["t_s"]
t1 = start + rs[0]["intervals"][steady[-1]]["t_s"] + width
smp = []
for line in open(f"{d}/cpu.txt"):
    f = line.split()
    v = [int(x) for x in f[2:]]
    smp.append((float(f[0]), sum(v), v[3] + v[4]))  # total, idle + iowait
inside = [s for s in smp if t0 <= s[0] <= t1]
machine = float("nan")
if len(inside) >= 2:
    a, b = inside[0], inside[-1]
    ncpu = sum(1 for l in open("/proc/stat") if l.startswith("cpu") and l[3].isdigit())
    machine = 100.0 * ncpu * (1 - (b[2] - a[2]) / (b[1] - a[1]))
failed = sum(r["failed_sessions"] for r in rs)
send99 = max(r["latency_from_schedule_ms"]["p99"] for r in rs)
modes = sorted({r.get("shaping_mode", "?") for r in rs})
valid = all(r["valid"] for r in rs)
print(json.dumps({"arm": name, "round": int(rnd), "peak": peak, "steady_sessions": mean_act,
                  "client_cpu_per_1000": mean_cpu / mean_act * 1000, "machine_cpu_per_1000": machine / mean_act * 1000,
                  "failed": failed, "send_p99_ms": send99, "shaping_mode": modes, "valid": valid}))
PY
  tail -1 "$OUT/rows.txt"
}

: > "$OUT/rows.txt"
for round in $(seq 1 "$ROUNDS"); do
  for m in $KERNEL_MTUS; do
    if [ "$m" = 1500 ]; then arm kernel "$VODLAB" kernel "$round"; else arm "kernel-mtu$m" "$VODLAB" kernel "$round" "$m"; fi
  done
  arm inproc "$VODLAB" inproc "$round"
  if [ -n "$BASELINE" ]; then
    for m in $BASELINE_MODES; do
      case $m in
        inproc) arm baseline "$BASELINE" inproc "$round" ;;
        kernel) arm baseline-kernel "$BASELINE" kernel "$round" ;;
        *) die "BASELINE_MODES: inproc and/or kernel, not $m" ;;
      esac
    done
  fi
done

python3 - "$OUT/rows.txt" "$SESSIONS" "$HOSTS" "$RATE" > "$OUT/summary.md" << 'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
arms = []
for r in rows:
    if r["arm"] not in arms:
        arms.append(r["arm"])
med = lambda arm, k: statistics.median(r[k] for r in rows if r["arm"] == arm)
print(f"{sys.argv[2]} paced sessions over {sys.argv[3]} lab hosts at {sys.argv[4]}, medians of the rounds:\n")
print("| arm | shaping_mode | client CPU % per 1,000 (steady mean) | machine CPU % per 1,000 | failed | latency from schedule p99 ms (worst host) | all valid | rounds |")
print("|---|---|---|---|---|---|---|---|")
for a in arms:
    rs = [r for r in rows if r["arm"] == a]
    mode = ",".join(rs[0]["shaping_mode"])
    each = ", ".join("%.2f" % r["client_cpu_per_1000"] for r in rs)
    machine = ", ".join("%.1f" % r["machine_cpu_per_1000"] for r in rs)
    print(f"| {a} | {mode} | {med(a, 'client_cpu_per_1000'):.2f} ({each}) "
          f"| {med(a, 'machine_cpu_per_1000'):.1f} ({machine}) | {sum(r['failed'] for r in rs)} | {max(r['send_p99_ms'] for r in rs):.2f} | {all(r['valid'] for r in rs)} | {len(rs)} |")
if "kernel" in arms and "inproc" in arms:
    print(f"\nkernel / in-process, client CPU: {med('kernel', 'client_cpu_per_1000') / med('inproc', 'client_cpu_per_1000'):.2f}; machine CPU: {med('kernel', 'machine_cpu_per_1000') / med('inproc', 'machine_cpu_per_1000'):.2f}")
if "baseline" in arms:
    print(f"in-process, this build / baseline, client CPU: {med('inproc', 'client_cpu_per_1000') / med('baseline', 'client_cpu_per_1000'):.2f}")
if "baseline-kernel" in arms:
    print(f"kernel, this build / baseline, client CPU: {med('kernel', 'client_cpu_per_1000') / med('baseline-kernel', 'client_cpu_per_1000'):.2f}")
PY
cat "$OUT/summary.md"
