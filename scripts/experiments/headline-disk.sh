#!/usr/bin/env bash
# The headline experiment on the emulated chapter-3 disk (docs/experiments.md,
# "Headline on the emulated disk"): youtube-2011-2mb and youtube-2011-unchunked
# at full title sizes (--scale sets the number of titles, not their sizes),
# served from `vodlab disk` with the ch3-sas-10k profile (the thesis's 146 GB
# 10,000 rpm SAS data disk), in a memory box scaled as the thesis's ratio:
# 8 GiB of RAM for the 3,366 requested titles of 12.9 MB (43.4 GB, thesis
# Table 3.3 [T784], [T718]), i.e. memory = 8 GiB x (requested-title bytes here
# / 43.4 GB). Rows: vodlab asap and nginx first, then vodlab vanilla, apache2
# and lighttpd (a second `compare --servers` into the same directory keeps the
# first rows and the sequential bound). Needs root (cgroups, FUSE:
# /dev/fuse and fusermount3) and the Debian servers
# (scripts/install-test-deps.sh). No disk space: the file sets exist only on
# the emulated drive. About 21 minutes for everything here with the two
# presets side by side (PARALLEL=1, the default: different ports, separate
# boxes and mounts; PARALLEL=0 runs them one after the other).
#
#   scripts/experiments/headline-disk.sh [OUT_DIR]
#   PRESETS=youtube-2011-unchunked THEN= DRAIN=20 PORT=18880 \
#     scripts/experiments/headline-disk.sh OUT   # asap and nginx only, 20 s drain
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-target/experiments/headline-disk}
WORK=${WORK:-/tmp/vodlab-headline-disk}  # only workload descriptions (KBs)
SCALE=${SCALE:-0.2}                      # 2,000 titles of full size (27 GB of files)
SESSIONS=${SESSIONS:-1440}               # 0.72 sessions per title, the thesis's 7,200 per 10,000
PROFILE=${PROFILE:-ch3-sas-10k}
PRESETS=${PRESETS:-"youtube-2011-2mb youtube-2011-unchunked"}
FIRST=${FIRST:-vodlab-asap,nginx}
THEN=${THEN-vodlab-vanilla,apache2,lighttpd}  # THEN= : first rows only
PARALLEL=${PARALLEL:-1}
WINDOW=${WINDOW:-20}
DRAIN=${DRAIN:-40}
MAX_POINTS=${MAX_POINTS:-7}
START=${START:-4}
VODLAB=${VODLAB:-target/release/vodlab}
[ -x "$VODLAB" ] || cargo build --release -q -p vodlab
mkdir -p "$WORK" "$OUT"
# a private copy: compare starts the mount daemon, servers and seqread from
# its own binary, which a rebuild during the experiment would replace
cp "$VODLAB" "$WORK/vodlab"; VODLAB=$WORK/vodlab

# load average every 30 s while the experiment runs (the shared cores)
( while sleep 30; do echo "$(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"; done ) \
  > "$OUT/loadavg.txt" &
LOADPID=$!
trap 'kill $LOADPID 2>/dev/null || true' EXIT

one() {
  local p=$1 port=$2
  "$VODLAB" gen --preset "$p" --scale "$SCALE" --sessions "$SESSIONS" -o "$WORK/$p" > "$OUT/$p.gen.txt"
  # requested titles' bytes: unique titles x mean title size (gen's summary)
  local uniq size mem
  uniq=$(awk '/unique titles/ {print $3}' "$OUT/$p.gen.txt")
  size=$(awk '/mean title size/ {print $4}' "$OUT/$p.gen.txt")
  mem=$(awk -v u="$uniq" -v s="$size" \
    'BEGIN { printf "%d", 8 * 1024 * u * s / (3366 * 12.9) }')   # MiB
  echo "$p: $uniq requested titles x $size MB -> --mem ${mem}M" | tee "$OUT/$p.mem.txt"
  local common=(--disk "$PROFILE" --mem "${mem}M" --port "$port"
    --no-pacing --no-shaping --check-bytes 0.01 --late-threshold-ms 100
    --start "$START" --step x2 --precision 0.25 --max-points "$MAX_POINTS"
    --max-rate $((SESSIONS / WINDOW))
    --window "$WINDOW" --drain "$DRAIN" --quiet -o "$OUT/$p")
  "$VODLAB" compare "$WORK/$p" --servers "$FIRST" "${common[@]}" > "$OUT/$p.log1.txt" 2>&1
  [ -z "$THEN" ] || "$VODLAB" compare "$WORK/$p" --servers "$THEN" --no-seqread \
    "${common[@]}" > "$OUT/$p.log2.txt" 2>&1
}

port=${PORT:-18680}
pids=()
for p in $PRESETS; do
  if [ "$PARALLEL" = 1 ]; then one "$p" "$port" & pids+=($!); else one "$p" "$port"; fi
  port=$((port + 100))
done
for pid in "${pids[@]}"; do wait "$pid"; done
dirs=()
for p in $PRESETS; do dirs+=("$OUT/$p"); done
python3 scripts/experiments/headline-disk-table.py "${dirs[@]}" > "$OUT/table.md"
cat "$OUT/table.md"
