#!/usr/bin/env bash
# The SM decoder's warm-ups, periodic shortcut and region-aware decoding, verified and measured
# on a lent H100/H200 in one call, most telling first (a call may be cut short). Carry: the
# .device/ folder of benches/h200_hardening.sh (wheels/ with the test-hooks wheel; bin/ with
# gpu-tests, gpu_sm-tests, sm_jpeg_probe and the `--features cuda` CLI `slidestream`, .xz;
# testdata/; vs/ (the generated NDPI slides suffice); make_big_svs.py):
#   device: run(command="bash benches/h200_issue32_region.sh", carry=[".device"])
# 1. core/tests/gpu_sm.rs with the SM decoder on (whole tiles and parts: device == CPU).
# 2. sm_jpeg_probe over 1,024 tiles of the 48000² slide: the warp kernel without warm-ups,
#    with them, with both (the engine's, verified against libjpeg-turbo).
# 3. gpu-region: batches of 4096 and 256 random 256² patches, SM off and on, and on with the
#    region-aware decode off (SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION=0: every tile whole).
# 4. training_loop.py: read_patches(device="cuda") and PatchLoader(readers=2), 8 slides,
#    batches of 256, SM off and on (patches/s, host cores busy).
# 5. compute-sanitizer memcheck on gpu_sm.rs; gpu_sm.rs with compat mode off; gpu.rs with the
#    SM decoder on; batches of 64 and 16; the probe over ~14k tiles.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/h200_issue32_region.log") 2>&1
source benches/h200_device_env.sh
export SLIDESTREAM_VENDOR_SLIDES=$D/vs
make_slides
probe() {
  echo "== sm_jpeg_probe $*"
  timeout 120 /tmp/bin/sm_jpeg_probe --rounds 5 "$@" /tmp/big.svs 2>&1 | grep -E "warp|idct, 64|equal|differ|tiles" | tail -12
}
sm_tests() {
  echo "-- gpu_sm-tests, SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=$1"
  SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=$1 timeout 100 /tmp/bin/gpu_sm-tests --nocapture --test-threads 1 2>&1 | grep -E "test result|panicked|SM decoder" | tail -12
}
region() {  # batch, SM setting, patches, [partial fraction]
  echo "== gpu-region /tmp/big.svs, batches of $1, SLIDESTREAM_GPU_SM_DECODER=$2${4:+, SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION=$4}"
  SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION=${4:-0.5} SLIDESTREAM_GPU_SM_DECODER=$2 SLIDESTREAM_GPU_WARMUP=full timeout 100 /tmp/bin/slidestream gpu-region /tmp/big.svs --patches $3 --batch $1 2>&1 | tail -2
}
sm_tests on
probe --tiles 1024 --step 9
for b in 4096 256; do
  region $b off 8192
  region $b on 8192
  region $b on 8192 0
done
for sm in off on; do
  echo "== training_loop, SLIDESTREAM_GPU_SM_DECODER=$sm"
  SLIDESTREAM_GPU_SM_DECODER=$sm timeout 100 $PY benches/training_loop.py --slides /tmp/tl-slides/s?.svs --only rp-device-8 loader-device-8-readers2 --budget-s 90 2>&1 | grep -E '^\| (rp|loader)'
done
echo "== compute-sanitizer memcheck, gpu_sm-tests, SM on"
SLIDESTREAM_GPU_SM_DECODER=on timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck /tmp/bin/gpu_sm-tests --test-threads 1 2>&1 | grep -E "ERROR SUMMARY|test result|Invalid" | head -8
sm_tests off
echo "-- gpu-tests, SLIDESTREAM_GPU_SM_DECODER=on"
SLIDESTREAM_GPU_SM_DECODER=on timeout 120 /tmp/bin/gpu-tests --test-threads 8 2>&1 | grep -E "^test |test result|panicked" | grep -v " ok$" | tail -12
for b in 64 16; do
  region $b on 2048
  region $b off 2048
done
probe --tiles 14000 --step 3
echo "== done in $SECONDS s"
