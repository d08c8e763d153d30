#!/usr/bin/env bash
# Speed and memory of `vodlab analyze` and `vodlab simulate --prefetch` on a
# large synthetic `vodlab serve` access log, against peers that read the same
# file in the same run (docs/analyze.md, docs/simulate.md "Speed and memory").
#
#   scripts/bench-analyze.sh [LINES] [RSS_LINES]
#
# LINES (default 2,000,000) is the benchmark log; RSS_LINES (default 0 = skip)
# is a second, longer log run once per tool to show peak RSS does not follow
# the log's length. Each command runs ROUNDS (default 3) times; the median
# is printed. CPU time (user + sys from /usr/bin/time) is the figure the
# targets are stated in (lines per CPU-second = per core), since this machine
# is shared; wall time and the load average are printed beside it.
# Environment: DIR (work directory, default /tmp/vodlab-bench-analyze),
# ROUNDS, SKIP_BUILD=1 (use target/release as it is), VODLAB (binary).
set -euo pipefail
cd "$(dirname "$0")/.."
LINES=${1:-2000000}
RSS_LINES=${2:-0}
ROUNDS=${ROUNDS:-3}
DIR=${DIR:-/tmp/vodlab-bench-analyze}
mkdir -p "$DIR"
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release -q -p vodlab --bin vodlab
    cargo build --release -q -p vodlab-analyze --example synth_log
fi
VODLAB=${VODLAB:-target/release/vodlab}
SYNTH=target/release/examples/synth_log
[[ -x "$SYNTH" ]] || { echo "no $SYNTH (cargo build --release -p vodlab-analyze --example synth_log, or run without SKIP_BUILD=1)" >&2; exit 1; }
[[ -x "$VODLAB" ]] || { echo "no $VODLAB (cargo build --release -p vodlab)" >&2; exit 1; }
AWK=$(command -v mawk || command -v awk)
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }

gen() { # lines -> path
    local f="$DIR/synth-$1.log"
    [[ -s "$f" ]] || { "$SYNTH" "$1" > "$f.part" && mv "$f.part" "$f"; }
    echo "$f"
}

# run NAME CMD...: ROUNDS runs; prints "NAME wall cpu rss" medians
run() {
    local name=$1; shift
    local walls=() cpus=() rsss=()
    for _ in $(seq "$ROUNDS"); do
        /usr/bin/time -f "%e %U %S %M" -o "$DIR/time.txt" "$@" > "$DIR/out.txt" 2>&1
        read -r w u s m < "$DIR/time.txt"
        walls+=("$w"); cpus+=("$(echo "$u + $s" | bc -l)"); rsss+=("$m")
    done
    med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    echo "$name $(med "${walls[@]}") $(med "${cpus[@]}") $(med "${rsss[@]}")"
}

LOG=$(gen "$LINES")
echo "log: $LOG ($LINES lines, $(du -mL "$LOG" | cut -f1) MB); $ROUNDS rounds, medians"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); cores: $(nproc)"
cat "$LOG" > /dev/null # page cache
RESULTS=$DIR/results.txt
: > "$RESULTS"
run "wc-l" wc -l "$LOG" >> "$RESULTS"
run "awk-sum-field" "$AWK" '{s += $8} END {print s}' "$LOG" >> "$RESULTS"
run "analyze" "$VODLAB" analyze "$LOG" >> "$RESULTS"
run "simulate-1" "$VODLAB" simulate --prefetch --log "$LOG" --policy fixed:7MB >> "$RESULTS"
run "simulate-5" "$VODLAB" simulate --prefetch --log "$LOG" --policy fixed:7MB \
    --policy proportional:7MB --policy sqrt:7MB --policy first-grow:16MB \
    --policy first-grow-sr:16MB >> "$RESULTS"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
PEER_CPU=$(awk '$1 == "awk-sum-field" {print $3}' "$RESULTS")
printf '%-14s %8s %8s %10s %14s %14s %9s\n' command wall_s cpu_s rss_MiB "lines/s wall" "lines/CPU-s" "x awk"
while read -r name wall cpu rss; do
    awk -v n="$name" -v w="$wall" -v c="$cpu" -v r="$rss" -v l="$LINES" -v p="$PEER_CPU" 'BEGIN {
        cc = (c > 0.005 ? c : 0.005); ww = (w > 0.005 ? w : 0.005)
        printf "%-14s %8.2f %8.2f %10.1f %14.0f %14.0f %8.2fx\n", n, w, c, r / 1024, l / ww, l / cc, p / cc }'
done < "$RESULTS"
echo "targets (issue 14): analyze >= 1,000,000 lines/CPU-s; simulate >= 2,000,000 requests/CPU-s"

if [[ "$RSS_LINES" != 0 ]]; then
    BIG=$(gen "$RSS_LINES")
    echo "peak RSS, $LINES vs $RSS_LINES lines (one run each):"
    for t in analyze simulate; do
        for f in "$LOG" "$BIG"; do
            if [[ $t == analyze ]]; then cmd=("$VODLAB" analyze "$f");
            else cmd=("$VODLAB" simulate --prefetch --log "$f" --policy fixed:7MB); fi
            /usr/bin/time -f "%e %U %S %M" -o "$DIR/time.txt" "${cmd[@]}" > /dev/null 2>&1
            read -r w u s m < "$DIR/time.txt"
            printf '  %-9s %-40s %8.1f MiB  cpu %6.2f s\n' "$t" "$(basename "$f")" "$(echo "$m / 1024" | bc -l)" "$(echo "$u + $s" | bc -l)"
        done
    done
fi
