#!/usr/bin/env bash
# The test command: install the real peers the tests use, then run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
cargo test --workspace --release "$@"
