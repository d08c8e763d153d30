#!/usr/bin/env bash
# dash.js in Chromium against `vodlab run --player dash` on the SAME
# kernel-shaped link (issue 17, "Against the real player"; docs/record.md,
# "dash.js vs vodlab on one kernel-shaped link"). Needs root (network
# namespaces), ffmpeg, chromium, node and the npm cache of
# scripts/install-test-deps.sh, python3 (the summary).
#
# One 60 s title of the dash-vod ladder (235-5,800 kbit/s, 4 s segments) is
# encoded as real media (`vodlab fileset create --media real`) and its MPD is
# made VIDEO-ONLY (the audio AdaptationSet removed; the original is kept as
# manifest-av.mpd), because vodlab's players fetch video only: both players
# then fetch the same things. For each link rate R:
#
#   vodlab lab up --clients 1 --client-down R      one client host, its
#                                                  downstream shaped by htb
#                                                  (SHAPE=flow-down: --flow-down R,
#                                                  a class per TCP connection
#                                                  and GSO off on the server)
#   vodlab serve in the lab's server host (10.77.0.1:8080, --io vanilla)
#   dash.js  vodlab record --netns vl-LAB-c0 --target http://10.77.0.1:8080
#            (Chromium in the client host; its own emulation off), defaults
#            of dash.js 4.7.4 unless DASHJS_SETTINGS is given
#   vodlab   ip netns exec vl-LAB-c0 vodlab run --no-shaping --player dash
#            --abr RULE --max-buffer MAXBUF (for each RULE in RULES), and
#            --player-profile P (for each P in PROFILES)
#   vodlab lab down
#
# The summary (OUT/summary.json, OUT/summary.csv, a table on stdout) gives per
# link and player: the mean nominal bit rate of the played video segments
# (for dash.js the last rendition fetched for each segment: it replaces
# buffered segments after an up-switch), the same over the segments both
# played, stalls, switches (changes of rendition between consecutive played
# segments), start-up, the load average when the link's runs began
# (OUT/LINK/loadavg), and the renditions in play order.
#
#   scripts/experiments/dashjs-compare.sh [OUT_DIR]
#
# Environment: VODLAB (binary, default target/release/vodlab), LINKS (tc
# rates, default "1mbit 3.5mbit 10mbit"), RULES (default "dynamic"), MAXBUF
# (vodlab's --max-buffer, default 16: a request starts with at most 12 s
# buffered, dash.js 4.7.4's stableBufferTime), RECORD_S (seconds dash.js plays,
# default 75), TITLE_S (default 60), DASHJS_SETTINGS (JSON for dash.js's
# updateSettings), SET (reuse an encoded set), LAB (lab name), SHAPE
# (client-down or flow-down), SUMMARY_ONLY=1 (only redo the summary of OUT),
# PROFILES (vodlab player profiles, default none; e.g. "dashjs"), SET_OUT
# (copy the encoded set there for SET in later runs).
#
# Stalls: vodlab counts its rebuffer episodes; for dash.js a stall is a video
# `waiting` after playback started that lasted at least 10 ms (`stalls`);
# `waiting_events` counts every one (Chromium fires sub-millisecond ones).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-target/experiments/dashjs-compare}
VODLAB=${VODLAB:-target/release/vodlab}
LINKS=${LINKS:-"1mbit 3.5mbit 10mbit"}
RULES=${RULES-dynamic}
PROFILES=${PROFILES:-}
MAXBUF=${MAXBUF:-16}
RECORD_S=${RECORD_S:-75}
TITLE_S=${TITLE_S:-60}
DASHJS_SETTINGS=${DASHJS_SETTINGS:-}
LAB=${LAB:-dj$(( $$ % 100000 ))}
SHAPE=${SHAPE:-client-down}
case $SHAPE in client-down|flow-down) ;; *) echo "SHAPE=$SHAPE: client-down or flow-down" >&2; exit 2;; esac
PORT=8080
[ -x "$VODLAB" ] || cargo build --release -q -p vodlab
if [ "${SUMMARY_ONLY:-0}" = 1 ]; then :; else
[ "$(id -u)" = 0 ] || { echo "dashjs-compare.sh: needs root (network namespaces)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/vodlab-dashjs-compare.XXXXXX)
SERVE_PID=
cleanup() {
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
  "$VODLAB" lab down --name "$LAB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
cp "$VODLAB" "$WORK/vodlab"; V=$WORK/vodlab
mkdir -p "$OUT"

# the workload: one title of TITLE_S seconds, the dash-vod ladder, one viewer
# who watches it all
python3 "$(dirname "$0")/one-title-spec.py" "$TITLE_S" dashjs-compare > "$WORK/spec.toml"
"$V" gen --spec "$WORK/spec.toml" -o "$WORK/w" >/dev/null
if [ -n "${SET:-}" ]; then
  cp -r "$SET" "$WORK/set"
else
  "$V" fileset create "$WORK/w" --root "$WORK/set" --media real
fi
[ -n "${SET_OUT:-}" ] && [ ! -e "$SET_OUT" ] && cp -r "$WORK/set" "$SET_OUT"
MPD=$WORK/set/t00000/manifest.mpd
[ -f "$WORK/set/t00000/manifest-av.mpd" ] || cp "$MPD" "$WORK/set/t00000/manifest-av.mpd"
python3 - "$WORK/set/t00000/manifest-av.mpd" "$MPD" <<'EOF'
import re, sys
s = open(sys.argv[1]).read()
v, n = re.subn(r'<AdaptationSet[^>]*contentType="audio".*?</AdaptationSet>', '', s, flags=re.S)
assert n == 1, "no audio AdaptationSet"
open(sys.argv[2], "w").write(v)
EOF
cp "$MPD" "$OUT/manifest-video-only.mpd"

for link in $LINKS; do
  echo "== $link"
  mkdir -p "$OUT/$link"
  cut -d' ' -f1-3 /proc/loadavg > "$OUT/$link/loadavg"
  "$V" lab up --name "$LAB" --clients 1 "--$SHAPE" "$link" >/dev/null
  ip netns exec "vl-$LAB-srv" "$V" serve --root "$WORK/set" --listen "10.77.0.1:$PORT" --io vanilla \
    > "$WORK/serve-$link.log" 2>&1 &
  SERVE_PID=$!
  for _ in $(seq 100); do
    ip netns exec "vl-$LAB-c0" curl -s -o /dev/null "http://10.77.0.1:$PORT/t00000/manifest.mpd" && break
    sleep 0.1
  done
  rec=(--netns "vl-$LAB-c0" --target "http://10.77.0.1:$PORT" --manifest /t00000/manifest.mpd
       --seconds "$RECORD_S" -o "$OUT/$link/dashjs")
  [ -n "$DASHJS_SETTINGS" ] && rec+=(--player-settings "$DASHJS_SETTINGS")
  "$V" record "${rec[@]}"
  rm -f "$OUT/$link/dashjs/raw.json"   # the rest holds what the summary needs
  for rule in $RULES; do
    ip netns exec "vl-$LAB-c0" "$V" run "$WORK/w" --target "http://10.77.0.1:$PORT" --allow-remote \
      --no-shaping --rate 1 --player dash --abr "$rule" --max-buffer "$MAXBUF" --p1203 --quiet \
      -o "$WORK/vodlab-$link-$rule" > "$WORK/run-$link-$rule.txt"
    mkdir -p "$OUT/$link/vodlab-$rule"
    cp "$WORK/vodlab-$link-$rule/p1203/0.json" "$OUT/$link/vodlab-$rule/p1203.json"
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); json.dump(r["players"], open(sys.argv[2],"w"), indent=1)' \
      "$WORK/vodlab-$link-$rule/results.json" "$OUT/$link/vodlab-$rule/players.json"
  done
  for prof in $PROFILES; do
    ip netns exec "vl-$LAB-c0" "$V" run "$WORK/w" --target "http://10.77.0.1:$PORT" --allow-remote \
      --no-shaping --rate 1 --player dash --player-profile "$prof" --p1203 --quiet \
      -o "$WORK/vodlab-$link-profile-$prof" > "$WORK/run-$link-profile-$prof.txt"
    mkdir -p "$OUT/$link/vodlab-profile-$prof"
    cp "$WORK/vodlab-$link-profile-$prof/p1203/0.json" "$OUT/$link/vodlab-profile-$prof/p1203.json"
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); json.dump(r["players"], open(sys.argv[2],"w"), indent=1)' \
      "$WORK/vodlab-$link-profile-$prof/results.json" "$OUT/$link/vodlab-profile-$prof/players.json"
  done
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true; SERVE_PID=
  "$V" lab down --name "$LAB" >/dev/null
done
fi

python3 - "$OUT" "$LINKS" "$RULES" "$MAXBUF" "$DASHJS_SETTINGS" "$SHAPE" "$PROFILES" <<'EOF'
import csv, json, os, re, sys
out, links, rules, maxbuf, settings, shape = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4], sys.argv[5], sys.argv[6]
profiles = sys.argv[7].split()
names = {235: "240p", 750: "384p", 1750: "480p", 3000: "720p", 4300: "1080p", 5800: "1080p-hi"}
rep_rate = {v: k for k, v in names.items()}
def runs(seq):
    out, prev, n = [], None, 0
    for x in seq:
        if x == prev: n += 1
        else:
            if prev is not None: out.append(f"{prev} x{n}" if n > 1 else prev)
            prev, n = x, 1
    if prev is not None: out.append(f"{prev} x{n}" if n > 1 else prev)
    return ", ".join(out)
rows = []
for link in links:
    d = os.path.join(out, link)
    req = json.load(open(os.path.join(d, "dashjs", "requests.json")))
    met = json.load(open(os.path.join(d, "dashjs", "dashjs-metrics.json")))
    played = {}
    fetches = 0
    for r in req["requests"]:
        m = re.match(r"^/t\d+/([^/]+)/(\d+)\.m4s$", r["path"])
        if not m or m.group(1) == "audio": continue
        fetches += 1
        if r.get("failed") or r.get("status") != 200: continue
        played[int(m.group(2))] = m.group(1)
    n = 0
    while n in played: n += 1
    dseq = [played[i] for i in range(n)]
    started = met.get("started_s")
    dash = {"link": link, "player": "dash.js 4.7.4" if not settings else "dash.js 4.7.4 (settings)",
            "segments": n, "renditions": dseq,
            "bitrates_kbps": [rep_rate[x] for x in dseq],
            "stalls": sum(1 for s in met.get("stalls", []) if (s["end_s"] or met["buffer"][-1]["t"]) - s["start_s"] >= 0.01),
            "waiting_events": len(met.get("stalls", [])),
            "stall_s": round(sum((s["end_s"] or met["buffer"][-1]["t"]) - s["start_s"] for s in met.get("stalls", [])), 3),
            "startup_s": round(started - met["t0_s"], 3) if started is not None else None,
            "segment_fetches": fetches,
            "abandoned": sum(1 for r in req["requests"] if r.get("failed") and r["path"].endswith(".m4s"))}
    rows.append(dash)
    runs_ = [(f"vodlab-{rule}", f"vodlab {rule} --max-buffer {maxbuf}") for rule in rules]
    runs_ += [(f"vodlab-profile-{p}", f"vodlab --player-profile {p}") for p in profiles]
    for sub, name in runs_:
        p = json.load(open(os.path.join(d, sub, "p1203.json")))
        pl = json.load(open(os.path.join(d, sub, "players.json")))
        segs = p["I13"]["segments"]
        vrates = [round(s["bitrate"]) for s in segs]
        o = pl["overall"]
        rows.append({"link": link, "player": name,
                     "segments": len(segs), "renditions": [names.get(x, str(x)) for x in vrates],
                     "bitrates_kbps": vrates,
                     "stalls": o["rebuffer_events"], "waiting_events": None, "stall_s": o["rebuffer_time_s"],
                     "startup_s": round(o["startup_delay_ms"]["mean"] / 1000, 3),
                     "segment_fetches": None, "abandoned": o["abandoned"]})
load = {}
for link in links:
    f = os.path.join(out, link, "loadavg")
    load[link] = open(f).read().strip() if os.path.exists(f) else None
for r in rows:
    r["switches"] = sum(1 for a, b in zip(r["renditions"], r["renditions"][1:]) if a != b)
    r["loadavg"] = load[r["link"]]
for link in links:
    group = [r for r in rows if r["link"] == link]
    common = min(r["segments"] for r in group)
    for r in group:
        r["mean_kbps"] = round(sum(r["bitrates_kbps"]) / max(1, r["segments"]), 1)
        r["common_segments"] = common
        r["mean_common_kbps"] = round(sum(r["bitrates_kbps"][:common]) / max(1, common), 1)
    base = group[0]["mean_common_kbps"]
    for r in group:
        r["ratio_to_dashjs"] = round(r["mean_common_kbps"] / base, 3) if base else None
json.dump({"links": links, "shape": shape, "rules": rules, "profiles": profiles, "max_buffer_s": float(maxbuf),
           "dashjs_settings": json.loads(settings) if settings else None, "rows": rows},
          open(os.path.join(out, "summary.json"), "w"), indent=1)
cols = ["link", "player", "segments", "mean_kbps", "common_segments", "mean_common_kbps",
        "ratio_to_dashjs", "switches", "stalls", "waiting_events", "stall_s", "startup_s", "abandoned", "loadavg"]
with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
    w = csv.writer(f); w.writerow(cols + ["renditions"])
    for r in rows: w.writerow([r[c] for c in cols] + [" ".join(r["renditions"])])
print(f"{'link':8} {'player':34} {'segs':>4} {'mean':>7} {'common':>7} {'ratio':>6} {'switch':>6} {'stalls':>6} {'stall_s':>7} {'start':>6}  renditions")
for r in rows:
    print(f"{r['link']:8} {r['player']:34} {r['segments']:4} {r['mean_kbps']:7.0f} {r['mean_common_kbps']:7.0f} {r['ratio_to_dashjs']:6.2f} {r['switches']:6} {r['stalls']:6} {r['stall_s']:7.2f} {str(r['startup_s']):>6}  {runs(r['renditions'])}")
EOF
