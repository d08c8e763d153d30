# Shared by the loopback server benchmarks (h2-serve-bench.sh, h1-where-cpu.sh):
# sourced after `set -euo pipefail`. Needs python3 and bash's /dev/tcp.

# free_port: a TCP port on 127.0.0.1 that nothing listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_port PORT: until 127.0.0.1:PORT accepts a connection (10 s at most, then exit 1).
wait_port() {
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "port $1 never opened" >&2; exit 1
}

# nginx_conf DIR ROOT [EXTRA_HTTP_LINES] SERVER_LINES...: writes DIR/nginx.conf for one
# worker without a master process (so its PID is the PID started), sendfile on, no access
# log, temp files in DIR; each SERVER_LINE is a `listen ...;` directive of its own server
# block serving ROOT. Start it with `nginx -c DIR/nginx.conf -p DIR`.
nginx_conf() {
  local dir=$1 root=$2 extra=$3 l
  shift 3
  {
    cat <<EOF2
daemon off;
master_process off;
worker_processes 1;
pid $dir/nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  client_body_temp_path $dir; proxy_temp_path $dir; fastcgi_temp_path $dir;
  uwsgi_temp_path $dir; scgi_temp_path $dir;
$extra
EOF2
    for l in "$@"; do echo "  server { $l root $root; }"; done
    echo "}"
  } > "$dir/nginx.conf"
}

# h2load_secs: h2load's output on stdin -> the run's seconds ("finished in 1.23s," or 812.5ms or us).
h2load_secs() {
  awk '/^finished in/ {v=$3; sub(/,$/,"",v); if (v ~ /ms$/) {sub(/ms$/,"",v); v=v/1000} else if (v ~ /us$/) {sub(/us$/,"",v); v=v/1e6} else sub(/s$/,"",v); print v}'
}

# json_open FILE, json_row FILE OBJECT..., json_close FILE: FILE holds a JSON array of the
# rows written between open and close, one object per json_row.
json_open() { echo "[" > "$1"; _json_first=1; }
json_row() {
  [ "$_json_first" = 1 ] || echo "," >> "$1"
  _json_first=0
  echo "$2" >> "$1"
}
json_close() { echo "]" >> "$1"; }
