#!/usr/bin/env bash
# The SM decoder's warp kernel with warm-ups and the periodic shortcut (codec/jpeg_sm_warp.h),
# verified and measured on a lent H100/H200, in two calls (the carry of benches/h200_issue32.sh,
# plus bin/sm_jpeg_probe.gz):
#   device: run(command="PART=A bash benches/h200_issue32_sync.sh", carry=[".device"])
#           run(command="PART=B bash benches/h200_issue32_sync.sh", carry=[".device"])
# A 0. the kernels alone (sm_jpeg_probe): the warp kernel without warm-ups or shortcut, with
#      warm-ups, with both (the engine's), ~1k and ~14k tiles of the 48000² slide; verified.
#   1. core/tests/gpu_sm.rs with the SM decoder on, both compat modes (device == CPU), and
#      under compute-sanitizer memcheck.
#   2. gpu-region, batches of 4096, SM off and on; then batches of 16, 64, 256 patches (about
#      70, 270, 1,100 tiles a call), SM off and on: where the SM decoder starts to pay.
# B 3. training_loop.py: read_patches(device="cuda") and PatchLoader(readers=2), 8 slides,
#      batches of 256, SM off and on (patches/s, host cores busy).
#   4. Nsight Compute on the engine's warp kernel over ~1k tiles: where its warps wait;
#      core/tests/gpu.rs with the SM decoder on.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/h200_issue32_sync.log") 2>&1
source benches/h200_device_env.sh
make_slides
if [ "${PART:-A}" = A ]; then
  # Most telling first (a call may be cut short): the kernels alone on a call's worth of tiles,
  # device == CPU, the 4096 batches; then the rest.
  probe() {
    echo "== sm_jpeg_probe $*"
    timeout 150 /tmp/bin/sm_jpeg_probe --rounds 5 "$@" /tmp/big.svs 2>&1 | grep -E "warp|idct, 64|equal|differ|tiles" | tail -12
  }
  sm_tests() {
    echo "-- gpu_sm-tests, SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=$1"
    SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=$1 timeout 100 /tmp/bin/gpu_sm-tests --nocapture 2>&1 | grep -E "test result|panicked|SM decoder:" | tail -7
  }
  region() {
    echo "== gpu-region /tmp/big.svs, batches of $1, SLIDESTREAM_GPU_SM_DECODER=$2"
    SLIDESTREAM_GPU_SM_DECODER=$2 SLIDESTREAM_GPU_WARMUP=full timeout 120 /tmp/bin/slidestream gpu-region /tmp/big.svs --patches $3 --batch $1 2>&1 | tail -2
  }
  probe --tiles 1024 --step 9
  sm_tests on
  region 4096 on 8192
  region 4096 off 8192
  sm_tests off
  probe --tiles 14000 --step 3
  echo "== compute-sanitizer memcheck, gpu_sm-tests, SM on"
  SLIDESTREAM_GPU_SM_DECODER=on timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck /tmp/bin/gpu_sm-tests --test-threads 1 2>&1 | grep -E "ERROR SUMMARY|test result|Invalid" | head -8
  for b in 256 64 16; do
    region $b on 2048
    region $b off 2048
  done
else
  for sm in off on; do
    echo "== training_loop, SLIDESTREAM_GPU_SM_DECODER=$sm"
    SLIDESTREAM_GPU_SM_DECODER=$sm timeout 170 $PY benches/training_loop.py --slides /tmp/tl-slides/s?.svs --only rp-device-8 loader-device-8-readers2 --budget-s 160 2>&1 | grep -E '^\| (rp|loader)'
  done
  if [ -x /usr/local/cuda/bin/ncu ]; then
    echo "== ncu, sm_huffman_warp (the engine's variant), 1024 tiles"
    # Launches of sm_huffman_warp in the probe with --rounds 1: two per variant; the 6th is the
    # engine's variant, timed.
    timeout 180 /usr/local/cuda/bin/ncu --kernel-name sm_huffman_warp --launch-skip 5 --launch-count 1 \
      --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy \
      --section LaunchStats --section MemoryWorkloadAnalysis --section SourceCounters \
      /tmp/bin/sm_jpeg_probe --rounds 1 --tiles 1024 --step 9 /tmp/big.svs > "$OUT/ncu_warp_1024.txt" 2>&1
    grep -E "Duration|Warp Cycles Per Issued|Issued Warp Per Scheduler|No Eligible|Achieved Occupancy|Registers Per|Branch Efficiency|Avg. Divergent|L1/TEX Hit|L2 Hit|Stall|Theoretical Occ|Active Warps Per" "$OUT/ncu_warp_1024.txt" | head -40
  fi
  echo "-- gpu-tests, SLIDESTREAM_GPU_SM_DECODER=on"
  SLIDESTREAM_GPU_SM_DECODER=on timeout 150 /tmp/bin/gpu-tests --test-threads 8 2>&1 | grep -E "^test |test result|panicked" | grep -v " ok$" | tail -12
fi
echo "== done in $SECONDS s"
