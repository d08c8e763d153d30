#!/usr/bin/env python3
"""Table of scripts/experiments/time-compression-disk.sh's runs: one row per (rate, k, server,
repeat) in nominal units (a point's results.json is in wall-clock time: times x k, rates / k; the
drive's figures are in model time already), then per (rate, server) each k's median beside
k = 1's and the ratio. Usage: time-compression-disk-table.py DIR"""
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from points import points  # noqa: E402

root = sys.argv[1] if len(sys.argv) > 1 else "."
rows = []
for d in sorted(glob.glob(os.path.join(root, "r*-k*"))):
    # r{rate}-k{k} (one compare with --repeats) or r{rate}-k{k}-run{round} (one run each), and
    # the compare's output beside it as .log (the verdict lines)
    m = re.match(r"r[0-9.]+-k([0-9.]+)(?:-run(\d+))?$", os.path.basename(d))
    if not m or not os.path.isdir(d):
        continue
    k = float(m.group(1))
    round_ = int(m.group(2)) if m.group(2) else None
    verdicts = {}
    lines = open(d + ".log").readlines() if os.path.exists(d + ".log") else []
    for line in lines:
        v = re.match(r"\s*(\S+)\s+rate ([0-9.]+)/s run (\d+)/\d+: .*\| (\d+) sessions, (\d+) "
                     r"failed, (\d+) unfinished, .*\| client (.*)$", line)
        if v:
            verdicts[(v.group(1), float(v.group(2)), int(v.group(3)))] = (
                int(v.group(5)) == 0 and int(v.group(6)) == 0 and v.group(7).strip() == "ok")
    for server, rate, point_run, r, dj in points(d):
        run = round_ or point_run
        dk, dv = dj["disk"], dj["derived"]
        rows.append({
            "rate": rate, "k": k, "server": server, "run": run,
            # the thesis's rule on each run (the script's compare criterion only lets every
            # repeat run): no failed session, none unfinished, a valid client
            "verdict": {True: "PASS", False: "FAIL"}[verdicts.get(
                (server, rate, point_run),
                # without the compare's log: the run's own figures
                r["failed_sessions"] == 0 and r["stopped_by"] == "finished" and r["valid"])],
            "late_pct": 100 * dv.get("reply_late_share", float("nan")),
            "valid": r["valid"],
            "failed": r["failed_sessions"],
            "sessions": r["started_sessions"],
            "wall_s": r["duration_s"],
            "delivered": r["throughput_bytes_per_s"] / 1e6 / k,
            "drive_mb_s": dv["throughput_mb_s"],
            "read_kib": dv["mean_read_bytes"] / 1024,
            "ms_read": dv["mean_service_ms"],
            "busy": 100 * dv["busy_fraction"],
            "resp_ms": dk["response_us"]["mean_us"] / 1000,
            "seeks": dk["seeks"],
            "startup_p95": r["startup_delay_s"]["p95"] * k,
            "resp_p50": r["response_time_ms"]["p50"] * k,
            "resp_p99": r["response_time_ms"]["p99"] * k,
        })

COLS = [("delivered", "delivered MB/s", 2), ("drive_mb_s", "drive MB/s", 2),
        ("read_kib", "mean read KiB", 0), ("ms_read", "ms/read", 2), ("busy", "busy %", 1),
        ("resp_ms", "drive response ms", 2), ("seeks", "seeks", 0),
        ("startup_p95", "p95 start-up s", 2), ("resp_p50", "p50 response ms", 0),
        ("resp_p99", "p99 response ms", 0), ("late_pct", "reply late %", 1)]

print("| rate | k | server | run | verdict | client | failed | wall s | "
      + " | ".join(c[1] for c in COLS) + " |")
print("|---" * (8 + len(COLS)) + "|")
for x in sorted(rows, key=lambda x: (x["rate"], x["server"], x["k"], x["run"])):
    print("| %g | %g | %s | %d | %s | %s | %d/%d | %.0f | " % (
        x["rate"], x["k"], x["server"], x["run"], x["verdict"],
        "ok" if x["valid"] else "INVALID", x["failed"], x["sessions"], x["wall_s"])
        + " | ".join("%.*f" % (c[2], x[c[0]]) for c in COLS) + " |")

print()
print("Medians over the valid runs; in brackets the ratio to k = 1's median.")
print()
print("| rate | server | k | runs | verdicts | failed | " + " | ".join(c[1] for c in COLS) + " |")
print("|---" * (6 + len(COLS)) + "|")
groups = {}
for x in rows:
    if x["valid"]:
        groups.setdefault((x["rate"], x["server"], x["k"]), []).append(x)
for (rate, server, k) in sorted(groups):
    g = groups[(rate, server, k)]
    base = groups.get((rate, server, 1.0))
    cells = []
    for c in COLS:
        med = statistics.median(x[c[0]] for x in g)
        cell = "%.*f" % (c[2], med)
        if base and k != 1.0:
            b = statistics.median(x[c[0]] for x in base)
            if b:
                cell += " (%.2f)" % (med / b)
        cells.append(cell)
    print("| %g | %s | %g | %d | %s | %s | " % (
        rate, server, k, len(g), " ".join(x["verdict"] for x in sorted(g, key=lambda x: x["run"])),
        ", ".join(str(x["failed"]) for x in sorted(g, key=lambda x: x["run"])))
        + " | ".join(cells) + " |")
