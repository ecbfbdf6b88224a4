#!/usr/bin/env python3
"""Write the generated vendor slides and OpenSlide's reference output for them.

    python scripts/make_vendor_slides.py OUT_DIR [--only MODULE[,MODULE...]]

Writes ``OUT_DIR/<file>`` for every slide the modules of ``scripts/vendor_slides/`` build,
checks each with OpenSlide 4.0.1 (openslide-python + openslide-bin: the intended vendor,
levels, associated images, properties and known pixels; any mismatch stops the script with
an error), and writes ``OUT_DIR/reference/<file>/`` in the layout of the shared test data's
references plus ``OUT_DIR/MANIFEST.md``. A slide of several files is named by the file it is
opened by when it has one: a MIRAX slide is ``OUT_DIR/X.mrxs`` beside its folder ``OUT_DIR/X/``,
its reference ``reference/X.mrxs/``; a DICOM slide is a folder ``OUT_DIR/<name>/`` with its
reference in ``OUT_DIR/reference-multifile/<name>/`` (whose regions.json names the file to open,
``"open"``). Modules may also write bad inputs (``OUT_DIR/bad-mirax/``, ``OUT_DIR/bad-dicom/``,
each with ``cases.json``; see ``vendor_slides/mirax_bad.py`` and ``vendor_slides/dicom.py``). The Rust and Python tests find OUT_DIR through
``$SLIDESTREAM_VENDOR_SLIDES`` (``scripts/test-all.sh`` sets it to ``target/vendor-slides``).
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import shutil
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from vendor_slides.common import check_with_openslide, write_reference  # noqa: E402

# One module per vendor layout; each has build(out_dir) -> list[Generated].
MODULES = ["mirax", "dicom", "hamamatsu", "vms", "philips", "ventana", "leica", "ome_tiff", "generic", "generic_16bit",
           "trestle", "huron", "argos", "czi", "sakura"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--only", default="", help="comma-separated module names (default: all present)")
    args = ap.parse_args()
    wanted = [m for m in args.only.split(",") if m] or MODULES
    out: pathlib.Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "reference").mkdir(exist_ok=True)
    rows = []
    for mod_name in wanted:
        try:
            mod = importlib.import_module(f"vendor_slides.{mod_name}")
        except ModuleNotFoundError as e:
            if e.name == f"vendor_slides.{mod_name}":
                continue  # not written yet
            raise
        for slide in mod.build(out):
            path = out / slide.open_path
            osr = check_with_openslide(path, slide)
            ref = out / slide.reference_kind / slide.name
            if ref.exists():
                shutil.rmtree(ref)
            write_reference(osr, slide, ref)
            osr.close()
            rows.append(f"| `{slide.name}` | {slide.vendor} | {len(slide.level_dimensions)} | {mod_name} | {slide.note} |")
    # With --only, keep the rows of the slides other modules generated before.
    made = {r.split("`")[1] for r in rows}
    old = out / "MANIFEST.md"
    if args.only and old.exists():
        kept = [l for l in old.read_text().splitlines() if l.startswith("| `") and l.split("`")[1] not in made]
        rows = sorted(kept + rows)
    manifest = [
        "# Generated vendor slides",
        "",
        "Written by `scripts/make_vendor_slides.py`; references are OpenSlide 4.0.1's output.",
        "",
        "| file | vendor | levels | generator | notes |",
        "|---|---|---:|---|---|",
        *rows,
        "",
    ]
    (out / "MANIFEST.md").write_text("\n".join(manifest))
    print(f"{len(rows)} generated slides in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
