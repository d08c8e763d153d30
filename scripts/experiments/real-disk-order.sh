#!/bin/sh
# The order in which Linux issues a server's reads to a real block device (issue 28, part 5;
# docs/experiments.md, "What the emulation does and what the kernel does"): youtube-2011-2mb at
# scale 0.05 (500 titles, 6.8 GB, 600 sessions) written with `vodlab fileset create` to ROOT on
# the machine's own disk, each server in a box of the thesis's memory ratio (MEM) from a cold
# cache, paced sessions at RATE for 30 s, no link emulation, real time. Every read the page cache
# submits to the block layer (`block:block_bio_queue`: the kernel's own order, before any merging
# or I/O scheduler) and every request the block layer then issues to the device
# (`block:block_rq_issue`: after merging and the device's scheduler) is recorded with perf,
# system-wide; the table gives, for each of the two, the reads of the device holding ROOT, their
# mean size, and the share that starts where the one before it ended (what a drive serves without
# a seek).
# The device's read-ahead is READAHEAD_KB (128) while each box lives. THROTTLE=hdd-7200 adds
# compare's io.max throttle (a rate and IOPS limit, not a drive model).
#
#   scripts/experiments/real-disk-order.sh ROOT [OUT]
#   RATE=10 SERVERS="nginx vodlab-asap" MEM=670M scripts/experiments/real-disk-order.sh /srv/yt OUT
#
# Root (the box, perf), nginx. ROOT is created when missing (6.8 GB).
set -eu
ROOT=$1
OUT=${2:-target/experiments/real-disk-order}
RATE=${RATE:-10}
SERVERS=${SERVERS:-"nginx vodlab-asap"}
# 8 GiB x the 3.55 GB of titles these sessions request / the thesis's 43.4 GB
MEM=${MEM:-670M}
# the device's read-ahead while a box lives (compare restores it): Linux's default for a disk,
# and the emulated drive's mount read-ahead; `keep` leaves the device's own
READAHEAD_KB=${READAHEAD_KB:-128}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
VODLAB=${VODLAB:-$HERE/target/release/vodlab}
command -v perf >/dev/null || { echo "perf missing (linux-perf)" >&2; exit 1; }
ROOT=$(cd "$(dirname "$ROOT")" && pwd)/$(basename "$ROOT")
. "$HERE/scripts/experiments/lib.sh"
enter_out "$OUT"
gen_once youtube-2011-2mb 0.05 600
./vodlab fileset create w --root "$ROOT" > fileset.txt
dev=$(stat -c %d "$ROOT")   # st_dev of the file set's file system
major=$((dev >> 8)); minor=$((dev & 255))
echo "file set on device $major,$minor ($(findmnt -n -o SOURCE -T "$ROOT"))" | tee device.txt
throttle=""
[ -n "${THROTTLE:-}" ] && throttle="--throttle-profile $THROTTLE"
for s in $SERVERS; do
  d=$s
  [ -f "$d/compare.json" ] && continue
  rm -rf "$d"
  echo "$(date -u +%T) $s: start (load $(cut -d' ' -f1 /proc/loadavg))" | tee -a runs.txt
  # shellcheck disable=SC2086
  perf record -q -e block:block_bio_queue -e block:block_rq_issue -a -o "$s.perf" -- \
    ./vodlab compare w --root "$ROOT" \
    --mem "$MEM" $throttle --readahead-kb "$READAHEAD_KB" --device-of "$ROOT" --servers "$s" \
    --no-shaping --no-seqread --start "$RATE" --max-points 1 --repeats 1 --window 30 \
    --drain 240 --criterion failed:100 --seed 1 \
    -o "$d" > "$d.log" 2>&1 || true
  grep -h 'run [0-9]*/[0-9]*:' "$d.log" | sed "s/^/  /" | tee -a runs.txt
  perf script -i "$s.perf" -F comm,event,trace > "$s.trace" 2>/dev/null
  gzip -f "$s.trace"; rm -f "$s.perf"
done
python3 - "$major,$minor" $SERVERS <<'PY' | tee table.md
import gzip, re, sys
dev, servers = sys.argv[1], sys.argv[2:]
print("| server | stage | reads | mean KiB | start where the previous read ended % |")
print("|---" * 5 + "|")
# "nginx block:block_rq_issue: 254,0 R 131072 () 1234567 + 256 be,0,4 [nginx]"
# "nginx block:block_bio_queue: 254,0 RA 1234567 + 256 [nginx]"
pat = re.compile(r"^\s*\S.*?\s+block:(block_bio_queue|block_rq_issue):\s+(\d+),(\d+) (\S+) "
                 r"(?:\d+ \(\S*\) )?(\d+) \+ (\d+)")
for s in servers:
    st = {}
    for line in gzip.open(s + ".trace.gz", "rt"):
        m = pat.match(line)
        if not m or "%s,%s" % (m.group(2), m.group(3)) != dev or "R" not in m.group(4):
            continue
        sector, count = int(m.group(5)), int(m.group(6))
        x = st.setdefault(m.group(1), [None, 0, 0, 0])  # previous end, reads, sequential, bytes
        x[1] += 1
        x[2] += x[0] == sector
        x[3] += count * 512
        x[0] = sector + count
    for ev, name in (("block_bio_queue", "submitted (bio)"), ("block_rq_issue", "issued (request)")):
        _, n, seq, size = st.get(ev, [None, 0, 0, 0])
        print("| %s | %s | %d | %.0f | %.1f |" % (
            s, name, n, size / max(n, 1) / 1024, 100 * seq / max(n, 1)))
PY
