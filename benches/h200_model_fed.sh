#!/usr/bin/env bash
# benches/model_fed.py on the lent H200: torchvision models fed by slidestream and its peers
# (the model-fed table of docs/benchmarks.md), 8 copies of the 48000² slide, in one call.
#
#   here:   the same .whl/ as benches/h200_training_loop.sh (bash benches/fetch_h200_wheels.sh,
#           plus the slidestream wheel: .venv/bin/maturin build --release -m py/Cargo.toml --out .whl)
#   device: run(command="bash benches/h200_model_fed.sh", carry=[".whl"], timeout_s=600)
#
# Installs the wheels into /tmp/h200-site (benches/h200_site.sh; torch, torchvision, cupy and
# tifffile are the device image's own), makes /tmp/big.svs with make_big_svs.py if missing and 8
# copies of it in /tmp/tl-slides (shared with h200_training_loop.sh), then runs the rows in order
# of importance (model_fed.py's docstring: ResNet-50, ViT-B/16, ResNet-18, then the row under
# `taskset -c $TASKSET`) within DEADLINE_S (default 560 s) less the setup; rows that do not fit
# are reported as skipped. Writes model_fed.jsonl / .md and the log to $OUT, and the per-row
# files (failed rows' stderr; with PROFILE=1 the profiles and the engine's stage timings) as one
# archive, $OUT/model_fed-rows.tar.gz (few files come back from the device).
# Environment: PYTHON (default python3), N_SLIDES (8), DEADLINE_S (560), STEPS (60), WARMUP (5),
# TASKSET (0-3; empty: no taskset row), PROFILE (1: --profile), MF_ARGS (extra model_fed.py
# options, e.g. "--only resnet50- loader-alone" or "--models resnet18").
set -uo pipefail
cd "$(dirname "$0")/.."
W=.whl
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/h200_model_fed.log") 2>&1
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. benches/h200_site.sh || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
nproc; "$PY" --version
for m in slidestream torch torchvision cucim openslide; do
  timeout 60 "$PY" -c "import $m as x; print('$m', getattr(x, '__version__', '?'))" 2>&1 | tail -1
done
if [ ! -f /tmp/big.svs ]; then
  "$PY" $W/make_big_svs.py /tmp/big.svs --source assets/CMU-1-Small-Region.svs || exit 1
fi
ls -l /tmp/big.svs
budget=$(( ${DEADLINE_S:-560} - SECONDS - 15 ))
extra=()
[ -n "${TASKSET-0-3}" ] && extra+=(--taskset "${TASKSET-0-3}")
[ "${PROFILE:-0}" = 1 ] && extra+=(--profile)
echo "setup took ${SECONDS} s; model_fed.py --budget-s $budget ${extra[*]}"
# shellcheck disable=SC2086
"$PY" benches/model_fed.py --make "${N_SLIDES:-8}" --from /tmp/big.svs --dir /tmp/tl-slides --out "$OUT" \
  --budget-s "$budget" --row-timeout 90 --steps "${STEPS:-60}" --warmup "${WARMUP:-5}" "${extra[@]}" ${MF_ARGS:-}
rc=$?
if [ -d "$OUT/rows" ]; then
  [ -n "$(ls -A "$OUT/rows")" ] && tar -czf "$OUT/model_fed-rows.tar.gz" -C "$OUT" rows
  rm -rf "$OUT/rows"
fi
echo "== done in ${SECONDS} s (rc $rc)"
ls -l "$OUT"
exit $rc
