#!/usr/bin/env bash
# Installs the system packages slidestream's build needs (cmake and nasm build the vendored
# libjpeg-turbo; gcc builds OpenJPEG, zstd and jxrlib; libclang runs bindgen for jxrlib) and its
# tests (Chromium and chromedriver, libmagic). Idempotent: does nothing when they are present.
set -euo pipefail
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v nasm >/dev/null 2>&1 || need+=(nasm)
command -v cc >/dev/null 2>&1 || need+=(build-essential)
# libclang for bindgen: the jpegxr crate (Zeiss CZI JPEG XR) generates its jxrlib bindings at
# build time.
# (libclang itself: libclang-cpp, which other packages pull in, is not what bindgen loads.)
[ -n "$(ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-*.so* /usr/lib/x86_64-linux-gnu/libclang-*.so* 2>/dev/null | grep -v 'libclang-cpp' | head -1)" ] || need+=(libclang-dev)
# libFuzzer (C++, built by libfuzzer-sys for the fuzz targets).
command -v c++ >/dev/null 2>&1 || need+=(g++)
# Headless Chromium and its WebDriver for the viewer test of `slidestream serve`
# (py/tests/test_serve_browser.py drives /usr/bin/chromedriver through selenium).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
# libmagic for python-magic, which the IIIF validator imports (py/tests/test_serve_iiif.py).
[ -n "$(ls /usr/lib/*/libmagic.so.1 /usr/lib/libmagic.so.1 2>/dev/null | head -1)" ] || need+=(libmagic1)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing system packages: ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# nginx for the remote-slide tests (py/tests/test_remote.py, via scripts/remote_servers.py):
# Debian's package unpacked into ~/.cache/slidestream-test/nginx, never installed as a service.
bash "$(dirname "$0")/setup-nginx.sh" >/dev/null
