#!/usr/bin/env bash
# The test command: install the real peers the tests use (what that installs
# and changes: scripts/install-test-deps.sh and README.md), then run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
# the project's virtual environment (kubernetes-validate for tests/k8s.rs)
# first on PATH: its python3 is the one `python3 -m kubernetes_validate` finds
venv="${VODLAB_TEST_VENV:-$PWD/target/test-venv}"
[ -x "$venv/bin/python3" ] && export PATH="$venv/bin:$PATH"
cargo test --workspace --release "$@"
