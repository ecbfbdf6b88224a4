#!/usr/bin/env bash
# Two slidestream builds side by side with FastSlide and OpenSlide: random 256² level-0 patches,
# 1 and 2 caller threads, fresh interpreter per measurement, readers alternating (order reversed
# every other round), the same seeded locations for every reader of a round.
#
# usage: BASE=DIR FINAL=DIR [ROUNDS=6] [N=1500] [PY=.venv/bin/python] bash benches/rand_patch_ab.sh SLIDE
#   DIR: a folder holding a `slidestream` package (e.g. a wheel unzipped there), put first on
#   PYTHONPATH for that row. One line per round and caller count, with the 1-minute load.
set -euo pipefail
S=$1; PY=${PY:-.venv/bin/python}; N=${N:-1500}
HERE=$(dirname "$0")
for r in $(seq 1 "${ROUNDS:-6}"); do
  for c in 1 2; do
    line="round $r callers $c load $(cut -d' ' -f1 /proc/loadavg):"
    order="base final fastslide openslide"; [ $((r % 2)) = 0 ] && order="openslide fastslide final base"
    for v in $order; do
      case $v in
        base) out=$(PYTHONPATH=$BASE "$PY" "$HERE/rand_patch_rate.py" "$S" "$N" "$r" "$c" slidestream) ;;
        final) out=$(PYTHONPATH=$FINAL "$PY" "$HERE/rand_patch_rate.py" "$S" "$N" "$r" "$c" slidestream) ;;
        *) out=$("$PY" "$HERE/rand_patch_rate.py" "$S" "$N" "$r" "$c" "$v") ;;
      esac
      line="$line $v=$out"
    done
    echo "$line"
  done
done
