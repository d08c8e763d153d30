#!/usr/bin/env python3
"""Interval log of the auto rows: p's path, scores, miss ratios, decisions, and the score's noise.
usage: an.py DIR... (each DIR holds auto-hd/compare.json)"""
import glob, json, os, statistics as st, sys

def rows(d):
    for cj in glob.glob(os.path.join(d, "auto-hd", "*", "capacity.json")):
        c = json.load(open(cj))
        r = c["search"]["points"][-1]["runs"][-1]
        yield os.path.basename(os.path.dirname(cj)), r

def noise(xs):
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return "n<2"
    m = st.mean(xs)
    d = [abs(b - a) for a, b in zip(xs, xs[1:])]
    return f"n={len(xs)} mean {m:.2f} sd {st.stdev(xs):.2f} cv {st.stdev(xs)/m:.2f} min {min(xs):.2f} max {max(xs):.2f} median |step-to-step| {st.median(d):.2f}"

for d in sys.argv[1:]:
    for name, r in rows(d):
        x = r["extra"]
        a = x["server_stats_after"].get("prefetch_auto")
        if not a or not a.get("log"):
            continue
        print(f"== {d} {name}")
        print(f"   intervals {a['intervals']} decisions {a['by_decision']} final p {a['current_bytes']/2**20:.1f} MiB")
        print("   t_s    p MiB  target  score  mspt  miss   busy  evict/req  decision")
        for e in a["log"]:
            print(f"   {e['t_s']:6.1f} {e['p']/2**20:5.1f} {e['target']/2**20:6.1f}  "
                  f"{(e.get('score') or float('nan')):5.2f} {(e.get('mspt') or float('nan')):5.2f} "
                  f"{(e.get('miss_ratio') or float('nan')):5.2f} {e['busy']:5.2f}  {e['evicted_ratio']:6.3f}     {e.get('decision')}")
        path = [round(e["p"] / 2**20, 1) for e in a["log"]] + [round(a["current_bytes"] / 2**20, 1)]
        print("   p path:", " -> ".join(f"{p:g}" for p in path))
        log = a["log"][1:]  # the first interval includes the cold start
        print("   score:", noise([e.get("score") for e in log]))
        print("   miss :", noise([e.get("miss_ratio") for e in log]))
        print("   mspt :", noise([e.get("mspt") for e in log]))
        byp = {}
        for e in log:
            if e.get("score") is not None:
                byp.setdefault(e["p"], []).append(e["score"])
        sp = [f"{p/2**20:g}M: " + "/".join(f"{s:.2f}" for s in v) for p, v in sorted(byp.items()) if len(v) > 1]
        print("   scores at the same p:", "; ".join(sp) or "none repeated")
        print("   stored scores:", ", ".join(f"{s['bytes']/2**20:g}M {s['score']:.2f}" for s in a.get("scores", [])))
