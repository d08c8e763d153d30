#!/usr/bin/env bash
# Closed-loop DASH players over h2 and h3 on one kernel-shaped link with
# random loss: where each protocol wins as loss grows (issue 29's sweep).
#
# The link is `vodlab lab`'s (docs/lab.md): one client host, htb at each
# rate of RATES toward it (`--client-down`; the kernel here has no netem, so
# the link adds no delay), and `--loss-down PCT` dropping that share of
# every packet toward it at random in the kernel (a classic-BPF program on
# the server link's clsact egress): TCP segments and QUIC datagrams alike,
# so both protocols cross the same link (docs/run.md, "Loss: h3 against
# h2"). `vodlab serve --h3` runs in the server host with a self-signed
# certificate (TCP and UDP on one port); `vodlab run --player dash --abr
# throughput --no-shaping` in the client host (the kernel shapes, nothing
# in-process), PLAYERS players arriving 1 s apart, each playing at most
# SEGMENTS 4 s segments of a `dash-vod` title (6 renditions, 235-5,800
# kbit/s), over `--protocol h2` and `--protocol h3` (`--insecure`: the
# certificate is the server's own, for both).
#
# For each rate in RATES, loss in LOSSES, ROUNDS rounds (the kernel's drops
# are not seeded: rounds differ) and each protocol (innermost, so the two
# protocols of a cell run back to back and a drift of the machine does not
# fall on one of them). Summary (summary.txt, results.json): per (rate,
# loss, protocol) the median over
# rounds, with min-max, of the players' time-average bit rate (kbit/s,
# mean over sessions), rebuffer events per session, rebuffer time per
# session (s) and the median start-up delay (ms).
#
#   scripts/experiments/h3-loss-sweep.sh [VODLAB_BIN]
#   env: LOSSES="0 0.5 1 2" PROTOS="h2 h3" ROUNDS=3 RATES="8mbit 20mbit"
#        PLAYERS=4 SEGMENTS=8 OUT=dir (default experiments/h3-loss-sweep/<date>)
# Needs root (network namespaces); 10-40 s a run.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath "${1:-$here/target/release/vodlab}")
losses=${LOSSES:-"0 0.5 1 2"}
protos=${PROTOS:-"h2 h3"}
rounds=${ROUNDS:-3}
rates=${RATES:-"8mbit 20mbit"}
players=${PLAYERS:-4}
segments=${SEGMENTS:-8}
out=$(realpath -m "${OUT:-$here/experiments/h3-loss-sweep/$(date -u +%Y-%m-%d)}")
[ "$(id -u)" = 0 ] || { echo "h3-loss-sweep.sh: needs root (network namespaces)" >&2; exit 2; }
mkdir -p "$out"
work=$(mktemp -d /tmp/vodlab-h3-loss.XXXXXX)
lab=h3loss
trap 'rm -rf "$work"; "$bin" lab down --name "$lab" >/dev/null 2>&1 || true' EXIT
cp "$bin" "$work/vodlab"; V=$work/vodlab

"$V" gen --preset dash-vod --sessions "$players" --titles 2 --seed 7 -o "$work/w" > "$work/gen.txt" 2>&1
"$V" fileset create "$work/w" --root "$work/set" > "$work/fileset.txt" 2>&1
port=8443
echo "h3-loss-sweep: link ${rates// /, } down, loss ${losses// /, } %, protocols $protos, $rounds round(s), $players players x $segments segments" | tee "$out/summary.txt"
for rate in $rates; do
 for loss in $losses; do
  for r in $(seq "$rounds"); do
    for p in $protos; do
      d=$out/runs/$rate-loss$loss-$p-$r; mkdir -p "$d"
      lossflag=(); [ "$loss" != 0 ] && lossflag=(--loss-down "$loss")
      "$V" lab run --name "$lab" --clients 1 --client-down "$rate" "${lossflag[@]}" --port "$port" \
        --timeout 300 \
        --server "exec $V serve --root $work/set --listen 10.77.0.1:$port --tls-self-signed --h3 --stats-interval 0" \
        --client "exec $V run $work/w --target https://\$VODLAB_LAB_SERVER:$port --allow-remote --protocol $p --insecure \
          --rate 1 --arrivals constant --ramp-up 0 --ramp-down 0 --no-shaping --check-bytes 0 \
          --player dash --abr throughput --max-segments $segments --late-threshold-ms 1000 --quiet -o $d" \
        > "$d/lab.out" 2>&1 || echo "$rate loss $loss $p round $r: lab run exited $? (see $d/lab.out)" | tee -a "$out/summary.txt"
      echo "$rate loss $loss % $p round $r done" >&2
    done
  done
 done
done

python3 - "$out" <<'EOF' | tee -a "$out/summary.txt"
import glob, gzip, json, os, statistics, sys
out = sys.argv[1]
def opened(path):
    # a run's results are kept gzipped once analysed
    return gzip.open(path + ".gz", "rt") if os.path.exists(path + ".gz") else open(path)
cells = {}
for d in sorted(glob.glob(os.path.join(out, "runs", "*"))):
    name = os.path.basename(d)
    rate, loss, p, r = name.split("-")
    loss = loss[len("loss"):]
    try:
        res = json.load(opened(os.path.join(d, "results.json")))
    except (OSError, ValueError):
        continue
    o = (res.get("players") or {}).get("overall")
    if not o or not o.get("sessions"):
        continue
    n = o["sessions"]
    cells.setdefault((int(rate[:-4]), float(loss), p), []).append({
        "bitrate_kbps": o["time_average_bitrate_kbps"]["mean"],
        "rebuffers_per_session": o["rebuffer_events"] / n,
        "rebuffer_s_per_session": o["rebuffer_time_s"] / n,
        "startup_ms": o["startup_delay_ms"]["p50"],
        "failed": o["failed"],
        "sessions": n,
    })
def med(rows, k):
    v = [x[k] for x in rows]
    return {"median": statistics.median(v), "min": min(v), "max": max(v)}
res = []
print("\nper (link, loss, protocol): median over rounds [min-max]")
print("%-7s %-6s %-5s %6s %26s %22s %24s %24s" % ("Mbit/s", "loss %", "proto", "rounds", "bit rate kbit/s", "rebuffers/session", "rebuffer s/session", "start-up ms (p50)"))
for (mbit, loss, p), rows in sorted(cells.items()):
    e = {"link_mbit_s": mbit, "loss_pct": loss, "protocol": p, "rounds": len(rows),
         "failed_sessions": sum(x["failed"] for x in rows)}
    line = "%-7d %-6g %-5s %6d" % (mbit, loss, p, len(rows))
    for k, w in (("bitrate_kbps", 26), ("rebuffers_per_session", 22), ("rebuffer_s_per_session", 24), ("startup_ms", 24)):
        m = med(rows, k); e[k] = m
        line += (" %" + str(w) + "s") % ("%.2f [%.2f-%.2f]" % (m["median"], m["min"], m["max"]))
    res.append(e)
    print(line)
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=1)
EOF
# keep the runs small: results.json gzipped (the analysis above reads either)
for d in "$out"/runs/*/; do
  rm -f "$d/metrics.json"
  [ -f "$d/results.json" ] && gzip -9f "$d/results.json"
done
echo "results in $out"
