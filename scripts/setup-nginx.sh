#!/usr/bin/env bash
# Unpacks Debian's nginx into a cache folder for the remote-slide tests (scripts/remote_servers.py
# runs it in the foreground on a loopback port with its own config). The package is fetched with
# `apt-get download` and unpacked with `dpkg-deb -x`: nothing is installed system-wide and no
# system service is started. Idempotent: does nothing when the unpacked binary runs.
# Prints the nginx binary's path on stdout.
set -euo pipefail
cache="${SLIDESTREAM_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slidestream-test}"
dest="$cache/nginx"
bin="$dest/usr/sbin/nginx"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing_libs() {
  # Shared libraries the unpacked binary needs but the system lacks, as Debian package names.
  ldd "$bin" 2>/dev/null | awk '/not found/ {print $1}' | while read -r lib; do
    case "$lib" in
      libpcre2-8.so.*) echo libpcre2-8-0 ;;
      libssl.so.3|libcrypto.so.3) echo libssl3 ;;
      libz.so.*) echo zlib1g ;;
      libcrypt.so.*) echo libcrypt1 ;;
      *) echo "unknown:$lib" ;;
    esac
  done | sort -u
}
if [ ! -x "$bin" ] || ! "$bin" -v >/dev/null 2>&1; then
  command -v apt-get >/dev/null || { echo "setup-nginx.sh: needs apt-get (Debian/Ubuntu)" >&2; exit 1; }
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  chmod 755 "$tmp"  # apt's _apt user downloads into it
  if ! (cd "$tmp" && apt-get download -qq nginx 2>/dev/null); then
    $SUDO apt-get update -qq
    (cd "$tmp" && apt-get download -qq nginx)
  fi
  rm -rf "$dest.new"
  mkdir -p "$dest.new"
  dpkg-deb -x "$tmp"/nginx_*.deb "$dest.new"
  rm -rf "$dest"
  mv "$dest.new" "$dest"
  # Libraries only (no services): the ones the binary links and this system lacks.
  libs="$(missing_libs)"
  if [ -n "$libs" ]; then
    if echo "$libs" | grep -q '^unknown:'; then
      echo "setup-nginx.sh: nginx needs libraries with no known package: $libs" >&2
      exit 1
    fi
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $libs >/dev/null
  fi
  "$bin" -v >/dev/null 2>&1 || { echo "setup-nginx.sh: $bin does not run" >&2; exit 1; }
fi
echo "$bin"
