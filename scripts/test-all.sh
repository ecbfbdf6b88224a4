#!/usr/bin/env bash
# Installs everything the tests need (system packages with apt-get, Python packages with pip
# into ./.venv) and runs every test. CI runs exactly this (through .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-system.sh
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
export PATH="$PWD/.venv/bin:$PATH"
cargo test --workspace --locked 2>&1
.venv/bin/python -m pytest -q benches/tests
