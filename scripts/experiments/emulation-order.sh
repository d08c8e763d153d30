#!/bin/sh
# Which of the emulated drive's sequential reads are the kernel's doing and which the model's
# (issue 28, part 5; docs/experiments.md, "What the emulation does and what the kernel does"):
# the paced chapter-3 point of ch3-disk.sh (youtube-2011-2mb at scale 0.2, 2 MB chunks, the
# ch3-sas-10k drive, a 1,800 MiB box, time compression K) at one RATE, each server once with the
# drive's elevator (clook, the default) and once with a FIFO queue (`--scheduler fifo`: requests
# served in the order the kernel's FUSE layer submitted them). Under FIFO, "continues the previous
# read" counts what the kernel's page cache and read-ahead submit back to back; the difference to
# clook is what the model's elevator adds. `tagged:N` (SCHEDS) is a drive's command queue: the
# drive picks the shortest positioning time among the first N requests.
#
#   scripts/experiments/emulation-order.sh [OUT]
#   RATE=10 REPEATS=2 SERVERS=nginx,vodlab-asap scripts/experiments/emulation-order.sh OUT
#   SCHEDS=tagged:32 SERVERS=nginx scripts/experiments/emulation-order.sh OUT   (a drive's NCQ)
#
# Resumes (a run whose compare.json exists is skipped). Root, /dev/fuse, fusermount3, nginx.
set -eu
OUT=${1:-target/experiments/emulation-order}
RATE=${RATE:-10}
REPEATS=${REPEATS:-2}
K=${K:-4}
SERVERS=${SERVERS:-nginx,vodlab-asap,apache2}
SCHEDS=${SCHEDS:-clook fifo}
MEM=${MEM:-1800M}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
VODLAB=${VODLAB:-$HERE/target/release/vodlab}
. "$HERE/scripts/experiments/lib.sh"
enter_out "$OUT"
gen_once youtube-2011-2mb 0.2 1440
sample_loadavg
round=1
while [ "$round" -le "$REPEATS" ]; do
  for sched in $SCHEDS; do
    d=$(echo "$sched" | tr : -)-run$round
    [ -f "$d/compare.json" ] && continue
    rm -rf "$d"
    echo "$(date -u +%T) $sched round $round: start (load $(cut -d' ' -f1 /proc/loadavg))" | tee -a runs.txt
    ./vodlab compare w --disk ch3-sas-10k --disk-arg=--scheduler=$sched --mem "$MEM" \
      --servers "$SERVERS" --no-shaping --no-seqread --start "$RATE" --max-points 1 --repeats 1 \
      --window 30 --drain 240 --late-threshold-ms 100 --criterion failed:100 --seed "$round" \
      --time-compression "$K" -o "$d" > "$d.log" 2>&1 || true
    grep -h 'run [0-9]*/[0-9]*:' "$d.log" | sed "s/^/  $sched round $round: /" | tee -a runs.txt
  done
  round=$((round + 1))
done
python3 - "$PWD" "$HERE/scripts/experiments" <<'PY' | tee table.md
import glob, os, re, sys
root = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from points import points
print("| scheduler | round | server | client | failed | drive MB/s | reads | mean read KiB | "
      "continue the previous read % | drive cache hits % | mean queue | ms per read |")
print("|---" * 12 + "|")
for d in sorted(glob.glob(os.path.join(root, "*-run*"))):
    m = re.match(r"([\w-]+)-run(\d+)$", os.path.basename(d))
    if not m or not os.path.isdir(d):
        continue
    for server, _, _, r, dj in points(d):
        dk, dv = dj["disk"], dj["derived"]
        n = max(dk["reads"], 1)
        print("| %s | %s | %s | %s | %d/%d | %.1f | %d | %.0f | %.1f | %.1f | %.1f | %.2f |" % (
            m.group(1), m.group(2), server, "ok" if r["valid"] else "INVALID",
            r["failed_sessions"], r["started_sessions"], dv["throughput_mb_s"], dk["reads"],
            dv["mean_read_bytes"] / 1024, 100 * dk["sequential"] / n, 100 * dk["cache_hits"] / n,
            dv.get("mean_depth", float("nan")), dv["mean_service_ms"]))
PY
