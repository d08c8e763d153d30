#!/usr/bin/env bash
# Where the user pacer's driver runs, and the server-side MSS of kernel mode,
# measured in rounds (docs/experiments.md, "Pacing", "The driver's priority"):
# ROUNDS (default 3) invocations of pacing.sh with PCAP=1 on 100 sessions and
# 1 Gbit/s, each running CONFIGS (default: user-noburst-task user-noburst
# user-noburst-rt user-burst user-burst-rt) one after the other, so every
# round has each configuration under the same load. Writes OUT/roundN/ (as
# pacing.sh), OUT/load.txt (load average before and after each run) and
# OUT/summary.md (per configuration and round: windows within ±5 % from the
# capture and from the client, grant lateness, the driver's scheduling; the
# median over rounds). Needs root. SUMMARY_ONLY=1 rewrites the summary only.
#
#   scripts/experiments/pacing-driver.sh OUT
#   CONFIGS="kernel-noburst kernel-noburst-mss" scripts/experiments/pacing-driver.sh OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: pacing-driver.sh OUT}
ROUNDS=${ROUNDS:-3}
CONFIGS=${CONFIGS:-"user-noburst-task user-noburst user-noburst-rt user-burst user-burst-rt"}
GROUP=${GROUP:-100:1gbit}
mkdir -p "$OUT"
# SUMMARY_ONLY=1: only (re)write OUT/summary.md from the rounds already there
[ "${SUMMARY_ONLY:-0}" = 1 ] && ROUNDS_RUN=0 || ROUNDS_RUN=$ROUNDS
for r in $(seq 1 "$ROUNDS_RUN"); do
  for cfg in $CONFIGS; do
    echo "round $r $cfg before: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
    PCAP=1 GROUPS_OVERRIDE="$GROUP" CONFIGS_OVERRIDE="$cfg" \
      scripts/experiments/pacing.sh --full "$OUT/round$r"
    echo "round $r $cfg after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
  done
done
python3 - "$OUT" "$ROUNDS" "$GROUP" $CONFIGS > "$OUT/summary.md" <<'PY'
import json, os, statistics, sys
out, rounds, group, cfgs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
n, egress = group.split(":")
def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
print(f"# {n} sessions, {egress}: windows within ±5 % after the burst\n")
print("| configuration | " + " | ".join(f"round {r}" for r in range(1, rounds + 1))
      + " | median (capture) | median (client) | lateness mean / max, ms | driver |")
print("|---|" + "---|" * (rounds + 4))
for c in cfgs:
    caps, clis, cells, lat, drv = [], [], [], [], set()
    for r in range(1, rounds + 1):
        d = os.path.join(out, f"round{r}", f"n{n}-{egress}", c)
        pc = load(os.path.join(d, "pcap_windows.json")) or {}
        res = load(os.path.join(d, "results.json")) or {}
        st = (load(os.path.join(d, "stats.json")) or {}).get("pacing", {})
        cap = pc.get("within_5pct_pct")
        cli = res.get("delivery", {}).get("rate_windows_within_5pct_pct")
        if cap is not None:
            caps.append(cap)
        if cli is not None:
            clis.append(cli)
        cells.append(f"{cap if cap is not None else '–'} ({cli:.1f})" if cli is not None else f"{cap}")
        if st.get("grants"):
            lat.append((st["mean_grant_lateness_us"] / 1000, st["max_grant_lateness_us"] / 1000))
        if st.get("driver_policy"):
            drv.add(st["driver_policy"])
    med = lambda v: f"{statistics.median(v):.2f}" if v else "–"
    ls = ", ".join(f"{a:.2f} / {b:.1f}" for a, b in lat) or "–"
    print(f"| {c} | " + " | ".join(cells) + f" | **{med(caps)}** | {med(clis)} | {ls} | {', '.join(sorted(drv)) or '–'} |")
PY
cat "$OUT/summary.md"
