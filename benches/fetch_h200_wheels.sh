#!/usr/bin/env bash
# Fill .whl/ (git-ignored) with what benches/h200_run.sh needs on the lent H200, which has no
# network: wheels for Python 3.12 manylinux x86_64 of the readers compare.py compares and the
# packages they need that the device image lacks, plus make_big_svs.py and the test slides.
#
# usage (here, from the repository root): bash benches/fetch_h200_wheels.sh [--testdata]
#   --testdata  also copy the 9 test files every reader opened here into .whl/testdata (6 MiB;
#               h200_run.sh uses them with TESTDATA=1)
#
# Also wanted in .whl/, built here by you (this script does not compile anything):
#   - the slidestream wheel:  .venv/bin/maturin build --release -m py/Cargo.toml --out .whl
#     (abi3, so the 3.11-built wheel installs on the device's 3.12);
#   - optionally the CLI, for the Rust row: strip -o .whl/bin/slidestream target/release/slidestream
#     and a CUDA build of it for the gpu-region row:
#     cargo build --release -p slidestream --features cuda && strip -o .whl/bin/slidestream-cuda target/release/slidestream
# The device image already has numpy, pillow, fsspec, typing-extensions, packaging, pyyaml,
# lazy-loader, cupy-cuda13x, matplotlib and tifffile (see the device KINDS.md); tifffile is
# carried anyway because tiffslide 3.0.1 wants tifffile < 2026.5.2.
# Everything in .whl/ travels with the run and counts towards the 64 MiB carry limit, so the big
# wheels are slimmed by benches/slim_wheels.py (cuCIM 15.9 -> 8.2 MiB, nvImageCodec 23.9 -> 12.3,
# imagecodecs 25.2 -> 4.6); tested by installing the result for CPython 3.12 here and reading the
# test slides with every reader (cuCIM with device="cpu").
set -uo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .gitignore || { echo "/.whl/ is not in .gitignore; add it first" >&2; exit 1; }
mkdir -p .whl
PY=${PYTHON:-python3}
PLAT=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_24_x86_64
      --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64)
WANT=(
  cucim-cu13==26.10.0            # cuCIM (device="cpu" and "cuda")
  nvidia-nvimgcodec-cu13==0.9.0.20   # cuCIM's decoders
  nvidia-nvtiff-cu13==0.8.0.82
  lazy-loader==0.4               # cucim imports through it (also in the image)
  openslide-python==1.4.7
  openslide-bin==4.0.1.2
  fastslide==0.8.1
  tiffslide==3.0.1
  zarr==3.1.6                    # tiffslide's needs missing from the image
  numcodecs==0.16.6
  donfig==0.8.1.post1
  google-crc32c==1.9.0
  imagecodecs==2026.3.6
  tifffile==2026.3.3
)
failed=()
for spec in "${WANT[@]}"; do
  spec=${spec%%#*}; spec=${spec// /}
  [ -n "$spec" ] || continue
  name=${spec%%==*}
  if ls .whl/ 2>/dev/null | grep -qi "^$(echo "$name" | tr - _)-${spec##*==}-"; then
    echo "have $spec"; continue
  fi
  extra=()
  # fastslide 0.8.1's only Linux wheel is tagged cp312-abi3 (its METADATA says Requires-Python
  # >=3.12) but PyPI's index lists it as <3.12,>=3.11, so pip would skip it for 3.12
  [ "$name" = fastslide ] && extra=(--ignore-requires-python)
  if ! "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${PLAT[@]}" \
        "${extra[@]}" -d .whl "$spec" 2>/tmp/fetch-h200.err; then
    echo "FAILED $spec: $(tail -1 /tmp/fetch-h200.err)" >&2
    failed+=("$spec")
  else
    echo "got $spec"
  fi
done
# drop what the run never loads (other CPythons' extensions, test data, unused image codecs)
"$PY" benches/slim_wheels.py .whl
# the 48000² slide is made there; make_big_svs.py comes along (the tools/ folder does not travel)
cp -f ../shared/tools/make_big_svs.py .whl/make_big_svs.py
if [ "${1:-}" = "--testdata" ] && [ -d ../shared/testdata ]; then
  mkdir -p .whl/testdata
  # the test files every reader opened here (compare.py re-checks there); ~6 MB
  for f in CMU-1-Small-Region.svs boxes.tiff cog.tiff quad-tile.jpg.tiff small_aperio.svs tcga-cr-7395-01a-01-ts1.svs \
           tiff_tiled_ycbcr_jpeg_2x2_sampling.tif tiled-jpeg-rgb-u8.tif tiled-rgb-u8.tif; do
    cp -f "../shared/testdata/$f" .whl/testdata/ 2>/dev/null || true
  done
fi
echo
echo "wheels in .whl:"
ls -l .whl/*.whl | awk '{printf "  %8.1f MiB  %s\n", $5/1048576, $NF}'
ls .whl/*slidestream*.whl >/dev/null 2>&1 || echo "  (no slidestream wheel yet: .venv/bin/maturin build --release -m py/Cargo.toml --out .whl)"
echo "total .whl: $(du -sb .whl | awk '{printf "%.1f MiB", $1/1048576}') (carry limit 64 MiB, working tree included: $(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | awk '{printf "%.1f MiB", $1/1048576}') tracked)"
if [ ${#failed[@]} -gt 0 ]; then
  echo "could not fetch: ${failed[*]}" >&2
  exit 1
fi
