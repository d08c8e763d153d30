"""The runs of a `vodlab compare` output folder, for the experiments' table scripts."""
import glob
import json
import os
import re


def points(compare_dir):
    """Each point run under COMPARE_DIR/<server>/points/NN-rate-R-run-N/ whose results.json and
    disk.json both read: (server, nominal rate, run number, results, disk), in path order."""
    for p in sorted(glob.glob(os.path.join(compare_dir, "*", "points", "*-run-*"))):
        m = re.search(r"-rate-([0-9.]+)-run-(\d+)$", p)
        if not m:
            continue
        try:
            r = json.load(open(os.path.join(p, "results.json")))
            dj = json.load(open(os.path.join(p, "disk.json")))
        except (OSError, ValueError):
            continue
        yield p.split(os.sep)[-3], float(m.group(1)), int(m.group(2)), r, dj
