#!/usr/bin/env bash
# The BBC's HTTP/2-for-DASH lab test (BBC R&D blog, 2015; reference:
# seeds-round2.md part D) with vodlab: one recorded-like DASH timing script
# (audio 128 kbit/s, ~60 kB segments; video ~7.7 Mbit/s, ~3.7 MB segments;
# 3.84 s segments; an MPD and two init segments first) replayed by N
# staggered clients with `vodlab run --timing-script` over h1, h2c, https, h2,
# h2-R (no dynamic TLS record sizing), h2-F (the largest flow-control
# window; the others use the RFC's 65,535 B) and h3 (HTTP/3 over QUIC:
# `vodlab serve --h3` only; Debian 12's nghttpx is built without QUIC and
# its nginx has no HTTP/3, so those rows are skipped), against
#   nghttpx   (Debian nghttp2-proxy, the BBC's) in front of `vodlab serve`,
#   nginx     (http2 on; one worker, as nghttpx got one core),
#   vodlab    (`vodlab serve` itself, one thread).
# Metric: request time from each server's log (nghttpx/nginx $request_time,
# vodlab's service time: head parsed to last byte written) and the client's
# (send to last byte), median and IQR, media segments with status 200/206 only.
#
#   scripts/experiments/bbc-h2.sh [--full|--quick|--smoke] [VODLAB_BIN]
#     --full   91 clients, 540 segment pairs (34.6 min), 3 runs per variant (the BBC's)
#     --quick  91 clients, 32 segment pairs (~2 min), 1 run        (default)
#     --smoke  4 clients, 6 segment pairs, 1 run, servers vodlab and nginx
#   env: SERVERS="nghttpx nginx vodlab" VARIANTS="h1 h2c https h2 h2-R h2-F h3"
#        RUNS CLIENTS SEGMENTS STAGGER_MS OUT=dir (default experiments/bbc-h2/<mode>)
set -euo pipefail
mode=quick
case "${1:-}" in --full|--quick|--smoke) mode=${1#--}; shift ;; esac
bin=$(realpath "${1:-target/release/vodlab}")
case $mode in
  full) clients=91; segments=540; runs=3 ;;
  quick) clients=91; segments=32; runs=1 ;;
  smoke) clients=4; segments=6; runs=1 ;;
esac
clients=${CLIENTS:-$clients}; segments=${SEGMENTS:-$segments}; runs=${RUNS:-$runs}
stagger=${STAGGER_MS:-500}
servers=${SERVERS:-"nghttpx nginx vodlab"}
[ "$mode" = smoke ] && servers=${SERVERS:-"nginx vodlab"}
variants=${VARIANTS:-"h1 h2c https h2 h2-R h2-F h3"}
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$(realpath -m "${OUT:-$here/experiments/bbc-h2/$mode}")
mkdir -p "$out"
work=$(mktemp -d)
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap 'stop; rm -rf "$work"' EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }

# --- content: one title, sizes around the BBC's medians (+-10 %, seeded) ---
root=$work/root
python3 - "$root" "$segments" <<'EOF'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
r = random.Random(2015)
for kind, median in (("audio", 61_440), ("video", 3_700_000)):
    d = os.path.join(root, "testcard", kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "init.mp4"), "wb") as f:
        f.write(os.urandom(800))
    for i in range(n):
        with open(os.path.join(d, "%05d.m4s" % i), "wb") as f:
            f.write(os.urandom(int(median * r.uniform(0.9, 1.1))))
with open(os.path.join(root, "testcard", "manifest.mpd"), "w") as f:
    f.write('<?xml version="1.0"?><MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static"/>\n')
EOF
# --- the timing script: MPD, inits, 8 segment pairs to fill the buffer, then
# one pair every 3.84 s (dash.js v1.3 pacing); 3 + 2 x SEGMENTS requests ---
script=$work/bbc.txt
python3 - "$script" "$segments" <<'EOF'
import sys
path, n = sys.argv[1], int(sys.argv[2])
lines = ["0\t/testcard/manifest.mpd", "20\t/testcard/audio/init.mp4", "25\t/testcard/video/init.mp4"]
for i in range(n):
    t = 40 + max(10 * i, (i - 8) * 3840)
    lines.append("%d\t/testcard/audio/%05d.m4s" % (t, i))
    lines.append("%d\t/testcard/video/%05d.m4s" % (t + 5, i))
open(path, "w").write("\n".join(lines) + "\n")
EOF
cp "$script" "$out/timing-script.txt"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -addext basicConstraints=critical,CA:FALSE \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
# (CA:FALSE: rustls, like browsers, refuses a CA certificate as a server's)

# start SERVER VARIANT LOG -> sets url, extra client flags; server pids in pids[]
start() {
  local s=$1 v=$2 log=$3 p; p=$(port)
  local tls=0; case $v in https|h2|h2-R|h2-F|h3) tls=1 ;; esac
  case $s in
    vodlab)
      local f=(serve --root "$root" --listen "127.0.0.1:$p" --threads 1 --stats-interval 0 --access-log "$log")
      [ $tls = 1 ] && f+=(--tls-cert "$work/cert.pem" --tls-key "$work/key.pem")
      # nghttpx (and the BBC's) sized records dynamically on h2 only
      case $v in h2|h2-F) f+=(--tls-dynamic-records) ;; esac
      # h3: QUIC on the UDP port of the same number
      [ "$v" = h3 ] && f+=(--h3)
      "$bin" "${f[@]}" 2>"$work/vodlab.err" & pids+=($!) ;;
    nginx)
      mkdir -p "$work/nginx"
      local listen="127.0.0.1:$p"
      case $v in h2c) listen="$listen http2" ;; https) listen="$listen ssl" ;; h2|h2-R|h2-F) listen="$listen ssl http2" ;; esac
      cat > "$work/nginx/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1; pid $work/nginx/nginx.pid; error_log stderr warn;
events { worker_connections 4096; }
http {
  log_format bbc '\$uri \$status \$body_bytes_sent \$request_time';
  access_log $log bbc;
  sendfile on; keepalive_requests 1000000; http2_max_requests 1000000;
  client_body_temp_path $work/nginx; proxy_temp_path $work/nginx; fastcgi_temp_path $work/nginx;
  uwsgi_temp_path $work/nginx; scgi_temp_path $work/nginx;
  ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem;
  server { listen $listen; root $root; }
}
EOF
      nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" 2>"$work/nginx.err" & pids+=($!) ;;
    nghttpx)
      local bp; bp=$(port)
      "$bin" serve --root "$root" --listen "127.0.0.1:$bp" --threads 1 --stats-interval 0 2>"$work/origin.err" & pids+=($!)
      wait_port "$bp"
      local fe="127.0.0.1,$p"; [ $tls = 1 ] || fe="$fe;no-tls"
      local f=(--frontend="$fe" --backend="127.0.0.1,$bp" --workers=1 --accesslog-file="$log"
               --accesslog-format='$path $status $body_bytes_sent $request_time' --errorlog-file="$work/nghttpx.err"
               --backend-keep-alive-timeout=120s)
      f+=(--no-ocsp)
      [ $tls = 1 ] && f+=("$work/key.pem" "$work/cert.pem")
      # nghttpx 1.52 sizes records dynamically on every TLS frontend; the
      # BBC's (0.6.7) did it on h2 only, so https and h2-R turn it off
      case $v in https|h2-R) f+=(--tls-dyn-rec-warmup-threshold=0) ;; esac
      nghttpx "${f[@]}" & pids+=($!) ;;
  esac
  wait_port "$p"
  local scheme=http; [ $tls = 1 ] && scheme=https
  url="$scheme://127.0.0.1:$p"
  case $v in h1) proto=h1 ;; h2c) proto=h2c ;; https) proto=https ;; h3) proto=h3 ;; *) proto=h2 ;; esac
  flags=(--protocol "$proto")
  [ $tls = 1 ] && flags+=(--ca "$work/cert.pem")
  case $v in h2c|h2|h2-R) flags+=(--h2-window-bits 16 --h2-connection-window-bits 16) ;; h2-F) flags+=(--h2-window-bits 30 --h2-connection-window-bits 30) ;; esac
}

echo "bbc-h2 $mode: $clients clients, $segments segment pairs, $runs run(s), servers: $servers; variants: $variants" | tee "$out/summary.txt"
for r in $(seq "$runs"); do
  for s in $servers; do
    for v in $variants; do
      if [ "$v" = h3 ] && [ "$s" != vodlab ]; then
        [ "$r" = 1 ] && echo "$s h3: skipped (Debian 12's $s has no HTTP/3)" | tee -a "$out/summary.txt"
        continue
      fi
      d=$out/runs/$s-$v-$r; mkdir -p "$d"
      log=$d/server.log; : > "$log"
      start "$s" "$v" "$log"
      "$bin" run --timing-script "$script" --clients "$clients" --stagger "$stagger" \
        --target "$url" "${flags[@]}" --late-threshold-ms 1000 --requests-csv --quiet -o "$d" \
        > "$d/run.out" 2>&1 || echo "run $s $v $r exited $? (see $d/run.out)" | tee -a "$out/summary.txt"
      stop
      echo "$s $v run $r done" >&2
    done
  done
done

python3 - "$out" <<'EOF' | tee -a "$out/summary.txt"
import csv, glob, gzip, json, os, statistics, sys
out = sys.argv[1]
def opened(path):
    # raw files are kept gzipped once analysed
    return gzip.open(path + ".gz", "rt") if os.path.exists(path + ".gz") else open(path)
def q(v, p):
    v = sorted(v); k = (len(v) - 1) * p; a = int(k); b = min(a + 1, len(v) - 1)
    return v[a] + (v[b] - v[a]) * (k - a)
rows = {}
for d in sorted(glob.glob(os.path.join(out, "runs", "*"))):
    name = os.path.basename(d)
    parts = name.split("-")
    s, r = parts[0], parts[-1]; v = "-".join(parts[1:-1])
    srv = {"audio": [], "video": []}
    for line in opened(os.path.join(d, "server.log")):
        f = line.split()
        if not f: continue
        if s == "vodlab":
            path, status, ms = f[3], f[6], int(f[8]) / 1000.0
        else:
            path, status, ms = f[0], f[1], float(f[3]) * 1000.0
        if status not in ("200", "206") or not path.endswith(".m4s"): continue
        srv["audio" if "/audio/" in path else "video"].append(ms)
    cli = {"audio": [], "video": []}
    rc = os.path.join(d, "requests.csv")
    if os.path.exists(rc) or os.path.exists(rc + ".gz"):
        for row in csv.DictReader(opened(rc)):
            p = row.get("path", "")
            if not p.endswith(".m4s") or row.get("status") not in ("200", "206"): continue
            cli["audio" if "/audio/" in p else "video"].append(float(row["response_ms"]))
    rows.setdefault((s, v), []).append((srv, cli))
res = []
print("\nrequest time, ms: median (IQR) over runs pooled; server log / client")
print("%-8s %-5s %22s %22s %22s %22s" % ("server", "var", "audio server", "video server", "audio client", "video client"))
for (s, v), runs in sorted(rows.items()):
    pooled = {k: sum((r[0][k] for r in runs), []) for k in ("audio", "video")}
    pc = {k: sum((r[1][k] for r in runs), []) for k in ("audio", "video")}
    def mi(x): return (q(x, .5), q(x, .75) - q(x, .25), len(x)) if x else (float("nan"), float("nan"), 0)
    e = {"server": s, "variant": v, "runs": len(runs)}
    cells = []
    for k, src in (("audio_server", pooled["audio"]), ("video_server", pooled["video"]), ("audio_client", pc["audio"]), ("video_client", pc["video"])):
        m, iqr, n = mi(src); e[k] = {"median_ms": m, "iqr_ms": iqr, "n": n}
        cells.append("%8.1f (%7.1f) n%-4d" % (m, iqr, n))
    res.append(e)
    print("%-8s %-5s %s" % (s, v, " ".join(cells)))
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=1)
EOF
# keep the raw logs small: per run, results.json and run.out as they are,
# requests.csv and server.log gzipped (the analysis above reads either)
for d in "$out"/runs/*/; do
  rm -f "$d/metrics.json"
  for f in requests.csv server.log; do [ -f "$d/$f" ] && gzip -9f "$d/$f"; done
done
echo "results in $out"
