# Sourced by benches/h200_issue*.sh on the lent H200: the cuFile udev record, the carried wheels
# installed into /tmp/ss (once per machine), the carried test binaries unpacked into /tmp/bin,
# and the test-data variables. Expects the carry folder .device/ (docs/gpu.md).
export PYTHONUNBUFFERED=1
mkdir -p /run/udev/data
printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n' > /run/udev/data/b$(printf '%d:%d' 0x$(stat -c '%t' /dev/vda) 0x$(stat -c '%T' /dev/vda))
D=$PWD/.device
PY=${PYTHON:-python3}
# Installed again when the carried wheels change (a warm machine keeps /tmp/ss between calls).
WHEELS_ID=$(ls -l $D/wheels | md5sum | cut -c1-12)
if [ "$(cat /tmp/ss/.done 2>/dev/null)" != "$WHEELS_ID" ]; then
  rm -rf /tmp/ss
  $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/ss $D/wheels/*.whl && echo "$WHEELS_ID" > /tmp/ss/.done
fi
export PYTHONPATH=/tmp/ss
export LD_LIBRARY_PATH=$(find /tmp/ss/openslide_bin -name '*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd:):/usr/local/cuda/lib64
mkdir -p /tmp/bin
for b in $D/bin/*.gz; do [ -f "$b" ] || continue; n=$(basename "$b" .gz); [ -x /tmp/bin/$n ] || { gunzip -c "$b" > /tmp/bin/$n; chmod +x /tmp/bin/$n; }; done
# .xz (smaller, to fit the carry): Python's lzma, in case the machine has no xz.
for b in $D/bin/*.xz; do [ -f "$b" ] || continue; n=$(basename "$b" .xz); [ -x /tmp/bin/$n ] || { $PY -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$b" /tmp/bin/$n; chmod +x /tmp/bin/$n; }; done
export SLIDESTREAM_TESTDATA=$D/testdata SLIDESTREAM_VENDOR_SLIDES=/tmp/vs
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nproc; date -u
# make_slides: the 48000² benchmark slide /tmp/big.svs and 8 copies in /tmp/tl-slides (kept
# across calls on a warm machine), read once into the page cache.
make_slides() {
  mkdir -p /tmp/tl-slides
  [ -f /tmp/big.svs ] || $PY $D/make_big_svs.py /tmp/big.svs --source $D/testdata/CMU-1-Small-Region.svs >/dev/null
  for i in 0 1 2 3 4 5 6 7; do [ -f /tmp/tl-slides/s$i.svs ] || cp /tmp/big.svs /tmp/tl-slides/s$i.svs; done
  cat /tmp/tl-slides/*.svs > /dev/null
  echo "slides made at $SECONDS s"
}
