#!/usr/bin/env bash
# Kernel shaping vs in-process link emulation on the same youtube-2011
# sessions (docs/scale-out.md, "Kernel shaping vs in-process link
# emulation"; docs/lab.md). Needs root (network namespaces), iproute2 and
# python3 (the summary).
#
# A small youtube-2011 workload (the preset's client classes, 0.5 MiB chunks,
# popularity and viewing fractions; title durations divided by DIV so it
# finishes in minutes) runs three times in a lab of 4 client hosts and a
# server host, with the same sessions, start time and seed each time:
#
#   kernel      vodlab lab run --flow-down 10mbit,3.5mbit,1mbit,10mbit: each
#               TCP connection has its own htb class at its host's class
#               rate; vodlab run --no-shaping (no in-process emulation)
#   inproc-d0   no kernel shaping; vodlab run's in-process link emulation
#               (rate; delay_ms set to 0, as the kernel here has no netem)
#   inproc-d50  the same with the preset's 50 ms one-way delay
#   kernel-paced, inproc-d50-paced
#               kernel and inproc-d50 with the preset's pacing (a chunk every
#               10 s after 3 back to back), the workload as specified
#
# Client host I runs only the sessions of one class (vodlab run --only-class):
# host 0 and 3 the 10mbit class (shards 0/2 and 1/2 of it), host 1 3.5mbit,
# host 2 1mbit. The first three runs are unpaced (--no-pacing): a session is
# then as long as its bytes take through the link. With the preset's pacing a
# session lasts about its viewing time whatever the link, and only the
# per-request figures tell the shapings apart. The summary prints, per class,
# the median and mean session duration, session throughput (bytes / duration)
# and request throughput (bytes / issue-to-last-byte) of each run, and the
# ratios of each kernel run to the in-process runs of the same pacing.
#
#   scripts/experiments/lab-shaping.sh [--quick] [OUT_DIR]
#
# --quick: 24 sessions, the three unpaced runs (CI size, about 3 minutes);
# default 60 sessions, all five runs (about 18 minutes). Environment: VODLAB (binary), SESSIONS, RATE (sessions/s),
# DIV, TITLES, MODES (a subset of "kernel inproc-d0 inproc-d50").
set -euo pipefail
cd "$(dirname "$0")/../.."
QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
OUT=${1:-target/experiments/lab-shaping}
if [ $QUICK = 1 ]; then
  SESSIONS=${SESSIONS:-24}; RATE=${RATE:-0.5}; DIV=${DIV:-20}
  MODES=${MODES:-"kernel inproc-d0 inproc-d50"}
else
  SESSIONS=${SESSIONS:-60}; RATE=${RATE:-0.5}; DIV=${DIV:-5}
  MODES=${MODES:-"kernel inproc-d0 inproc-d50 kernel-paced inproc-d50-paced"}
fi
TITLES=${TITLES:-60}
LAB=${LAB:-lshp}
VODLAB=${VODLAB:-target/release/vodlab}
[ -x "$VODLAB" ] || cargo build --release -q -p vodlab
[ "$(id -u)" = 0 ] || { echo "lab-shaping.sh: needs root (network namespaces)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/vodlab-lab-shaping.XXXXXX)
trap 'rm -rf "$WORK"; "$VODLAB" lab down --name "$LAB" >/dev/null 2>&1 || true' EXIT
cp "$VODLAB" "$WORK/vodlab"; V=$WORK/vodlab
mkdir -p "$OUT"

# the workload: youtube-2011 with title durations / DIV, one-way delay D
"$V" gen --show-preset youtube-2011 > "$WORK/base.toml"
for d in 0 50; do
  python3 - "$WORK/base.toml" "$DIV" "$d" > "$WORK/spec-d$d.toml" <<'EOF'
import re, sys
s = open(sys.argv[1]).read()
div, delay = float(sys.argv[2]), sys.argv[3]
def scale(m):
    pts = re.sub(r"\[([0-9.]+), ([0-9.]+)\]",
                 lambda p: "[%s, %.1f]" % (p.group(1), max(5.0, float(p.group(2)) / div)), m.group(2))
    return m.group(1) + pts
s, n = re.subn(r"(\[catalog\.duration\].*?points = )(\[.*?\],?\n\])", scale, s, count=1, flags=re.S)
assert n == 1, "no [catalog.duration] points"
s = re.sub(r"ramp_(up|down)_sessions = [0-9]+", r"ramp_\1_sessions = 0", s)
s = re.sub(r"delay_ms = [0-9.]+", "delay_ms = %s" % delay, s)
s = s.replace('name = "youtube-2011"', 'name = "youtube-2011-lab-shaping"', 1)
print(s, end="")
EOF
  "$V" gen --spec "$WORK/spec-d$d.toml" --seed 1 --titles "$TITLES" --sessions "$SESSIONS" \
    --shards 1 -o "$WORK/w$d" > "$WORK/gen-d$d.txt"
done
# the delay is not drawn from the seed: both workloads hold the same sessions
diff -r -q "$WORK/w0/scripts" "$WORK/w50/scripts" >/dev/null 2>&1 \
  || diff -r -q -x spec.toml -x '*.json' -x '*.txt' "$WORK/w0" "$WORK/w50"
"$V" fileset create "$WORK/w50" --root "$WORK/files" | tail -1
cp "$WORK/spec-d50.toml" "$OUT/spec.toml"
cp "$WORK/gen-d50.txt" "$OUT/gen.txt"

# client host I: its class, and its shard of that class's sessions
cat > "$WORK/client.sh" <<'EOF'
#!/bin/sh
# client.sh MODE WORKLOAD OUT START RATE VODLAB [run flags...]
mode=$1 work=$2 out=$3 start=$4 rate=$5 v=$6; shift 6
case "$VODLAB_LAB_CLIENT" in
  0) class=10mbit shard=0/2 ;;
  1) class=3.5mbit shard=0/1 ;;
  2) class=1mbit shard=0/1 ;;
  3) class=10mbit shard=1/2 ;;
  *) echo "client.sh: no class for host $VODLAB_LAB_CLIENT" >&2; exit 2 ;;
esac
exec "$v" run "$work" --target "http://$VODLAB_LAB_SERVER:8080" --allow-remote \
  --rate "$rate" --arrivals poisson --seed 1 --ramp-up 0 --ramp-down 0 \
  --check-bytes 0 --requests-csv --quiet \
  --only-class "$class" --shard "$shard" --start-at "$start" \
  -o "$out/c$VODLAB_LAB_CLIENT" "$@" > "$out/c$VODLAB_LAB_CLIENT.txt" 2>&1
EOF

for mode in $MODES; do
  dir=$OUT/$mode
  rm -rf "$dir"; mkdir -p "$dir"
  case $mode in
    kernel*)     work=$WORK/w50; lab=(--flow-down 10mbit,3.5mbit,1mbit,10mbit); run=(--no-shaping) ;;
    inproc-d0*)  work=$WORK/w0;  lab=(); run=() ;;
    inproc-d50*) work=$WORK/w50; lab=(); run=() ;;
    *) echo "unknown mode $mode" >&2; exit 2 ;;
  esac
  case $mode in
    kernel|inproc-d0|inproc-d50) run+=(--no-pacing) ;;
    kernel-paced|inproc-d0-paced|inproc-d50-paced) ;;
    *) echo "unknown mode $mode" >&2; exit 2 ;;
  esac
  start=$(( $(date +%s) + 5 ))
  echo "== $mode: $SESSIONS sessions at $RATE/s, start $(date -u -d @$start +%T)" >&2
  "$V" lab run --name "$LAB" --clients 4 ${lab[@]+"${lab[@]}"} --port 8080 --timeout 1800 \
    --server "exec $V serve --root $WORK/files --listen 10.77.0.1:8080 --stats-interval 0 > $dir/serve.txt 2>&1" \
    --client "sh $WORK/client.sh $mode $work $dir $start $RATE $V ${run[*]:-}" 2> "$dir/lab.txt"
  # the shards of each class merged exactly (vodlab merge)
  "$V" merge "$dir/c0" "$dir/c3" -o "$dir/merged-10mbit" > /dev/null
  "$V" merge "$dir/c1" -o "$dir/merged-3.5mbit" > /dev/null
  "$V" merge "$dir/c2" -o "$dir/merged-1mbit" > /dev/null
  # kept: each host's summary.txt, log and requests.csv (gzipped), and each
  # class's merged results; the hosts' results.json and metrics.json are
  # what the merge read
  for c in 0 1 2 3; do
    gzip -f "$dir/c$c/requests.csv"; rm -f "$dir/c$c/metrics.json" "$dir/c$c/results.json"
  done
  rm -f "$dir"/merged-*/metrics.json
done

python3 - "$OUT" $MODES <<'EOF' | tee "$OUT/summary.md"
import csv, gzip, os, statistics, sys
out, modes = sys.argv[1], sys.argv[2:]
classes = ["10mbit", "3.5mbit", "1mbit"]
def load(mode):
    s = {}
    for c in range(4):
        with gzip.open(os.path.join(out, mode, "c%d" % c, "requests.csv.gz"), "rt") as f:
            for r in csv.DictReader(f):
                if r["error"] or not r["response_ms"]:
                    s.setdefault((r["class"], r["session"]), []).append(None)
                    continue
                t0 = float(r["sent_s"]); dt = float(r["response_ms"]) / 1e3
                s.setdefault((r["class"], r["session"]), []).append((t0, t0 + dt, int(r["bytes"])))
    per = {c: {} for c in classes}
    for (cls, sid), rows in s.items():
        if any(x is None for x in rows):
            per[cls][sid] = None
            continue
        d = max(t1 for _, t1, _ in rows) - min(t0 for t0, _, _ in rows)
        req = [b * 8 / (t1 - t0) / 1e6 for t0, t1, b in rows]
        per[cls][sid] = (d, sum(b for _, _, b in rows) * 8 / d / 1e6, req)
    return per
data = {m: load(m) for m in modes}
print("Per class: sessions (failed); session duration (s, first send to last byte); session throughput")
print("(Mbit/s, body bytes / duration); request throughput (Mbit/s, body bytes / issue to last byte)\n")
print("| class | run | sessions | duration median | duration mean | session thr. median | session thr. mean | request thr. median |")
print("|---|---|---|---|---|---|---|---|")
stats = {}
for c in classes:
    for m in modes:
        v = data[m][c]
        ok = [x for x in v.values() if x]
        dur = [x[0] for x in ok]; thr = [x[1] for x in ok]; req = [r for x in ok for r in x[2]]
        stats[(m, c)] = (statistics.median(dur), statistics.mean(dur), statistics.median(thr),
                         statistics.mean(thr), statistics.median(req))
        print("| %s | %s | %d (%d) | %.2f | %.2f | %.3f | %.3f | %.3f |" % ((c, m, len(v), len(v) - len(ok)) + stats[(m, c)]))
pairs = [(k, m) for k in modes if k.startswith("kernel") for m in modes
         if m.startswith("inproc") and m.endswith("-paced") == k.endswith("-paced")]
if pairs:
    print("\nRatios kernel / in-process, same sessions and pacing\n")
    print("| class | kernel run | vs | dur. median | dur. mean | session thr. median | session thr. mean | request thr. median |")
    print("|---|---|---|---|---|---|---|---|")
    for c in classes:
        for k, m in pairs:
            a, b = stats[(k, c)], stats[(m, c)]
            print("| %s | %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f |" % ((c, k, m) + tuple(x / y for x, y in zip(a, b))))
    for k, m in pairs:
        for c in classes:
            if set(data[k][c]) != set(data[m][c]):
                print("\nWARNING: %s and %s ran different %s sessions" % (k, m, c))
EOF
