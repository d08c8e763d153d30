#!/usr/bin/env python3
"""Client request-time medians per cell across the quick runs of 2026-11-23.
usage: across.py DIR_RUN1 DIR_RUN2 DIR_RUN3 [DIR_H1_H2F_RUN2]
Prints markdown: per variant and server, run 1 / run 2 / run 3 and their median (of two
runs: the mean of both), for video and audio client medians."""
import json, os, statistics, sys

def load(d):
    p = os.path.join(d, "results.json")
    if not os.path.exists(p):
        return {}
    return {(r["server"], r["variant"]): r for r in json.load(open(p))}

r1, r2, r3 = (load(d) for d in sys.argv[1:4])
r4 = load(sys.argv[4]) if len(sys.argv) > 4 else {}
servers = ["nghttpx", "nginx", "vodlab"]
variants = ["h1", "h2c", "https", "h2", "h2-R", "h2-F"]

def series(s, v, key):
    out = []
    for run in ((r1, r2, r3) if v not in ("h1", "h2-F") else (r1, r4)):
        r = run.get((s, v))
        out.append(None if r is None else r[key]["median_ms"])
    return out

def fmt(x, nd=1):
    return "–" if x is None else "%.*f" % (nd, x)

for key in ("video_client", "audio_client"):
    nd = 1 if key.startswith("video") else 2
    print("\n%s, ms: run 1 / run 2 / run 3 → **median of runs** (spread max/min)\n" % key)
    print("| variant | " + " | ".join("nghttpx" if s == "nghttpx" else ("vodlab serve" if s == "vodlab" else s) for s in servers) + " |")
    print("|---|" + "---|" * len(servers))
    for v in variants:
        cells = []
        for s in servers:
            xs = series(s, v, key)
            got = [x for x in xs if x is not None]
            if not got:
                cells.append("–")
                continue
            m = statistics.median(got)
            spread = max(got) / min(got) if min(got) > 0 else float("nan")
            cells.append("%s → **%s** (%.2f×)" % (" / ".join(fmt(x, nd) for x in xs), fmt(m, nd), spread))
        print("| %s | %s |" % (v, " | ".join(cells)))
# orderings per run (video), for the text
print()
for key in ("video_client", "audio_client"):
    for s in servers:
        for i, run in enumerate((r1, r2, r3), 1):
            xs = {v: run[(s, v)][key]["median_ms"] for v in ("h2c", "https", "h2", "h2-R") if (s, v) in run}
            if len(xs) == 4:
                order = " < ".join(sorted(xs, key=xs.get))
                print("%s %s run %d: %s   h2-R/h2 = %.2f" % (key, s, i, order, xs["h2-R"] / xs["h2"]))
