#!/usr/bin/env bash
# Helper of pacing.sh: CPU seconds (user + system) used so far by every
# process in the process group of PID (the server the lab started in its own
# group: vodlab serve, or nginx/apache2 and their workers), as JSON.
#   pacing-server-cpu.sh PID
set -euo pipefail
pid=$1
tck=$(getconf CLK_TCK)
ticks=0 procs=0
for f in /proc/[0-9]*/stat; do
  # fields after the ")" of comm: 3 state, 5 pgrp, 14 utime, 15 stime
  line=$(cat "$f" 2>/dev/null) || continue
  rest=${line##*) }
  set -- $rest
  [ "${3:-}" = "$pid" ] || continue
  ticks=$((ticks + ${12} + ${13}))
  procs=$((procs + 1))
done
# shellcheck disable=SC2312
echo "{\"pgrp\": $pid, \"processes\": $procs, \"cpu_s\": $(awk -v t="$ticks" -v h="$tck" 'BEGIN{printf "%.2f", t/h}')}"
