#!/usr/bin/env bash
# The SM decoder with a host-core budget, its damaged-tile path, and where it starts to pay, on a
# lent H100/H200 in one call (the carry of benches/h200_issue32_region.sh):
#   device: run(command="bash benches/h200_issue32_cores.sh", carry=[".device"])
# PART=budget (default):
# 1. training_loop.py, 8 slides, batches of 256, the whole process pinned to 2 host cores
#    (taskset -c 0,1): PatchLoader with 2 and 3 readers, SM on.
# 2. core/tests/gpu_sm.rs (whole tiles, parts, damaged tiles) under compute-sanitizer memcheck,
#    and core/tests/gpu.rs with the SM decoder on in both compat modes.
# PART=verify: only gpu_sm.rs under memcheck and with compat mode off.
# PART=sizes: gpu-region, batches of 16, 32, 64 and 128 random 256² patches (~70 to ~540 tiles
#    a call), SM off and on: the call size where the SM decoder starts to pay
#    (scheduler::sm_takes_call). Log: docs/benchmarks/issue32-2026-12-07-h100-sm-cores.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/h200_issue32_cores.log") 2>&1
source benches/h200_device_env.sh
export SLIDESTREAM_VENDOR_SLIDES=$D/vs
make_slides
if [ "${PART:-budget}" = verify ]; then
  # The shortest check of the latest SM code: its GPU tests under memcheck, then compat mode off.
  echo "== compute-sanitizer memcheck, gpu_sm-tests, SM on"
  SLIDESTREAM_GPU_SM_DECODER=on timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool memcheck /tmp/bin/gpu_sm-tests --test-threads 1 --nocapture 2>&1 | grep -E "ERROR SUMMARY|test result|Invalid|panicked|damaged|parts:" | head -40
  echo "-- gpu_sm-tests, SM on, SLIDESTREAM_COMPAT_MODE=off"
  SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=off timeout 100 /tmp/bin/gpu_sm-tests --test-threads 1 2>&1 | grep -E "test result|panicked" | head -4
elif [ "${PART:-budget}" = budget ]; then
  # (SM off on 2 cores: 6.7-6.8k/s, the earlier call's log.)
  echo "== training_loop on 2 host cores (taskset -c 0,1), SLIDESTREAM_GPU_SM_DECODER=on"
  SLIDESTREAM_GPU_SM_DECODER=on timeout 80 taskset -c 0,1 $PY benches/training_loop.py --slides /tmp/tl-slides/s?.svs --only loader-device-8-readers2 loader-device-8-readers3 --budget-s 70 2>&1 | grep -E '^\| (rp|loader)'

  echo "== compute-sanitizer memcheck, gpu_sm-tests, SM on"
  SLIDESTREAM_GPU_SM_DECODER=on timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool memcheck /tmp/bin/gpu_sm-tests --test-threads 1 --nocapture 2>&1 | grep -E "ERROR SUMMARY|test result|Invalid|panicked|damaged" | head -16
  for mode in on off; do
    echo "-- gpu-tests, SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=$mode"
    SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=$mode timeout 120 /tmp/bin/gpu-tests --test-threads 8 2>&1 | grep -E "^test |test result|panicked" | grep -v " ok$" | tail -12
  done
else
  for b in 16 32 64 128; do
    for sm in on off; do
      echo "== gpu-region /tmp/big.svs, batches of $b, SLIDESTREAM_GPU_SM_DECODER=$sm"
      SLIDESTREAM_GPU_SM_DECODER=$sm SLIDESTREAM_GPU_WARMUP=full timeout 60 /tmp/bin/slidestream gpu-region /tmp/big.svs --patches 4096 --batch $b 2>&1 | tail -2
    done
  done
fi
echo "== done in $SECONDS s"
