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
# One-shot builds: no incremental-compilation caches (they roughly double target/debug).
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
# Small slides in each vendor's layout (Philips, Ventana, Leica, NDPI, OME-TIFF, ...), with
# OpenSlide 4.0.1's output as their reference: read by the Rust and Python parity tests.
export SLIDESTREAM_VENDOR_SLIDES="$PWD/target/vendor-slides"
rm -rf "$SLIDESTREAM_VENDOR_SLIDES"
.venv/bin/python scripts/make_vendor_slides.py "$SLIDESTREAM_VENDOR_SLIDES"
# Local servers for the remote-slide tests (py/tests/test_remote.py): moto's S3 server and
# nginx, each behind scripts/faultproxy.py, holding the shared test slides and the vendor slides
# above; stopped on exit, whatever the outcome.
export SLIDESTREAM_TEST_SERVERS="$PWD/target/test-servers.json"
trap '.venv/bin/python scripts/remote_servers.py stop --state "$SLIDESTREAM_TEST_SERVERS" || true' EXIT
.venv/bin/python scripts/remote_servers.py start --state "$SLIDESTREAM_TEST_SERVERS"
# Formatting and lints (cargo fmt, clippy -D warnings, ruff): scripts/lint.sh says what runs.
bash scripts/lint.sh
# Rust: unit, integration and doc tests of the core.
cargo test -p slidestream --locked 2>&1
# The `cuda` feature builds everywhere (CUDA is loaded at run time); its unit tests check the
# GPU entry points return typed errors on machines without a GPU.
cargo test -p slidestream --features cuda --lib --test gpu --locked 2>&1
# The bindings' own Rust unit tests (DLPack capsule layout and deleter), with and without the
# test hooks.
cargo test -p slidestream-py --locked 2>&1
cargo test -p slidestream-py --features test-hooks --locked 2>&1
# Fuzzing, bounded: the fuzz targets of the text and container inputs (MIRAX Slidedat.ini and
# Index.dat, DICOM headers and offset tables, Philips/Ventana/Leica/OME XML, NDPI tags), built
# with the stable toolchain, each run for 2000 executions (30 s at most) over seeds made from
# the slides above and the test slides (fuzz/README.md). A crash fails the run.
rm -rf target/fuzz-seeds
.venv/bin/python fuzz/make_seeds.py target/fuzz-seeds "$SLIDESTREAM_VENDOR_SLIDES"
bash fuzz/run.sh target/fuzz-seeds 2000
# The release CLI (used by the benchmark harness's smoke test) and, sharing its compiled
# dependencies, the Python extension built into the venv; then the Python tests. The test build
# has the `test-hooks` feature (`_test_cpu_dlpack`, ... for py/tests/test_gpu.py); release
# wheels (`maturin build --release`) never do.
cargo build --release -p slidestream --locked
VIRTUAL_ENV="$PWD/.venv" .venv/bin/maturin develop --release --locked -q -m py/Cargo.toml --features test-hooks
.venv/bin/python -m pytest -q py/tests benches/tests
# openslide-python 1.4.7's own test suite (from its sdist, downloaded once with pip and cached
# under target/) against slidestream's drop-in, substituted by py/openslide-shim on PYTHONPATH;
# the tests that cannot pass yet are listed with their reason in docs/python.md.
bash scripts/openslide-python-suite.sh
