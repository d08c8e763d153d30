#!/bin/sh
# How far time compression goes on this machine, per drive profile (docs/experiments.md, "Time
# compression on a paced, drive-bound point"): the emulated drive alone, mounted at k = 1, 2, 4,
# ... and read by READERS concurrent readers (each `cat`s its own FILES chunk files of
# youtube-2011-2mb, cold: a fresh mount), and for each k the share of the drive's response time
# that the emulation added (`derived.reply_late_share`: replies sent after the model had served
# them, the figure `vodlab compare` turns into INVALID over 10 %), the wall read rate and the
# drive's mean response time in model time (which should not change with k). A whole point adds
# the server's and the client's CPU at k times the nominal byte rate, so its limit can only be
# lower (the script beside this one measures that on one point).
# Root, /dev/fuse and fusermount3.
#
#   scripts/experiments/time-compression-limit.sh [OUT]
#   PROFILES="ch3-sas-10k wd10efrx" KS="1 4 8 16" scripts/experiments/time-compression-limit.sh OUT
set -eu
OUT=${1:-target/experiments/time-compression-limit}
PROFILES=${PROFILES:-"ch3-sas-10k wd10efrx st1000dm003 hitachi-5k3000"}
KS=${KS:-"1 2 4 8 16 32"}
READERS=${READERS:-32}
FILES=${FILES:-8}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
VODLAB=${VODLAB:-$HERE/target/release/vodlab}
. "$HERE/scripts/experiments/lib.sh"
enter_out "$OUT"
gen_once youtube-2011-2mb 0.2 1440
mkdir -p mnt
echo "| profile | k | load | readers | FUSE reads | MB | wall s | wall MB/s | drive response ms (model) | reply late ms (model) | late share % |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for p in $PROFILES; do
  for k in $KS; do
    ./vodlab disk mount w mnt --disk-profile "$p" --time-compression "$k" --stats "$p-k$k.json" \
      > "$p-k$k.log" 2>&1 &
    mp=$!
    i=0
    while [ ! -f mnt/.vodlab-disk-stats.json ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    load=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(date +%s.%N)
    r=0
    pids=""
    # reader r reads titles r, r + READERS, ...: distinct files, spread over the set
    for d in $(cd mnt && ls -d t*/sd | head -$((READERS * FILES))); do echo "$d"; done > dirs.txt
    while [ $r -lt "$READERS" ]; do
      (awk -v r=$r -v n="$READERS" 'NR % n == r' dirs.txt | while read -r d; do
        cat "mnt/$d/00000.m4s" "mnt/$d/00001.m4s" > /dev/null 2>&1 || true; done) &
      pids="$pids $!"
      r=$((r + 1))
    done
    for j in $pids; do wait "$j"; done
    t1=$(date +%s.%N)
    cp mnt/.vodlab-disk-stats.json "$p-k$k.now.json"
    fusermount3 -u mnt
    wait "$mp" || true
    python3 - "$p-k$k.now.json" "$p" "$k" "$load" "$READERS" "$t0" "$t1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); f = d["fuse"]; dk = d["disk"]; dv = d["derived"]
w = float(sys.argv[7]) - float(sys.argv[6])
late = f.get("reply_late_us", {}).get("mean_us", float("nan")) / 1e3
print("| %s | %s | %s | %s | %d | %.0f | %.2f | %.0f | %.2f | %.3f | %.1f |" % (
    sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], f["reads"], f["bytes"] / 1e6, w,
    f["bytes"] / 1e6 / w, dk["response_us"]["mean_us"] / 1e3, late,
    100 * dv.get("reply_late_share", float("nan"))))
PY
  done
done
