#!/usr/bin/env bash
# Build the fuzz targets with the stable toolchain and run each one over its seed corpus for a
# bounded number of executions. Exits non-zero when a target crashes (a panic, an abort, a
# timeout or memory past the limit), leaving the input under fuzz/artifacts/<target>/.
#
# usage: fuzz/run.sh SEEDS_DIR [RUNS [TARGET...]]
#   SEEDS_DIR  the output of fuzz/make_seeds.py (a folder per target)
#   RUNS       executions per target after the seeds (default 2000; 0 = the seeds only)
#   TARGET     targets to run (default: every target that has a folder in SEEDS_DIR)
# Environment: FUZZ_MAX_TIME seconds per target at most (default 30), FUZZ_SEED the
# fuzzer's random seed (default 28, so a run is repeatable).
#
# cargo-fuzz is not needed: the flags below are the ones `cargo fuzz build -s none` passes to
# rustc (SanitizerCoverage through LLVM's sancov pass, stable since Rust 1.58), plus debug
# assertions and overflow checks; libfuzzer-sys builds libFuzzer itself. `--target` keeps them
# off build scripts and proc-macros.
set -euo pipefail
seeds=$(realpath "$1")
cd "$(dirname "$0")"
runs=${2:-2000}
shift $(($# < 2 ? $# : 2))
host=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-sanitizer-coverage-stack-depth --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for d in "$seeds"/*/; do targets+=("$(basename "$d")"); done
fi
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
cargo build --release --locked --target "$host" "${bins[@]}"
bin_dir="${CARGO_TARGET_DIR:-target}/$host/release"
status=0
for t in "${targets[@]}"; do
  # A scratch corpus: new inputs found during the run go there, not into the seeds.
  work=$(mktemp -d)
  mkdir -p "artifacts/$t"
  start=$(date +%s%N)
  # -rss_limit_mb / -malloc_limit_mb: an allocation sized by a header value fails the run;
  # -timeout: one input taking longer is a hang.
  if ! "$bin_dir/$t" "$work" "$seeds/$t" -runs="$runs" -max_total_time="${FUZZ_MAX_TIME:-30}" \
      -seed="${FUZZ_SEED:-28}" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=1048576 \
      -artifact_prefix="artifacts/$t/" -print_final_stats=1 >"artifacts/$t/log.txt" 2>&1; then
    echo "fuzz target $t: FAILED (input under fuzz/artifacts/$t/, log fuzz/artifacts/$t/log.txt):"
    grep -E "panicked|ERROR|SUMMARY|Test unit written" "artifacts/$t/log.txt" | head -20 || tail -20 "artifacts/$t/log.txt"
    status=1
  else
    echo "fuzz target $t: ok, $(grep -oE 'stat::number_of_executed_units: *[0-9]+' "artifacts/$t/log.txt" | grep -oE '[0-9]+$') executions in $(( ($(date +%s%N) - start) / 1000000 )) ms, $(grep -oE 'cov: [0-9]+ ft: [0-9]+' "artifacts/$t/log.txt" | tail -1)"
  fi
  rm -rf "$work"
done
exit $status
