#!/usr/bin/env bash
# Runs openslide-python 1.4.7's own test suite (tests/ and fixtures of its sdist, unmodified)
# against slidestream's OpenSlide drop-in: `py/openslide-shim` first on PYTHONPATH makes
# `import openslide` slidestream.openslide, and scripts/openslide_suite/openslide_suite_plugin.py
# refuses to run otherwise and marks the tests that cannot pass yet (listed with their reason in
# docs/python.md, "openslide-python's test suite"). Extra arguments go to pytest.
#
# The sdist is downloaded from PyPI with pip once and cached (checked by its SHA-256) under
# target/openslide-python-1.4.7/, so reruns work offline. Needs slidestream and Pillow installed in
# $PYTHON (default .venv/bin/python), e.g. by scripts/test-all.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
VERSION=1.4.7
SHA256=730fed798de683b00c8ef4d956f3d429cc02f2c449eb0d58944e1769ba7983cc
CACHE="$ROOT/target/openslide-python-$VERSION"
SDIST="$CACHE/openslide_python-$VERSION.tar.gz"
if [ ! -f "$SDIST" ] || ! echo "$SHA256  $SDIST" | sha256sum -c --quiet - 2>/dev/null; then
  rm -rf "$CACHE"
  mkdir -p "$CACHE"
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "openslide-python==$VERSION" -d "$CACHE"
  echo "$SHA256  $SDIST" | sha256sum -c --quiet -
fi
# Only the tests and the files they name (setup.py, pyproject.toml's pytest settings); never the
# sdist's openslide/ package, which would shadow the shim.
SUITE="$CACHE/suite"
rm -rf "$SUITE"
mkdir -p "$SUITE"
tar -xzf "$SDIST" -C "$SUITE" --strip-components=1 \
  "openslide_python-$VERSION/tests" "openslide_python-$VERSION/pyproject.toml" "openslide_python-$VERSION/setup.py"
cd "$SUITE"
export PYTHONPATH="$ROOT/py/openslide-shim:$ROOT/scripts/openslide_suite${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m pytest -p openslide_suite_plugin -rxXs -q "$@"
