#!/usr/bin/env bash
# Installs the real peers vodlab's tests run against. What it installs and
# changes, and nothing else (README.md, "Quick start", lists the same):
#
# 1. Debian/Ubuntu packages, only those missing (apt-get, with sudo when not root):
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
#   python3-venv    makes the virtual environment of step 2
#   testssl.sh      the TLS scanner tests/tls_scan.rs runs against vodlab serve (loopback, no DNS)
#   ffmpeg          encodes real media (`vodlab fileset create --media real`; ffprobe in tests)
#   chromium        the headless browser `vodlab record` drives (dash.js over DevTools)
#   ngtcp2-client, ngtcp2-server  gtlsclient and gtlsserver, ngtcp2's HTTP/3 example
#                   programs (with nghttp3): the third-party h3 peers of tests/h3.rs
#                   (ngtcp2-server ships an ngtcp2d unit; the policy-rc.d keeps it stopped)
#   While it installs missing packages, and only then, a /usr/sbin/policy-rc.d that
#   forbids starting services keeps the packages' daemons (nginx, apache2, lighttpd)
#   from starting; it is removed afterwards, and one that was already there is left
#   as it is. No service is ever stopped, disabled or reconfigured: the tests start
#   their own servers, with their own configurations, on free loopback ports.
# 2. kubernetes-validate and aioquic (PyPI) into a virtual environment in the repository,
#   ${VODLAB_TEST_VENV:-target/test-venv} (git-ignored; never the system's Python):
#   tests/k8s.rs validates `vodlab k8s` manifests with it; scripts/test.sh puts the
#   environment's bin/ first on PATH; tests/h3.rs runs scripts/h3probe/h3get.py
#   (an aioquic HTTP/3 client) with the environment's python3.
# 3. with npm, dash.js, hls.js and puppeteer-core (which drives the system Chromium,
#   downloads no browser) for `vodlab record`, into ${VODLAB_RECORD_DIR:-~/.cache/vodlab-record}
#   (outside the repository: never committed).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
record_dir="${VODLAB_RECORD_DIR:-${HOME:-/root}/.cache/vodlab-record}"
venv="${VODLAB_TEST_VENV:-$repo/target/test-venv}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

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

install_venv() {
  "$venv/bin/python3" -c 'import kubernetes_validate, aioquic' 2>/dev/null && return 0
  if ! python3 -m venv "$venv" >/dev/null; then
    echo "install-test-deps: python3 -m venv $venv failed (Debian: python3-venv): tests/k8s.rs validates vodlab k8s manifests with kubernetes-validate" >&2
    return 0
  fi
  "$venv/bin/python3" -m pip install -q kubernetes-validate \
    || echo "install-test-deps: kubernetes-validate (PyPI) not installed into $venv: tests/k8s.rs validates vodlab k8s manifests with it" >&2
  "$venv/bin/python3" -m pip install -q aioquic \
    || echo "install-test-deps: aioquic (PyPI) not installed into $venv: tests/h3.rs fetches from vodlab serve --h3 with it" >&2
}

# Installs the missing packages with service starts forbidden by a
# policy-rc.d of our own, removed on the way out (also on failure).
policy=/usr/sbin/policy-rc.d
our_policy=""
remove_policy() {
  if [ -n "$our_policy" ]; then
    $sudo rm -f "$policy"
    our_policy=""
  fi
}
install_packages() {
  if [ ! -e "$policy" ]; then
    trap remove_policy EXIT
    trap 'remove_policy; exit 130' INT TERM
    printf '#!/bin/sh\n# vodlab scripts/install-test-deps.sh: no service starts while it installs packages\nexit 101\n' \
      | $sudo tee "$policy" >/dev/null
    $sudo chmod 755 "$policy"
    our_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! $sudo apt-get install -y -q --no-install-recommends "$@"; then
    $sudo apt-get update -q
    $sudo apt-get install -y -q --no-install-recommends "$@"
  fi
  remove_policy
  trap - EXIT INT TERM
}

packages=(nginx-light apache2 lighttpd httperf nghttp2-client nghttp2-proxy openssl curl fuse3 python3-h2 python3-venv testssl.sh ffmpeg chromium ngtcp2-client ngtcp2-server iputils-ping)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] || install_packages "${missing[@]}"
install_venv
install_record_npm
