#!/usr/bin/env bash
# Formatting and lints, run by scripts/test-all.sh (the README's test command) before the tests:
#   cargo fmt --check                     (rustfmt.toml: width 160)
#   cargo clippy ... -- -D warnings       (allowed lints and why: Cargo.toml [workspace.lints.clippy])
#   ruff check                            (ruff.toml: pyflakes and pycodestyle errors)
#   core/tests/layering.rs runs with the Rust tests: the GPU engine's layers.
# Any finding fails the run. `bash scripts/lint.sh --fix` applies what the tools can fix.
set -euo pipefail
cd "$(dirname "$0")/.."
RUFF=${RUFF:-.venv/bin/ruff}
[ -x "$RUFF" ] || RUFF=ruff
for c in rustfmt clippy; do
  if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
    rustup component add "$c" >/dev/null 2>&1 || { echo "lint: cargo ${c/rustfmt/fmt} is missing (rustup component add $c)" >&2; exit 1; }
  fi
done
if [ "${1:-}" = "--fix" ]; then
  cargo fmt
  "$RUFF" check --fix .
  exit 0
fi
echo "lint: cargo fmt --check"
cargo fmt --check
echo "lint: cargo clippy (slidestream: cuda, unstable, all targets; slidestream-py: test-hooks)"
cargo clippy -q -p slidestream --all-targets --features cuda,unstable --locked -- -D warnings
cargo clippy -q -p slidestream-py --all-targets --features test-hooks --locked -- -D warnings
echo "lint: ruff check"
"$RUFF" check .
echo "lint: clean"
