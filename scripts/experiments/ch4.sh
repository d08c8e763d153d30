#!/bin/sh
# Thesis chapter 4's experiments (docs/experiments.md, "Chapter 4: the experiments"), in the
# miniature of scripts/experiments/ch4-mini.sh: delivered throughput at a fixed overload
# (unpaced sessions, 10 s deadline) against the prefetch size, on an emulated drive in a small
# box, one `vodlab compare` per experiment with one row per serve configuration
# (`vodlab-asap:fixed:4M`, ..., `vodlab-vanilla`); each row from a fresh mount (cold drive and
# page cache). Table 4.1 per point comes from the server's /vodlab/stats, which compare keeps
# per point (server_stats_before/after in each row's capacity.json). Root, /dev/fuse and
# fusermount3 (Debian fuse3), python3.
#
#   scripts/experiments/ch4.sh [OUT] [EXPERIMENT...]
#
# Experiments (default: all, in this order; each point takes about a minute here):
#   hd-wdred    youtube-2011-hd, WD Red, 128 MiB: vanilla and $HD_SIZES          (Fig. 4.1 HD)
#   hd-wdred-MEM  the same in a MEM box (e.g. hd-wdred-512M); not in the default list
#   sd-wdred    youtube-2011-sd, WD Red, 128 MiB: vanilla and $SD_SIZES          (Fig. 4.1 SD, Table 4.1)
#   sd-seagate  youtube-2011-sd, Seagate ST1000DM003: vanilla and $SD_SIZES     (4.5.3)
#   mem64 mem256  youtube-2011-sd, WD Red, 64 / 256 MiB boxes: $MEM_SIZES     (4.5.1; 128 MiB is sd-wdred)
#   alpha06 alpha10  youtube-2011-sd, Zipf alpha 0.6 / 1.0: $ALPHA_SIZES      (4.5.2; 0.8 is sd-wdred)
#   mixed       youtube-2011-mixed, WD Red: fixed:$MIXED_P,ref=2095,scale=F for F in $SCALES (4.5.4)
#   auto-hd     youtube-2011-hd, WD Red: auto from the drive's HD start and fixed $AUTO_FIXED,
#               one longer point each ($AUTO_WINDOW s) so auto has intervals to move in (more
#               sessions than whd's 2,000 when HD_RATE x AUTO_WINDOW needs them: whd-N, see whd_long)
#   hd-seagate  youtube-2011-hd, Seagate: vanilla and $HD_SIZES                 (4.5.3)
#   hd-long-SIZE  one fixed size at auto-hd's length (e.g. hd-long-2M); not in the default list
#   auto-sd-seagate  auto from the Seagate's SD start and fixed 2M, $AUTO_WINDOW s each; not default
#   summary     only (re)write OUT/summary.md from what is there
#
# Settings (environment): VODLAB (binary; copy it out of target/ first: compare re-executes its
# own binary for the mount), SCALE (0.03), SD_RATE (40 sessions/s), HD_RATE (16), MIXED_RATE
# (24), WINDOW (20 s of arrivals), DRAIN (30 s), K (time compression, 1), and the size lists.
set -eu
V=${VODLAB:-vodlab}
OUT=${1:-ch4}
[ $# -gt 0 ] && shift
EXPS=${*:-hd-wdred sd-wdred sd-seagate mem64 mem256 alpha06 alpha10 mixed auto-hd hd-seagate}
SCALE=${SCALE:-0.03}
SD_RATE=${SD_RATE:-40}
HD_RATE=${HD_RATE:-16}
MIXED_RATE=${MIXED_RATE:-24}
WINDOW=${WINDOW:-20}
DRAIN=${DRAIN:-30}
K=${K:-1}
SD_SIZES=${SD_SIZES:-2M 4M 6M 8M 12M}
HD_SIZES=${HD_SIZES:-2M 4M 6M 8M 12M}
MEM_SIZES=${MEM_SIZES:-2M 4M 6M 8M}
ALPHA_SIZES=${ALPHA_SIZES:-2M 4M 6M 8M}
MIXED_P=${MIXED_P:-6M}
SCALES=${SCALES:-0.1 0.2 0.45 0.75 1}
AUTO_FIXED=${AUTO_FIXED:-8M}
AUTO_WINDOW=${AUTO_WINDOW:-120}
AUTO_OPTS=${AUTO_OPTS:-interval=10,ramp=3}
mkdir -p "$OUT"
cd "$OUT"

# rows: "vanilla" -> vodlab-vanilla; SIZE -> vodlab-asap:fixed:SIZE; anything else as given
rows() {
  r=""
  for s in "$@"; do
    case $s in
      vanilla) x=vodlab-vanilla ;;
      vodlab-*) x=$s ;;
      *) x=vodlab-asap:fixed:$s ;;
    esac
    r="${r:+$r,}$x"
  done
  echo "$r"
}

workload() { # NAME PRESET SESSIONS [ALPHA]
  [ -f "$1/catalog.json" ] && return 0
  if [ $# -ge 4 ]; then
    $V gen --show-preset "$2" | sed "s/alpha = [0-9.]*/alpha = $4/" > "$1.toml"
    grep -q "alpha = $4 " "$1.toml" || { echo "ch4.sh: no alpha line in preset $2" >&2; exit 1; }
    $V gen --spec "$1.toml" --scale "$SCALE" --sessions "$3" --seed 1 -o "$1" > "$1-gen.txt"
  else
    $V gen --preset "$2" --scale "$SCALE" --sessions "$3" --seed 1 -o "$1" > "$1-gen.txt"
  fi
}

# the HD workload for a long point: whd (2,000 sessions, 125 s at 16/s) unless RATE x WINDOW
# needs more; then whd-N with N = RATE x WINDOW x 1.1 (same catalogue and file set, more sessions)
whd_long() { # RATE WINDOW -> sets WHD
  n=$(python3 -c "import math; n = $1 * $2; print(0 if n <= 2000 else math.ceil(n * 1.1))")
  if [ "$n" -eq 0 ]; then WHD=whd; workload whd youtube-2011-hd 2000
  else WHD=whd-$n; workload "$WHD" youtube-2011-hd "$n"; fi
}

sweep() { # EXP WORKLOAD DISK MEM RATE WINDOW ROWS [SERVE-ARGS...]
  e=$1 w=$2 d=$3 m=$4 r=$5 win=$6 rw=$7
  shift 7
  if [ -f "$e/compare.json" ]; then echo "$e: done before"; return 0; fi
  rm -rf "$e"
  echo "$e: $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "loadavg.txt"
  # shellcheck disable=SC2086
  $V compare "$w" --disk "$d" --time-compression "$K" --mem "$m" --servers "$rw" "$@" \
     --no-pacing --no-shaping --no-seqread --start "$r" --max-points 1 --window "$win" \
     --drain "$DRAIN" --late-threshold-ms 100 --seed 1 -o "$e" > "$e.log" 2>&1 || true
  echo "$e: $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) (end)" | tee -a "loadavg.txt"
}

for e in $EXPS; do
  case $e in
    hd-wdred)
      workload whd youtube-2011-hd 2000
      # shellcheck disable=SC2086
      sweep hd-wdred whd wd10efrx 128M "$HD_RATE" "$WINDOW" "$(rows $HD_SIZES vanilla)" ;;
    hd-wdred-*)
      # the HD sweep in a larger box (memory per concurrent session nearer the thesis's)
      workload whd youtube-2011-hd 2000
      # shellcheck disable=SC2086
      sweep "$e" whd wd10efrx "${e#hd-wdred-}" "$HD_RATE" "$WINDOW" "$(rows $HD_SIZES vanilla)" ;;
    sd-wdred)
      workload wsd youtube-2011-sd 6000
      # shellcheck disable=SC2086
      sweep sd-wdred wsd wd10efrx 128M "$SD_RATE" "$WINDOW" "$(rows $SD_SIZES vanilla)" ;;
    sd-seagate)
      workload wsd youtube-2011-sd 6000
      # shellcheck disable=SC2086
      sweep sd-seagate wsd st1000dm003 128M "$SD_RATE" "$WINDOW" "$(rows $SD_SIZES vanilla)" ;;
    hd-seagate)
      workload whd youtube-2011-hd 2000
      # shellcheck disable=SC2086
      sweep hd-seagate whd st1000dm003 128M "$HD_RATE" "$WINDOW" "$(rows $HD_SIZES vanilla)" ;;
    mem64 | mem256)
      workload wsd youtube-2011-sd 6000
      # shellcheck disable=SC2086
      sweep "$e" wsd wd10efrx "${e#mem}M" "$SD_RATE" "$WINDOW" "$(rows $MEM_SIZES)" ;;
    alpha06 | alpha10)
      a=$(echo "${e#alpha}" | sed 's/^\(.\)/\1./')
      workload "wsd-a$a" youtube-2011-sd 6000 "$a"
      # shellcheck disable=SC2086
      sweep "$e" "wsd-a$a" wd10efrx 128M "$SD_RATE" "$WINDOW" "$(rows $ALPHA_SIZES)" ;;
    mixed)
      workload wmix youtube-2011-mixed 4000
      rs=""
      for f in $SCALES; do rs="$rs vodlab-asap:fixed:$MIXED_P,ref=2095,scale=$f"; done
      # the catalog gives the server each file's bit rate (SD 419, HD 2,095 kbit/s)
      # shellcheck disable=SC2086
      sweep mixed wmix wd10efrx 128M "$MIXED_RATE" "$WINDOW" "$(rows $rs)" \
        "--serve-arg=--catalog=$PWD/wmix/catalog.json" ;;
    auto-hd)
      whd_long "$HD_RATE" "$AUTO_WINDOW"
      sweep auto-hd "$WHD" wd10efrx 128M "$HD_RATE" "$AUTO_WINDOW" \
        "$(rows "vodlab-asap:auto:start=wd10efrx-hd,$AUTO_OPTS" "$AUTO_FIXED")" \
        "--serve-arg=--default-bitrate=2097.152" ;;
    auto-sd-seagate)
      # auto from the Seagate's SD start size (2 MB [T1213]) against the SD sweep's best
      workload wsd youtube-2011-sd 6000
      sweep auto-sd-seagate wsd st1000dm003 128M "$SD_RATE" "$AUTO_WINDOW" \
        "$(rows "vodlab-asap:auto:start=st1000dm003-sd,$AUTO_OPTS" 2M)" \
        "--serve-arg=--default-bitrate=419.4304" ;;
    hd-long-*)
      # one more fixed size at auto-hd's length (e.g. hd-long-2M: the HD sweep's best)
      whd_long "$HD_RATE" "$AUTO_WINDOW"
      sweep "$e" "$WHD" wd10efrx 128M "$HD_RATE" "$AUTO_WINDOW" "$(rows "${e#hd-long-}")" ;;
    summary) ;;
    *) echo "ch4.sh: unknown experiment $e" >&2; exit 2 ;;
  esac
done

# summary.md: per experiment and row, delivered MB/s, drive MB/s, mspt, sessions failed and
# unfinished, and Table 4.1's ratios (from the point's server stats, after - before)
python3 - > summary.md <<'EOF'
import json, os, glob
def num(x, f="{:.2f}"):
    return "" if x is None else f.format(x)
for c in sorted(glob.glob("*/compare.json")):
    e = os.path.dirname(c)
    d = json.load(open(c))
    disk = (d.get("disk") or {}).get("profile")
    print(f"## {e}\n\nworkload {d['workload']}, disk {disk}, box {d['box']['mem_bytes'] >> 20} MiB, "
          f"window {d['window_s']:.0f} s\n")
    print("| row | rate/s | delivered MB/s | x vanilla | drive MB/s | mspt | drive/delivered "
          "| failed/unfinished/sessions | Disk/Req | Cached/Req | Evicted/Req | Wasted/Req "
          "| probed hits/Req |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    van = None
    for s in d["servers"]:
        if s["server"] == "vodlab-vanilla" and s.get("at_overload"):
            van = s["at_overload"]["delivered_mb_s"]
    for s in d["servers"]:
        o = s.get("at_overload") or {}
        row = [s["server"], num(o.get("rate"), "{:.0f}"), num(o.get("delivered_mb_s"), "{:.1f}")]
        row.append(num(o["delivered_mb_s"] / van) if van and o.get("delivered_mb_s") else "")
        row += [num(o.get("disk_mb_s"), "{:.1f}"), num(o.get("device_ms_per_read"))]
        row.append(num(o["cache_miss_pct"] / 100) if o.get("cache_miss_pct") is not None else "")
        t41 = ["", "", "", "", ""]
        fu = ""
        cj = os.path.join(e, s.get("capacity_json") or "")
        if os.path.isfile(cj):
            cap = json.load(open(cj))
            pts = (cap.get("search") or {}).get("points") or []
            if pts and pts[-1].get("runs"):
                p = pts[-1]["runs"][-1]
                x = p.get("extra") or {}
                fu = f"{p.get('failed_sessions')}/{p.get('unfinished_sessions')}/{x.get('sessions')}"
                a = x.get("server_stats_after") or {}
                b = x.get("server_stats_before") or {}
                ta, tb = a.get("table_4_1"), b.get("table_4_1") or {}
                if ta:
                    g = lambda k: ta.get(k, 0) - tb.get(k, 0)
                    rq = g("requested_bytes")
                    if rq > 0:
                        dev, ev, wa = g("device_bytes"), g("evicted_bytes"), g("wasted_bytes")
                        t41 = [num(dev / rq), num((rq - dev + ev + wa) / rq), num(ev / rq),
                               num(wa / rq), num(g("probed_hit_bytes") / rq)]
        row += [fu] + t41
        print("| " + " | ".join(row) + " |")
    print()
EOF
echo "summary: $PWD/summary.md"
