#!/usr/bin/env bash
# benches/training_loop.py on the lent H200: the issue-14 training-loop benchmark with 8 copies
# of the 48000² slide, next to cuCIM (cpu, cuda) and OpenSlide (16 threads), in one run.
#
#   here:   the same .whl/ as benches/h200_run.sh (bash benches/fetch_h200_wheels.sh, plus the
#           slidestream wheel: .venv/bin/maturin build --release -m py/Cargo.toml --out .whl)
#   device: run(command="bash benches/h200_training_loop.sh", carry=[".whl"], timeout_s=600)
#
# Installs the wheels into /tmp/h200-site as h200_run.sh does (shared with it: a warm machine
# keeps it), makes /tmp/big.svs with make_big_svs.py if missing and 8 copies of it in
# /tmp/tl-slides, then runs every row with a budget of DEADLINE_S (default 540 s) less the setup.
# Writes training_loop.jsonl / .md, training_loop-first-read.stderr.txt and the log to $OUT.
# Environment: PYTHON (default python3), N_SLIDES (default 8), DEADLINE_S, TL_ARGS (extra
# training_loop.py options, e.g. "--only rp- loader-device").
set -uo pipefail
cd "$(dirname "$0")/.."
W=.whl
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/h200_training_loop.log") 2>&1
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. benches/h200_site.sh || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
nproc; "$PY" --version
for m in slidestream torch cupy cucim openslide; do
  timeout 60 "$PY" -c "import $m as x; print('$m', getattr(x, '__version__', '?'))" 2>&1 | tail -1
done
if [ ! -f /tmp/big.svs ]; then
  "$PY" $W/make_big_svs.py /tmp/big.svs --source assets/CMU-1-Small-Region.svs || exit 1
fi
ls -l /tmp/big.svs
budget=$(( ${DEADLINE_S:-540} - SECONDS - 30 ))
echo "setup took ${SECONDS} s; training_loop.py --budget-s $budget"
# shellcheck disable=SC2086
"$PY" benches/training_loop.py --make "${N_SLIDES:-8}" --from /tmp/big.svs --dir /tmp/tl-slides --out "$OUT" \
  --budget-s "$budget" --row-timeout 120 --threads 16 --workers 15 ${TL_ARGS:-}
rc=$?
echo "== done in ${SECONDS} s (rc $rc)"
ls -l "$OUT"
exit $rc
