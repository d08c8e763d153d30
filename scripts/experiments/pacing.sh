#!/usr/bin/env bash
# The pacing experiment of docs/experiments.md ("Pacing"), after Ma, Bartoš and
# Bhatia, "Scalability of HTTP pacing with intelligent bursting": one 1 MB file
# at 400 kbit/s (20 s of content), a 4 s client buffer, N one-request sessions
# started 500 µs apart (a flash crowd), through `vodlab lab run` with the
# server's egress shaped by htb. Servers: vodlab serve unpaced; paced (user and
# kernel mechanism) without and with a 4 s burst; nginx with `limit_rate 50k;
# limit_rate_after 200k;`; apache2 prefork limited to 20 workers (the paper's
# run-to-completion baseline). Needs root (network namespaces).
#
#   scripts/experiments/pacing.sh [--full|--quick|--smoke] [OUT_DIR]
#
#   --full   (default) 100 and 1,000 sessions, on 1 Gbit/s and on a tight link
#            (1.25 x the paced need: 50 Mbit/s for 100, 500 Mbit/s for 1,000),
#            7 servers each: 28 runs, about 12 minutes
#   --quick  100 sessions on 1 Gbit/s: unpaced, user/kernel with burst, nginx,
#            apache2 (5 runs, about 2 minutes)
#   --smoke  20 sessions of a 200 KB file at 800 kbit/s, 0.5 s buffer, 100 Mbit/s:
#            unpaced and user-paced, then checks that paced windows are mostly
#            within ±5 % of the target and unpaced ones are not (exit 1 if not)
#
# Environment: VODLAB (binary, default target/release/vodlab), WORK (scratch,
# default /var/tmp/vodlab-pacing), GROUPS_OVERRIDE ("N:EGRESS ..."),
# CONFIGS_OVERRIDE (names below), PORT (default 8080), LAB_NAME (default pace).
# KERNEL_TUNE (kernel-* runs; set inside the server's namespace only, which the
# lab creates and removes): `none`; `tso` (net.ipv4.tcp_min_tso_segs=1 and
# the veth's TSO/GSO off: one MSS per paced packet); `mss` (default: `tso`
# plus a route MTU of 177 B, i.e. 125 B segments = 2.5 ms of 400 kbit/s, the
# size the user pacer's chunk rule picks). PCAP=1: also capture the server's
# packets on the client host's interface and compute the windows from the
# capture (pcap_windows.json, pacing-pcap.sh; the capture is deleted unless
# KEEP_PCAP=1, which keeps it as WORK/CONFIG.pcap). SERVER_NICE=N: run the
# server at nice N (a negative N puts the pacer's driver ahead of other work).
# Extra configurations (not in --full's list, named in CONFIGS_OVERRIDE):
# user-{noburst,burst}-{task,nco,rt} (--pace-coalesce-us 0 and --pace-driver
# task: the driver as a tokio task on tokio's 1 ms timer, the first design;
# thread: a dedicated thread at normal priority; rt: that thread under
# SCHED_FIFO), user-{noburst,burst}-{co,rt-co} (thread or rt with
# --pace-coalesce-us 250; the plain user-* runs use the server's defaults), and
# kernel-{noburst,burst}-mss (the server's --pace-mss 137 gives the 125 B
# segments instead of the lab's route MTU; KERNEL_TUNE's `tso` part still applies).
#
# Per run OUT_DIR/nN-EGRESS/CONFIG/ holds results.json, summary.txt,
# requests.csv, server_cpu.json (CPU of the server's process group when the
# clients finished), system_cpu.json (the whole machine's CPU by kind over
# the client's run, and the client's own: pacing-system-cpu.sh) and, for
# vodlab serve, stats.json (/vodlab/stats).
# OUT_DIR/pacing.json lists the runs; `vodlab report OUT_DIR` draws them.
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=scripts/experiments
MODE=full
case "${1:-}" in
  --full | --quick | --smoke) MODE=${1#--}; shift ;;
esac
OUT=${1:-target/experiments/pacing-$MODE}
WORK=${WORK:-/var/tmp/vodlab-pacing}
PORT=${PORT:-8080}
VODLAB=${VODLAB:-target/release/vodlab}
[ -x "$VODLAB" ] || cargo build --release -q -p vodlab
[ "$(id -u)" = 0 ] || { echo "pacing.sh: needs root (network namespaces)" >&2; exit 2; }
mkdir -p "$WORK" "$OUT"
WORK=$(cd "$WORK" && pwd)
OUT_ABS=$(cd "$OUT" && pwd)
# a private copy, so a rebuild during the experiment does not replace it
cp "$VODLAB" "$WORK/vodlab"
VL=$WORK/vodlab

# the paper's workload (Sec. 4): 1,000,000 B = 400 kbit/s x 20 s; B = 4 s = 200 KB
SIZE=1000000 KBPS=400 BUFFER=4 BURST=4
ALL="unpaced user-noburst user-burst user-burst-c250 user-burst-c512 user-noburst-c64k kernel-noburst kernel-burst nginx apache2"
EXTRA="user-noburst-task user-burst-task user-noburst-nco user-burst-nco user-noburst-rt user-burst-rt user-noburst-co user-burst-co user-noburst-rt-co user-burst-rt-co kernel-noburst-mss kernel-burst-mss"
case $MODE in
  full)  GROUPS_=${GROUPS_OVERRIDE:-"100:1gbit 100:50mbit 1000:1gbit 1000:500mbit"}; CONFIGS=${CONFIGS_OVERRIDE:-$ALL} ;;
  quick) GROUPS_=${GROUPS_OVERRIDE:-"100:1gbit"}; CONFIGS=${CONFIGS_OVERRIDE:-"unpaced user-burst kernel-burst nginx apache2"} ;;
  smoke) GROUPS_=${GROUPS_OVERRIDE:-"20:100mbit"}; CONFIGS=${CONFIGS_OVERRIDE:-"unpaced user-burst"}
         SIZE=200000 KBPS=800 BUFFER=0.5 BURST=0.5 ;;
esac
BPS=$((KBPS * 1000))

ROOT=$WORK/root
mkdir -p "$ROOT"
if [ "$(stat -c %s "$ROOT/video.bin" 2>/dev/null || echo 0)" != "$SIZE" ]; then
  head -c "$SIZE" /dev/urandom > "$ROOT/video.bin"
fi
chmod -R a+rX "$ROOT"
cat "$ROOT/video.bin" > /dev/null   # in the page cache: the paper's file is cached

# N one-request sessions; the bit rate rides on the session (bitrate=, bit/s)
workload() {
  local n=$1 f=$WORK/sessions-$1-$SIZE.vsl
  if [ ! -s "$f" ]; then
    for ((i = 0; i < n; i++)); do
      printf '#@session id=%d bitrate=%d\n/video.bin timeout=120\n\n' "$i" "$BPS"
    done > "$f"
  fi
  echo "$f"
}

# nginx: crates/vodlab-lab/src/servers.rs's tuning plus the rate limit
nginx_conf() {
  local wd=$1
  cat <<CONF
daemon off;
master_process on;
worker_processes 2;
worker_rlimit_nofile 65536;
user www-data;
pid $wd/nginx.pid;
error_log $wd/error.log warn;
events { worker_connections 16384; use epoll; multi_accept on; }
http {
  access_log off; sendfile on; tcp_nopush on; keepalive_timeout 60s;
  default_type application/octet-stream;
  client_body_temp_path $wd; proxy_temp_path $wd; fastcgi_temp_path $wd;
  uwsgi_temp_path $wd; scgi_temp_path $wd;
  limit_rate 50k;
  limit_rate_after 200k;
  server { listen 10.77.0.1:$PORT backlog=4096; root $ROOT; }
}
CONF
}

# apache2 prefork, 20 processes: the paper's Apache 2.2.6 (prefork, its
# process limit of 20 on that machine); KeepAlive off so a worker is free as
# soon as its response is sent (the sessions make one request each)
apache_conf() {
  local wd=$1
  cat <<CONF
ServerRoot $wd
DefaultRuntimeDir $wd
PidFile $wd/apache2.pid
ErrorLog $wd/error.log
LogLevel warn
ServerName 10.77.0.1
Listen 10.77.0.1:$PORT
LoadModule mpm_prefork_module /usr/lib/apache2/modules/mod_mpm_prefork.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
User www-data
Group www-data
StartServers 20
MinSpareServers 20
MaxSpareServers 20
ServerLimit 20
MaxRequestWorkers 20
MaxConnectionsPerChild 0
KeepAlive Off
Timeout 60
EnableSendfile On
EnableMMAP Off
DocumentRoot $ROOT
<Directory $ROOT>
  Require all granted
  AllowOverride None
</Directory>
CONF
}

server_cmd() {
  local cfg=$1 egress=$2 wd=$3
  local serve="$VL serve --root $ROOT --listen 10.77.0.1:$PORT --io asap --stats-interval 0"
  local paced="--pace 1 --default-bitrate $KBPS --link-capacity $egress"
  case $cfg in
    unpaced) echo "$serve" ;;
    user-noburst) echo "$serve $paced --pace-mode user --pace-burst 0" ;;
    user-burst) echo "$serve $paced --pace-mode user --pace-burst $BURST" ;;
    user-burst-c250) echo "$serve $paced --pace-mode user --pace-burst $BURST --pace-chunk 250" ;;
    user-burst-c512) echo "$serve $paced --pace-mode user --pace-burst $BURST --pace-chunk 512" ;;
    user-noburst-c64k) echo "$serve $paced --pace-mode user --pace-burst 0 --pace-chunk 64K" ;;
    kernel-noburst) echo "$serve $paced --pace-mode kernel --pace-burst 0" ;;
    kernel-burst) echo "$serve $paced --pace-mode kernel --pace-burst $BURST" ;;
    user-noburst-task) echo "$serve $paced --pace-mode user --pace-burst 0 --pace-driver task --pace-coalesce-us 0" ;;
    user-burst-task) echo "$serve $paced --pace-mode user --pace-burst $BURST --pace-driver task --pace-coalesce-us 0" ;;
    user-noburst-nco) echo "$serve $paced --pace-mode user --pace-burst 0 --pace-driver thread --pace-coalesce-us 0" ;;
    user-burst-nco) echo "$serve $paced --pace-mode user --pace-burst $BURST --pace-driver thread --pace-coalesce-us 0" ;;
    user-noburst-rt) echo "$serve $paced --pace-mode user --pace-burst 0 --pace-driver rt --pace-coalesce-us 0" ;;
    user-burst-rt) echo "$serve $paced --pace-mode user --pace-burst $BURST --pace-driver rt --pace-coalesce-us 0" ;;
    user-noburst-co) echo "$serve $paced --pace-mode user --pace-burst 0 --pace-driver thread --pace-coalesce-us 250" ;;
    user-burst-co) echo "$serve $paced --pace-mode user --pace-burst $BURST --pace-driver thread --pace-coalesce-us 250" ;;
    user-noburst-rt-co) echo "$serve $paced --pace-mode user --pace-burst 0 --pace-driver rt --pace-coalesce-us 250" ;;
    user-burst-rt-co) echo "$serve $paced --pace-mode user --pace-burst $BURST --pace-driver rt --pace-coalesce-us 250" ;;
    kernel-noburst-mss) echo "$serve $paced --pace-mode kernel --pace-burst 0 --pace-mss 137" ;;
    kernel-burst-mss) echo "$serve $paced --pace-mode kernel --pace-burst $BURST --pace-mss 137" ;;
    nginx) nginx_conf "$wd" > "$wd/nginx.conf"; echo "/usr/sbin/nginx -p $wd -c $wd/nginx.conf" ;;
    apache2) apache_conf "$wd" > "$wd/apache2.conf"; echo "/usr/sbin/apache2 -f $wd/apache2.conf -DFOREGROUND" ;;
    *) echo "pacing.sh: unknown configuration $cfg" >&2; return 1 ;;
  esac
}

label() {
  case $1 in
    unpaced) echo "vodlab unpaced" ;;
    user-noburst) echo "user, no burst" ;;
    user-burst) echo "user, burst" ;;
    user-burst-c250) echo "user, burst, 250 B chunks" ;;
    user-burst-c512) echo "user, burst, 512 B chunks" ;;
    user-noburst-c64k) echo "user, no burst, 64 KiB chunks" ;;
    kernel-noburst) echo "kernel, no burst" ;;
    kernel-burst) echo "kernel, burst" ;;
    user-noburst-task) echo "user, no burst, driver task" ;;
    user-burst-task) echo "user, burst, driver task" ;;
    user-noburst-rt) echo "user, no burst, driver rt" ;;
    user-burst-rt) echo "user, burst, driver rt" ;;
    user-noburst-nco) echo "user, no burst, driver thread, no coalescing" ;;
    user-burst-nco) echo "user, burst, driver thread, no coalescing" ;;
    user-noburst-co) echo "user, no burst, 250 us coalescing" ;;
    user-burst-co) echo "user, burst, 250 us coalescing" ;;
    user-noburst-rt-co) echo "user, no burst, driver rt, 250 us coalescing" ;;
    user-burst-rt-co) echo "user, burst, driver rt, 250 us coalescing" ;;
    kernel-noburst-mss) echo "kernel, no burst, --pace-mss 137" ;;
    kernel-burst-mss) echo "kernel, burst, --pace-mss 137" ;;
    nginx) echo "nginx limit_rate" ;;
    apache2) echo "apache2 20 workers" ;;
  esac
}

for g in $GROUPS_; do
  n=${g%%:*} egress=${g#*:}
  script=$(workload "$n")
  for cfg in $CONFIGS; do
    rel=n$n-$egress/$cfg
    dir=$OUT_ABS/$rel wd=$WORK/srv-$cfg
    rm -rf "$dir" "$wd"; mkdir -p "$dir" "$wd"
    chown www-data "$wd" 2>/dev/null || true
    srv=$(server_cmd "$cfg" "$egress" "$wd")
    # kernel pacing's packet size, set in the server's namespace (see KERNEL_TUNE)
    tune=true
    case $cfg:${KERNEL_TUNE:-mss} in
      kernel-*:none | *:none) ;;
      # the server's --pace-mss sets the segment size: no route MTU
      kernel-*-mss:tso | kernel-*-mss:mss) tune="sysctl -qw net.ipv4.tcp_min_tso_segs=1 net.ipv4.tcp_tso_rtt_log=0 && ethtool -K eth0 tso off gso off > /dev/null" ;;
      kernel-*:tso) tune="sysctl -qw net.ipv4.tcp_min_tso_segs=1 net.ipv4.tcp_tso_rtt_log=0 && ethtool -K eth0 tso off gso off > /dev/null" ;;
      kernel-*:mss) tune="sysctl -qw net.ipv4.tcp_min_tso_segs=1 net.ipv4.tcp_tso_rtt_log=0 && ethtool -K eth0 tso off gso off > /dev/null \
        && ip route change 10.77.0.0/24 dev eth0 proto kernel scope link src 10.77.0.1 mtu lock 177" ;;
      kernel-*:*) echo "pacing.sh: KERNEL_TUNE is none, tso or mss" >&2; exit 2 ;;
    esac
    # the server's PID (= its process group: the lab starts it in its own) for the CPU reading
    # SERVER_NICE=N runs the server at nice N (e.g. -10: ahead of other work on a shared machine)
    [ -n "${SERVER_NICE:-}" ] && srv="nice -n $SERVER_NICE $srv"
    server="$tune; echo \$\$ > $wd/pid; exec $srv 2> $wd/stderr.log"
    # PCAP=1: the server's packets as they reach the client host
    cap_on=true cap_off=true
    if [ "${PCAP:-0}" = 1 ]; then
      cap_on="tcpdump -Z root -i eth0 -nn -s 80 -U -w $WORK/cap.pcap 'tcp src port $PORT' 2> /dev/null & tp=\$!; sleep 1"
      cap_off="sleep 0.5; kill \$tp; wait \$tp"
    fi
    client="$cap_on; s0=\$(head -1 /proc/stat); $VL run $script --target http://\$VODLAB_LAB_SERVER:$PORT --allow-remote -q \
      --arrivals constant --rate 2000 --no-shaping --check-bytes 0 --requests-csv \
      --playback-buffer $BUFFER --pace-target 1 --interval 1 -o $dir > $dir/run.log 2>&1; rc=\$?; \
      $HERE/pacing-system-cpu.sh \"\$s0\" \"\$(head -1 /proc/stat)\" \$\$ > $dir/system_cpu.json; \
      $HERE/pacing-server-cpu.sh \$(cat $wd/pid) > $dir/server_cpu.json; \
      curl -s -m 2 http://\$VODLAB_LAB_SERVER:$PORT/vodlab/stats > $dir/stats.json || rm -f $dir/stats.json; \
      $cap_off; exit \$rc"
    echo "== $rel: $srv" >&2
    t0=$(date +%s.%N)
    if ! "$VL" lab run --name "${LAB_NAME:-pace}" --server-egress "$egress" --port "$PORT" --timeout 150 \
        --server "$server" --client "$client" > "$dir/lab.log" 2>&1; then
      echo "   (lab run failed; see $dir/lab.log and run.log)" >&2
    fi
    t1=$(date +%s.%N)
    [ -s "$dir/stats.json" ] && grep -q '^{' "$dir/stats.json" || rm -f "$dir/stats.json"
    if [ -s "$WORK/cap.pcap" ]; then
      "$HERE/pacing-pcap.sh" "$WORK/cap.pcap" "$(awk -v s="$BPS" -v b="$BUFFER" 'BEGIN{printf "%d", s*b/8}')" \
        "$(awk -v s="$BPS" 'BEGIN{printf "%d", s*0.1/8}')" > "$dir/pcap_windows.json" || true
      if [ "${KEEP_PCAP:-0}" = 1 ]; then mv "$WORK/cap.pcap" "$WORK/$cfg.pcap"; else rm -f "$WORK/cap.pcap"; fi
      sed 's/^/   capture: /' "$dir/pcap_windows.json" >&2
    fi
    cpu=$(sed -n 's/.*"cpu_s": \([0-9.]*\).*/\1/p' "$dir/server_cpu.json" 2>/dev/null || true)
    printf '   %.1f s wall, server CPU %s s\n' "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" "${cpu:-?}" >&2
    [ -s "$dir/summary.txt" ] && grep -iE "playback|download|within" "$dir/summary.txt" | sed 's/^/   /' >&2 || true
    echo "{\"group\": \"$n sessions, $egress egress\", \"sessions\": $n, \"egress\": \"$egress\", \"config\": \"$cfg\", \"label\": \"$(label "$cfg")\", \"dir\": \"$rel\", \"server_cpu_s\": ${cpu:-null}}" > "$dir/meta.json"
  done
done

# the manifest lists every run under OUT (also those of earlier invocations
# with other GROUPS_OVERRIDE/CONFIGS_OVERRIDE), groups in name order, servers in $ALL order
MANIFEST_RUNS=()
for gdir in "$OUT_ABS"/n*/; do
  for cfg in $ALL $EXTRA; do
    if [ -s "$gdir$cfg/meta.json" ]; then MANIFEST_RUNS+=("$(cat "$gdir$cfg/meta.json")"); fi
  done
done
{
  echo "{"
  echo "  \"format\": \"vodlab-pacing\","
  echo "  \"version\": 1,"
  echo "  \"mode\": \"$MODE\","
  echo "  \"file_bytes\": $SIZE,"
  echo "  \"bitrate_kbps\": $KBPS,"
  echo "  \"buffer_s\": $BUFFER,"
  echo "  \"burst_s\": $BURST,"
  echo "  \"arrival_gap_s\": 0.0005,"
  echo "  \"runs\": ["
  for i in "${!MANIFEST_RUNS[@]}"; do
    sep=,; [ "$i" = $((${#MANIFEST_RUNS[@]} - 1)) ] && sep=
    echo "    ${MANIFEST_RUNS[$i]}$sep"
  done
  echo "  ]"
  echo "}"
} > "$OUT_ABS/pacing.json"
echo "pacing.sh: $OUT/pacing.json" >&2

if [ "$MODE" = smoke ]; then
  exec "$HERE/pacing-check.sh" "$OUT_ABS"
fi
if "$VL" report "$OUT_ABS" -o "$OUT_ABS/report.html" --title "vodlab: the pacing experiment" 2>/dev/null; then
  echo "pacing.sh: $OUT/report.html" >&2
fi
