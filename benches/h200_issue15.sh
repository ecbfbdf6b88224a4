#!/usr/bin/env bash
# Issue 15 on the lent H200: the vendor drivers' GPU checks and the NDPI rows.
#
#   here:   bash /tmp/build_device.sh equivalent (see docs/gpu.md "Issue 15 on the H200"): into .device/
#           bin/{gpu,conformance,reference}-tests.gz (cargo test --release --features cuda --no-run,
#           debug info stripped), wheels/ (the slidestream abi3 wheel + openslide-bin and
#           openslide-python, the oracle the vendor-slide generator checks against), testdata/ (a
#           copy of ../shared/testdata), make_big_svs.py
#   device: run(command="PART=tests bash benches/h200_issue15.sh", carry=[".device"])
#           run(command="PART=bench bash benches/h200_issue15.sh", carry=[".device"])
#
# PART=tests: generates the vendor slides (scripts/make_vendor_slides.py, checked by OpenSlide),
#   then the conformance battery (device reads == CPU reads for every file of every driver), the
#   reference tests and the GPU tests, under SLIDESTREAM_COMPAT_MODE=on (POSIX) and off (cuFile),
#   and py/tests/test_gpu.py.
# PART=bench: writes a 40960² NDPI (4:2:2, 512x8 restart-interval tiles) and the 48000² Aperio
#   slide, then benches/ndpi_patches.py (CPU, one thread, vs OpenSlide), benches/gpu_tile_rate.py
#   (level-0 tile decode rate of the GPU engine, NDPI vs Aperio) in both compat modes, and
#   benches/gpu_batch_py.py (random 256² device patches) on both slides.
set -uo pipefail
cd "$(dirname "$0")/.."
PART=${PART:-tests}
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/h200_issue15-$PART.log") 2>&1
source benches/h200_device_env.sh  # the udev record, wheels in /tmp/ss, test binaries, test-data variables
if [ ! -f /tmp/vs/MANIFEST.md ]; then
  t=$(date +%s); $PY scripts/make_vendor_slides.py /tmp/vs | tail -1; echo "generated in $(( $(date +%s) - t )) s"
fi
case "$PART" in
tests)
  for mode in on off; do
    echo "== SLIDESTREAM_COMPAT_MODE=$mode"
    for t in conformance gpu; do
      echo "-- $t ($mode)"
      SLIDESTREAM_COMPAT_MODE=$mode timeout 200 /tmp/bin/$t-tests --test-threads 8 2>&1 | grep -E "^test |test result|panicked|SKIP|skipped|assert" | grep -v " ok$" | tail -40
    done
  done
  echo "-- reference"
  timeout 120 /tmp/bin/reference-tests 2>&1 | grep -E "test result|panicked" | tail -5
  echo "-- py/tests/test_gpu.py"
  timeout 200 $PY -m pytest -q -p no:cacheprovider py/tests/test_gpu.py 2>&1 | tail -5
  ;;
bench)
  [ -f /tmp/big.svs ] || { t=$(date +%s); $PY $D/make_big_svs.py /tmp/big.svs --source $D/testdata/CMU-1-Small-Region.svs >/dev/null && echo "big.svs in $(( $(date +%s) - t )) s"; }
  echo "== NDPI vs OpenSlide, CPU, one thread"
  timeout 240 $PY benches/ndpi_patches.py --slide /tmp/big.ndpi --patches 1000 --rounds 5
  for mode in on off; do
    echo "== tile rate, SLIDESTREAM_COMPAT_MODE=$mode"
    SLIDESTREAM_COMPAT_MODE=$mode timeout 120 $PY benches/gpu_tile_rate.py /tmp/big.svs /tmp/big.ndpi --max-tiles 20000 --rounds 3
  done
  echo "== random 256² device patches (batches of 4096)"
  for s in /tmp/big.svs /tmp/big.ndpi; do timeout 100 $PY benches/gpu_batch_py.py $s --patches 4096 --rounds 5 --label $(basename $s); done
  ;;
esac
date -u
