#!/usr/bin/env bash
# compare.py on the lent H200: slidestream (CPU and CUDA) next to cuCIM (cpu and cuda), OpenSlide,
# tiffslide and FastSlide. The device has no network, so everything comes in .whl/ (git-ignored):
#
#   here:   bash benches/fetch_h200_wheels.sh [--testdata]          # peer wheels (slimmed) + make_big_svs.py [+ test files]
#           .venv/bin/maturin build --release -m py/Cargo.toml --out .whl         # the slidestream wheel (abi3; a CUDA
#                                                          # build for the slidestream-cuda row, see docs/gpu.md)
#           mkdir -p .whl/bin && strip -o .whl/bin/slidestream target/release/slidestream   # optional: Rust CLI row
#           # optional: CUDA CLI row (gpu-region): cargo build --release -p slidestream --features cuda,
#           #           then strip -o .whl/bin/slidestream-cuda target/release/slidestream
#           du -sh .whl      # all that travels must stay under 64 MiB: peers 42.2 + slidestream ~6.1 + CLIs ~3.2 each
#                            # + test files 6.0 + the tracked tree ~3.1 (drop .whl/testdata if over)
#   device: run(command="PART=1 bash benches/h200_run.sh", carry=[".whl"], timeout_s=600)
#           run(command="PART=2 bash benches/h200_run.sh", carry=[".whl"], timeout_s=600)
#
# One device call cannot hold the whole comparison (600-s limit), so it is split in two parts,
# each sized to end by DEADLINE_S (default 540 s, setup included):
#
#   PART=1  GPU readers and the batch / GPU-target workloads: slidestream, slidestream-cuda
#           (when the wheel has CUDA: slidestream.cuda_available()), the CUDA CLI row (if carried),
#           cuCIM cpu and cuda; warm batch4096, scan-l0, batch1024, rand256-1t, rand256-mt,
#           rand256-l1, rand256-l2, rand512-1t; cold batch4096, scan-l0, rand256-1t. 4000 scan tiles.
#   PART=2  the rest: the CPU readers (slidestream, 1 decode thread, the Rust CLI if carried,
#           OpenSlide, tiffslide, FastSlide, cuCIM cpu) on levels 1-2 and scan-l0 (warm), and cold
#           rand256-1t, rand256-mt, scan-l0, batch1024. 2000 scan tiles. (Their warm level-0 random and
#           batch1024 rows are in the earlier compare-h200 run.)
#
# Both: 1000 patches, 3 rounds, a 60-s timeout per measurement (MEASURE_TIMEOUT_S; the worker's
# process group is killed and the run recorded as "timed out") and a reader dropped after its
# first timeout (MAX_TIMEOUTS=1), so one hang (cuCIM device="cuda" hung until the call limit
# before) costs 60 s, not the part. compare.py gets --budget-s = DEADLINE_S minus the setup time
# minus 25 s for the report: no run starts after it and a running one is stopped at it; what did
# not run is marked in the report.
#
# Writes compare-h200-partN.md / .json, the PNG charts and h200_run-partN.log to $OUT (5 files;
# 8 at most come back). Environment: PART (1 or 2; default 1), PYTHON (default python3), NAME
# (report name, default h200-partN), DEADLINE_S, BUDGET_S (overrides the computed budget),
# MEASURE_TIMEOUT_S, MAX_TIMEOUTS, COMPARE_ARGS (extra compare.py options, last wins, e.g.
# "--rounds 1" or "--readers slidestream,slidestream-cuda"), TESTDATA=1 (PART=2 only: also the
# carried test files, ~2-3 more minutes: lower the load elsewhere). Every measurement is a fresh
# interpreter (~0.5-1 s with cuCIM's imports). The wheels are installed into /tmp/h200-site once
# per machine (a warm machine keeps /tmp: the second part skips the install and the slide).
set -uo pipefail
cd "$(dirname "$0")/.."
W=.whl
PY=${PYTHON:-python3}
PART=${PART:-1}
case "$PART" in 1|2) ;; *) echo "PART must be 1 or 2"; exit 2;; esac
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
LOG="$OUT/h200_run-part$PART.log"
exec > >(tee "$LOG") 2>&1
export PYTHONUNBUFFERED=1
# never let a program here turn NVLink multicast on (device KINDS.md)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

. benches/h200_site.sh || exit 1

echo "== machine (PART=$PART)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
nproc; "$PY" --version
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "== readers"
for m in slidestream openslide tiffslide fastslide cucim cupy torch; do
  timeout 60 "$PY" -c "import $m as x; print('$m', getattr(x, '__version__', '?'))" 2>&1 | tail -1
done
timeout 60 "$PY" -c "import slidestream as s; f = getattr(s, 'cuda_available', None); print('slidestream.cuda_available():', f() if callable(f) else 'missing (no CUDA path in this build)')" 2>&1 | tail -1
timeout 60 "$PY" -c "from cucim import CuImage; print('cucim CuImage ok')" 2>&1 | tail -1

echo "== slide"
if [ ! -f /tmp/big.svs ]; then
  "$PY" $W/make_big_svs.py /tmp/big.svs --source assets/CMU-1-Small-Region.svs || exit 1   # 48000² level 0, 3 levels
fi
ls -l /tmp/big.svs

# compare.py's budget: what is left of DEADLINE_S after the setup above, less 25 s for the report
budget=${BUDGET_S:-$(( ${DEADLINE_S:-540} - SECONDS - 25 ))}
if [ "$budget" -lt 60 ]; then echo "only $budget s left for compare.py (setup took ${SECONDS} s); raise DEADLINE_S or set BUDGET_S"; exit 1; fi
echo "setup took ${SECONDS} s; compare.py --budget-s $budget"

args=(/tmp/big.svs --name "${NAME:-h200-part$PART}" --out "$OUT" --budget-s "$budget"
      --measure-timeout-s "${MEASURE_TIMEOUT_S:-60}" --max-timeouts "${MAX_TIMEOUTS:-1}" --patches 1000 --rounds 3)
if [ -x $W/bin/slidestream ]; then args+=(--binary $W/bin/slidestream); else args+=(--binary /nonexistent/slidestream); fi
if [ "$PART" = 1 ]; then
  [ -x $W/bin/slidestream-cuda ] && args+=(--cuda-cli $W/bin/slidestream-cuda)
  args+=(--testdata none --scan-tiles 4000 --scan-batch 1024
         --readers slidestream,slidestream-cuda,slidestream-cli-cuda,cucim-cpu,cucim-cuda
         --workloads batch4096,scan-l0,batch1024,rand256-1t,rand256-mt,rand256-l1,rand256-l2,rand512-1t
         --cold-workloads batch4096,scan-l0,rand256-1t)
else
  if [ "${TESTDATA:-0}" = 1 ] && [ -d $W/testdata ]; then args+=(--testdata $W/testdata --testdata-patches 100); else args+=(--testdata none); fi
  # warm: levels 1-2 and the scan; cold only (compare.py runs every cold one after the warm ones):
  # the level-0 random, batch and scan workloads
  args+=(--scan-tiles 2000
         --readers slidestream,slidestream-1dt,slidestream-cli,openslide,tiffslide,fastslide,cucim-cpu
         --workloads rand256-l1,rand256-l2,scan-l0,rand256-1t,rand256-mt,batch1024
         --warm-workloads rand256-l1,rand256-l2,scan-l0
         --cold-workloads rand256-1t,rand256-mt,scan-l0,batch1024
         --cache warm,cold)
fi
# 16 cores: -mt workloads and cuCIM batches use all of them (compare.py's default).
echo "== $PY benches/compare.py ${args[*]} ${COMPARE_ARGS:-}"
# shellcheck disable=SC2086
"$PY" benches/compare.py "${args[@]}" ${COMPARE_ARGS:-} > /dev/null
rc=$?
echo "== done in ${SECONDS} s (rc $rc)"
ls -l "$OUT"
exit $rc
