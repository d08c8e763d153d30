#!/usr/bin/env bash
# A soak of `vodlab serve` (not run by CI; docs/serve.md, "Soak"): for
# --minutes (default 60), on loopback, benign clients throughout (paced
# scripted viewers and closed-loop DASH players, `vodlab run`), attacks
# switched on and off every --period seconds (slowloris, slow readers,
# HTTP/2 floods, then all three), one server restart at the middle; the
# server's RSS, descriptors, threads and CPU sampled every --sample seconds.
# Writes samples.csv, phases.csv (benign QoE per phase), summary.txt (min,
# max and slope of RSS and descriptors over the last half) and soak.html
# (SVG plots) into --out (default target/soak/<time>).
#
#   scripts/soak.sh                                # one hour
#   nice -n 19 scripts/soak.sh --minutes 5         # a 5-minute smoke run
#   scripts/soak.sh --minutes 120 --period 300 --slowloris 2000 --out /tmp/soak
#   scripts/soak.sh --help                         # every option
#
# Needs a release build (cargo build --release -p vodlab; --vodlab PATH picks
# another binary), Debian's python3 with python3-h2 (the floods are
# scripts/h2probe's), and nothing else: the orchestrator (scripts/soak/soak.py)
# and the slowloris / slow-reader attacker (scripts/soak/attack.py) use only
# Python's standard library. Every process it starts is ended by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
[ -x "$py" ] || { echo "soak: needs Debian's /usr/bin/python3 (python3)" >&2; exit 2; }
"$py" -c 'import hpack' 2>/dev/null \
  || { echo "soak: the HTTP/2 floods need python3-h2 (apt-get install python3-h2, or scripts/install-test-deps.sh)" >&2; exit 2; }
exec "$py" scripts/soak/soak.py "$@"
