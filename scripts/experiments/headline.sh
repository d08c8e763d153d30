#!/usr/bin/env bash
# The headline experiment of docs/experiments.md: youtube-2011-2mb and
# youtube-2011-unchunked with the disk as the bottleneck (512 MiB box,
# hdd-7200 throttle), vodlab asap/vanilla, nginx, apache2, lighttpd, and the
# sequential-read bound. Needs root (cgroups) and the Debian servers
# (scripts/install-test-deps.sh). About 25 minutes per workload here.
#
#   scripts/experiments/headline.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-target/experiments/headline}
WORK=${WORK:-/var/tmp/vodlab-headline}   # must be on a block device (not tmpfs)
SCALE=${SCALE:-0.03}
SESSIONS=${SESSIONS:-1200}
PRESETS=${PRESETS:-"youtube-2011-2mb youtube-2011-unchunked"}
VODLAB=${VODLAB:-target/release/vodlab}
[ -x "$VODLAB" ] || cargo build --release -q
mkdir -p "$WORK" "$OUT"
# run a private copy: compare starts servers and seqread from its own binary,
# which a rebuild during the hour-long experiment would otherwise replace
cp "$VODLAB" "$WORK/vodlab"; VODLAB=$WORK/vodlab
for p in $PRESETS; do
  "$VODLAB" gen --preset "$p" --scale "$SCALE" --sessions "$SESSIONS" -o "$WORK/$p" > "$OUT/$p.gen.txt"
  "$VODLAB" fileset create "$WORK/$p" --root "$WORK/$p-files" | tail -1
  "$VODLAB" compare "$WORK/$p" --root "$WORK/$p-files" \
    --profile hdd-7200 --mem 512M \
    --no-pacing --no-shaping --check-bytes 0.01 \
    --start 1 --step x2 --precision 0.2 --max-points 7 \
    --window 30 --drain 60 --quiet --requests-csv \
    -o "$OUT/$p"
done
