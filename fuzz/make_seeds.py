#!/usr/bin/env python3
"""Seed corpora of the fuzz targets for the text and container inputs of the newer drivers,
from the generated vendor slides (scripts/make_vendor_slides.py) and the real test slides.

Writes OUT_DIR/<target>/<seed> for the targets
* mirax_ini, mirax_index: every MIRAX slide as a bundle (its .mrxs, then every file of its
  folder: Slidedat.ini, Index.dat, Data*.dat); the targets mutate Slidedat.ini resp. Index.dat;
* dicom_header: every DICOM series as a bundle of its instances (a level first; files added
  smallest first while the bundle stays under 900 KB), and each lone DICOM file;
* vendor_xml: every Philips, Ventana, Leica, OME-TIFF and ARGOS slide as a bundle of its XML
  texts (ImageDescription XML, XMLPacket and ARGOS's tag 65000 of each IFD of the main chain,
  named ifd<N>.<tag>.xml), every Trestle and Huron slide with its IFD 0 ImageDescription (their
  key=value text), each followed by the slide itself (the template they are spliced into);
* ndpi_tags: every NDPI file under 1 MiB as it is;
* vsi_ets: the Olympus VSI slides of scripts/vendor_slides/vsi.py (written into a temporary
  folder; needs Pillow) and the real ../shared/formats3/vsi-ets-test-jpg2k.vsi, each as a bundle
  of the .vsi and its ETS file;
* czi_segments: every CZI file under 1 MiB as it is (the generated ones and shared/formats3's);
* read_region: every generated Sakura slide (an SQLite database, opened from memory) as it is.

A bundle (core/src/fuzzing.rs, `Bundle`) is b"SSFB\\x01", then per member a name length (u8),
the name, a data length (u32 LE) and the data. Inputs over 1 MiB (the targets' -max_len) are
left out.

usage: make_seeds.py OUT_DIR VENDOR_SLIDES_DIR [TESTDATA_DIR]   (needs tifffile)
"""
import os
import struct
import sys

import tifffile

MAX_INPUT = 1 << 20
DICOM_BUDGET = 900_000
MAGIC = b"SSFB\x01"


def bundle(members) -> bytes:
    """Encode [(name, bytes)] as the targets' bundle."""
    out = bytearray(MAGIC)
    for name, data in members:
        n = name.encode()
        out += bytes([len(n)]) + n + struct.pack("<I", len(data)) + data
    return bytes(out)


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write(out: str, target: str, name: str, data: bytes) -> bool:
    if len(data) > MAX_INPUT:
        return False
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
    return True


def walk(root: str):
    """Every file under root, sorted."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            yield os.path.join(dirpath, f)


def is_dicom(path: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(132)
    return len(head) == 132 and head[128:] == b"DICM"


def mirax_seeds(out: str, roots) -> int:
    n = 0
    for root in roots:
        for p in walk(root):
            if not p.endswith(".mrxs"):
                continue
            folder = p[: -len(".mrxs")]
            if not os.path.isdir(folder):
                continue
            stem = os.path.basename(folder)
            members = [(stem + ".mrxs", read(p))]
            members += [(f"{stem}/{f}", read(os.path.join(folder, f))) for f in sorted(os.listdir(folder)) if os.path.isfile(os.path.join(folder, f))]
            data = bundle(members)
            tag = os.path.relpath(folder, root).replace(os.sep, "_")
            for t in ("mirax_ini", "mirax_index"):
                n += write(out, t, tag + ".bundle", data)
    return n


def dicom_seeds(out: str, roots) -> int:
    n = 0
    dirs = {}
    for root in roots:
        for p in walk(root):
            if is_dicom(p):
                dirs.setdefault((root, os.path.dirname(p)), []).append(p)
    for (root, d), files in sorted(dirs.items()):
        tag = os.path.relpath(d, os.path.dirname(os.path.normpath(root))).replace(os.sep, "_")
        if len(files) == 1:
            for p in files:
                n += write(out, "dicom_header", f"{tag}_{os.path.basename(p)}.bundle", bundle([(os.path.basename(p), read(p))]))
            continue
        chosen, total = [], 0
        for p in sorted(files, key=os.path.getsize):
            if total + os.path.getsize(p) <= DICOM_BUDGET:
                chosen.append(p)
                total += os.path.getsize(p)
        if not chosen:
            continue
        # Open a level (the largest chosen file is one in every generated series).
        first = max(chosen, key=os.path.getsize)
        order = [first] + [p for p in sorted(chosen) if p != first]
        n += write(out, "dicom_header", tag + ".bundle", bundle([(f"{tag}/{os.path.basename(p)}", read(p)) for p in order]))
    return n


def xml_seeds(out: str, roots) -> int:
    n = 0
    for root in roots:
        for p in walk(root):
            base = os.path.basename(p)
            text_vendor = base.startswith(("trestle", "huron"))
            if not base.startswith(("philips", "ventana", "leica", "ome", "argos", "trestle", "huron")) or not base.endswith((".tif", ".tiff", ".bif", ".avs")):
                continue
            data = read(p)
            if data[:4] not in (b"II*\0", b"MM\0*", b"II+\0", b"MM\0+"):
                continue
            members = []
            with tifffile.TiffFile(p) as tf:
                for i, page in enumerate(tf.pages):
                    for code in (270, 700, 65000):
                        t = page.tags.get(code)
                        if t is None:
                            continue
                        v = t.value
                        text = v if isinstance(v, bytes) else str(v).encode()
                        text = text.split(b"\0")[0]
                        if text.lstrip().startswith(b"<") or (text_vendor and i == 0 and code == 270):
                            members.append((f"ifd{i}.{code}.xml", text))
            if members:
                tag = os.path.relpath(p, root).replace(os.sep, "_")
                n += write(out, "vendor_xml", tag + ".bundle", bundle(members + [(base, data)]))
    return n


def ndpi_seeds(out: str, roots) -> int:
    n = 0
    for root in roots:
        for p in walk(root):
            if p.endswith(".ndpi"):
                n += write(out, "ndpi_tags", os.path.relpath(p, root).replace(os.sep, "_"), read(p))
    return n


def vsi_seeds(out: str, formats3: str) -> int:
    import importlib.util
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("vsi_gen", os.path.join(here, "../scripts/vendor_slides/vsi.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        gen.main(tmp)
        for root in (tmp, os.path.join(tmp, "bad"), formats3):
            if not os.path.isdir(root):
                continue
            for f in sorted(os.listdir(root)):
                stem = f[: -len(".vsi")]
                folder = os.path.join(root, f"_{stem}_")
                if not f.endswith(".vsi") or not os.path.isdir(folder):
                    continue
                members = [(f, read(os.path.join(root, f)))]
                members += [(os.path.relpath(p, root), read(p)) for p in walk(folder) if p.endswith(".ets")]
                n += write(out, "vsi_ets", stem + ".bundle", bundle(members))
    return n


def czi_seeds(out: str, roots) -> int:
    n = 0
    for root in roots:
        for p in walk(root):
            if p.endswith(".czi"):
                n += write(out, "czi_segments", os.path.relpath(p, root).replace(os.sep, "_"), read(p))
    return n


def sakura_seeds(out: str, roots) -> int:
    """Every Sakura slide (an SQLite database, opened from memory) for ``read_region``."""
    n = 0
    for root in roots:
        for p in walk(root):
            if p.endswith(".svslide"):
                n += write(out, "read_region", os.path.relpath(p, root).replace(os.sep, "_"), read(p))
    return n


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, vendor = sys.argv[1], sys.argv[2]
    testdata = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../shared/testdata")
    roots = [vendor] + ([testdata] if os.path.isdir(testdata) else [])
    # The test data's reference outputs hold no slides.
    counts = {
        "mirax": mirax_seeds(out, roots),
        "dicom_header": dicom_seeds(out, [vendor] + [os.path.join(testdata, d) for d in ("CMU-1-Small-Region-dicom",) if os.path.isdir(os.path.join(testdata, d))]),
        "vendor_xml": xml_seeds(out, roots),
        "ndpi_tags": ndpi_seeds(out, roots),
        "vsi_ets": vsi_seeds(out, os.path.join(os.path.dirname(os.path.abspath(testdata)), "formats3")),
        "czi_segments": czi_seeds(out, roots + [d for d in (os.path.join(os.path.dirname(os.path.abspath(testdata)), "formats3"),) if os.path.isdir(d)]),
        "read_region (sakura)": sakura_seeds(out, [vendor]),
    }
    if os.path.isfile(os.path.join(testdata, "camelyon-jpeg-ybr.dcm")):
        p = os.path.join(testdata, "camelyon-jpeg-ybr.dcm")
        counts["dicom_header"] += write(out, "dicom_header", "camelyon-jpeg-ybr.dcm.bundle", bundle([("camelyon-jpeg-ybr.dcm", read(p))]))
    for k, v in counts.items():
        if v == 0:
            sys.exit(f"make_seeds.py: no {k} seeds (is {vendor} the output of scripts/make_vendor_slides.py?)")
    print("seeds:", ", ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
