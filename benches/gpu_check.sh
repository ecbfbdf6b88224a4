#!/usr/bin/env bash
# GPU verification and timings on a CUDA machine without a Rust toolchain (the lent H200).
# What docs/gpu.md reports comes from these steps (run as one or two device calls, by PARTS).
#
# Prepare here (x86-64 build machine), into the git-ignored .device/:
#   cargo build --release -p slidestream --features cuda
#   mkdir -p .device/bin .device/wheels && strip -o .device/bin/slidestream-cuda target/release/slidestream
#   cargo test --release -p slidestream --features cuda --no-run     # prints target/release/deps/gpu-<hash>
#   objcopy --strip-debug target/release/deps/gpu-<hash> .device/bin/gpu-tests   # symbols kept for the sanitizer
#   (cd py && maturin build --release --out ../.device/wheels)
#   cp -r ../shared/testdata .device/testdata && cp ../shared/tools/make_big_svs.py .device/
# Device: run(command="PARTS='tests sweep' bash benches/gpu_check.sh", carry=[".device"]); logs go to $OUT.
#
# PARTS (default "tests python timings torchvision"):
#   tests        core/tests/gpu.rs under SLIDESTREAM_COMPAT_MODE=on, off, auto, then auto without CPU
#                decode workers, then the large-batch test alone with a 16 MiB device cache (the
#                held-bytes bound), then the small-patch (partial decode) test alone
#   sanitizer    compute-sanitizer memcheck over the GPU tests (leak check on), then initcheck
#   initcheck    initcheck (kernel accesses) over five GPU tests
#   python       py/tests/test_gpu.py with the wheel
#   timings      4096 random 256² patches (gpu-region; REPEAT=n runs it n times) and the level-0
#                scan, default settings
#   sweep        the same under SLIDESTREAM_GPU_SPLIT x SLIDESTREAM_GPU_SYNC x SLIDESTREAM_GPU_CPU_WORKERS
#                settings, then without partial decoding
#   scantrace    the level-0 scan traced per call (SLIDESTREAM_GPU_TRACE)
#   torchvision  torchvision's batched nvJPEG on the same tiles (benches/tv_decode.py)
#   mt           compare.py rand256-1t / rand256-mt for slidestream-cuda, default and blocking sync
#   beforeafter  the redesign's before/after check in one call: the previous revision's CLI and wheel
#                (.device/base/slidestream-cuda, .device/base/wheels/) against this one, alternating,
#                three rounds: gpu-region 4096 x 4096, the CPU `bench`, and the Python batch of 4096
#                (benches/gpu_batch_py.py, device and CPU)
#   compare      benches/compare.py, slidestream CPU and CUDA from Python (batch4096, scan-l0,
#                rand256-1t, rand256-mt; warm page cache), report in $OUT
set -uo pipefail
B=$PWD/.device/bin/slidestream-cuda
T=$PWD/.device/bin/gpu-tests
export SLIDESTREAM_TESTDATA=$PWD/.device/testdata
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
PARTS=${PARTS:-"tests python timings torchvision"}
has() { case " $PARTS " in *" $1 "*) return 0;; esac; return 1; }
wheel() {
  [ -d /tmp/ss/slidestream ] || python3 -m pip install -q --no-deps --no-index --target /tmp/ss .device/wheels/slidestream-*.whl
}
region() {  # label, then env assignments for gpu-region (4096 patches, one batch); BIN overrides $B
  echo "#### 4096 random 256² patches: $*"
  env "$@" SLIDESTREAM_GPU_TRACE=1 timeout 120 ${BIN:-$B} gpu-region /tmp/big.svs --patches 4096 --batch 4096 2>&1 | grep -E "patches/s|trace"
}
scan() {
  echo "#### level-0 scan (40,000 tiles), batches of 4096: $*"
  env "$@" timeout 120 $B tiles /tmp/big.svs --device cuda --batch 4096 2>&1 | grep -E "throughput|gpu decode"
}
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
[ -f /tmp/big.svs ] || python3 .device/make_big_svs.py /tmp/big.svs --source .device/testdata/CMU-1-Small-Region.svs >/dev/null
export SLIDESTREAM_TEST_BIG_SLIDE=/tmp/big.svs   # the large-batch test also reads 2048 of its tiles
if has tests; then
  for mode in on off auto; do
    echo "#### core/tests/gpu.rs, SLIDESTREAM_COMPAT_MODE=$mode"
    SLIDESTREAM_COMPAT_MODE=$mode timeout 240 $T --test-threads 8 --nocapture 2>&1 | grep -v '^$' | tail -40
  done
  echo "#### core/tests/gpu.rs, SLIDESTREAM_GPU_CPU_WORKERS=0 (nvJPEG only)"
  SLIDESTREAM_GPU_CPU_WORKERS=0 timeout 240 $T --test-threads 8 --nocapture 2>&1 | grep -E "test result|FAILED|panicked|large batch|tiles in one batch" | tail -10
  echo "#### held-bytes bound: the large-batch test alone, SLIDESTREAM_DEVICE_CACHE_BYTES=16777216"
  SLIDESTREAM_DEVICE_CACHE_BYTES=16777216 timeout 120 $T --test-threads 1 --nocapture a_large_batch 2>&1 | grep -v '^$' | tail -8
  echo "#### partial decodes on the CPU workers: the small-patch test alone"
  timeout 120 $T --test-threads 1 --nocapture small_patches 2>&1 | grep -v '^$' | tail -8
  if [ -x .device/bin/lib-tests ]; then
    echo "#### the library's unit tests on the GPU (NVRTC compile with the layout asserts, probe stream leak)"
    timeout 240 .device/bin/lib-tests --test-threads 4 2>&1 | grep -E "test result|FAILED|panicked" | tail -8
  fi
  # The driver conformance battery and the error-kind cases, whose GPU halves run here.
  for t in conformance error_kinds; do
    [ -x .device/bin/$t-tests ] || continue
    for mode in on off auto; do
      echo "#### core/tests/$t.rs, SLIDESTREAM_COMPAT_MODE=$mode"
      SLIDESTREAM_COMPAT_MODE=$mode timeout 240 .device/bin/$t-tests --test-threads 8 2>&1 | grep -E "test result|FAILED|panicked|skip" | tail -12
    done
  done
  echo "#### which path the bytes took: a level-0 scan under each compat mode (cuFile needs the udev record, see docs/gpu.md)"
  for mode in on off auto; do
    echo "# SLIDESTREAM_COMPAT_MODE=$mode"
    SLIDESTREAM_COMPAT_MODE=$mode timeout 120 $B tiles /tmp/big.svs --device cuda --batch 4096 2>&1 | grep -vE "^\s*$" | head -12
  done
fi
CS=/usr/local/cuda/bin/compute-sanitizer
summary() {  # error kinds, and the kernels / API calls they were reported in
  grep -E "^========= [A-Z]" "$1" | sed -E 's/ (at|to) 0x[0-9a-f]+.*//; s/[0-9,]+ bytes/N bytes/g; s/[0-9]+ errors/N errors/' | sort | uniq -c | sort -rn | head -15
  grep -E "^=========     at " "$1" | sed -E 's/\+0x[0-9a-f]+//' | sort | uniq -c | sort -rn | head -10
}
if has sanitizer; then
  $CS --version | tail -1
  echo "#### compute-sanitizer memcheck (leak check), every GPU test (log: sanitizer-memcheck.txt)"
  env -u SLIDESTREAM_TEST_BIG_SLIDE timeout 240 $CS --tool memcheck --leak-check full --print-limit 100000 --error-exitcode 99 $T --test-threads 4 --nocapture > "$OUT/sanitizer-memcheck.txt" 2>&1
  echo "rc $?"; grep -E "^test result|ERROR SUMMARY|LEAK SUMMARY" "$OUT/sanitizer-memcheck.txt"; summary "$OUT/sanitizer-memcheck.txt"
fi
if has sanitizer || has initcheck; then
  # --check-api-memory-access no: copies made inside nvjpegDecodeBatched read nvJPEG's own buffers
  # that the hardware engines fill, which initcheck cannot observe (every one was reported when
  # the check was on); kernels' reads are still checked, slidestream's included.
  echo "#### compute-sanitizer initcheck of kernel accesses: generated pyramids, corrupt tile, edge requests, large batch, small patches (partial tiles) (log: sanitizer-initcheck.txt)"
  env -u SLIDESTREAM_TEST_BIG_SLIDE timeout 240 $CS --tool initcheck --check-api-memory-access no --print-limit 200 --error-exitcode 99 $T --test-threads 1 generated_jpeg corrupt_tile outside_and_empty a_large_batch small_patches > "$OUT/sanitizer-initcheck.txt" 2>&1
  echo "rc $?"; grep -E "^test result|ERROR SUMMARY" "$OUT/sanitizer-initcheck.txt"; summary "$OUT/sanitizer-initcheck.txt"
fi
if has python; then
  echo "#### py/tests/test_gpu.py"
  wheel
  PYTHONPATH=/tmp/ss timeout 300 python3 -m pytest -q -p no:cacheprovider -rs py/tests/test_gpu.py 2>&1 | tail -8
fi
if has timings; then
  echo "#### engine start and warm-up"
  SLIDESTREAM_GPU_TRACE=1 timeout 60 $B info /tmp/big.svs --io-stats 2>&1 | grep -E "engine start|gpu decode"
  for _ in $(seq "${REPEAT:-1}"); do region SLIDESTREAM_GPU_WORKERS=4; done
  echo "#### level-0 scan: CPU path"
  timeout 120 $B tiles /tmp/big.svs --batch 1024 | head -2
  scan SLIDESTREAM_GPU_WORKERS=4
fi
if has sweep; then
  for split in cost offset; do
    for sync in default blocking; do
      for cw in 8 12 16; do
        region SLIDESTREAM_GPU_CPU_WORKERS=$cw SLIDESTREAM_GPU_SYNC=$sync SLIDESTREAM_GPU_SPLIT=$split
      done
    done
  done
  region SLIDESTREAM_GPU_CPU_WORKERS=12 SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION=0
  region SLIDESTREAM_GPU_CPU_WORKERS=12 SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION=1
  for cw in 0 12; do scan SLIDESTREAM_GPU_CPU_WORKERS=$cw; done
fi
if has scantrace; then
  echo "#### level-0 scan, batches of 4096, traced (per call: time inside the engine, the whole call, the drop)"
  SLIDESTREAM_GPU_TRACE=1 timeout 120 $B tiles /tmp/big.svs --device cuda --batch 4096 2>&1 | grep -E "throughput|gpu decode|trace"
fi
if has torchvision; then
  echo "#### torchvision batched nvJPEG on the same tiles"
  timeout 120 python3 benches/tv_decode.py /tmp/big.svs 8192 256
fi
if has mt; then
  wheel
  for sync in default blocking; do
    echo "#### compare.py rand256-1t / rand256-mt, slidestream-cuda, SLIDESTREAM_GPU_SYNC=$sync"
    SLIDESTREAM_GPU_SYNC=$sync PYTHONPATH=/tmp/ss timeout 200 python3 benches/compare.py /tmp/big.svs --readers slidestream-cuda \
      --workloads rand256-1t,rand256-mt --cache warm --testdata none --patches 1000 --rounds 3 --measure-timeout-s 60 --no-plots \
      --name h200-gpu-mt-$sync --out "$OUT" --binary /nonexistent >/dev/null 2>"$OUT/compare-mt-$sync.err"
    echo "rc $?"; grep -E "^\| rand256" "$OUT/compare-h200-gpu-mt-$sync.md" | head -4
  done
fi
if has beforeafter; then
  [ -d /tmp/ssbase/slidestream ] || python3 -m pip install -q --no-deps --no-index --target /tmp/ssbase .device/base/wheels/slidestream-*.whl
  wheel
  for round in 1 2 3; do
    for side in before after; do
      if [ $side = before ]; then bin=$PWD/.device/base/slidestream-cuda; pp=/tmp/ssbase; else bin=$B; pp=/tmp/ss; fi
      echo "#### round $round, $side"
      BIN=$bin region SIDE=$side
      echo "# CPU bench, 4000 random 256² patches:"; timeout 120 $bin bench /tmp/big.svs --patches 4000 --size 256 --seed $round 2>&1 | grep -E "patches/s|reads/s" | head -2
      PYTHONPATH=$pp timeout 120 python3 benches/gpu_batch_py.py /tmp/big.svs --label "$side" --seed $round 2>&1 | tail -1
      PYTHONPATH=$pp timeout 120 python3 benches/gpu_batch_py.py /tmp/big.svs --label "$side" --seed $round --device cpu --rounds 3 2>&1 | tail -1
    done
  done
fi
if has compare; then
  echo "#### compare.py: slidestream CPU and CUDA from Python"
  wheel
  PYTHONPATH=/tmp/ss timeout 420 python3 benches/compare.py /tmp/big.svs --readers slidestream,slidestream-cuda \
    --workloads batch4096,scan-l0,rand256-1t,rand256-mt --cache warm --testdata none --patches 1000 --rounds 3 \
    --scan-tiles 4000 --measure-timeout-s 60 --no-plots --name h200-gpu-${NAME:-check} --out "$OUT" --binary /nonexistent >/dev/null 2>"$OUT/compare.err"
  echo "rc $?"; tail -5 "$OUT/compare.err"
  grep -E "^\|" "$OUT"/compare-h200-gpu-*.md | head -30
fi
} 2>&1 | tee "$OUT/gpu_check.log"
