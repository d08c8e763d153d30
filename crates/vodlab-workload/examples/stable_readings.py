#!/usr/bin/env python3
"""Mean stable phase of a netflix plan under several readings of the thesis's
rule (docs/workload-spec.md, "Re-checked (2026-11-23)").

Usage: cargo run --release -p vodlab-workload --example netflix_plan -- csv SPEC plan.csv
       python3 crates/vodlab-workload/examples/stable_readings.py plan.csv

Chains: requests of one session to one file, each starting at the byte after
the previous one and sent within 40 s of it (the plan has no reordering);
a chain lasting > 40 s is long. Prints per reading the long chains and their
mean duration, and the union stretches of overlapping long chains."""
import collections
import csv
import sys

f = sys.argv[1]
by = collections.defaultdict(list)
for r in csv.DictReader(open(f)):
    kind = r['file'].rsplit('/', 1)[1][0]
    by[r['session']].append((float(r['start_s']), float(r['end_s']), r['file'], int(r['offset']), int(r['bytes']), r['form'], kind))
allch = []
for s, rs in by.items():
    rs.sort()
    open_ = {}  # (file, next) -> chain
    chains = []
    for st, en, fi, off, b, form, kind in rs:
        c = open_.pop((fi, off), None)
        if c and st - c['last'] <= 40:
            c['end'] = max(c['end'], en); c['last'] = st; c['bytes'] += b
        else:
            c = dict(start=st, end=en, last=st, bytes=b, kind=kind, form=form, s=s); chains.append(c)
        open_[(fi, off + b)] = c
    allch += chains
def stats(sel, label):
    long = [c for c in allch if sel(c) and c['end'] - c['start'] > 40]
    per = sum(c['end'] - c['start'] for c in long) / len(long)
    # union stretches per session
    st = collections.defaultdict(list)
    for c in long: st[c['s']].append((c['start'], c['end']))
    n = 0; tot = 0
    for s, iv in st.items():
        iv.sort(); a, b = iv[0]
        for x, y in iv[1:]:
            if x <= b: b = max(b, y)
            else: n += 1; tot += b - a; a, b = x, y
        n += 1; tot += b - a
    print(f'{label}: {len(long)} long chains, mean per chain {per:.0f} s; {n} union stretches, mean {tot/n:.0f} s')
stats(lambda c: True, 'all')
stats(lambda c: c['kind'] != 'a', 'no audio')
stats(lambda c: not (c['kind'] == 'v' and c['form'] == 'open'), 'no open video')
stats(lambda c: c['kind'] != 'a' and c['form'] == 'chunk', 'video+combined chunk')
stats(lambda c: c['kind'] != 'a' and not (c['kind'] == 'v' and c['form'] == 'open'), 'no audio, no open video')
