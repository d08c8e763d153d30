#!/usr/bin/env bash
# Builds the cargo-fuzz targets (fuzz/) and runs each for SECONDS (default 60).
# cargo-fuzz needs nightly-only sanitizer flags; on a stable toolchain
# RUSTC_BOOTSTRAP=1 allows them (only for this build).
#   scripts/fuzz.sh          # 60 s per target
#   scripts/fuzz.sh 600      # longer
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked --quiet
export RUSTC_BOOTSTRAP=1
cargo fuzz build -O
for t in $(cargo fuzz list); do
  echo "fuzz: $t for ${seconds}s"
  cargo fuzz run -O "$t" -- -max_total_time="$seconds" 2>&1 | grep -E "^Done|SUMMARY|panicked" || true
  if [ -d "fuzz/artifacts/$t" ] && [ -n "$(ls -A "fuzz/artifacts/$t")" ]; then
    echo "fuzz: $t found a crash: fuzz/artifacts/$t"; exit 1
  fi
done
