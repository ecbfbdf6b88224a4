#!/usr/bin/env bash
# Issue 18 on the lent H200 (16 cores; one GPU, or two on nvidia-h200-x2).
#
#   here:   the .device/ carry (docs/gpu.md): wheels/ (the slidestream abi3 wheel), py18/ (dask,
#           distributed, zarr and the dependencies the device image lacks), bin/ (GPU test
#           binaries), testdata/, make_big_svs.py
#   device: run(command="PART=dask bash benches/h200_issue18.sh", carry=[".device"])
#
# PART=dask: benches/dask_scaling.py — the cohort pipeline (docs/examples/dask_cohort.py) over
#   64 copies (hard links) of the 48000² SVS with 1, 2, 4, 8, 16 worker processes; then the
#   Dask GPU test (one GPU per worker, map_patches(device="worker") == CPU).
# PART=final: the Python GPU tests, then PART=dask with CEILING=1 (the same patch work in plain
#   processes beside each worker count).
# PART=gpu: the GPU test binaries (multi-device tests included) under both compat modes, the
#   Python GPU tests, benches/ddp_patches.py (one process per GPU).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/h200_issue18_${PART:-all}.log") 2>&1
source benches/h200_device_env.sh
if [ ! -f /tmp/dk/.done ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/dk $D/py18/*.whl && touch /tmp/dk/.done
fi
export PYTHONPATH=/tmp/ss:/tmp/dk
# OVERLAY=1: the tree's Python layer over the carried wheel's (when only Python changed since
# the wheel was built: the extension must be the same).
[ "${OVERLAY:-0}" = 1 ] && cp -r py/python/slidestream/. /tmp/ss/slidestream/ && echo "python layer from the tree"
PART=${PART:-all}
$PY -c "import numpy, dask, distributed, zarr, slidestream; print('numpy', numpy.__version__, 'dask', dask.__version__, 'zarr', zarr.__version__, 'slidestream', slidestream.__file__)"
mkdir -p /tmp/big /tmp/c64
[ -f /tmp/big/big.svs ] || $PY $D/make_big_svs.py /tmp/big/big.svs --source $D/testdata/CMU-1-Small-Region.svs
for i in $(seq -w 0 63); do ln -f /tmp/big/big.svs /tmp/c64/slide-$i.svs; done
cat /tmp/big/big.svs > /dev/null  # in the page cache before the first run (every run reads it from memory)
if [ "$PART" = final ]; then
  echo "-- Python GPU tests (the no-libcuda-on-close fix)"
  timeout 150 $PY -m pytest -q -p no:cacheprovider py/tests/test_gpu.py py/tests/test_gpu_multi.py 2>&1 | tail -3
  PART=dask CEILING=1
fi
if [ "$PART" = dask ] || [ "$PART" = all ]; then
  echo "== dask scaling: 64 slides, level 1 grid of 256 px, min_tissue 0.5"
  timeout 520 $PY benches/dask_scaling.py /tmp/c64 --workers ${WORKERS:-1,2,4,8,16} --level 1 ${CEILING:+--ceiling} --budget-s ${BUDGET:-480} --out $OUT/dask_scaling.json
  echo "== dask GPU test"
  timeout 60 $PY -m pytest -q -p no:cacheprovider py/tests/test_dask_gpu.py 2>&1 | tail -3
fi
if [ "$PART" = gpu ] || [ "$PART" = all ]; then
  for mode in on off; do
    for t in gpu gpu_multi conformance; do
      echo "-- $t tests (SLIDESTREAM_COMPAT_MODE=$mode)"
      SLIDESTREAM_COMPAT_MODE=$mode timeout 200 /tmp/bin/$t-tests --test-threads 8 2>&1 | grep -E "^test |test result|panicked|assert" | grep -v " ok$" | tail -20
    done
  done
  echo "-- Python GPU tests"
  timeout 200 $PY -m pytest -q -p no:cacheprovider py/tests/test_gpu.py py/tests/test_gpu_multi.py py/tests/test_dask_gpu.py py/tests/test_distributed.py 2>&1 | tail -5
  if [ -f benches/ddp_patches.py ]; then
    n=$(nvidia-smi -L | wc -l)
    ws=1; [ "$n" -ge 2 ] && ws=1,2
    echo "== DDP patches into GPU memory, world sizes $ws"
    timeout 240 $PY benches/ddp_patches.py --slides '/tmp/c64/slide-[01]?.svs' --world-sizes $ws --batch 1024 --batches 30 --out $OUT/ddp.json
  fi
fi
date -u
