#!/usr/bin/env bash
# GPU verification and timings on a CUDA machine without a Rust toolchain (the lent H200).
# What docs/gpu.md reports comes from these steps (there run as separate calls).
#
# Prepare here (x86-64 build machine), into the git-ignored .device/:
#   cargo build --release -p slidestream --features cuda
#   mkdir -p .device/bin .device/wheels && strip -o .device/bin/slidestream-cuda target/release/slidestream
#   cargo test --release -p slidestream --features cuda --no-run     # prints target/release/deps/gpu-<hash>
#   strip -o .device/bin/gpu-tests target/release/deps/gpu-<hash>
#   (cd py && maturin build --release --out ../.device/wheels)
#   cp -r ../shared/testdata .device/testdata && cp ../shared/tools/make_big_svs.py .device/
# Device: run(command="bash benches/gpu_check.sh", carry=[".device"]); logs go to $OUT.
# Environment: PARTS (default "tests python timings torchvision").
set -uo pipefail
B=$PWD/.device/bin/slidestream-cuda
export SLIDESTREAM_TESTDATA=$PWD/.device/testdata
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
PARTS=${PARTS:-"tests python timings torchvision"}
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
[ -f /tmp/big.svs ] || python3 .device/make_big_svs.py /tmp/big.svs --source .device/testdata/CMU-1-Small-Region.svs >/dev/null
case " $PARTS " in *" tests "*)
  for mode in on off auto; do
    echo "#### core/tests/gpu.rs, SLIDESTREAM_COMPAT_MODE=$mode"
    SLIDESTREAM_COMPAT_MODE=$mode timeout 240 .device/bin/gpu-tests --test-threads 8 --nocapture 2>&1 | grep -v '^$' | tail -40
  done;;
esac
case " $PARTS " in *" python "*)
  echo "#### py/tests/test_gpu.py"
  python3 -m pip install -q --no-deps --no-index --target /tmp/ss .device/wheels/slidestream-*.whl
  PYTHONPATH=/tmp/ss timeout 300 python3 -m pytest -q -p no:cacheprovider -rs py/tests/test_gpu.py 2>&1 | tail -8;;
esac
case " $PARTS " in *" timings "*)
  for w in 1 2 4 8; do
    echo "#### 4096 random 256² patches, SLIDESTREAM_GPU_WORKERS=$w"
    SLIDESTREAM_GPU_WORKERS=$w SLIDESTREAM_GPU_TRACE=1 timeout 120 $B gpu-region /tmp/big.svs --patches 4096 --batch 4096 2>&1 | grep -E "patches/s|trace"
  done
  echo "#### level-0 scan: CPU, then GPU"
  $B tiles /tmp/big.svs --batch 1024 | head -2
  timeout 120 $B tiles /tmp/big.svs --device cuda --batch 4096;;
esac
case " $PARTS " in *" torchvision "*)
  echo "#### torchvision batched nvJPEG on the same tiles"
  timeout 120 python3 benches/tv_decode.py /tmp/big.svs 8192 256;;
esac
} 2>&1 | tee "$OUT/gpu_check.log"
