#!/usr/bin/env bash
# The hostile-input rows that reach the device path, on the lent H200 (16 cores, one GPU).
#
#   here:   the .device/ carry (docs/gpu.md): wheels/ (the slidestream abi3 wheel with test hooks),
#           bin/ (gzipped `--features cuda` release test executables, named <test>-tests.gz),
#           testdata/ (a copy of ../shared/testdata), vs/ (the generated MIRAX and DICOM slides
#           of scripts/make_vendor_slides.py with their references), make_big_svs.py
#   device: run(command="bash benches/h200_hardening.sh", carry=[".device"])
#
# 1. The GPU test executables and the several-file slide tests under both compat modes (POSIX
#    into pinned memory, cuFile): device reads equal the CPU's, hostile members refused alike.
# 2. py/tests/test_hostile_members.py (each read on "cpu" and "cuda": a member touched after the
#    open reads, one rewritten or swapped for a link is ESTALE, on both paths) and the Python
#    GPU tests.
# 3. Standalone CPU read_patches across 8 open slides, the process-wide budget off and on
#    (SLIDESTREAM_READ_PROCESS_BYTES), and device read_patches, side by side.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/h200_hardening.log") 2>&1
source benches/h200_device_env.sh
export SLIDESTREAM_VENDOR_SLIDES=$D/vs
for mode in on off; do
  for t in gpu gpu_dicom conformance mirax_generated dicom_generated hostile_members; do
    [ -x /tmp/bin/$t-tests ] || continue
    echo "-- $t (SLIDESTREAM_COMPAT_MODE=$mode)"
    SLIDESTREAM_COMPAT_MODE=$mode timeout 240 /tmp/bin/$t-tests --test-threads 8 2>&1 | grep -E "^test |test result|panicked" | grep -v " ok$" | tail -20
  done
done
for mode in on off; do
  echo "-- Python hostile-member and GPU tests (SLIDESTREAM_COMPAT_MODE=$mode)"
  # Separate processes: test_gpu.py checks that CPU reads start no GPU engine in its process.
  for t in test_gpu.py test_hostile_members.py; do
    SLIDESTREAM_COMPAT_MODE=$mode timeout 300 $PY -m pytest -q -p no:cacheprovider py/tests/$t 2>&1 | tail -4
  done
done
mkdir -p /tmp/big
[ -f /tmp/big/big.svs ] || $PY $D/make_big_svs.py /tmp/big/big.svs --source $D/testdata/CMU-1-Small-Region.svs
cat /tmp/big/big.svs > /dev/null
echo "== CPU read_patches, 8 slides, batches of 256 random 256² patches: budget off, then 1 GiB"
timeout 200 $PY benches/cross_slide_cpu.py /tmp/big/big.svs --slides 8 --batch 256 --batches 40 --rounds 3
SLIDESTREAM_READ_PROCESS_BYTES=1073741824 timeout 200 $PY benches/cross_slide_cpu.py /tmp/big/big.svs --slides 8 --batch 256 --batches 40 --rounds 3
echo "== device read_regions, one batch of 4096 random 256² patches"
timeout 200 $PY benches/gpu_batch_py.py /tmp/big/big.svs --patches 4096 --rounds 5
timeout 200 $PY benches/gpu_batch_py.py /tmp/big/big.svs --patches 4096 --rounds 5 --device cpu
