#!/usr/bin/env bash
# Issue 17 on the lent H200: remote slides through the GPU engine.
#
#   here:   the .device/ carry (docs/gpu.md "Issue 17 on the H200"): bin/{gpu,conformance}-tests.gz
#           (cargo test --release --features cuda --no-run, debug info stripped), wheels/ (the
#           slidestream abi3 wheel, rangehttpserver), testdata/ (a copy of ../shared/testdata),
#           make_big_svs.py, nginx/ (nginx + libpcre2-8, libcrypt from scripts/setup-nginx.sh's
#           unpacked Debian package); scripts/faultproxy.py (the latency proxy) from the tree
#   device: run(command="bash benches/h200_issue17.sh", carry=[".device"])
#
# 1. The GPU tests and the conformance battery (device reads == CPU reads) under
#    SLIDESTREAM_COMPAT_MODE=on and off: the read plan's batched path (ByteSource::read_many) is
#    new, local reads must be unchanged.
# 2. benches/remote_gpu.py over nginx on loopback (benches/h200_nginx.conf) and
#    through the latency proxy (10 ms each way = 20 ms RTT): every shared single-file slide read
#    to the device from the URL equals the local file's device read; then random 256² device
#    patches of the 48000² SVS (batches of 256 and 4096) from the URL vs the local file.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/h200_issue17.log") 2>&1
source benches/h200_device_env.sh
PART=${PART:-all}
for mode in on off; do
  [ "$PART" = rates ] && break
  echo "== SLIDESTREAM_COMPAT_MODE=$mode"
  for t in conformance gpu; do
    echo "-- $t ($mode)"
    SLIDESTREAM_COMPAT_MODE=$mode timeout 200 /tmp/bin/$t-tests --test-threads 8 2>&1 | grep -E "^test |test result|panicked|assert" | grep -v " ok$" | tail -20
  done
done
[ -f /tmp/www/big.svs ] || { mkdir -p /tmp/www; t=$(date +%s); $PY $D/make_big_svs.py /tmp/www/big.svs --source $D/testdata/CMU-1-Small-Region.svs >/dev/null && echo "big.svs in $(( $(date +%s) - t )) s"; }
cp -r --update=none $D/testdata/. /tmp/www/
# nginx (Debian 12's binary, unpacked by scripts/setup-nginx.sh, with the two libraries the
# device may lack) serves /tmp/www with ranges, keep-alive and ETags.
mkdir -p /tmp/ngx
LD_LIBRARY_PATH=$D/nginx/lib $D/nginx/nginx -p /tmp/ngx -c $PWD/benches/h200_nginx.conf > /tmp/ngx/out.log 2>&1 &
RS=$!
$PY scripts/faultproxy.py --upstream http://127.0.0.1:8817 --listen 127.0.0.1:8818 --delay-ms 10 > /tmp/proxy.log 2>&1 &
PX=$!
sleep 2
ls -la /tmp/www/big.svs
if [ "$PART" != rates ]; then
  for mode in on off; do
    echo "== remote GPU reads, SLIDESTREAM_COMPAT_MODE=$mode"
    SLIDESTREAM_COMPAT_MODE=$mode timeout 100 $PY benches/remote_gpu.py --www /tmp/www --direct http://127.0.0.1:8817
  done
fi
echo "== remote GPU reads over nginx (ETags, If-Match) and rates (POSIX path; cuFile does not apply to remote objects)"
SLIDESTREAM_COMPAT_MODE=on timeout 300 $PY benches/remote_gpu.py --www /tmp/www --direct http://127.0.0.1:8817 --delayed http://127.0.0.1:8818 --big big.svs --patches 2048 --rounds 3
kill $RS $PX 2>/dev/null
date -u
