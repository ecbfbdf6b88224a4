#!/usr/bin/env bash
# A/B of guided lane chunks: SLIDESTREAM_GPU_MIN_CHUNK=256 (fixed 256-tile chunks) vs default 64.
B=$PWD/.device/bin/slidestream-cuda   # prepared as in benches/gpu_check.sh
[ -f /tmp/big.svs ] || python3 .device/make_big_svs.py /tmp/big.svs --source .device/testdata/CMU-1-Small-Region.svs >/dev/null
for i in 1 2 3 4; do
  for mc in 256 64; do
    echo "#### round $i SLIDESTREAM_GPU_MIN_CHUNK=$mc"
    SLIDESTREAM_GPU_MIN_CHUNK=$mc SLIDESTREAM_GPU_TRACE=1 timeout 60 $B gpu-region /tmp/big.svs --patches 4096 --batch 4096 2>&1 | grep -E "cold\)|13951 tiles:"
  done
done
for mc in 256 64; do echo "#### scan SLIDESTREAM_GPU_MIN_CHUNK=$mc"; SLIDESTREAM_GPU_MIN_CHUNK=$mc timeout 60 $B tiles /tmp/big.svs --device cuda --batch 4096 2>&1 | grep throughput; done
