#!/bin/sh
# Thesis chapter 5 live (docs/experiments.md, "Chapter 5 live: First-Grow on the emulated drive"):
# First-Grow and First-Grow-SR against a fixed size and chapter 4's auto on the emulated Hitachi
# Deskstar 5K3000 (the thesis's chapter-5 drive model), one row at a time with the same load,
# then `vodlab simulate --prefetch` over each row's own access log for the same policy.
# Root, /dev/fuse and fusermount3 (Debian fuse3).
#
#   scripts/experiments/ch5-live.sh [OUT]        (about 25 minutes here)
#
# Knobs (environment): VODLAB (binary; copy it out of target/ first, compare re-executes it for the
# mount), RATE (sessions/s, default 2), WINDOW (s of arrivals, default 15), DRAIN (s, default 240),
# ROWS (rows to run, default "fg fgsr fixed auto"; a row named fg2, fixed3, ... repeats one),
# MEM (box memory, default 1G), PORT (loopback port, default 18571), MAX (First-Grow maximum, default 16M), FIXED (default 7M),
# PACED (default 1: the sessions' own schedule, waits between requests and pauses included; 0:
# --no-pacing, each request right after the one before, as the first series of 2026-12-07).
# K (time compression, default 1: real time; First-Grow takes k != 1 since 2026-12-07, its chain
# window divided by k; docs/experiments.md, "Time compression", for where k agrees with real
# time). Open-ended reads are read at their read_kbps= paced or not. A row already in OUT (its cmp-TAG/*/capacity.json) is not
# run again: rerun the script to resume.
# Each row records the load average before and after it (load-TAG.txt); the summary marks a row
# whose client was INVALID (such a row is to be re-run, not reported).
set -eu
V=${VODLAB:-vodlab}
OUT=${1:-ch5-live}
RATE=${RATE:-2}
WINDOW=${WINDOW:-15}
DRAIN=${DRAIN:-240}
MEM=${MEM:-1G}
MAX=${MAX:-16M}
FIXED=${FIXED:-7M}
mkdir -p "$OUT/logs"
cd "$OUT"
HERE=$(pwd)

# netflix-2014 with 100 titles (1.8 TB that exist only on the emulated 3 TB drive), 1,000 sessions;
# a point replays the first RATE x WINDOW of them
[ -d wnf ] || $V gen --preset netflix-2014 --titles 100 --sessions 1000 --seed 1 -o wnf > gen.txt

# one compare per row, so that each row's access log is its own
PACING=
[ "${PACED:-1}" = 1 ] || PACING=--no-pacing
row() { # TAG POLICY SIMPOLICY
  if ls "cmp-$1"/*/capacity.json > /dev/null 2>&1; then echo "$1: done before, kept"; return; fi
  rm -rf "logs/$1.log" "cmp-$1"
  echo "before $(cat /proc/loadavg)" > "load-$1.txt"
  $V compare wnf --disk hitachi-5k3000 --mem "$MEM" --servers "vodlab-asap:$2" \
     --serve-arg=--bitrates="$HERE/wnf/catalog.json" --serve-arg=--access-log="$HERE/logs/$1.log" \
     --port "${PORT:-18571}" $PACING --no-shaping --no-seqread --start "$RATE" --max-points 1 --window "$WINDOW" \
     --drain "$DRAIN" --seed 1 --time-compression "${K:-1}" --quiet -o "cmp-$1" > "cmp-$1.txt" 2>&1 || true
  echo "after $(cat /proc/loadavg)" >> "load-$1.txt"
  echo "$2: $(grep -h 'run 1/1' "cmp-$1.txt" || tail -n 2 "cmp-$1.txt")"
  if [ -n "$3" ] && [ -s "logs/$1.log" ]; then
    # simulate's prediction for the same requests (sizes in MiB, as serve's M)
    $V simulate --prefetch --log "logs/$1.log" --workload wnf --drives 1 --policy "$3" \
       --out "sim-$1" > "sim-$1.txt" 2>&1 || true
  fi
}
for r in ${ROWS:-fg fgsr fixed auto}; do
  case $r in
    fgsr*) row "$r" "first-grow-sr:$MAX" "first-grow-sr:${MAX}iB" ;;
    fg*) row "$r" "first-grow:$MAX" "first-grow:${MAX}iB" ;;
    fixed*) row "$r" "fixed:$FIXED" "fixed:${FIXED}iB" ;;
    auto*) row "$r" "auto" "" ;;
  esac
done

# one line per row: client throughput, the drive's own counters, the server's /vodlab/stats,
# and simulate's prediction for the same log
python3 - <<'PY' | tee summary.txt
import glob, json, os, re
print("row | client valid | sessions measured / failed / unfinished | load before, after | "
      "delivered MB/s | drive MB/s | drive busy % | reply late % | ms per read | drive reads / seeks | drive GB | "
      "server device reads / GB | wasted GB | evicted MB | box mem peak MiB | "
      "sim device GB / prefetches / peak util (1 drive) / peak mem GB / mean mem GB")
for tag in sorted(d[4:] for d in glob.glob("cmp-*") if os.path.isdir(d)):
    caps = glob.glob(f"cmp-{tag}/*/capacity.json")
    if not caps:
        continue
    cap = json.load(open(caps[0]))
    run = cap["search"]["points"][0]["runs"][0]
    delivered = cap["rows"][0]["delivered_mb_s"]["mean"]
    x = run["extra"]
    disk = json.load(open(glob.glob(f"cmp-{tag}/*/points/*/disk.json")[0]))
    d, wall = disk["disk"], disk["wall_seconds"]
    s = x.get("server_stats_after") or {}
    dev = (s.get("devices") or [{}])[0]
    t = s.get("table_4_1") or {}
    sim = "-"
    if os.path.exists(f"sim-{tag}.txt"):
        for line in open(f"sim-{tag}.txt"):
            f = line.split()
            if len(f) >= 8 and re.match(r"^[a-z-]+$", f[0]) and f[0] != "policy":
                sim = f"{float(f[6]):.2f} / {f[7]} / {f[2]} / {float(f[4]):.3f} / {float(f[5]):.3f}"
    valid = "valid" if run.get("client_valid") else "INVALID: " + "; ".join(run.get("client_invalid_reasons") or [])
    load = "-"
    if os.path.exists(f"load-{tag}.txt"):
        load = ", ".join(l.split()[1] for l in open(f"load-{tag}.txt") if l.strip())
    print(f"{tag}: {s.get('prefetch_policy', tag)} | {valid} | "
          f"{run.get('measured_sessions')} / {run.get('failed_sessions')} / {run.get('unfinished_sessions')} | "
          f"{load} | {delivered:.2f} | "
          f"{d['bytes'] / wall / 1e6:.2f} | {100 * d['busy_ns'] / d['elapsed_ns']:.1f} | "
          f"{x.get('drive_reply_late_pct', 0):.1f} | {x.get('device_ms_per_read', 0):.2f} | "
          f"{d['reads']} / {d['seeks']} | {d['bytes'] / 1e9:.2f} | "
          f"{dev.get('reads', 0)} / {dev.get('bytes', 0) / 1e9:.2f} | "
          f"{t.get('wasted_bytes', 0) / 1e9:.2f} | {t.get('evicted_bytes', 0) / 1e6:.0f} | "
          f"{x.get('box_memory_peak_bytes', 0) / 2**20:.0f} | {sim}")
PY
