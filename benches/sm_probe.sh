#!/usr/bin/env bash
# The SM JPEG decoder's deciding experiment (docs/gpu.md, "Decoding on the multiprocessors") on a
# GPU host: the sm_jpeg_probe example over the shared slides' tiles and the 48000² benchmark
# slide. Build it first (on a machine with Rust):
#   cargo build --release --features cuda,unstable --example sm_jpeg_probe
# then run, with the binary and a copy of the shared test data:
#   PROBE=target/release/examples/sm_jpeg_probe TESTDATA=../shared/testdata bash benches/sm_probe.sh
# (CLI=... GPU_TESTS=... add the engine rows at the end)
set -u
cd "$(dirname "$0")/.."
P=${PROBE:-target/release/examples/sm_jpeg_probe}
TD=${TESTDATA:-../shared/testdata}
BIG=${BIG:-/tmp/big.svs}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; nproc; date -u
echo "== shared slides, each repeated to 14000 tiles"
for s in "$TD/CMU-1-Small-Region.svs" "$TD/camelyon-jpeg-ybr.dcm" "$TD/CMU-1-Small-Region-dicom/$(ls "$TD/CMU-1-Small-Region-dicom" | grep dcm | head -1)" "$TD/test3-DAPI-2-387.ndpi" "$TD/tiff_tiled_ycbcr_jpeg_2x2_sampling.tif"; do
  echo "-- $s"
  timeout 120 "$P" --rounds 5 --repeat-to 14000 "$s" 2>&1 | tail -14
done
echo "== 48000² benchmark slide"
[ -f "$BIG" ] || python3 ../shared/tools/make_big_svs.py "$BIG" --source assets/CMU-1-Small-Region.svs >/dev/null
for args in "--tiles 14000 --step 3" "--tiles 40000 --step 1" "--tiles 4096 --step 9"; do  # 40000: every level-0 tile
  echo "-- $args"
  timeout 200 "$P" --rounds 7 $args "$BIG" 2>&1 | tail -14
done
# The SM decoder inside the engine (SLIDESTREAM_GPU_SM_DECODER): with CLI=<a release
# `slidestream` built with --features cuda> and GPU_TESTS=<the executables of `cargo test
# --release --features cuda,unstable --test gpu --test gpu_sm --no-run`, space-separated>,
# device == CPU with it on (both compat modes),
# then random 256² patches in batches of 4096, SM off and on alternating, side by side.
if [ -n "${GPU_TESTS:-}" ]; then
  for mode in on off; do
    echo "== core/tests/gpu.rs, SLIDESTREAM_GPU_SM_DECODER=on, SLIDESTREAM_COMPAT_MODE=$mode"
    for t in $GPU_TESTS; do
      SLIDESTREAM_GPU_SM_DECODER=on SLIDESTREAM_COMPAT_MODE=$mode SLIDESTREAM_TESTDATA=$TD timeout 120 "$t" --nocapture 2>&1 | grep -E '^test |test result|panicked|SM decoder' | tail -30
    done
  done
fi
if [ -n "${CLI:-}" ]; then
  for sm in off on off on; do
    echo "== gpu-region, SLIDESTREAM_GPU_SM_DECODER=$sm"
    SLIDESTREAM_GPU_SM_DECODER=$sm SLIDESTREAM_GPU_WARMUP=full timeout 90 "$CLI" gpu-region "$BIG" --patches 8192 --batch 4096 2>&1 | tail -4
  done
fi
