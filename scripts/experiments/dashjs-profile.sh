#!/usr/bin/env bash
# dash.js 4.7.4 in Chromium against `vodlab run --player dash
# --player-profile dashjs` on the same kernel-shaped links (issue 30, item 6;
# docs/experiments.md "dash.js against --player-profile dashjs"). Runs
# scripts/experiments/dashjs-compare.sh RUNS times (default 3) with
# PROFILES=dashjs (and RULES, default none) into OUT/runN, encoding the
# real-media set once, then writes OUT/summary.json and OUT/summary.md: per
# link, each run's mean nominal bit rate, switches and stalls of both
# players, the means over the runs, and vodlab's over dash.js's.
# Needs root and what dashjs-compare.sh needs.
#
#   scripts/experiments/dashjs-profile.sh [OUT_DIR]
#
# Environment: RUNS (3), LINKS, SHAPE, RECORD_S as dashjs-compare.sh; RULES
# (vodlab --abr rules to run beside the profile, default none);
# SUMMARY_ONLY=1 (only redo OUT/summary.*).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-experiments/dashjs-profile}
RUNS=${RUNS:-3}
if [ "${SUMMARY_ONLY:-0}" != 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "dashjs-profile.sh: needs root (network namespaces)" >&2; exit 2; }
  SETDIR=$(mktemp -d /tmp/vodlab-dashjs-set.XXXXXX)
  trap 'rm -rf "$SETDIR"' EXIT
  mkdir -p "$OUT"
  for i in $(seq 1 "$RUNS"); do
    echo "==== run $i of $RUNS ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
    if [ -d "$SETDIR/set" ]; then
      RULES="${RULES-}" PROFILES=dashjs SET="$SETDIR/set" \
        scripts/experiments/dashjs-compare.sh "$OUT/run$i" | tee "$OUT/run$i.txt"
    else
      RULES="${RULES-}" PROFILES=dashjs SET_OUT="$SETDIR/set" \
        scripts/experiments/dashjs-compare.sh "$OUT/run$i" | tee "$OUT/run$i.txt"
    fi
  done
fi
python3 - "$OUT" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
runs = sorted(glob.glob(os.path.join(out, "run*", "summary.json")),
              key=lambda p: int(os.path.basename(os.path.dirname(p))[3:]))
assert runs, f"no {out}/runN/summary.json"
per = {}
for p in runs:
    s = json.load(open(p))
    run = os.path.basename(os.path.dirname(p))
    for r in s["rows"]:
        per.setdefault(r["link"], {}).setdefault(r["player"], []).append(
            {"run": run, "mean_kbps": r["mean_kbps"], "segments": r["segments"],
             "switches": r["switches"], "stalls": r["stalls"], "stall_s": r["stall_s"],
             "startup_s": r["startup_s"], "loadavg": r.get("loadavg"),
             "renditions": r["renditions"]})
def rel(a, b):
    return None if b == 0 else round(a / b, 3)
links, table = [], []
for link, players in per.items():
    dj = next(k for k in players if k.startswith("dash.js"))
    base = players[dj]
    bm = statistics.mean(x["mean_kbps"] for x in base)
    bs = statistics.mean(x["switches"] for x in base)
    bst = statistics.mean(x["stalls"] for x in base)
    for name, xs in players.items():
        m = statistics.mean(x["mean_kbps"] for x in xs)
        sw = statistics.mean(x["switches"] for x in xs)
        st = statistics.mean(x["stalls"] for x in xs)
        row = {"link": link, "player": name, "runs": len(xs),
               "mean_kbps": round(m, 1), "mean_kbps_runs": [x["mean_kbps"] for x in xs],
               "switches": round(sw, 2), "switches_runs": [x["switches"] for x in xs],
               "stalls": round(st, 2), "stalls_runs": [x["stalls"] for x in xs],
               "startup_s_runs": [x["startup_s"] for x in xs],
               "loadavg_runs": [x["loadavg"] for x in xs]}
        if name != dj:
            row["bitrate_ratio"] = rel(m, bm)
            row["bitrate_ratio_runs"] = [rel(a["mean_kbps"], b["mean_kbps"]) for a, b in zip(xs, base)]
            row["switches_ratio"] = rel(sw, bs)
            row["switches_diff"] = round(sw - bs, 2)
            row["stalls_diff"] = round(st - bst, 2)
            row["within_10pct"] = {
                "bitrate": abs(m / bm - 1) <= 0.1 if bm else None,
                "switches": (abs(sw / bs - 1) <= 0.1) if bs else sw == 0,
                "stalls": (abs(st / bst - 1) <= 0.1) if bst else st == 0}
        table.append(row)
json.dump({"runs": len(runs), "rows": table}, open(os.path.join(out, "summary.json"), "w"), indent=1)
with open(os.path.join(out, "summary.md"), "w") as f:
    f.write("| link | player | mean kbit/s (runs) | ratio (runs) | switches (runs) | stalls (runs) | load avg (runs) |\n|---|---|---|---|---|---|---|\n")
    for r in table:
        ratio = "" if "bitrate_ratio" not in r else f"{r['bitrate_ratio']} ({', '.join(str(x) for x in r['bitrate_ratio_runs'])})"
        f.write(f"| {r['link']} | {r['player']} | {r['mean_kbps']:.0f} ({', '.join(f'{x:.0f}' for x in r['mean_kbps_runs'])}) | {ratio} | "
                f"{r['switches']} ({', '.join(str(x) for x in r['switches_runs'])}) | {r['stalls']} ({', '.join(str(x) for x in r['stalls_runs'])}) | "
                f"{'; '.join(str(x) for x in r['loadavg_runs'])} |\n")
print(open(os.path.join(out, "summary.md")).read())
PY
