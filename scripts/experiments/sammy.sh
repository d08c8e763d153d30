#!/usr/bin/env bash
# Sammy at load (issue "Players and servers that talk", item 4): closed-loop
# DASH players and one competing bulk TCP flow share a kernel-shaped
# bottleneck (the network lab's htb on the server's egress); `vodlab serve`
# paces the players' segments by one policy per run:
#
#   off        unpaced (as fast as TCP and the bottleneck allow)
#   sammy      --pace-policy sammy: 3x the ladder's top bit rate (CMCD tb)
#              with an empty buffer, falling with CMCD bl to 1.5x at 12 s
#   fixed:K    --pace-policy fixed:K: K x the segment's own bit rate (br)
#
# Per run:
#   - chunk throughput: each media segment's body bytes over the server's
#     service time (access log: head parsed to last byte written), i.e.
#     bytes / time while sending; median and mean over the run's segments;
#     and the client's view, a segment's nominal size (bit rate x 4 s) over
#     its download time (players' timelines);
#   - the competing flow: the mean rate of curl's download of a large file
#     from client host 1 over the run (the server's access-log line: bytes
#     over service time), and ping's RTT from that host to the server
#     (the bottleneck queue's delay: the replies queue in the server's
#     egress with the video and the bulk flow);
#   - the players' QoE (results.json's players section): mean bit rate,
#     rebuffering, start-up delay, switches.
# Each policy runs REPS times (interleaved: policy order rotates per rep);
# the summary gives the median and the range over reps, and each policy's
# chunk throughput and QoE against `off` measured in the same rep: the
# median of those ratios, and their mean with a 95 % t-interval over the
# reps (Student's t, n - 1 degrees of freedom; the rep is the unit: a
# rep's policies ran back to back on one machine state).
#
#   scripts/experiments/sammy.sh [OUT_DIR]
#   env: VODLAB (target/release/vodlab), BOTTLENECK (50mbit), PLAYERS (4),
#        SEGMENTS (15 per player: 60 s of content), ABR (dynamic),
#        POLICIES ("off sammy fixed:1.5 fixed:3"), REPS (3), LAB (sammy),
#        SUMMARY_ONLY=1 (no runs: summarise the runs already in OUT_DIR)
#
# Needs root (network namespaces), iproute2, curl, ping (iputils-ping) and
# python3 (the summary). Everything runs inside the lab; it is removed at
# the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-target/experiments/sammy}
VODLAB=${VODLAB:-target/release/vodlab}
BOTTLENECK=${BOTTLENECK:-50mbit}
PLAYERS=${PLAYERS:-4}
SEGMENTS=${SEGMENTS:-15}
ABR=${ABR:-dynamic}
POLICIES=${POLICIES:-"off sammy fixed:1.5 fixed:3"}
REPS=${REPS:-3}
LAB=${LAB:-sammy}
summarise() {
  python3 - "$OUT" $POLICIES <<'EOF' | tee "$OUT/summary.txt"
import gzip, json, os, re, statistics, sys
out, pols = sys.argv[1], sys.argv[2:]
def runs(pol):
    return sorted(d for d in os.listdir(out) if d.startswith(pol.replace(":", "-") + "-r"))
def lines(path):
    # the committed runs keep their logs gzipped
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        return gzip.open(path + ".gz", "rt")
    return open(path)
def one(d):
    p = os.path.join(out, d)
    tput = []
    for line in lines(os.path.join(p, "access.log")):
        f = line.split()
        if len(f) >= 9 and f[3].endswith(".m4s") and f[6] in ("200", "206") and int(f[8]) > 0:
            tput.append(int(f[7]) * 8 / (int(f[8]) / 1e6) / 1e6)  # Mbit/s while sending
    # the bulk flow's line (written when curl is stopped): bytes over service time
    bulk = []
    for line in lines(os.path.join(p, "access.log")):
        f = line.split()
        if len(f) >= 9 and f[3] == "/bulk.bin" and int(f[8]) > 0:
            bulk = [int(f[7]) / (int(f[8]) / 1e6)]
    rtts = [float(m) for m in re.findall(r"time=([0-9.]+) ms", open(os.path.join(p, "ping.txt")).read())]
    r = json.loads("".join(lines(os.path.join(p, "run", "results.json"))))
    # the client's view: a segment's nominal size (bit rate x 4 s) over its
    # download time (request to last byte), media segments after the first
    ctput = [seg["bitrate_kbps"] * 4 / seg["download_ms"]
             for t in (r.get("players") or {}).get("timelines") or []
             for seg in t["segments"][1:] if seg["download_ms"] > 0]
    o = (r.get("players") or {}).get("overall") or {}
    n = max(1, o.get("sessions", 0))
    q = {
        "mean_bitrate_kbps": (o.get("mean_bitrate_kbps") or {}).get("mean"),
        "rebuffer_s": o.get("rebuffer_time_s"),
        "rebuffer_events": o.get("rebuffer_events"),
        "startup_ms_mean": (o.get("startup_delay_ms") or {}).get("mean"),
        "switches_per_session": (o.get("switches_up_total", 0) + o.get("switches_down_total", 0)) / n,
        "failed_sessions": o.get("failed"),
    }
    return {
        "chunk_mbps_median": statistics.median(tput) if tput else float("nan"),
        "chunk_mbps_mean": statistics.mean(tput) if tput else float("nan"),
        "client_chunk_mbps_median": statistics.median(ctput) if ctput else float("nan"),
        "segments": len(tput),
        "bulk_mbps": bulk[0] * 8 / 1e6 if bulk else float("nan"),
        "rtt_ms_median": statistics.median(rtts) if rtts else float("nan"),
        "rtt_ms_p95": sorted(rtts)[int(len(rtts) * 0.95)] if rtts else float("nan"),
        **q,
    }
res = {pol: [one(d) for d in runs(pol)] for pol in pols}
json.dump(res, open(os.path.join(out, "summary.json"), "w"), indent=1)
keys = ["chunk_mbps_median", "client_chunk_mbps_median", "bulk_mbps", "rtt_ms_median", "rtt_ms_p95", "mean_bitrate_kbps",
        "rebuffer_s", "startup_ms_mean", "switches_per_session", "failed_sessions"]
def med(v):
    v = [x for x in v if isinstance(x, (int, float))]
    return (statistics.median(v), min(v), max(v)) if v else None
print("policy      " + "  ".join("%-22s" % k for k in keys))
for pol in pols:
    cells = []
    for k in keys:
        m = med([r.get(k) for r in res[pol]])
        cells.append("%-22s" % ("-" if m is None else "%.3g (%.3g-%.3g)" % m))
    print("%-11s " % pol + "  ".join(cells))
if "off" in res:
    print("\nagainst off in the same rep (ratio, median over reps):")
    for pol in pols:
        if pol == "off":
            continue
        cells = []
        for k in keys:
            v = [a.get(k) / b.get(k) for a, b in zip(res[pol], res["off"])
                 if isinstance(a.get(k), (int, float)) and isinstance(b.get(k), (int, float)) and b.get(k)]
            cells.append("%s %.2f" % (k, statistics.median(v)) if v else "%s -" % k)
        print("  %-10s " % pol + ", ".join(cells))
    # Student's t at 0.975 for 1..10 degrees of freedom
    T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]
    print("\nagainst off in the same rep (ratio, mean and 95 % t-interval over reps):")
    for pol in pols:
        if pol == "off":
            continue
        cells = []
        for k in ["chunk_mbps_median", "client_chunk_mbps_median", "bulk_mbps", "rtt_ms_p95",
                  "mean_bitrate_kbps", "startup_ms_mean", "switches_per_session"]:
            v = [a.get(k) / b.get(k) for a, b in zip(res[pol], res["off"])
                 if isinstance(a.get(k), (int, float)) and isinstance(b.get(k), (int, float)) and b.get(k)]
            if len(v) >= 2:
                m = statistics.mean(v)
                h = T975[min(len(v) - 1, len(T975)) - 1] * statistics.stdev(v) / len(v) ** 0.5
                cells.append("%s %.3f [%.3f, %.3f]" % (k, m, m - h, m + h))
            else:
                cells.append("%s -" % k)
        print("  %-10s " % pol + ", ".join(cells))
EOF
}
if [ -n "${SUMMARY_ONLY:-}" ]; then
  [ -d "$OUT" ] || { echo "sammy.sh: SUMMARY_ONLY: no runs in $OUT" >&2; exit 2; }
  summarise
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "sammy.sh: needs root (network namespaces)" >&2; exit 2; }
for p in curl ping python3; do
  command -v $p >/dev/null || { echo "sammy.sh: needs $p" >&2; exit 2; }
done
[ -x "$VODLAB" ] || cargo build --release -q -p vodlab
WORK=$(mktemp -d /var/tmp/vodlab-sammy.XXXXXX)
spid=""
cleanup() {
  [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
  "$VODLAB" lab down --name "$LAB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$OUT"
V=$WORK/vodlab
cp "$VODLAB" "$V"
SRV=(ip netns exec "vl-$LAB-srv")
C0=(ip netns exec "vl-$LAB-c0")
C1=(ip netns exec "vl-$LAB-c1")

# the workload: dash-vod's ladder and manifests, PLAYERS sessions of 4 titles
"$V" gen --show-preset dash-vod | sed -E 's/ramp_(up|down)_sessions = [0-9]+/ramp_\1_sessions = 0/' >"$WORK/spec.toml"
"$V" gen --spec "$WORK/spec.toml" --seed 1 --sessions "$PLAYERS" --titles 4 -o "$WORK/w" >/dev/null
"$V" fileset create --root "$WORK/root" "$WORK/w" >/dev/null
head -c $((512 << 20)) /dev/zero >"$WORK/root/bulk.bin"
"$V" lab up --name "$LAB" --clients 2 --server-egress "$BOTTLENECK" >/dev/null
echo "# $(date -u +%FT%TZ) sammy.sh: bottleneck $BOTTLENECK (htb, server egress), $PLAYERS $ABR players" \
  "x $SEGMENTS segments, policies: $POLICIES, $REPS reps; load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/README.txt"

run_one() { # policy rep
  local pol=$1 rep=$2 dir="$OUT/${1//:/-}-r$2" args=()
  mkdir -p "$dir"
  [ "$pol" != off ] && args=(--pace-policy "$pol" --pace-burst 0)
  "${SRV[@]}" "$V" serve --root "$WORK/root" --listen 10.77.0.1:8080 --stats-interval 1 \
    --access-log "$dir/access.log" "${args[@]}" 2>"$dir/serve.err" &
  spid=$!
  for _ in $(seq 100); do "${C0[@]}" bash -c 'exec 3<>/dev/tcp/10.77.0.1/8080' 2>/dev/null && break; sleep 0.1; done
  # the competing flow and its RTT, for as long as the players run
  "${C1[@]}" curl -s -o /dev/null --max-time 600 http://10.77.0.1:8080/bulk.bin &
  local cpid=$!
  "${C1[@]}" ping -i 0.2 -n 10.77.0.1 >"$dir/ping.txt" 2>&1 &
  local ppid=$!
  sleep 2 # the bulk flow fills the queue first
  "${C0[@]}" "$V" run "$WORK/w" --target http://10.77.0.1:8080 --player dash --abr "$ABR" \
    --allow-remote --rate 2 --arrivals constant --ramp-up 0 --ramp-down 0 --no-shaping --check-bytes 0 \
    --max-segments "$SEGMENTS" --player-timelines "$PLAYERS" --quiet -o "$dir/run" >"$dir/run.txt" 2>&1 || true
  kill -INT "$ppid" 2>/dev/null || true
  kill "$cpid" 2>/dev/null || true
  wait "$ppid" "$cpid" 2>/dev/null || true
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  spid=""
  echo "$pol rep $rep done"
}

set -- $POLICIES
n=$#
for rep in $(seq "$REPS"); do
  # rotate the order so no policy always runs first
  i=0
  for pol in $POLICIES; do order[$(( (i + rep - 1) % n ))]=$pol; i=$((i + 1)); done
  for pol in "${order[@]}"; do run_one "$pol" "$rep"; done
done

summarise
