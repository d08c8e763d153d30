#!/usr/bin/env bash
# Helper of pacing.sh: the whole machine's CPU over a run, from two `cpu` lines
# of /proc/stat (before and after), by kind, in CPU-seconds; and the client's
# own CPU (user + system of the finished children of CLIENT_SHELL_PID: the
# `vodlab run` it waited for), so that system - client = the server, the
# kernel's network work for both ends (softirq: TCP's pacing timers, veth
# delivery, ACKs), htb and whatever else ran on the machine meanwhile (other
# work on a shared machine shows up here too: compare runs of one session).
#   pacing-system-cpu.sh "CPU_LINE_BEFORE" "CPU_LINE_AFTER" CLIENT_SHELL_PID
set -euo pipefail
tck=$(getconf CLK_TCK)
# /proc/PID/stat after the ")": field 3 state ... 16 cutime, 17 cstime
rest=$(sed 's/.*) //' "/proc/$3/stat")
set -- "$1" "$2" $rest
child=$((${16} + ${17}))
awk -v a="$1" -v b="$2" -v h="$tck" -v c="$child" 'BEGIN {
  split(a, x); split(b, y)
  # cpu user nice system idle iowait irq softirq steal
  for (i = 2; i <= 9; i++) d[i] = (y[i] - x[i]) / h
  busy = d[2] + d[3] + d[4] + d[7] + d[8] + d[9]
  printf "{\"user_s\": %.2f, \"nice_s\": %.2f, \"system_s\": %.2f, \"irq_s\": %.2f, \"softirq_s\": %.2f, ", d[2], d[3], d[4], d[7], d[8]
  printf "\"busy_s\": %.2f, \"client_cpu_s\": %.2f, \"busy_minus_client_s\": %.2f}\n", busy, c / h, busy - c / h
}'
