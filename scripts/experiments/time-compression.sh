#!/bin/sh
# Time compression k = 1 against k = 10 on one emulated-disk point (docs/disk.md, "Time
# compression of a whole point"): youtube-2011-2mb at scale 0.01 (100 titles, 1.30 GB that exist
# only on the emulated drive), paced sessions (pacing 10 s, deadlines 10 s), no link emulation,
# one point at RATE nominal sessions/s for WINDOW nominal seconds, vodlab serve (ASAP) on an
# emulated Hitachi 5K3000 in a 128 MiB box, from a fresh mount. `vodlab compare
# --time-compression K` compresses the drive, the workload and the server together and reports
# the point in nominal units (rates / k, times x k; the drive's figures in model time).
# Root, /dev/fuse and fusermount3 (Debian fuse3).
#
#   scripts/experiments/time-compression.sh [OUT]     (about 6 minutes per k = 1 round here)
#
# ROUNDS (default 1) rounds of k = 10 then k = 1; K (default 10) the compressed k; RATE (default 1)
# and WINDOW (default 60). VODLAB names the binary (default: vodlab on PATH); copy it out of
# target/ first when other builds may replace it while this runs.
set -eu
V=${VODLAB:-vodlab}
OUT=${1:-time-compression}
ROUNDS=${ROUNDS:-1}
K=${K:-10}
RATE=${RATE:-1}
WINDOW=${WINDOW:-60}
mkdir -p "$OUT"
cd "$OUT"
[ -d w ] || $V gen --preset youtube-2011-2mb --scale 0.01 --sessions 2000 --seed 1 -o w > gen.txt

point() { # K TAG
  $V compare w --disk hitachi-5k3000 --mem 128M --servers vodlab-asap --no-shaping --no-seqread \
     --start "$RATE" --max-points 1 --window "$WINDOW" --drain 400 --late-threshold-ms 100 \
     --seed 1 --time-compression "$1" -o "$2" > "$2.log" 2>&1 || true
  d=$(ls -d "$2"/vodlab-asap/points/*/ | head -1)
  echo "$2 (k = $1): $(grep -h 'run 1/1' "$2.log" | sed 's/^ *//')"
  # nominal figures of the point and the drive's statistics (model time)
  python3 - "$2/compare.json" "$d/disk.json" "$d/results.json" "$1" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); d = json.load(open(sys.argv[2])); r = json.load(open(sys.argv[3]))
k = float(sys.argv[4]); row = c["servers"][0]; f = row.get("at_capacity") or row.get("at_overload") or {}
dk = d["disk"]; dv = d["derived"]
print("  passed: %s | delivered %.2f MB/s nominal | drive: %d reads, %.1f MB, %.0f KiB/read, %.2f ms/read (model), busy %.0f %%, %.2f MB/s over %.0f s model | wall %.0f s (nominal %.0f s)" % (
  row["answer"].get("capacity") is not None, f.get("delivered_mb_s", float("nan")),
  dk["reads"], dk["bytes"] / 1e6, dv["mean_read_bytes"] / 1024, dv["mean_service_ms"],
  100 * dv["busy_fraction"], dv["throughput_mb_s"], dk["elapsed_ns"] / 1e9, r["duration_s"], r["duration_s"] * k))
PY
}
i=1
while [ "$i" -le "$ROUNDS" ]; do
  point "$K" "k$K-r$i"
  point 1 "k1-r$i"
  i=$((i + 1))
done
