#!/bin/sh
# Time compression on a paced, drive-bound point (issue 28, part 1; docs/experiments.md, "Time
# compression on a drive-bound point"): youtube-2011-2mb at scale 0.2 (2,000 titles of full size,
# 27 GB that exist only on the emulated drive; 1,440 sessions), paced sessions (2 MB chunks, the
# first three back to back, then one every 10 s; 10 s deadlines), no link emulation, on the
# emulated ch3-sas-10k drive in a box of the thesis's memory ratio (1,800 MiB: 8 GiB x the 9.5 GB
# of requested titles here / the thesis's 43.4 GB), vodlab-asap and nginx. REPEATS rounds; in
# each, for each rate in RATES and each k in KS, one `vodlab compare` run (round i uses seed i, the
# same schedules at every k); then a table of each run's figures in nominal units (drive figures
# in model time). Root, /dev/fuse, fusermount3 and nginx (scripts/install-test-deps.sh).
#
#   scripts/experiments/time-compression-disk.sh [OUT]
#   KS="1 4" RATES=10 REPEATS=3 scripts/experiments/time-compression-disk.sh OUT
#
# Resumes: a (rate, k, round) whose compare.json exists is not run again. The load average is recorded
# every 10 s (loadavg.txt) and each compare's client validity is in its runs (an INVALID run is
# reported as such, never as a result). About 4 minutes per k = 1 run at 10/s here.
set -eu
OUT=${1:-target/experiments/time-compression-disk}
KS=${KS:-"4 8 1"}
RATES=${RATES:-10}
REPEATS=${REPEATS:-3}
WINDOW=${WINDOW:-30}
DRAIN=${DRAIN:-240}   # the longest session of the first 600 lasts 220 s
SERVERS=${SERVERS:-vodlab-asap,nginx}
MEM=${MEM:-1800M}
# every repeat runs whatever the one before it did (compare stops a rate at its first failed
# run under the thesis's rule); the table applies the thesis's rule, no failed session, to each run
CRITERION=${CRITERION:-failed:100}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
VODLAB=${VODLAB:-$HERE/target/release/vodlab}
. "$HERE/scripts/experiments/lib.sh"
enter_out "$OUT"
gen_once youtube-2011-2mb 0.2 1440
sample_loadavg
# the page-out of this VM's DAMON (kdamond, action pageout), when there is one: bytes it paged
# out so far, recorded beside each run (its work varied with what the machine did before)
damon() {
  d=/sys/kernel/mm/damon/admin/kdamonds/0
  [ -w "$d/state" ] && echo update_schemes_stats > "$d/state" 2>/dev/null &&
    cat "$d/contexts/0/schemes/0/stats/sz_applied" 2>/dev/null || echo -
}
# rounds outermost: each round runs every k once, so what drifts on a shared machine over the
# minutes of an experiment reaches every k alike (round i uses seed i)
for rate in $RATES; do
  round=1
  while [ "$round" -le "$REPEATS" ]; do
    for k in $KS; do
      d=r$rate-k$k-run$round
      [ -f "$d/compare.json" ] && continue
      rm -rf "$d"
      echo "$(date -u +%T) rate $rate k $k round $round: start (load $(cut -d' ' -f1 /proc/loadavg), DAMON paged out $(damon) B)" | tee -a runs.txt
      ./vodlab compare w --disk ch3-sas-10k --mem "$MEM" --servers "$SERVERS" --no-shaping \
        --no-seqread --start "$rate" --max-points 1 --repeats 1 --window "$WINDOW" \
        --drain "$DRAIN" --late-threshold-ms 100 --criterion "$CRITERION" --seed "$round" \
        --time-compression "$k" -o "$d" > "$d.log" 2>&1 || true
      grep -h 'run [0-9]*/[0-9]*:' "$d.log" | sed "s/^/  k $k round $round: /" | tee -a runs.txt
      echo "  DAMON paged out $(damon) B" | tee -a runs.txt
    done
    round=$((round + 1))
  done
done
python3 "$HERE/scripts/experiments/time-compression-disk-table.py" . | tee table.md
