#!/usr/bin/env bash
# Runs the cargo-fuzz targets of fuzz/ (all, or those named) for a given time
# each, on the corpus kept in the repository, and prints a summary per target:
# executions, executions per second, coverage (libFuzzer's `cov` edges and `ft`
# features), the corpus, and any crash with its artifact's path.
#
#   scripts/fuzz.sh                          # every target for 1 hour
#   scripts/fuzz.sh --time 60 range cmcd     # two targets for 60 s each
#   scripts/fuzz.sh --time 3600 --minimize   # then `cargo fuzz cmin` each corpus
#   scripts/fuzz.sh --time 10 --read-only    # CI: the corpus is read, not grown
#
# Corpus: fuzz/corpus/<target>/ (committed), where libFuzzer adds each input
# that reaches new coverage; fuzz/seeds/<target>/ (committed, written by
# scripts/fuzz-seeds.py) is read as a second directory and never changed, so a
# target with an empty corpus starts from valid inputs. --read-only sends new
# inputs to a temporary directory instead (removed), leaving the checkout as it
# was. --minimize runs `cargo fuzz cmin` on each target's corpus at the end
# (not with --read-only). Crashes (and timeouts past --timeout, default 10 s
# for one input) stop that target; libFuzzer writes them to
# fuzz/artifacts/<target>/, the summary names them and the script exits 1.
#
# cargo-fuzz needs nightly-only sanitizer flags; on a stable toolchain
# RUSTC_BOOTSTRAP=1 allows them (only for this build). cargo-fuzz is
# installed when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit "${1:-0}"
}

seconds=3600
timeout=10
minimize=""
read_only=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) seconds="${2:?--time needs SECONDS}"; shift 2 ;;
    --time=*) seconds="${1#--time=}"; shift ;;
    --timeout) timeout="${2:?--timeout needs SECONDS}"; shift 2 ;;
    --minimize) minimize=1; shift ;;
    --read-only) read_only=1; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "fuzz: unknown option $1" >&2; usage 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
case "$seconds" in
  ''|*[!0-9]*|0) echo "fuzz: --time wants a whole number of seconds > 0, not '$seconds'" >&2; exit 2 ;;
esac
case "$timeout" in
  ''|*[!0-9]*|0) echo "fuzz: --timeout wants a whole number of seconds > 0, not '$timeout'" >&2; exit 2 ;;
esac
if [ -n "$minimize" ] && [ -n "$read_only" ]; then
  echo "fuzz: --minimize rewrites the corpus, --read-only keeps it: not both" >&2; exit 2
fi

command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked --quiet
export RUSTC_BOOTSTRAP=1
all=$(cargo fuzz list)
if [ ${#targets[@]} -eq 0 ]; then
  read -r -a targets <<< "$(echo $all)"
fi
for t in "${targets[@]}"; do
  if ! grep -qx -- "$t" <<< "$all"; then
    echo "fuzz: no target '$t' (the targets: $(echo $all); the time is --time SECONDS)" >&2
    exit 2
  fi
done
cargo fuzz build -O

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# the corpus's file count and bytes: "N files, B bytes"
corpus_size() {
  local n b
  n=$(find "$1" -type f | wc -l)
  b=$(find "$1" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}')
  echo "$n files, $b bytes"
}
# one field of libFuzzer's last status line ("#N DONE cov: C ft: F corp: ...")
status_field() {
  grep -E '^#[0-9]+' "$1" | tail -1 | grep -oE "$2: [0-9]+" | awk '{print $2}'
}
final_stat() {
  grep -E "^stat::$2:" "$1" | tail -1 | awk '{print $2}'
}

failed=0
rows=()
for t in "${targets[@]}"; do
  corpus="fuzz/corpus/$t"
  seeds="fuzz/seeds/$t"
  artifacts="fuzz/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  dirs=("$corpus")
  if [ -n "$read_only" ]; then
    dirs=("$logs/new-$t" "$corpus")
    mkdir -p "$logs/new-$t"
  fi
  [ -d "$seeds" ] && dirs+=("$seeds")
  before=$(ls -A "$artifacts")
  echo "fuzz: $t for ${seconds}s (corpus $corpus: $(corpus_size "$corpus"))"
  log="$logs/$t.log"
  rc=0
  cargo fuzz run -O "$t" "${dirs[@]}" -- -max_total_time="$seconds" -timeout="$timeout" \
    -print_final_stats=1 >"$log" 2>&1 || rc=$?
  grep -E "^Done|SUMMARY|panicked|ERROR|Test unit written" "$log" || true
  new_artifacts=$(comm -13 <(echo "$before" | sort) <(ls -A "$artifacts" | sort) | sed "s|^|$artifacts/|")
  execs=$(final_stat "$log" number_of_executed_units)
  rate=$(final_stat "$log" average_exec_per_sec)
  added=$(final_stat "$log" new_units_added)
  rss=$(final_stat "$log" peak_rss_mb)
  cov=$(status_field "$log" cov)
  ft=$(status_field "$log" ft)
  crash="none"
  if [ "$rc" -ne 0 ] || [ -n "$new_artifacts" ]; then
    failed=1
    crash="exit $rc; ${new_artifacts:-no artifact (see the log above)}"
    tail -40 "$log"
  fi
  rows+=("$t|${execs:-?}|${rate:-?}|${cov:-?}|${ft:-?}|${added:-?}|${rss:-?}|$(echo $crash)")
done

if [ -n "$minimize" ]; then
  for t in "${targets[@]}"; do
    echo "fuzz: cmin $t ($(corpus_size "fuzz/corpus/$t"))"
    cargo fuzz cmin -O "$t" "fuzz/corpus/$t" >"$logs/cmin-$t.log" 2>&1 \
      || { tail -20 "$logs/cmin-$t.log"; failed=1; }
    echo "fuzz: cmin $t -> $(corpus_size "fuzz/corpus/$t")"
  done
fi

echo
echo "fuzz summary (${seconds}s per target$([ -n "$read_only" ] && echo ', read-only corpus'))"
# new: inputs libFuzzer added to the corpus; corpus: fuzz/corpus/<target> now
# (after --minimize, the minimised one)
printf '%-15s %12s %8s %6s %7s %5s  %-28s %7s  %s\n' target execs exec/s cov ft new corpus rss_mb crash
for r in "${rows[@]}"; do
  IFS='|' read -r t execs rate cov ft added rss crash <<< "$r"
  printf '%-15s %12s %8s %6s %7s %5s  %-28s %7s  %s\n' "$t" "$execs" "$rate" "$cov" "$ft" "$added" \
    "$(corpus_size "fuzz/corpus/$t")" "$rss" "$crash"
done
exit "$failed"
