#!/usr/bin/env bash
# Issue 16 on the lent H200: DICOM and MIRAX through the GPU engine, and the DICOM rows.
#
#   here:   bash /tmp/build_device.sh equivalent (docs/gpu.md "Issue 16 on the H200"): into .device/
#           bin/{gpu,gpu_dicom,conformance,reference}-tests.gz (cargo test --release --features cuda
#           --no-run, debug info stripped), wheels/ (the slidestream abi3 wheel, openslide-bin +
#           openslide-python (the oracle), pydicom and Pillow for make_big_dicom.py), testdata/ (a
#           copy of ../shared/testdata), make_big_svs.py; the vendor slides are generated on the
#           device (scripts/make_vendor_slides.py, checked by OpenSlide; pydicom and Pillow from
#           the wheels)
#   device: run(command="PART=tests bash benches/h200_issue16.sh", carry=[".device"])
#           run(command="PART=bench bash benches/h200_issue16.sh", carry=[".device"])
#
# PART=tests: the conformance battery (device reads == CPU reads for every file of every driver,
#   DICOM and MIRAX included), the GPU tests, the DICOM GPU tests and the generated DICOM / MIRAX
#   slides' device tests (dicom_generated, mirax_generated) under
#   SLIDESTREAM_COMPAT_MODE=on (POSIX) and off (cuFile), the reference tests, py/tests/test_gpu.py.
# PART=bench: the CMU DICOM vs OpenSlide (benches/dicom_patches.py, one thread and all threads),
#   a 48000² one-level DICOM (benches/make_big_dicom.py) vs OpenSlide and vs the 48000² SVS, the
#   engine's level-0 tile rate (benches/gpu_tile_rate.py) and random 256² device patches
#   (benches/gpu_batch_py.py) on both.
set -uo pipefail
cd "$(dirname "$0")/.."
PART=${PART:-tests}
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/h200_issue16-$PART.log") 2>&1
source benches/h200_device_env.sh
if [ ! -f /tmp/vs/MANIFEST.md ]; then
  t=$(date +%s); $PY scripts/make_vendor_slides.py /tmp/vs | tail -1; echo "generated in $(( $(date +%s) - t )) s"
fi
case "$PART" in
tests)
  for mode in on off; do
    echo "== SLIDESTREAM_COMPAT_MODE=$mode"
    for t in conformance gpu gpu_dicom dicom_generated mirax_generated; do
      [ -x /tmp/bin/$t-tests ] || { echo "-- $t: no binary"; continue; }
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
  echo "== CMU DICOM vs OpenSlide, CPU, one thread"
  timeout 120 $PY benches/dicom_patches.py --dicom $D/testdata/CMU-1-Small-Region-dicom --svs $D/testdata/CMU-1-Small-Region.svs --patches 2000 --rounds 3
  [ -f /tmp/big.dcm ] || { t=$(date +%s); $PY benches/make_big_dicom.py /tmp/big.dcm --size 48000 --template $D/testdata/CMU-1-Small-Region-dicom && echo "big.dcm in $(( $(date +%s) - t )) s"; }
  [ -f /tmp/big.svs ] || { t=$(date +%s); $PY $D/make_big_svs.py /tmp/big.svs --source $D/testdata/CMU-1-Small-Region.svs >/dev/null && echo "big.svs in $(( $(date +%s) - t )) s"; }
  echo "== 48000² DICOM vs OpenSlide, CPU, one thread"
  timeout 150 $PY benches/dicom_patches.py --dicom /tmp/big.dcm --svs /nonexistent --patches 1000 --rounds 3
  echo "== 48000² DICOM vs OpenSlide, CPU, all threads (slidestream defaults)"
  timeout 150 $PY benches/dicom_patches.py --dicom /tmp/big.dcm --svs /nonexistent --patches 1000 --rounds 3 --threads 0
  for mode in on off; do
    echo "== tile rate, SLIDESTREAM_COMPAT_MODE=$mode"
    SLIDESTREAM_COMPAT_MODE=$mode timeout 120 $PY benches/gpu_tile_rate.py /tmp/big.svs /tmp/big.dcm --max-tiles 8000 --rounds 3
  done
  echo "== random 256² device patches (batches of 4096)"
  for s in /tmp/big.svs /tmp/big.dcm; do timeout 100 $PY benches/gpu_batch_py.py $s --patches 4096 --rounds 5 --label $(basename $s); done
  ;;
esac
date -u
