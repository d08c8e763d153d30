#!/usr/bin/env python3
"""Tables of scripts/experiments/headline-disk.sh (docs/experiments.md,
"Headline on the emulated disk"), from `vodlab compare --disk` directories:

  scripts/experiments/headline-disk-table.py [--rate R] DIR...
  scripts/experiments/headline-disk-table.py --excerpt POINT_DIR...   (results-summary.json)

First table: each server at its own failure-free rate (compare.json's
at_capacity; drive busy from that point's disk.json). Second table: every
server at one rate R (default 16 sessions/s), as thesis Table 3.7 gives every
server at one request rate (35 chunks/s), from each point's results.json and
disk.json (drive figures in model time)."""
import glob
import json
import os
import sys


def fmt(v, p=1):
    return "" if v is None else f"{v:.{p}f}"


def point(d, server, rate):
    pts = sorted(glob.glob(os.path.join(d, server, "points", f"*-rate-{rate:.4f}-run-1")))
    return pts[-1] if pts else None


def disk(p):
    """The point's drive statistics: disk.json, or the committed copy without
    the histograms (experiments/headline-disk)."""
    for f in ("disk.json", "disk-summary.json"):
        if os.path.exists(os.path.join(p, f)):
            return json.load(open(os.path.join(p, f)))["derived"]
    raise FileNotFoundError(os.path.join(p, "disk.json"))


KEEP = ("valid", "invalid_reasons", "scheduled_sessions", "started_sessions",
        "measured_sessions", "failed_sessions", "throughput_bytes_per_s", "duration_s",
        "errors")


def results(p):
    """The point's client results: results.json, or the committed excerpt
    (results-summary.json: the KEEP keys and the response-time p99)."""
    f = os.path.join(p, "results.json")
    if os.path.exists(f):
        return json.load(open(f))
    return json.load(open(os.path.join(p, "results-summary.json")))


def at_capacity(d):
    c = json.load(open(os.path.join(d, "compare.json")))
    bound = (c.get("seqread") or {}).get("mb_s")
    print(f"\n{os.path.basename(d.rstrip('/'))}: sequential bound {fmt(bound)} MB/s\n")
    ng = next((s for s in c["servers"] if s["server"] == "nginx"), None)
    ngc = ng and ng["answer"].get("capacity")
    print("| server | failure-free sessions/s | × nginx | delivered MB/s | disk MB/s "
          "| % of seqread | mean read KiB | ms per read | drive busy | disk MB/s at overload |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in c["servers"]:
        a, k = s["answer"], s["at_capacity"] or {}
        cap, lf = a.get("capacity"), a.get("lowest_failed")
        if cap is None:
            capt = "none"
        elif a.get("ending") == "above_max_rate":
            capt = f"≥ {cap:g} (highest rate)"
        elif a.get("ending") == "client_limited":
            capt = f"≥ {cap:g} (INVALID at {a.get('client_limited_at'):g})"
        else:
            capt = f"{cap:g}"
        if lf:
            capt += f", failed at {lf:g}"
        if s.get("error"):
            capt += " (error)"
        busy = ""
        p = point(d, s["server"], cap) if cap else None
        if p:
            busy = f"{100 * disk(p)['busy_fraction']:.0f} %"
        o = s.get("at_overload") or {}
        ov = f"{o['disk_mb_s']:.1f} at {o['rate']:g}/s" if o.get("disk_mb_s") is not None else ""
        x = f"{cap / ngc:.2f}" if cap and ngc else ""
        pct = f"{100 * k['disk_mb_s'] / bound:.0f} %" if k.get("disk_mb_s") and bound else ""
        print(f"| {s['server']} | {capt} | {x} | {fmt(k.get('delivered_mb_s'))} "
              f"| {fmt(k.get('disk_mb_s'))} | {pct} | {fmt(k.get('mean_read_kib'), 0)} "
              f"| {fmt(k.get('device_ms_per_read'), 2)} | {busy} | {ov} |")


def at_rate(d, rate):
    c = json.load(open(os.path.join(d, "compare.json")))
    bound = (c.get("seqread") or {}).get("mb_s")
    print(f"\n{os.path.basename(d.rstrip('/'))}, every server at {rate:g} sessions/s\n")
    print("| server | result | delivered MB/s | disk MB/s | % of seqread | mean read KiB "
          "| ms per read | drive busy | mean queue depth | point length s | response p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for s in c["servers"]:
        p = point(d, s["server"], rate)
        if not p:
            print(f"| {s['server']} | not run | | | | | | | | | |")
            continue
        r = results(p)
        k = disk(p)
        # sessions of the point's window that had not finished at the end
        # of the drain are not in results.json
        unfinished = round(rate * c["window_s"]) - r["measured_sessions"]
        if not r["valid"]:
            res = "INVALID"
        elif r["failed_sessions"] or unfinished > 0:
            res = f"fail ({r['failed_sessions']} failed, {unfinished} unfinished)"
        else:
            res = "pass"
        p99 = (r.get("response_time_ms") or {}).get("p99")
        pct = f"{100 * k['throughput_mb_s'] / bound:.0f} %" if bound else ""
        print(f"| {s['server']} | {res} | {r['throughput_bytes_per_s'] / 1e6:.1f} "
              f"| {k['throughput_mb_s']:.1f} | {pct} | {k['mean_read_bytes'] / 1024:.0f} "
              f"| {k['mean_service_ms']:.2f} | {100 * k['busy_fraction']:.0f} % "
              f"| {k['mean_depth']:.1f} | {r['duration_s']:.0f} | {fmt(p99, 0)} |")


def excerpt(p):
    """Write results-summary.json (KEEP keys, response p99) beside results.json."""
    r = json.load(open(os.path.join(p, "results.json")))
    e = {k: r.get(k) for k in KEEP}
    e["response_time_ms"] = {"p99": (r.get("response_time_ms") or {}).get("p99")}
    json.dump(e, open(os.path.join(p, "results-summary.json"), "w"), indent=1)


def main():
    args, rate = sys.argv[1:], 16.0
    if args[:1] == ["--excerpt"]:
        for p in args[1:]:
            excerpt(p)
        return
    if args[:1] == ["--rate"]:
        rate, args = float(args[1]), args[2:]
    for d in args:
        at_capacity(d)
    for d in args:
        at_rate(d, rate)


if __name__ == "__main__":
    main()
