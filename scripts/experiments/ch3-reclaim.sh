#!/bin/sh
# Does the steady point tip when the box's page cache fills? (issue 28; docs/experiments.md,
# "When the failures come"). One point of the chapter-3 steady setup (youtube-2011-2mb at scale
# 0.2, 6,000 paced sessions, 240 s of arrivals, 240 s drain, ch3-sas-10k, no shaping) per run,
# for each server in SERVERS and each box size in MEMS, REPEATS times, while a sampler records
# the box's memory cgroup every 0.5 s (usage, the limit's failcnt: how often the box met its
# limit and reclaimed, the page cache, and the cgroup's name). The table prints, per run, the failed sessions, the
# first failure and the moment the box first met its limit, both in nominal seconds.
#
#   RATE=12.5 K=4 MEMS="3711M 12G" SERVERS="nginx vodlab-asap" REPEATS=2 \
#     scripts/experiments/ch3-reclaim.sh OUT
#
# Root (cgroup v1 memory controller), /dev/fuse, nginx. Resumes: a run whose compare.json
# exists is not run again. About 2.5 minutes per run at K=4.
set -eu
OUT=${1:?usage: ch3-reclaim.sh OUT}
RATE=${RATE:-12.5}
K=${K:-4}
MEMS=${MEMS:-3711M 12G}
SERVERS=${SERVERS:-nginx vodlab-asap}
REPEATS=${REPEATS:-2}
SEED=${SEED:-1}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
VODLAB=${VODLAB:-$HERE/target/release/vodlab}
[ -d /sys/fs/cgroup/memory ] || { echo "needs the cgroup v1 memory controller" >&2; exit 1; }
. "$HERE/scripts/experiments/lib.sh"
enter_out "$OUT"
gen_once youtube-2011-2mb 0.2 6000
sample_loadavg
for rep in $(seq "$REPEATS"); do
  for mem in $MEMS; do
    for s in $SERVERS; do
      d=$s-$mem-r$rep
      [ -f "$d/compare.json" ] && continue
      rm -rf "$d"
      echo "$(date -u +%T) $d start (load $(cut -d' ' -f1 /proc/loadavg))" | tee -a runs.txt
      # the sampler: Unix time, then per box cgroup its usage, failcnt and page cache (bytes)
      (
        while :; do
          for c in /sys/fs/cgroup/memory/vodlab-*; do
            [ -f "$c/memory.usage_in_bytes" ] || continue
            echo "$(date +%s.%N) $(cat "$c/memory.usage_in_bytes") $(cat "$c/memory.failcnt") $(awk '$1 == "cache" {print $2}' "$c/memory.stat") ${c##*/}"
          done
          sleep 0.5
        done
      ) > "$d.mem.txt" 2>/dev/null &
      sampler=$!
      # end the sampler too if the script stops here (Ctrl-C, an error)
      trap 'kill $LOADPID $sampler 2>/dev/null || true' EXIT
      ./vodlab compare w --disk ch3-sas-10k --mem "$mem" --servers "$s" --no-shaping \
        --no-seqread --search "additive:$RATE:2.5" --max-points 1 --repeats 1 \
        --window 240 --drain 240 --late-threshold-ms 100 --criterion none \
        --seed "$SEED" --time-compression "$K" -o "$d" > "$d.log" 2>&1 || true
      kill "$sampler" 2>/dev/null || true
      wait "$sampler" 2>/dev/null || true
      trap 'kill $LOADPID 2>/dev/null || true' EXIT
      grep -h 'run [0-9]*/[0-9]*:' "$d.log" | sed "s/^/  $d: /" | tee -a runs.txt
    done
  done
done
# the table: failed sessions, first failure and first limit hit in nominal seconds
python3 - "$K" <<'EOF'
import glob, json, sys
k = float(sys.argv[1])
print("run\tfailed\tfirst_failure_s\tlimit_first_met_s\tpeak_usage_MiB\tfailcnt_end")
for d in sorted(p[:-len(".mem.txt")] for p in glob.glob("*.mem.txt")):
    res = glob.glob(f"{d}/*/points/*/results.json")
    if not res:
        continue
    r = json.load(open(res[0]))
    first = next((i["t_s"] * k for i in r["intervals"] if i["failed"]), None)
    # rows: time, usage, failcnt, cache[, cgroup]; the box the server ran in is the one
    # that held the most memory (compare also makes a short-lived check box)
    rows = [l.split() for l in open(f"{d}.mem.txt") if len(l.split()) in (4, 5)]
    boxes = {}
    for x in rows:
        name = x[4] if len(x) == 5 else ""
        boxes[name] = max(boxes.get(name, 0), int(x[1]))
    main = max(boxes, key=boxes.get) if boxes else ""
    rows = [x[:4] for x in rows if (x[4] if len(x) == 5 else "") == main]
    # nominal seconds from the run's start (the load's, after the mount and the server)
    start = r["started_at_unix_s"]
    hit = next(((float(t) - start) * k for t, u, f, c in rows if int(f) > 0), None)
    peak = max((int(u) for t, u, f, c in rows), default=0) / 2**20
    fc = rows[-1][2] if rows else "-"
    print(f"{d}\t{r['failed_sessions']}\t{first}\t{hit if hit is None else round(hit, 1)}\t{peak:.0f}\t{fc}")
EOF
