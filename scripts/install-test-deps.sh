#!/usr/bin/env bash
# Installs the real peers vodlab's tests run against (Debian/Ubuntu packages):
#   nginx-light     nginx, the reference HTTP server on loopback
#   httperf         replays exported wsesslog files
#   nghttp2-client  h2load, replays exported timing scripts
#   nghttp2-proxy   nghttpx, the BBC's HTTP/2 proxy, in front of nginx in vodlab run's h2/h2c tests
#   openssl         makes the throw-away CA and certificate of the TLS tests
#   curl            a real client for vodlab serve's HTTP tests
#   apache2, lighttpd  servers `vodlab compare` configures and measures beside nginx
#   fuse3           fusermount3, which `vodlab disk mount` (FUSE) mounts and unmounts with
#   python3-h2      Python's h2 and hpack for Debian's /usr/bin/python3: the HTTP/2
#                   conformance and flood probes of scripts/h2probe (tests/h2_serve.rs, h2_floods.rs);
#                   nghttp2-client's nghttp and h2load are the h2 peers
#   ffmpeg          encodes real media (`vodlab fileset create --media real`; ffprobe in tests)
#   chromium        the headless browser `vodlab record` drives (dash.js over DevTools)
# and, with npm, dash.js, hls.js and puppeteer-core (which drives the system Chromium,
# downloads no browser) for `vodlab record`, into ${VODLAB_RECORD_DIR:-~/.cache/vodlab-record}
# (outside the repository: never committed).
set -euo pipefail
record_dir="${VODLAB_RECORD_DIR:-${HOME:-/root}/.cache/vodlab-record}"
install_record_npm() {
  local m="$record_dir/node_modules"
  [ -f "$m/dashjs/package.json" ] && [ -f "$m/puppeteer-core/package.json" ] \
    && grep -q '"version": "1.7.4"' "$m/hls.js/package.json" 2>/dev/null && return 0
  command -v npm >/dev/null 2>&1 || { echo 'install-test-deps: npm missing: vodlab record needs node and npm (Debian: nodejs npm)' >&2; return 0; }
  mkdir -p "$record_dir"
  [ -f "$record_dir/package.json" ] || echo '{"name":"vodlab-record-cache","private":true}' > "$record_dir/package.json"
  # versions pinned: the record script uses dash.js 4's and hls.js 1.7's API
  PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix "$record_dir" --no-audit --no-fund --loglevel=error dashjs@4.7.4 hls.js@1.7.4 puppeteer-core@24 >/dev/null 2>&1 \
    || echo "install-test-deps: npm install into $record_dir failed: tests/record.rs will say what is missing" >&2
}
python3 -c 'import kubernetes_validate' 2>/dev/null || PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q kubernetes-validate || echo 'install-test-deps: kubernetes-validate (PyPI) not installed: tests/k8s.rs validates vodlab k8s manifests with it' >&2
packages=(nginx-light apache2 lighttpd httperf nghttp2-client nghttp2-proxy openssl curl fuse3 python3-h2 ffmpeg chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then install_record_npm; exit 0; fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# The packaged nginx service is not needed: tests start their own on loopback.
if command -v systemctl >/dev/null 2>&1; then $sudo systemctl disable --now nginx apache2 lighttpd >/dev/null 2>&1 || true; fi
install_record_npm
