#!/usr/bin/env python3
"""Tables of scripts/experiments/ch3-disk.sh: each round's failure-free rate per server (the
thesis's additive steps: the last passing step below the first failing one), their mean with a
95 % interval over the rounds (Student's t), ASAP's rate over each other server's per round and
its mean and interval, and each server's drive figures at its failure-free rate (medians over
the rounds) beside the thesis's Table 3.7. A round whose run at a server's answer or first
failure had an INVALID client is flagged and left out. Usage: ch3-disk-table.py DIR"""
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from points import points  # noqa: E402

# Student's t, two-sided 95 %, by degrees of freedom
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
# thesis Table 3.7 (2 MB chunks, every server at 35 chunks/s): MB/s, KB per read, ms per read,
# busy % (copied into docs/experiments.md, "youtube-2011-2mb beside thesis Table 3.7")
THESIS = {"vodlab-asap": (42.7, 112.4, 2.3, 90), "vodlab-vanilla": (23.9, 88.1, 3.6, 100),
          "nginx": (19.9, 87.4, 4.3, 100), "apache2": (17.2, 39.3, 2.2, 100)}
# the thesis has that table for 2 MB chunk files only
if os.environ.get("PRESET", "youtube-2011-2mb") != "youtube-2011-2mb":
    THESIS = {}

root = sys.argv[1] if len(sys.argv) > 1 else "."


def interval(xs):
    m = statistics.mean(xs)
    if len(xs) < 2:
        return m, None
    return m, T95.get(len(xs) - 1, 1.96) * statistics.stdev(xs) / len(xs) ** 0.5


def fmt(m, h, digits=1):
    return "%.*f" % (digits, m) if h is None else "%.*f ± %.*f" % (digits, m, digits, h)


rounds = {}  # round -> server -> dict
for d in sorted(glob.glob(os.path.join(root, "round*"))):
    m = re.match(r"round(\d+)$", os.path.basename(d))
    if not m or not os.path.exists(os.path.join(d, "compare.json")):
        continue
    cmp_ = json.load(open(os.path.join(d, "compare.json")))
    per = {}
    for s in cmp_["servers"]:
        name = s["server"]
        a = s["answer"]
        figs = {}
        valid = True
        for server, rate, _, r, dj in points(d):
            if server != name:
                continue
            if rate in (a["capacity"], a["lowest_failed"]) and not r["valid"]:
                valid = False
            if rate == a["capacity"]:
                dv = dj["derived"]
                figs = {"mb_s": dv["throughput_mb_s"], "kib": dv["mean_read_bytes"] / 1024,
                        "ms": dv["mean_service_ms"], "busy": 100 * dv["busy_fraction"]}
        per[name] = {"capacity": a["capacity"], "failed_at": a["lowest_failed"],
                     "ending": a["ending"], "valid": valid, "figs": figs}
    rounds[int(m.group(1))] = per

servers = []
for per in rounds.values():
    for s in per:
        if s not in servers:
            servers.append(s)

print("Failure-free rate per round, sessions/s (first failing step in brackets):\n")
print("| server | " + " | ".join("round %d" % r for r in sorted(rounds)) + " | mean ± 95 % |")
print("|---" * (len(rounds) + 2) + "|")
for s in servers:
    cells, xs = [], []
    for r in sorted(rounds):
        x = rounds[r].get(s)
        if x is None:
            cells.append("—")
            continue
        c = x["capacity"] if x["capacity"] is not None else 0.0
        cell = "%g (%s)" % (c, "%g" % x["failed_at"] if x["failed_at"] is not None else "none")
        if not x["valid"]:
            cell += " INVALID"
        else:
            xs.append(c)
        cells.append(cell)
    print("| %s | %s | %s |" % (s, " | ".join(cells), fmt(*interval(xs)) if xs else "—"))

if "vodlab-asap" in servers:
    print("\nvodlab-asap's failure-free rate over each server's, per round and mean ± 95 %:\n")
    print("| server | " + " | ".join("round %d" % r for r in sorted(rounds)) + " | mean ± 95 % |")
    print("|---" * (len(rounds) + 2) + "|")
    for s in servers:
        if s == "vodlab-asap":
            continue
        cells, xs = [], []
        for r in sorted(rounds):
            a, b = rounds[r].get("vodlab-asap"), rounds[r].get(s)
            if not a or not b or not a["valid"] or not b["valid"] or not b["capacity"]:
                cells.append("—")
                continue
            q = (a["capacity"] or 0.0) / b["capacity"]
            xs.append(q)
            cells.append("%.2f" % q)
        print("| %s | %s | %s |" % (s, " | ".join(cells), fmt(*interval(xs), digits=2) if xs else "—"))

print("\nAt each server's failure-free rate (medians over the valid rounds; drive figures in model "
      "time) beside thesis Table 3.7:\n")
print("| server | drive MB/s | mean read KiB | ms per read | busy % | thesis MB/s | thesis KB per read "
      "| thesis ms per read | thesis busy % |")
print("|---" * 9 + "|")
for s in servers:
    fs = [rounds[r][s]["figs"] for r in rounds if s in rounds[r] and rounds[r][s]["valid"]
          and rounds[r][s]["figs"]]
    med = lambda k: statistics.median(f[k] for f in fs) if fs else float("nan")
    t = THESIS.get(s, ("—",) * 4)
    print("| %s | %.1f | %.0f | %.2f | %.0f | %s | %s | %s | %s |" % (
        s, med("mb_s"), med("kib"), med("ms"), med("busy"), *t))
