"""What every vendor generator shares: the description of a generated slide, known pixels,
and the OpenSlide checks and reference dump (see ``make_vendor_slides.py``)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np


@dataclasses.dataclass
class Region:
    """A reference region: ``location`` in level-0 pixels, ``size`` in pixels of ``level``
    (OpenSlide's ``read_region`` arguments)."""

    name: str
    level: int
    location: Tuple[int, int]
    size: Tuple[int, int]


@dataclasses.dataclass
class Generated:
    """One generated slide and what OpenSlide must report for it.

    ``check`` (optional) receives the open ``openslide.OpenSlide`` and raises
    ``AssertionError`` when OpenSlide's pixels are not the known pixels the generator wrote
    (within the codec's tolerance); the generator fails then, so no test ever compares
    against an OpenSlide that misread the file.

    A slide of several files (DICOM) is a folder: ``name`` is the folder (relative to the
    output directory) and ``open`` the file OpenSlide opens (relative to the output directory,
    e.g. ``"dicom-x/level-0.dcm"``); its reference goes to ``reference-multifile/<name>/``
    with ``regions.json["open"]``, as in the shared test data. ``extra`` keys are added to
    regions.json as they are (facts a module's tests read, e.g. DICOM's ``refused_files``)."""

    name: str
    vendor: str
    level_dimensions: List[Tuple[int, int]]
    regions: List[Region]
    associated: Sequence[str] = ()
    properties: Dict[str, str] = dataclasses.field(default_factory=dict)
    check: Optional[Callable[[object], None]] = None
    note: str = ""
    open: Optional[str] = None
    extra: Dict[str, object] = dataclasses.field(default_factory=dict)

    @property
    def open_path(self) -> str:
        """The path OpenSlide opens, relative to the output directory."""
        return self.open or self.name

    @property
    def reference_kind(self) -> str:
        """``reference`` (one file) or ``reference-multifile`` (a folder slide)."""
        return "reference-multifile" if self.open else "reference"


def tissue_like(width: int, height: int, seed: int = 0) -> np.ndarray:
    """Known pixels that look like stained tissue and compress like it: smooth pink/purple
    blobs over a near-white background, plus fine texture. ``uint8`` array of shape
    ``(height, width, 3)``; deterministic for a seed."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    field = np.zeros((height, width), np.float32)
    for _ in range(6):
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        r = rng.uniform(0.1, 0.35) * max(width, height)
        field += np.exp(-(((x - cx) ** 2 + (y - cy) ** 2) / (2 * r * r)))
    field = np.clip(field, 0, 1)
    texture = 0.5 + 0.5 * np.sin(x / 3.1 + rng.uniform(0, 6)) * np.cos(y / 4.3 + rng.uniform(0, 6))
    tissue = field * (0.75 + 0.25 * texture)
    bg = np.array([242, 240, 244], np.float32)
    stain = np.array([176, 84, 150], np.float32)
    img = bg * (1 - tissue[..., None]) + stain * tissue[..., None]
    return np.clip(img + 0.5, 0, 255).astype(np.uint8)


def downscale(img: np.ndarray, factor: int) -> np.ndarray:
    """Box-filter ``img`` (h, w, c) by an integer ``factor`` (edge pixels averaged over what
    exists), rounding to nearest; the generators' reduced levels."""
    h, w = img.shape[:2]
    nh, nw = -(-h // factor), -(-w // factor)
    pad = np.pad(img.astype(np.float64), ((0, nh * factor - h), (0, nw * factor - w), (0, 0)), mode="edge")
    out = pad.reshape(nh, factor, nw, factor, img.shape[2]).mean(axis=(1, 3))
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


def assert_close(got: np.ndarray, want: np.ndarray, tol: int, what: str) -> None:
    """Raise ``AssertionError`` unless ``got`` and ``want`` (same shape, uint8) differ by at
    most ``tol`` per sample."""
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    d = int(np.abs(got.astype(np.int16) - want.astype(np.int16)).max()) if got.size else 0
    assert d <= tol, f"{what}: max abs difference {d} > {tol}"


def write_reference(osr, slide: Generated, ref_dir: pathlib.Path) -> None:
    """Write what OpenSlide returns for ``slide`` in the layout of
    ``../shared/testdata/reference/<file>/`` (``reference-multifile/<folder>/`` for a folder
    slide, whose regions.json adds ``open``): properties.json, regions.json and RGBA PNGs of
    every region and associated image."""
    import openslide

    ref_dir.mkdir(parents=True, exist_ok=True)
    (ref_dir / "properties.json").write_text(json.dumps(dict(sorted(osr.properties.items())), indent=1))
    regions = []
    for r in slide.regions:
        img = osr.read_region(r.location, r.level, r.size)
        png = f"{r.name}.png"
        img.save(ref_dir / png)
        regions.append(
            {
                "name": r.name,
                "level": r.level,
                "location": list(r.location),
                "size": list(r.size),
                "png": png,
                "rgba_sha256": hashlib.sha256(img.tobytes()).hexdigest(),
            }
        )
    assoc = {}
    for name, img in osr.associated_images.items():
        png = f"assoc_{name}.png"
        img.save(ref_dir / png)
        assoc[name] = {"png": png, "size": list(img.size), "rgba_sha256": hashlib.sha256(img.tobytes()).hexdigest()}
    doc = {
        "file": slide.name,
        **({"open": slide.open} if slide.open else {}),
        "openslide_version": openslide.__library_version__,
        "openslide_python": openslide.__version__,
        "detect_format": openslide.OpenSlide.detect_format(str(ref_dir.parent.parent / slide.open_path)),
        "level_count": osr.level_count,
        "level_dimensions": [list(d) for d in osr.level_dimensions],
        "level_downsamples": list(osr.level_downsamples),
        "associated_images": assoc,
        "regions": regions,
        "note": "Generated by scripts/make_vendor_slides.py; PNGs are RGBA exactly as OpenSlide's read_region "
        "returns them. " + slide.note,
        **slide.extra,
    }
    (ref_dir / "regions.json").write_text(json.dumps(doc, indent=1))


def check_with_openslide(path: pathlib.Path, slide: Generated):
    """Open ``path`` (the file ``slide.open_path`` names) with OpenSlide and check it reads the file as ``slide`` intends; return
    the open ``OpenSlide``. Raises ``AssertionError`` naming the file otherwise."""
    import openslide

    vendor = openslide.OpenSlide.detect_format(str(path))
    assert vendor == slide.vendor, f"{slide.name}: OpenSlide detects {vendor!r}, intended {slide.vendor!r}"
    osr = openslide.OpenSlide(str(path))
    dims = [tuple(d) for d in osr.level_dimensions]
    assert dims == [tuple(d) for d in slide.level_dimensions], f"{slide.name}: OpenSlide levels {dims}, intended {slide.level_dimensions}"
    missing = set(slide.associated) - set(osr.associated_images)
    assert not missing, f"{slide.name}: OpenSlide lacks associated images {sorted(missing)}"
    for k, v in slide.properties.items():
        assert osr.properties.get(k) == v, f"{slide.name}: OpenSlide property {k} = {osr.properties.get(k)!r}, intended {v!r}"
    if slide.check is not None:
        slide.check(osr)
    return osr


def main(build: Callable[[pathlib.Path], List[Generated]], argv: Sequence[str]) -> int:
    """``python -m vendor_slides.<module> OUT``: write the module's slides into OUT with
    OpenSlide's references beside them (as ``make_vendor_slides.py`` does); the Rust tests of
    one format run this."""
    out = pathlib.Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for slide in build(out):
        osr = check_with_openslide(out / slide.open_path, slide)
        write_reference(osr, slide, out / slide.reference_kind / slide.name)
        osr.close()
    return 0
