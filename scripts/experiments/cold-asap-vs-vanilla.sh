#!/usr/bin/env bash
# Cold-cache comparison of `vodlab serve --io vanilla` and `--io asap` on a
# hand-made box: the server runs in a cgroup with a memory limit (which
# includes its page cache) and throttled reads of the file set's block device
# (bytes/s and IOPS; the IOPS limit stands in for a disk's seeks). Until
# `vodlab box` exists (experiments issue), this is the box. Needs root and
# cgroup v1 memory + blkio controllers, or cgroup v2 with memory + io.
#
#   scripts/experiments/cold-asap-vs-vanilla.sh          # defaults below
#   SCALE=0.1 MEM=1G RBPS=$((80<<20)) RIOPS=100 scripts/experiments/cold-asap-vs-vanilla.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
VODLAB=${VODLAB:-target/release/vodlab}
WORK=${WORK:-target/tmp/cold}
SCALE=${SCALE:-0.05}            # 500 titles, ~7 GB per file set
MEM=${MEM:-512M}                # server memory limit, page cache included
RBPS=${RBPS:-$((60 << 20))}     # read bytes/s of the device
RIOPS=${RIOPS:-120}             # read operations/s of the device
RATE=${RATE:-8}                 # unpaced sessions started per second (Poisson)
DURATION=${DURATION:-40}        # seconds per run
PRESETS=${PRESETS:-"youtube-2011-2mb youtube-2011-unchunked"}
READAHEAD_KB=${READAHEAD_KB:-}  # if set, the device's read-ahead for the runs (restored on exit)
[ "$(id -u)" -eq 0 ] || { echo "needs root (cgroups)"; exit 1; }
[ -x "$VODLAB" ] || cargo build --release -q
mkdir -p "$WORK"
devnum=$(stat -c %d "$WORK"); dev="$((devnum >> 8)):$((devnum & 255))"
port=18181
if [ -n "$READAHEAD_KB" ]; then
  ra=/sys/dev/block/$dev/queue/read_ahead_kb
  [ -e "$ra" ] || ra=/sys/dev/block/$dev/../queue/read_ahead_kb
  old_ra=$(cat "$ra"); echo "$READAHEAD_KB" > "$ra"
  trap 'echo "$old_ra" > "$ra"' EXIT
  echo "device read-ahead $old_ra KiB -> $READAHEAD_KB KiB for the runs"
fi
if [ -d /sys/fs/cgroup/memory ] && [ -d /sys/fs/cgroup/blkio ]; then v=1; else v=2; fi
echo "box: cgroup v$v, memory $MEM, device $dev read ${RBPS} B/s ${RIOPS} IOPS; $RATE unpaced sessions/s for ${DURATION}s"
setup() {  # $1 = name; prints nothing; the server pid is added later
  if [ $v = 1 ]; then
    mkdir -p /sys/fs/cgroup/memory/$1 /sys/fs/cgroup/blkio/$1
    echo "$MEM" > /sys/fs/cgroup/memory/$1/memory.limit_in_bytes
    echo "$dev $RBPS" > /sys/fs/cgroup/blkio/$1/blkio.throttle.read_bps_device
    echo "$dev $RIOPS" > /sys/fs/cgroup/blkio/$1/blkio.throttle.read_iops_device
  else
    mkdir -p /sys/fs/cgroup/$1
    echo "+memory +io" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
    echo "$MEM" > /sys/fs/cgroup/$1/memory.max
    echo "$dev rbps=$RBPS riops=$RIOPS" > /sys/fs/cgroup/$1/io.max
  fi
}
enter() { if [ $v = 1 ]; then echo "$2" > /sys/fs/cgroup/memory/$1/cgroup.procs; echo "$2" > /sys/fs/cgroup/blkio/$1/cgroup.procs; else echo "$2" > /sys/fs/cgroup/$1/cgroup.procs; fi; }
disk_read() {  # bytes read from the device by the cgroup
  if [ $v = 1 ]; then awk -v d="$dev" '$1==d && $2=="Read" {print $3}' /sys/fs/cgroup/blkio/$1/blkio.throttle.io_service_bytes
  else awk -v d="$dev" '$1==d {for(i=2;i<=NF;i++) if ($i ~ /^rbytes=/) {sub("rbytes=","",$i); print $i}}' /sys/fs/cgroup/$1/io.stat; fi
}
teardown() { if [ $v = 1 ]; then rmdir /sys/fs/cgroup/memory/$1 /sys/fs/cgroup/blkio/$1 2>/dev/null || true; else rmdir /sys/fs/cgroup/$1 2>/dev/null || true; fi; }
for preset in $PRESETS; do
  w=$WORK/$preset; root=$WORK/$preset-files
  [ -f "$w/workload.json" ] || "$VODLAB" gen --preset "$preset" --scale "$SCALE" -o "$w" >/dev/null
  "$VODLAB" fileset create "$w" --root "$root" | tail -1
  "$VODLAB" fileset seqread "$w" --root "$root" | sed "s/^/$preset seqread (unthrottled): /"
  for io in vanilla asap; do
    cg=vodlab-cold-$io
    teardown $cg; setup $cg
    "$VODLAB" fileset cool "$w" --root "$root" >/dev/null
    "$VODLAB" serve --root "$root" --listen 127.0.0.1:$port --io $io --stats-interval 0 2>/dev/null &
    pid=$!
    enter $cg $pid
    sleep 0.5
    before=$(disk_read $cg); before=${before:-0}
    out=$WORK/result-$preset-$io
    "$VODLAB" run "$w" --target http://127.0.0.1:$port --rate "$RATE" --no-pacing --no-shaping --check-bytes 0 \
      --duration "$DURATION" --ramp-up 0 --ramp-down 0 --quiet -o "$out" >/dev/null || true
    after=$(disk_read $cg); after=${after:-0}
    kill -TERM $pid; wait $pid 2>/dev/null || true
    python3 - "$out/results.json" "$preset" "$io" "$before" "$after" "$DURATION" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); secs = float(sys.argv[6])
d = (int(sys.argv[5]) - int(sys.argv[4])) / secs / 2**20
sent = sum(i["throughput_bytes_per_s"] * r["interval_s"] for i in r["intervals"]) / secs / 2**20
reqs = sum(i["completed_requests"] for i in r["intervals"])
print(f"{sys.argv[2]:24} {sys.argv[3]:8} delivered {sent:7.1f} MiB/s  disk reads {d:7.1f} MiB/s  requests {reqs}  "
      f"response p50 {r['response_time_ms']['p50']:.0f} ms p99 {r['response_time_ms']['p99']:.0f} ms  sessions started {r['started_sessions']}")
PY
    teardown $cg
  done
done
