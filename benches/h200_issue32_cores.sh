#!/usr/bin/env bash
# The SM decoder with a host-core budget, and where it starts to pay, on a lent H100/H200 in one
# call (the carry of benches/h200_issue32_region.sh):
#   device: run(command="bash benches/h200_issue32_cores.sh", carry=[".device"])
# 1. training_loop.py, 8 slides, batches of 256, the whole process pinned to 2 host cores
#    (taskset -c 0,1): read_patches(device="cuda") and PatchLoader(readers=2), SM off and on.
# 2. gpu-region, batches of 16, 32, 64 and 128 random 256² patches (~70 to ~540 tiles a call),
#    SM off and on: the call size where the SM decoder starts to pay (scheduler::sm_takes_call).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/h200_issue32_cores.log") 2>&1
source benches/h200_device_env.sh
make_slides
for sm in on off; do
  echo "== training_loop on 2 host cores (taskset -c 0,1), SLIDESTREAM_GPU_SM_DECODER=$sm"
  SLIDESTREAM_GPU_SM_DECODER=$sm timeout 110 taskset -c 0,1 $PY benches/training_loop.py --slides /tmp/tl-slides/s?.svs --only rp-device-8 loader-device-8-readers2 --budget-s 100 2>&1 | grep -E '^\| (rp|loader)'
done
for b in 16 32 64 128; do
  for sm in on off; do
    echo "== gpu-region /tmp/big.svs, batches of $b, SLIDESTREAM_GPU_SM_DECODER=$sm"
    SLIDESTREAM_GPU_SM_DECODER=$sm SLIDESTREAM_GPU_WARMUP=full timeout 60 /tmp/bin/slidestream gpu-region /tmp/big.svs --patches 4096 --batch $b 2>&1 | tail -2
  done
done
echo "== done in $SECONDS s"
