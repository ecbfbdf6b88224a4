#!/usr/bin/env bash
# The SM JPEG decoder (SLIDESTREAM_GPU_SM_DECODER) feeding loaders and a model, off and on side
# by side, on a lent H100/H200 in one call (the carry of benches/h200_issue32.sh):
#   device: run(command="bash benches/h200_issue32_feed.sh", carry=[".device"])
# 1. benches/training_loop.py: read_patches(device="cuda") and PatchLoader(device="cuda") with
#    one and two readers, 8 copies of the 48000² slide, batches of 256 (patches/s, host cores).
# 2. benches/model_fed.py, ResNet-50 training: its ceiling, fed by PatchLoader(device="cuda"),
#    and the loader alone and under the model (the feeding issue's measurement).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/h200_issue32_feed.log") 2>&1
source benches/h200_device_env.sh
make_slides
for sm in off on; do
  echo "== training_loop, SLIDESTREAM_GPU_SM_DECODER=$sm"
  SLIDESTREAM_GPU_SM_DECODER=$sm timeout 150 $PY benches/training_loop.py --slides /tmp/tl-slides/s?.svs --only rp-device-8 loader-device-8 loader-device-8-readers2 --budget-s 140 2>&1 | grep -E '^\| (rp|loader)'
done
for sm in off on; do
  echo "== model_fed ResNet-50, SLIDESTREAM_GPU_SM_DECODER=$sm"
  SLIDESTREAM_GPU_SM_DECODER=$sm timeout 170 $PY benches/model_fed.py --slides /tmp/tl-slides/s?.svs --models resnet50 --only resnet50-synthetic resnet50-loader-device loader-alone resnet50-loader-bg --steps 40 --warmup 5 --budget-s 160 --row-timeout 60 2>&1 | grep -E '^\|'
done
echo "== done in $SECONDS s"
