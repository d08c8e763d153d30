#!/bin/sh
# Thesis chapter 4 in miniature (docs/experiments.md, "Chapter 4"): delivered throughput against
# the prefetch size on an emulated WD Red (k = 1) in a 128 MiB box, and where --prefetch-policy
# auto goes on the same drive. Root, /dev/fuse and fusermount3 (Debian fuse3), curl.
#
#   scripts/experiments/ch4-mini.sh [OUT]        (about 20 minutes here)
#
# VODLAB names the binary (default: vodlab on PATH). Copy it out of target/ first when other
# builds may replace it while this runs (compare re-executes its own binary for the mount).
set -eu
V=${VODLAB:-vodlab}
OUT=${1:-ch4-mini}
mkdir -p "$OUT"
cd "$OUT"

# youtube-2011-sd at scale 0.03: 600 titles, 7.44 GiB that exist only on the emulated drive
$V gen --preset youtube-2011-sd --scale 0.03 --sessions 6000 --seed 1 -o wsdL > gen.txt

# 1. a fixed overload (40 sessions/s for 20 s, unpaced) per prefetch size, from a cold drive and cache
for cfg in 512K 1M 2M 4M 8M 16M vanilla; do
  if [ "$cfg" = vanilla ]; then S=vodlab-vanilla; A=""; else S=vodlab-asap; A="--serve-arg=--prefetch-policy=fixed:$cfg"; fi
  # shellcheck disable=SC2086
  $V compare wsdL --disk wd10efrx --mem 128M --servers $S $A --no-pacing --no-shaping --no-seqread \
     --start 40 --max-points 1 --window 20 --drain 30 --late-threshold-ms 100 --seed 1 \
     -o "ov-$cfg" > "ov-$cfg.log" 2>&1 || true
  echo "$cfg: $(grep -h 'run 1/1' "ov-$cfg.log")"
done

# 2. 240 s at 25 sessions/s against one server: auto (from the WD Red SD start, 3 MiB, and from
#    8 MiB) and two fixed sizes; /vodlab/stats polled every 5 s (prefetch_auto has the intervals)
one() { # RATE POLICY DURATION TAG
  PORT=18490
  $V box --disk wd10efrx --mem 128M --workload wsdL --name "ch4mini-$4" -- $V serve --root '{mount}' \
     --listen 127.0.0.1:$PORT --prefetch-policy "$2" --default-bitrate 419.4304 --stats-interval 0 \
     > "one-$4-box.log" 2>&1 &
  BOX=$!
  for _ in $(seq 1 100); do curl -s -o /dev/null http://127.0.0.1:$PORT/vodlab/stats && break; sleep 0.5; done
  ( while kill -0 $BOX 2>/dev/null; do curl -s http://127.0.0.1:$PORT/vodlab/stats >> "one-$4-stats.json"; echo >> "one-$4-stats.json"; sleep 5; done ) &
  POLL=$!
  $V run wsdL --target http://127.0.0.1:$PORT --rate "$1" --duration "$3" --no-pacing --no-shaping \
     --late-threshold-ms 100 -o "one-$4-run" > "one-$4-run.log" 2>&1 || true
  curl -s http://127.0.0.1:$PORT/vodlab/stats > "one-$4-final.json" || true
  kill $POLL
  # the boxed server's end ends the box (and the drive's daemon)
  kill -TERM "$(pgrep -f "serve --root .* --listen 127.0.0.1:$PORT")"
  wait $BOX || true
  echo "$2: $(grep -h 'throughput:' "one-$4-run.log")"
}
one 25 auto:interval=20,ramp=5,start=wd10efrx-sd 240 auto3
one 25 fixed:4M 240 fixed4
one 25 auto:interval=20,ramp=5,start=8M 240 auto8
one 25 fixed:2M 240 fixed2
