#!/usr/bin/env python3
"""Extract the compact Sabre oracle (oracle.json) from Sabre's results.jsonl.

Usage: python3 extract_oracle.py /path/to/results.jsonl > oracle.json

For each (algorithm, trace) of the throughput, bola, dynamic, bolae and
dynamicdash runs it keeps the quality of each of the 199 completed segments
(play order), Sabre's total stall time in ms, its stall count ignoring float
noise, and the number of abandoned attempts.
"""
import json
import sys

KEEP = ("throughput", "bola", "dynamic", "bolae", "dynamicdash")
out = {}
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line)
        if r["algorithm"] not in KEEP:
            continue
        s = r["summary"]
        out.setdefault(r["algorithm"], {})[r["trace"]] = {
            "qualities": [seg["quality"] for seg in r["segments"]],
            "rebuffer_ms": s["rebuffer_time_s"] * 1000.0,
            "rebuffer_events": s["rebuffer_events_ignoring_float_noise"],
            "abandoned": s["abandoned_downloads"],
        }
json.dump(out, sys.stdout, separators=(",", ":"), sort_keys=True)
sys.stdout.write("\n")
