#!/usr/bin/env bash
# hls.js 1.7.4 in Chromium against `vodlab run --player hls --player-profile
# hlsjs` on the same kernel-shaped links (issue 30, item 6;
# docs/experiments.md "hls.js against --player-profile hlsjs"), the hls.js
# twin of dashjs-profile.sh / dashjs-compare.sh. Needs root (network
# namespaces), ffmpeg, chromium, node and the npm cache of
# scripts/install-test-deps.sh, python3 (the summary).
#
# One 60 s title of the dash-vod ladder (235-5,800 kbit/s, 4 s segments) is
# encoded once as real media (`vodlab fileset create --media real`) and its
# master playlist made VIDEO-ONLY (the audio EXT-X-MEDIA and each variant's
# AUDIO group dropped, BANDWIDTH less the audio's and CODECS without it; the
# original kept as master-av.m3u8), because vodlab's players fetch video
# only: both players then see the same ladder and fetch the same things.
# Then RUNS times, for each link rate R:
#
#   vodlab lab up --clients 1 --client-down R     one client host, htb-shaped
#   vodlab serve in the lab's server host (10.77.0.1:8080, --io vanilla)
#   hls.js   vodlab record --player hls --netns vl-LAB-c0 (Chromium in the
#            client host, its own emulation off), hls.js's defaults
#   vodlab   ip netns exec vl-LAB-c0 vodlab run --no-shaping --player hls
#            --player-profile hlsjs
#   vodlab lab down
#
# OUT/runN/summary.json per run and OUT/summary.{json,md} over the runs: per
# link and player the mean nominal bit rate of the played segments (for
# hls.js the last rendition fetched for each segment: an aborted fragment is
# fetched again), switches (changes of rendition between consecutive played
# segments), stalls (vodlab: its rebuffer events; hls.js: a video `waiting`
# after playback started lasting 10 ms or more), start-up, abandoned
# requests, the load average when the link began, and vodlab's over hls.js's.
#
#   scripts/experiments/hlsjs-profile.sh [OUT_DIR]
#
# Environment: VODLAB (binary, default target/release/vodlab), RUNS (3),
# LINKS (tc rates, default "1mbit 3.5mbit 10mbit"), RECORD_S (seconds hls.js
# plays, 75), TITLE_S (60), HLSJS_SETTINGS (JSON merged into hls.js's
# config), SET (reuse an encoded set), SET_OUT (copy the encoded set there),
# LAB (lab name), SUMMARY_ONLY=1 (only redo the summaries of OUT).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-experiments/hlsjs-profile}
VODLAB=${VODLAB:-target/release/vodlab}
RUNS=${RUNS:-3}
LINKS=${LINKS:-"1mbit 3.5mbit 10mbit"}
RECORD_S=${RECORD_S:-75}
TITLE_S=${TITLE_S:-60}
HLSJS_SETTINGS=${HLSJS_SETTINGS:-}
LAB=${LAB:-hj$(( $$ % 100000 ))}
PORT=8080
[ -x "$VODLAB" ] || cargo build --release -q -p vodlab
if [ "${SUMMARY_ONLY:-0}" != 1 ]; then
[ "$(id -u)" = 0 ] || { echo "hlsjs-profile.sh: needs root (network namespaces)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/vodlab-hlsjs-profile.XXXXXX)
SERVE_PID=
cleanup() {
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
  "$VODLAB" lab down --name "$LAB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
cp "$VODLAB" "$WORK/vodlab"; V=$WORK/vodlab
mkdir -p "$OUT"

# the workload: one title of TITLE_S seconds, the dash-vod ladder, one
# viewer who watches it all (as dashjs-compare.sh)
python3 "$(dirname "$0")/one-title-spec.py" "$TITLE_S" hlsjs-profile > "$WORK/spec.toml"
"$V" gen --spec "$WORK/spec.toml" -o "$WORK/w" >/dev/null
if [ -n "${SET:-}" ]; then
  cp -r "$SET" "$WORK/set"
else
  "$V" fileset create "$WORK/w" --root "$WORK/set" --media real
fi
[ -n "${SET_OUT:-}" ] && [ ! -e "$SET_OUT" ] && cp -r "$WORK/set" "$SET_OUT"
MASTER=$WORK/set/t00000/master.m3u8
[ -f "$WORK/set/t00000/master-av.m3u8" ] || cp "$MASTER" "$WORK/set/t00000/master-av.m3u8"
python3 - "$WORK/set/t00000/master-av.m3u8" "$MASTER" <<'EOF'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
audio = [l for l in lines if l.startswith("#EXT-X-MEDIA:") and "TYPE=AUDIO" in l]
assert len(audio) == 1, "no audio EXT-X-MEDIA"
# the audio bit rate: each variant's BANDWIDTH is its video's plus it; the
# video's is the dash-vod ladder's, lowest first
ladder = [235000, 750000, 1750000, 3000000, 4300000, 5800000]
bws = sorted(int(re.search(r"BANDWIDTH=(\d+)", l).group(1)) for l in lines if l.startswith("#EXT-X-STREAM-INF:"))
extra = {b - v for b, v in zip(bws, ladder)}
assert len(bws) == len(ladder) and len(extra) == 1, (bws, extra)
extra = extra.pop()
out = []
for l in lines:
    if l in audio:
        continue
    if l.startswith("#EXT-X-STREAM-INF:"):
        l = re.sub(r',AUDIO="[^"]*"', "", l)
        l = re.sub(r"BANDWIDTH=(\d+)", lambda m: f"BANDWIDTH={int(m.group(1)) - extra}", l)
        l = re.sub(r'CODECS="([^",]*),[^"]*"', r'CODECS="\1"', l)
    out.append(l)
open(sys.argv[2], "w").write("\n".join(out) + "\n")
EOF
cp "$MASTER" "$OUT/master-video-only.m3u8"

for i in $(seq 1 "$RUNS"); do
  echo "==== run $i of $RUNS ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
  R=$OUT/run$i
  for link in $LINKS; do
    echo "== $link"
    mkdir -p "$R/$link"
    cut -d' ' -f1-3 /proc/loadavg > "$R/$link/loadavg"
    "$V" lab up --name "$LAB" --clients 1 --client-down "$link" >/dev/null
    ip netns exec "vl-$LAB-srv" "$V" serve --root "$WORK/set" --listen "10.77.0.1:$PORT" --io vanilla \
      > "$WORK/serve-$link.log" 2>&1 &
    SERVE_PID=$!
    for _ in $(seq 100); do
      ip netns exec "vl-$LAB-c0" curl -s -o /dev/null "http://10.77.0.1:$PORT/t00000/master.m3u8" && break
      sleep 0.1
    done
    rec=(--player hls --netns "vl-$LAB-c0" --target "http://10.77.0.1:$PORT"
         --manifest /t00000/master.m3u8 --seconds "$RECORD_S" -o "$R/$link/hlsjs")
    [ -n "$HLSJS_SETTINGS" ] && rec+=(--player-settings "$HLSJS_SETTINGS")
    "$V" record "${rec[@]}"
    rm -f "$R/$link/hlsjs/raw.json"   # the rest holds what the summary needs
    ip netns exec "vl-$LAB-c0" "$V" run "$WORK/w" --target "http://10.77.0.1:$PORT" --allow-remote \
      --no-shaping --rate 1 --player hls --player-profile hlsjs --p1203 --player-timelines 1 --quiet \
      -o "$WORK/vodlab-$i-$link" > "$WORK/run-$i-$link.txt"
    mkdir -p "$R/$link/vodlab-profile-hlsjs"
    cp "$WORK/vodlab-$i-$link/p1203/0.json" "$R/$link/vodlab-profile-hlsjs/p1203.json"
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); json.dump(r["players"], open(sys.argv[2],"w"), indent=1)' \
      "$WORK/vodlab-$i-$link/results.json" "$R/$link/vodlab-profile-hlsjs/players.json"
    kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true; SERVE_PID=
    "$V" lab down --name "$LAB" >/dev/null
  done
done
fi

python3 - "$OUT" "$LINKS" <<'EOF'
import glob, json, os, re, statistics, sys
out, links = sys.argv[1], sys.argv[2].split()
names = {235: "240p", 750: "384p", 1750: "480p", 3000: "720p", 4300: "1080p", 5800: "1080p-hi"}
rate = {v: k for k, v in names.items()}
def runs_of(seq):
    res, prev, n = [], None, 0
    for x in seq + [None]:
        if x == prev:
            n += 1
            continue
        if prev is not None:
            res.append(f"{prev} x{n}" if n > 1 else prev)
        prev, n = x, 1
    return ", ".join(res)
def hlsjs_row(d, link):
    req = json.load(open(os.path.join(d, "requests.json")))
    met = json.load(open(os.path.join(d, "hlsjs-metrics.json")))
    played, fetches, aborted = {}, 0, 0
    for r in req["requests"]:
        m = re.match(r"^/t\d+/([^/]+)/(\d+)\.m4s$", r["path"])
        if not m or m.group(1) == "audio":
            continue
        fetches += 1
        if r.get("failed") or r.get("status") != 200:
            aborted += 1
            continue
        played[int(m.group(2))] = m.group(1)
    n = 0
    while n in played:
        n += 1
    seq = [played[i] for i in range(n)]
    end = met["buffer"][-1]["t"] if met["buffer"] else 0
    stalls = [(s["end_s"] or end) - s["start_s"] for s in met.get("stalls", [])]
    started = met.get("started_s")
    return {"link": link, "player": "hls.js 1.7.4", "segments": n, "renditions": seq,
            "bitrates_kbps": [rate[x] for x in seq],
            "stalls": sum(1 for s in stalls if s >= 0.01), "waiting_events": len(stalls),
            "stall_s": round(sum(stalls), 3),
            "startup_s": round(started - met["t0_s"], 3) if started is not None else None,
            "segment_fetches": fetches, "abandoned": aborted,
            "errors": [e["error"] for e in met.get("errors", [])]}
def vodlab_row(d, link):
    p = json.load(open(os.path.join(d, "p1203.json")))
    pl = json.load(open(os.path.join(d, "players.json")))
    vr = [round(s["bitrate"]) for s in p["I13"]["segments"]]
    o = pl["overall"]
    return {"link": link, "player": "vodlab --player-profile hlsjs", "segments": len(vr),
            "renditions": [names.get(x, str(x)) for x in vr], "bitrates_kbps": vr,
            "stalls": o["rebuffer_events"], "waiting_events": None, "stall_s": o["rebuffer_time_s"],
            "startup_s": round(o["startup_delay_ms"]["mean"] / 1000, 3),
            "segment_fetches": None, "abandoned": o["abandoned"], "errors": []}
run_dirs = sorted((d for d in glob.glob(os.path.join(out, "run*")) if os.path.isdir(d)),
                  key=lambda d: int(os.path.basename(d)[3:]))
assert run_dirs, f"no {out}/runN"
per = {}
for rd in run_dirs:
    rows = []
    for link in links:
        d = os.path.join(rd, link)
        if not os.path.isdir(d):
            continue
        load = open(os.path.join(d, "loadavg")).read().strip()
        for r in (hlsjs_row(os.path.join(d, "hlsjs"), link),
                  vodlab_row(os.path.join(d, "vodlab-profile-hlsjs"), link)):
            r["switches"] = sum(1 for a, b in zip(r["renditions"], r["renditions"][1:]) if a != b)
            r["mean_kbps"] = round(sum(r["bitrates_kbps"]) / max(1, r["segments"]), 1)
            r["loadavg"] = load
            rows.append(r)
            per.setdefault(link, {}).setdefault(r["player"], []).append(dict(r, run=os.path.basename(rd)))
    json.dump({"rows": rows}, open(os.path.join(rd, "summary.json"), "w"), indent=1)
    print(f"--- {os.path.basename(rd)}")
    for r in rows:
        print(f"{r['link']:8} {r['player']:30} {r['segments']:3} {r['mean_kbps']:7.0f} sw {r['switches']:2} "
              f"stalls {r['stalls']} ({r['stall_s']:.2f} s) start {r['startup_s']} ab {r['abandoned']}  {runs_of(r['renditions'])}")
def rel(a, b):
    return None if b == 0 else round(a / b, 3)
table = []
for link, players in per.items():
    base = players["hls.js 1.7.4"]
    bm = statistics.mean(x["mean_kbps"] for x in base)
    bs = statistics.mean(x["switches"] for x in base)
    bst = statistics.mean(x["stalls"] for x in base)
    for name, xs in players.items():
        m = statistics.mean(x["mean_kbps"] for x in xs)
        sw = statistics.mean(x["switches"] for x in xs)
        st = statistics.mean(x["stalls"] for x in xs)
        row = {"link": link, "player": name, "runs": len(xs), "mean_kbps": round(m, 1),
               "mean_kbps_runs": [x["mean_kbps"] for x in xs], "switches": round(sw, 2),
               "switches_runs": [x["switches"] for x in xs], "stalls": round(st, 2),
               "stalls_runs": [x["stalls"] for x in xs], "stall_s_runs": [x["stall_s"] for x in xs],
               "startup_s_runs": [x["startup_s"] for x in xs],
               "abandoned_runs": [x["abandoned"] for x in xs],
               "renditions_runs": [runs_of(x["renditions"]) for x in xs],
               "loadavg_runs": [x["loadavg"] for x in xs]}
        if name != "hls.js 1.7.4":
            row["bitrate_ratio"] = rel(m, bm)
            row["bitrate_ratio_runs"] = [rel(a["mean_kbps"], b["mean_kbps"]) for a, b in zip(xs, base)]
            row["within_10pct"] = {
                "bitrate": abs(m / bm - 1) <= 0.1 if bm else None,
                "switches": (abs(sw / bs - 1) <= 0.1) if bs else sw == 0,
                "stalls": (abs(st / bst - 1) <= 0.1) if bst else st == 0}
        table.append(row)
json.dump({"runs": len(run_dirs), "rows": table}, open(os.path.join(out, "summary.json"), "w"), indent=1)
with open(os.path.join(out, "summary.md"), "w") as f:
    f.write("| link | player | mean kbit/s (runs) | ratio (runs) | switches (runs) | stalls (runs) | abandoned (runs) | load avg (runs) |\n"
            "|---|---|---|---|---|---|---|---|\n")
    for r in table:
        ratio = "" if "bitrate_ratio" not in r else f"{r['bitrate_ratio']} ({', '.join(str(x) for x in r['bitrate_ratio_runs'])})"
        f.write(f"| {r['link']} | {r['player']} | {r['mean_kbps']:.0f} ({', '.join(f'{x:.0f}' for x in r['mean_kbps_runs'])}) | {ratio} | "
                f"{r['switches']} ({', '.join(str(x) for x in r['switches_runs'])}) | {r['stalls']} ({', '.join(str(x) for x in r['stalls_runs'])}) | "
                f"{', '.join(str(x) for x in r['abandoned_runs'])} | {'; '.join(str(x) for x in r['loadavg_runs'])} |\n")
print(open(os.path.join(out, "summary.md")).read())
EOF
