#!/usr/bin/env bash
# compare.py on the lent H200: slidestream next to cuCIM (cpu and cuda), OpenSlide, tiffslide and
# FastSlide in one run. The device has no network, so everything comes in .whl/ (git-ignored):
#
#   here:   bash benches/fetch_h200_wheels.sh [--testdata]          # peer wheels (slimmed) + make_big_svs.py [+ test files]
#           .venv/bin/maturin build --release -m py/Cargo.toml --out .whl         # the slidestream wheel (abi3)
#           mkdir -p .whl/bin && strip -o .whl/bin/slidestream target/release/slidestream   # optional: Rust CLI row
#           # optional: CUDA CLI row (gpu-region): cargo build --release -p slidestream --features cuda,
#           #           then strip -o .whl/bin/slidestream-cuda target/release/slidestream
#           du -sh .whl      # all that travels must stay under 64 MiB: peers 42.2 + slidestream ~6.1 + CLIs ~3.2 each
#                            # + test files 6.0 + the tracked tree ~3.1 (drop .whl/testdata if over)
#   device: run(command="bash benches/h200_run.sh", carry=[".whl"], timeout_s=600)
#
# Writes compare-h200.md / .json, the PNG charts and h200_run.log to $OUT (8 files at most come
# back). Environment: PYTHON (default python3), COMPARE_ARGS (extra compare.py options, e.g.
# "--quick" or "--workloads batch1024 --readers slidestream,cucim-cuda"), BUDGET_S (compare.py
# starts no workload after this many seconds; default 420, so the call ends inside the 600-s
# limit; skipped workloads are marked in the report), TESTDATA=1 (also the carried test files:
# ~2-3 more minutes). Every measurement is a fresh interpreter (~0.5-1 s with cuCIM's imports),
# so the run is sized for ~9 readers: 1000 patches, 4000 scan tiles, cold only for rand256-1t
# and batch1024, the GPU-relevant workloads first.
set -uo pipefail
cd "$(dirname "$0")/.."
W=.whl
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
LOG="$OUT/h200_run.log"
exec > >(tee "$LOG") 2>&1
export PYTHONUNBUFFERED=1
# never let a program here turn NVLink multicast on (device KINDS.md)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

ls $W/*.whl >/dev/null 2>&1 || { echo "no wheels in $W (run benches/fetch_h200_wheels.sh here and carry .whl)"; exit 1; }
ls $W/slidestream-*.whl >/dev/null 2>&1 || echo "WARNING: no slidestream wheel in $W: the slidestream rows need it (maturin build --release -m py/Cargo.toml --out .whl)"
"$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $W/*.whl || { echo "pip install failed"; exit 1; }
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
# shared libraries of the carried wheels (cuCIM, nvImageCodec and its extensions, nvTIFF,
# openslide-bin, auditwheel's .libs folders), then CUDA's
libdirs=$(find /tmp/site -name '*.so*' \( -path '/tmp/site/nvidia/*' -o -path '/tmp/site/cucim*' -o -path '/tmp/site/openslide_bin/*' \) -printf '%h\n' | sort -u | paste -sd:)
export LD_LIBRARY_PATH=${libdirs}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
nproc; "$PY" --version
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "== readers"
for m in slidestream openslide tiffslide fastslide cucim cupy torch; do
  "$PY" -c "import $m as x; print('$m', getattr(x, '__version__', '?'))" 2>&1 | tail -1
done
"$PY" -c "from cucim import CuImage; print('cucim CuImage ok')" 2>&1 | tail -1

echo "== slide"
if [ ! -f /tmp/big.svs ]; then
  "$PY" $W/make_big_svs.py /tmp/big.svs --source assets/CMU-1-Small-Region.svs || exit 1   # 48000² level 0, 3 levels
fi
ls -l /tmp/big.svs

args=(/tmp/big.svs --name h200 --out "$OUT" --budget-s "${BUDGET_S:-420}")
if [ -x $W/bin/slidestream ]; then args+=(--binary $W/bin/slidestream); else args+=(--binary /nonexistent/slidestream); fi
[ -x $W/bin/slidestream-cuda ] && args+=(--cuda-cli $W/bin/slidestream-cuda)
if [ "${TESTDATA:-0}" = 1 ] && [ -d $W/testdata ]; then args+=(--testdata $W/testdata --testdata-patches 100); else args+=(--testdata none); fi
args+=(--patches 1000 --scan-tiles 4000 --cold-workloads rand256-1t,batch1024
       --workloads rand256-1t,batch1024,rand256-mt,rand512-1t,rand512-mt,rand256-l1,rand256-l2,scan-l0)
# 16 cores: -mt workloads and cuCIM batches use all of them (compare.py's default).
# shellcheck disable=SC2086
echo "== $PY benches/compare.py ${args[*]} ${COMPARE_ARGS:-}"
"$PY" benches/compare.py "${args[@]}" ${COMPARE_ARGS:-} > /dev/null
rc=$?
ls -l "$OUT"
exit $rc
