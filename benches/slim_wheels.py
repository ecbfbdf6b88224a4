#!/usr/bin/env python3
"""Drop files a benchmark run never loads from downloaded wheels, so that everything carried to
the lent H200 fits its 64 MiB limit. Rewrites each wheel in place (same name) and removes the
dropped files' lines from its RECORD; prints what it saved.

usage: slim_wheels.py WHEEL_DIR

What goes (everything else stays):
- nvidia-nvimgcodec-cu13: the Python extension built for every CPython but 3.12 (the device's);
- cucim-cu13: its test folders (test images and expected results);
- imagecodecs: every codec except the ones tifffile needs to decode the slides compared here
  (JPEG, JPEG 2000, deflate/zlib, LZW and PackBits (_imcd), zstd, WebP, LZMA, PNG) and the
  shared modules; of its bundled libraries only those the kept modules need (DT_NEEDED,
  transitively, read with readelf; without readelf every library stays). A dropped codec
  raises when used (imagecodecs imports codecs lazily), it does not break the import.
"""
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

IMAGECODECS_KEEP_MODULES = {"_shared", "_shared_cython", "_imcd", "_jpeg8", "_jpeg2k", "_zlib", "_deflate", "_zstd", "_webp", "_lzma", "_png"}

RULES = {
    "nvidia_nvimgcodec_cu13-": lambda n: bool(re.search(r"nvimgcodec_impl\.cpython-3(?!12-)\d+t?-", n)),
    "cucim_cu13-": lambda n: "/tests/" in n,
    "imagecodecs-": None,  # built per wheel by imagecodecs_rule (needs the libraries' DT_NEEDED)
}


def _needed(data):
    """DT_NEEDED names of an ELF file's bytes, via readelf; None when readelf is missing."""
    if not shutil.which("readelf"):
        return None
    with tempfile.NamedTemporaryFile(suffix=".so") as f:
        f.write(data)
        f.flush()
        out = subprocess.run(["readelf", "-d", f.name], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def imagecodecs_rule(path):
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        mods = [n for n in names if fnmatch.fnmatch(n, "imagecodecs/_*.so")]
        keep_mods = {n for n in mods if os.path.basename(n).split(".")[0] in IMAGECODECS_KEEP_MODULES}
        libs = {os.path.basename(n): n for n in names if n.startswith("imagecodecs.libs/")}
        keep_libs, todo = set(), list(keep_mods)
        while todo:
            needed = _needed(z.read(todo.pop()))
            if needed is None:
                keep_libs = set(libs.values())
                break
            for lib in needed:
                if lib in libs and libs[lib] not in keep_libs:
                    keep_libs.add(libs[lib])
                    todo.append(libs[lib])
    drop = (set(mods) - keep_mods) | (set(libs.values()) - keep_libs)
    return lambda n: n in drop


def slim(path, drop):
    tmp = path + ".tmp"
    dropped = []
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        names = [i.filename for i in zin.infolist()]
        dropped = [n for n in names if drop(n)]
        if not dropped:
            os.unlink(tmp)
            return 0, 0
        gone = set(dropped)
        for info in zin.infolist():
            if info.filename in gone:
                continue
            data = zin.read(info.filename)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines()
                data = ("\n".join(line for line in lines if line.split(",")[0] not in gone) + "\n").encode()
            zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    before = os.path.getsize(path)
    os.replace(tmp, path)
    return before, len(dropped)


def main():
    d = sys.argv[1]
    for f in sorted(os.listdir(d)):
        if not f.endswith(".whl"):
            continue
        for prefix, drop in RULES.items():
            if f.startswith(prefix):
                drop = drop or imagecodecs_rule(os.path.join(d, f))
                before, n = slim(os.path.join(d, f), drop)
                if n:
                    after = os.path.getsize(os.path.join(d, f))
                    print(f"slimmed {f}: {n} files dropped, {before / 2**20:.1f} -> {after / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
