#!/usr/bin/env bash
# The SM JPEG decoder inside the engine (SLIDESTREAM_GPU_SM_DECODER), verified and measured on a
# lent H100/H200 in one call:
#   here:   the .device/ carry (benches/h200_hardening.sh's header: wheels/ with the test-hooks
#           wheel; bin/ with the gzipped executables of `cargo test --release --features
#           cuda,unstable --test gpu --test gpu_sm --no-run` named gpu-tests, gpu_sm-tests, and the
#           `--features cuda` release CLI named slidestream; testdata/; vs/; make_big_svs.py)
#           (and, optional, sm_jpeg_probe: `cargo build --release --features cuda,unstable
#           --example sm_jpeg_probe`, gzipped the same way)
#   device: run(command="bash benches/h200_issue32.sh", carry=[".device"])
#           (QUICK=1 bash ...: only the SM engine tests and gpu-region off/on)
# 0. the kernels alone (sm_jpeg_probe): thread vs warp Huffman decoding, ~1k and ~14k tiles.
# 1. core/tests/gpu_sm.rs with the SM decoder on, both compat modes (device == CPU).
# 2. gpu-region on the 48000² slide (batches of 4096), SM off and on alternating: patches/s and
#    host cores busy.
# 3. core/tests/gpu.rs with the SM decoder on, both compat modes.
# 4. read_patches(device="cuda") across 8 copies, batches of 256, and one slide: SM off and on.
# 5. compute-sanitizer memcheck on the SM engine test; py/tests/test_gpu.py with it on.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/h200_issue32.log") 2>&1
source benches/h200_device_env.sh
export SLIDESTREAM_VENDOR_SLIDES=$D/vs
make_slides &
mk=$!
wait $mk
if [ "${QUICK:-0}" = 1 ]; then
  # QUICK=1: after a routing change, the engine checks and the rates alone.
  for mode in on off; do
    echo "-- gpu_sm-tests, SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=$mode"
    SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=$mode timeout 100 /tmp/bin/gpu_sm-tests --nocapture 2>&1 | grep -E "test result|panicked|SM decoder:" | tail -7
  done
  for sm in off on; do
    echo "== gpu-region /tmp/big.svs, SLIDESTREAM_GPU_SM_DECODER=$sm"
    SLIDESTREAM_GPU_SM_DECODER=$sm SLIDESTREAM_GPU_WARMUP=full timeout 120 /tmp/bin/slidestream gpu-region /tmp/big.svs --patches 8192 --batch 4096 2>&1 | tail -3
  done
  echo "-- gpu-tests, SLIDESTREAM_GPU_SM_DECODER=on"
  SLIDESTREAM_GPU_SM_DECODER=on timeout 150 /tmp/bin/gpu-tests --test-threads 8 2>&1 | grep -E "^test |test result|panicked" | grep -v " ok$" | tail -12
  echo "== done in $SECONDS s"
  exit 0
fi
# The kernels alone over the benchmark slide's tiles (tiles/s per Huffman variant, the
# one-warp-a-segment decoder last and verified against libjpeg-turbo): a call's worth of tiles
# (~1k for 256 patches) and a large batch (~14k).
if [ -x /tmp/bin/sm_jpeg_probe ]; then
  for args in "--tiles 1024 --step 9" "--tiles 14000 --step 3"; do
    echo "== sm_jpeg_probe $args"
    timeout 120 /tmp/bin/sm_jpeg_probe --rounds 3 $args /tmp/big.svs 2>&1 | tail -16
  done
fi
for mode in on off; do
  echo "-- gpu_sm-tests, SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=$mode"
  SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=$mode timeout 100 /tmp/bin/gpu_sm-tests --nocapture 2>&1 | grep -E "^test |test result|panicked|SM decoder:" | grep -v " ok$" | tail -10
done
for sm in off on off on; do
  echo "== gpu-region /tmp/big.svs, SLIDESTREAM_GPU_SM_DECODER=$sm"
  SLIDESTREAM_GPU_SM_DECODER=$sm SLIDESTREAM_GPU_WARMUP=full timeout 120 /tmp/bin/slidestream gpu-region /tmp/big.svs --patches 8192 --batch 4096 2>&1 | tail -4
done
# Where an SM call's time goes (SLIDESTREAM_GPU_TRACE: phases summed per call), batches of 4096
# and of 256.
for b in 4096 256; do
  echo "== gpu-region trace, SM on, batches of $b"
  SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_GPU_TRACE=1 timeout 60 /tmp/bin/slidestream gpu-region /tmp/big.svs --patches 2048 --batch $b 2>&1 | grep -E "patches/s|tiles decoded in" | tail -4
done
for mode in on off; do
  echo "-- gpu-tests, SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=$mode"
  SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=$mode timeout 150 /tmp/bin/gpu-tests --test-threads 8 2>&1 | grep -E "^test |test result|panicked" | grep -v " ok$" | tail -12
done
for sm in off on; do
  echo "== read_patches(device=cuda), SLIDESTREAM_GPU_SM_DECODER=$sm"
  SLIDESTREAM_GPU_SM_DECODER=$sm timeout 100 $PY benches/training_loop.py --slides /tmp/tl-slides/s?.svs --only rp-device-8 rp-device-1 --budget-s 90 2>&1 | grep -E '^\| rp' | head -4
done
if command -v compute-sanitizer >/dev/null || [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
  echo "== compute-sanitizer memcheck, gpu_sm-tests, SM on"
  SLIDESTREAM_GPU_SM_DECODER=on timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck /tmp/bin/gpu_sm-tests --test-threads 1 2>&1 | grep -E "ERROR SUMMARY|test result|Invalid|SM decoder:" | head -12
fi
echo "== test_gpu.py, SLIDESTREAM_GPU_SM_DECODER=on"
SLIDESTREAM_GPU_SM_DECODER=on timeout 100 $PY -m pytest -q -x -p no:cacheprovider py/tests/test_gpu.py 2>&1 | tail -4
echo "== done in $SECONDS s"
