#!/usr/bin/env bash
# Helper of pacing.sh --smoke: the paced run's 100 ms windows are mostly
# (>= MIN_PACED_PCT, default 60 %) within ±5 % of the target, the unpaced run's
# are not (<= MAX_UNPACED_PCT, default 10 %, with at least one window), and no
# session failed. Exit 1 otherwise.
#   pacing-check.sh OUT_DIR
set -euo pipefail
OUT=$1
field() { sed -n "s/^ *\"$2\": \([-0-9.e+]*\),\{0,1\}$/\1/p" "$1" | head -1; }
fail=0
for g in "$OUT"/n*/; do
  for cfg in unpaced user-burst; do
    r=$g$cfg/results.json
    [ -s "$r" ] || { echo "pacing-check: $r missing" >&2; fail=1; continue; }
    n=$(field "$r" rate_windows) pct=$(field "$r" rate_windows_within_5pct_pct)
    failed=$(field "$r" failed_sessions)
    echo "pacing-check: $g$cfg: $n windows, $pct % within ±5 %, $failed failed sessions" >&2
    [ "$failed" = 0 ] || fail=1
    if [ "$cfg" = unpaced ]; then
      awk -v n="$n" -v p="$pct" -v m="${MAX_UNPACED_PCT:-10}" 'BEGIN{exit !(n > 0 && p <= m)}' || fail=1
    else
      awk -v n="$n" -v p="$pct" -v m="${MIN_PACED_PCT:-60}" 'BEGIN{exit !(n > 0 && p >= m)}' || fail=1
    fi
  done
done
[ $fail = 0 ] && echo "pacing-check: ok" >&2
exit $fail
