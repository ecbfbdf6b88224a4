#!/usr/bin/env bash
# Issue 29's verification on the lent H200 in one call (the model-fed table is
# benches/h200_model_fed.sh, a call of its own):
#   here:   the .device/ carry (benches/h200_hardening.sh's header: wheels/ with the test-hooks
#           wheel, bin/ with the gzipped `--features cuda` test executables, testdata/, vs/,
#           make_big_svs.py)
#   device: run(command="bash benches/h200_issue29.sh", carry=[".device"])
# 1. benches/loader_under_model.py: PatchLoader(device="cuda") in a background thread, alone and
#    while the main thread trains ResNet-50 (the GIL and the GPU shared), stream priority high
#    (the default) and normal.
# 2. py/tests/test_gpu_concurrent.py (busy streams, legacy-stream probe, the priority setting),
#    test_gpu.py and test_loader.py on the GPU.
# 3. The GPU test executables under both compat modes (device reads equal CPU reads).
# 4. Standalone rates: read_patches(device="cuda") and PatchLoader across 8 slides, one batch of
#    4096 on the device and the CPU.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/h200_issue29.log") 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source benches/h200_device_env.sh
export SLIDESTREAM_VENDOR_SLIDES=$D/vs
make_slides &
mk=$!
echo "== test_gpu_concurrent.py"
timeout 200 $PY -m pytest -q -p no:cacheprovider py/tests/test_gpu_concurrent.py 2>&1 | tail -6
wait $mk
for p in high normal; do
  echo "== loader_under_model.py, SLIDESTREAM_GPU_STREAM_PRIORITY=$p"
  SLIDESTREAM_GPU_STREAM_PRIORITY=$p timeout 120 $PY benches/loader_under_model.py /tmp/tl-slides/s?.svs 2>&1 | tail -3
done
echo "== standalone: read_patches / PatchLoader across 8 slides; one batch of 4096"
timeout 150 $PY benches/training_loop.py --slides /tmp/tl-slides/s?.svs --only rp-device-8 loader-device-8 rp-device-1 --budget-s 140 2>&1 | grep -E '^\|' | head -12
timeout 100 $PY benches/gpu_batch_py.py /tmp/big.svs --patches 4096 --rounds 5 2>&1 | tail -2
for mode in on off; do
  for t in gpu gpu_dicom mirax_generated hostile_members; do
    [ -x /tmp/bin/$t-tests ] || continue
    echo "-- $t (SLIDESTREAM_COMPAT_MODE=$mode)"
    SLIDESTREAM_COMPAT_MODE=$mode timeout 150 /tmp/bin/$t-tests --test-threads 8 2>&1 | grep -E "^test |test result|panicked" | grep -v " ok$" | tail -12
  done
done
for t in test_gpu.py test_loader.py; do
  echo "== $t"
  timeout 150 $PY -m pytest -q -p no:cacheprovider py/tests/$t 2>&1 | tail -4
done
echo "== done in $SECONDS s"
