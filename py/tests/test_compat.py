"""The OpenSlide-compatible API (slidestream.OpenSlide, open_slide, ImageSlide, errors) against
openslide-python 1.4 on the real test slides: Pillow types, modes and sizes, the same values
for properties, geometry, associated images, colour profiles and thumbnails, and errors that
are OpenSlideError subclasses.

Pixel tolerances: lossless codecs exact; JPEG / JPEG 2000 within 2 per channel for regions
and associated images (decoder rounding), within 3 for thumbnails (a Lanczos reduction of
inputs that differ by at most 2 can differ by 2 x the kernel's absolute weight sum, < 1.5).
Regions are read at level 0 and at locations that are multiples of integer downsamples, where
OpenSlide does not resample (test_parity covers fractional origins).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import slidestream
from _parity_helpers import (
    SUPPORTED_VENDORS,
    slide_path,
    LOSSY_COMPRESSIONS,
    first_difference,
    locate_testdata,
    max_abs_diff,
    openslide_or_skip,
    page_compressions,
    slide_files,
    tolerance_for,
)

openslide = pytest.importorskip("openslide")
PIL_Image = pytest.importorskip("PIL.Image")
ImageCms = pytest.importorskip("PIL.ImageCms")

FILES = slide_files()


def _pair(name: str):
    """(openslide.OpenSlide, slidestream.OpenSlide) for a file both open."""
    osr = openslide_or_skip(name)
    vendor = osr.properties["openslide.vendor"]
    if vendor not in SUPPORTED_VENDORS:
        osr.close()
        with pytest.raises(slidestream.OpenSlideUnsupportedFormatError):
            slidestream.OpenSlide(slide_path(name))
        pytest.skip(f"{name}: no slidestream driver for vendor {vendor!r}")
    return osr, slidestream.OpenSlide(str(slide_path(name)))


def _lossy(name: str) -> bool:
    return any(c in LOSSY_COMPRESSIONS for c in page_compressions(slide_path(name)).values())


def test_error_aliases_and_exports():
    assert slidestream.OpenSlideError is slidestream.SlideError
    assert slidestream.OpenSlideUnsupportedFormatError is slidestream.UnsupportedFormatError
    assert issubclass(slidestream.OpenSlideUnsupportedFormatError, slidestream.OpenSlideError)
    from slidestream import _compat

    for name in dir(openslide):
        if name.startswith("PROPERTY_NAME_"):
            assert getattr(slidestream, name) == getattr(openslide, name), name
            assert getattr(_compat, name) == getattr(openslide, name), name
    assert issubclass(slidestream.OpenSlide, slidestream.AbstractSlide)
    assert issubclass(slidestream.ImageSlide, slidestream.AbstractSlide)


def test_api_names_match_openslide_python():
    """Every public attribute of openslide.OpenSlide / ImageSlide exists on ours."""
    for theirs, ours in [(openslide.OpenSlide, slidestream.OpenSlide), (openslide.ImageSlide, slidestream.ImageSlide)]:
        missing = [n for n in dir(theirs) if not n.startswith("_") and not hasattr(ours, n)]
        assert not missing, (ours, missing)
    for n in ("OpenSlide", "ImageSlide", "open_slide", "OpenSlideCache", "OpenSlideError", "OpenSlideUnsupportedFormatError"):
        assert hasattr(slidestream, n), n


def test_pillow_is_imported_lazily():
    """Opening a slide and reading metadata does not import Pillow; reading a region does."""
    path = locate_testdata() / "boxes.tiff"
    code = (
        "import sys, slidestream\n"
        f"s = slidestream.OpenSlide({str(path)!r})\n"
        "s.properties; s.level_dimensions; s.associated_images; s.get_best_level_for_downsample(2)\n"
        "import slidestream.deepzoom as dz; g = dz.DeepZoomGenerator(s); g.get_dzi('png')\n"
        "assert 'PIL' not in sys.modules, 'PIL imported early'\n"
        "s.read_region((0, 0), 0, (4, 4))\n"
        "assert 'PIL' in sys.modules\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", FILES)
def test_metadata_matches(name):
    """Geometry, properties (as a Mapping), associated image names, colour profile, repr."""
    osr, ours = _pair(name)
    with ours:
        assert ours.level_count == osr.level_count
        assert ours.dimensions == osr.dimensions and type(ours.dimensions) is tuple
        assert ours.level_dimensions == osr.level_dimensions
        assert all(type(v) is int for d in ours.level_dimensions for v in d)
        assert ours.level_downsamples == pytest.approx(osr.level_downsamples, rel=1e-12, abs=0)
        assert all(type(d) is float for d in ours.level_downsamples)
        assert dict(ours.properties) == dict(osr.properties)
        assert list(ours.properties) == list(osr.properties)  # sorted names, as OpenSlide
        with pytest.raises(TypeError):
            ours.properties["x"] = "y"  # type: ignore[index]
        assert list(ours.associated_images) == list(osr.associated_images)
        assert len(ours.associated_images) == len(osr.associated_images)
        theirs_icc = osr.color_profile
        if theirs_icc is None:
            assert ours.color_profile is None
        else:
            assert isinstance(ours.color_profile, ImageCms.ImageCmsProfile)
            assert ours.color_profile.tobytes() == theirs_icc.tobytes()
        assert repr(ours) == repr(osr)
        assert slidestream.OpenSlide.detect_format(slide_path(name)) == openslide.OpenSlide.detect_format(
            str(slide_path(name))
        )
        for d in (0.5, 1.0, 2.0, 3.0, 7.9, 100.0):
            assert ours.get_best_level_for_downsample(d) == osr.get_best_level_for_downsample(d)


@pytest.mark.parametrize("name", FILES)
def test_associated_images_match(name):
    """Lazy mapping of PIL RGBA images with OpenSlide's pixels and ICC info."""
    osr, ours = _pair(name)
    locate_testdata()
    for an in osr.associated_images:
        try:
            theirs = osr.associated_images[an]
        except openslide.OpenSlideError:
            with pytest.raises(slidestream.OpenSlideError):
                ours.associated_images[an]
            continue
        img = ours.associated_images[an]
        assert isinstance(img, PIL_Image.Image)
        assert img.mode == "RGBA" and img.size == theirs.size
        assert ("icc_profile" in img.info) == ("icc_profile" in theirs.info)
        if "icc_profile" in theirs.info:
            assert img.info["icc_profile"] == theirs.info["icc_profile"]
        tol = tolerance_for(slide_path(name), img.size[0], img.size[1], tiled=False)
        a, b = np.asarray(img), np.asarray(theirs)
        assert max_abs_diff(a, b) <= tol, f"{an}: {first_difference(a, b)}"
    # A missing name is a KeyError; after a failed read both handles are latched and raise
    # OpenSlideError instead (OpenSlide's error semantics).
    expected: type = KeyError
    try:
        osr.associated_images["no such image"]
    except openslide.OpenSlideError:
        expected = slidestream.OpenSlideError
    except KeyError:
        pass
    with pytest.raises(expected):
        ours.associated_images["no such image"]


@pytest.mark.parametrize("name", FILES)
def test_read_region_matches(name):
    """PIL RGBA images of the requested size; same pixels at whole-pixel level origins,
    including regions partly outside the image."""
    osr, ours = _pair(name)
    # Geometry first: after a failed read (unreadable.svs) both handles are latched.
    dims = ours.level_dimensions
    tol_by_level = [tolerance_for(slide_path(name), w, h, tiled=True) for w, h in dims]
    for level, ds in enumerate(ours.level_downsamples):
        if ds != round(ds):
            continue  # OpenSlide resamples unaligned origins; see test_parity
        k = int(round(ds))
        lw, lh = dims[level]
        for lx, ly, w, h in [(0, 0, 64, 48), (lw // 2, lh // 3, 100, 75), (lw - 20, lh - 10, 50, 40), (-8, -4, 30, 20), (0, 0, 0, 0)]:
            loc, size = (lx * k, ly * k), (w, h)
            try:
                theirs = osr.read_region(loc, level, size)
            except openslide.OpenSlideError:
                with pytest.raises(slidestream.OpenSlideError):
                    ours.read_region(loc, level, size)
                continue
            img = ours.read_region(loc, level, size)
            assert isinstance(img, PIL_Image.Image)
            assert img.mode == "RGBA" and img.size == size == theirs.size
            assert ("icc_profile" in img.info) == ("icc_profile" in theirs.info)
            a, b = np.asarray(img), np.asarray(theirs)
            assert max_abs_diff(a, b) <= tol_by_level[level], f"level {level} {loc} {size}: {first_difference(a, b)}"


@pytest.mark.parametrize("name", FILES)
def test_thumbnail_matches(name):
    """get_thumbnail: PIL RGB, OpenSlide's size, ICC info and pixels."""
    osr, ours = _pair(name)
    if name == "unreadable.svs":
        with pytest.raises(slidestream.OpenSlideError):
            ours.get_thumbnail((64, 64))
        return
    tol = 3 if _lossy(name) else 0
    for size in [(100, 100), (333, 200), (1024, 1024)]:
        theirs = osr.get_thumbnail(size)
        thumb = ours.get_thumbnail(size)
        assert isinstance(thumb, PIL_Image.Image)
        assert thumb.mode == "RGB" and thumb.size == theirs.size
        assert thumb.info.get("icc_profile") == theirs.info.get("icc_profile")
        a, b = np.asarray(thumb), np.asarray(theirs)
        assert max_abs_diff(a, b) <= tol, f"{size}: {first_difference(a, b)}"


def test_errors_for_bad_files_are_openslide_errors():
    """Files OpenSlide refuses are refused with OpenSlideError subclasses; files it cannot
    recognise with OpenSlideUnsupportedFormatError (ours may be more specific where the
    file is recognised but damaged)."""
    td = locate_testdata()
    for name in ["broken.svs", "zero_gi.tif", "seek_too_large.tif", "unopenable.tiff"]:
        path = str(td / name)
        with pytest.raises(openslide.OpenSlideError) as theirs:
            openslide.OpenSlide(path)
        with pytest.raises(slidestream.OpenSlideError) as ours:
            slidestream.OpenSlide(path)
        # seek_too_large.tif (first IFD offset past the end of the file) is a CorruptDataError
        # for slidestream, "unsupported or missing" for OpenSlide: both are OpenSlideErrors.
        if isinstance(theirs.value, openslide.OpenSlideUnsupportedFormatError) and name != "seek_too_large.tif":
            assert isinstance(ours.value, slidestream.OpenSlideUnsupportedFormatError), (name, ours.value)
    # NDPI: OpenSlide opens it (hamamatsu), and so does slidestream's driver (issue 15).
    with slidestream.OpenSlide(td / "test3-DAPI-2-387.ndpi") as ours, openslide.OpenSlide(str(td / "test3-DAPI-2-387.ndpi")) as theirs:
        assert ours.level_dimensions == theirs.level_dimensions and ours.level_count == 7
    # A missing file: OpenSlideUnsupportedFormatError as openslide-python, and FileNotFoundError.
    missing = td / "no-such-slide.svs"
    with pytest.raises(openslide.OpenSlideUnsupportedFormatError):
        openslide.OpenSlide(str(missing))
    with pytest.raises(slidestream.OpenSlideUnsupportedFormatError) as ei:
        slidestream.OpenSlide(missing)
    assert isinstance(ei.value, FileNotFoundError) and ei.value.filename == str(missing)
    # detect_format on unrecognised files.
    for name in ["broken.svs", "zero_gi.tif", "seek_too_large.tif"]:
        assert slidestream.OpenSlide.detect_format(td / name) is None
        assert openslide.OpenSlide.detect_format(str(td / name)) is None
    assert slidestream.OpenSlide.detect_format(missing) is None
    # Detected but not openable: the vendor, as OpenSlide.
    assert slidestream.OpenSlide.detect_format(td / "unopenable.tiff") == "generic-tiff"
    # A corrupt tile latches the drop-in's error as OpenSlide's: test_compat_handles.py.


def test_invalid_arguments_and_close():
    path = locate_testdata() / "boxes.tiff"
    s = slidestream.OpenSlide(path)
    with pytest.raises(slidestream.OpenSlideError):
        s.read_region((0, 0), 0, (-1, 10))
    # A level that does not exist: a transparent image (test_compat_handles.py compares it).
    assert s.read_region((0, 0), s.level_count, (4, 4)).getextrema() == ((0, 0),) * 4
    s.set_cache(slidestream.OpenSlideCache(1 << 20))
    s.set_cache(openslide.OpenSlideCache(1 << 20))
    with pytest.raises(TypeError):
        s.set_cache(5)
    with pytest.raises(ValueError):
        slidestream.OpenSlideCache(-1)
    with s as entered:
        assert entered is s
    with pytest.raises(ValueError):  # closed: InvalidArgumentError is a ValueError
        s.read_region((0, 0), 0, (4, 4))
    with pytest.raises(ValueError):  # closing twice: ArgumentError and ValueError, as OpenSlide
        s.close()


def test_open_slide_and_image_slide():
    """open_slide returns OpenSlide for slides and ImageSlide for plain images; ImageSlide
    behaves as openslide.ImageSlide."""
    td = locate_testdata()
    with slidestream.open_slide(td / "boxes.tiff") as s:
        assert isinstance(s, slidestream.OpenSlide)
    png = td / "reference" / "boxes.tiff" / "center_l0.png"
    ours = slidestream.open_slide(png)
    theirs = openslide.open_slide(str(png))
    assert isinstance(ours, slidestream.ImageSlide) and isinstance(theirs, openslide.ImageSlide)
    assert ours.level_count == 1 and ours.dimensions == theirs.dimensions
    assert ours.level_dimensions == theirs.level_dimensions
    assert ours.level_downsamples == theirs.level_downsamples
    assert dict(ours.properties) == dict(theirs.properties)
    assert dict(ours.associated_images) == dict(theirs.associated_images)
    assert ours.get_best_level_for_downsample(8) == 0
    assert slidestream.ImageSlide.detect_format(png) == openslide.ImageSlide.detect_format(str(png))
    assert slidestream.ImageSlide.detect_format(td / "MANIFEST.md") is None
    for loc, size in [((0, 0), (10, 10)), ((-5, -7), (40, 30)), ((250, 200), (80, 90))]:
        a, b = np.asarray(ours.read_region(loc, 0, size)), np.asarray(theirs.read_region(loc, 0, size))
        assert a.shape == b.shape and max_abs_diff(a, b) == 0, loc
    assert np.array_equal(np.asarray(ours.get_thumbnail((20, 20))), np.asarray(theirs.get_thumbnail((20, 20))))
    with pytest.raises(slidestream.OpenSlideError):
        ours.read_region((0, 0), 1, (4, 4))
    with pytest.raises(slidestream.OpenSlideError):
        ours.read_region((0, 0), 0, (-4, 4))
    ours.close()
    theirs.close()
    with pytest.raises(ValueError):
        ours.read_region((0, 0), 0, (4, 4))
    # A PIL image is accepted as is.
    img = PIL_Image.new("RGB", (8, 6), (10, 20, 30))
    with slidestream.ImageSlide(img) as i:
        assert i.dimensions == (8, 6)
        assert i.read_region((7, 5), 0, (2, 2)).getpixel((0, 0)) == (10, 20, 30, 255)
        assert i.read_region((7, 5), 0, (2, 2)).getpixel((1, 1)) == (0, 0, 0, 0)


def _every_test_file():
    """Every file of the test-data folder (slides, DICOM files, and files that are not slides
    at all: MANIFEST.md, manifest.json), plus a missing file."""
    td = locate_testdata()
    files = sorted(p for p in td.iterdir() if p.is_file())
    files += sorted((td / "CMU-1-Small-Region-dicom").glob("*.dcm"))[:2]
    return files + [td / "no-such-slide.svs"]


def test_detect_vendor_matches_openslide_on_every_file():
    """slidestream.detect_vendor (bound from the core's Slide::detect_vendor) and
    OpenSlide.detect_format give openslide's answer for every test file: the vendor for
    slides, including vendors slidestream cannot read (hamamatsu, dicom), None for the rest."""
    seen = set()
    for path in _every_test_file():
        theirs = openslide.OpenSlide.detect_format(str(path))
        assert slidestream.detect_vendor(path) == theirs, path.name
        assert slidestream.detect_vendor(str(path).encode()) == theirs, path.name
        assert slidestream.OpenSlide.detect_format(path) == theirs, path.name
        seen.add(theirs)
    assert {"aperio", "generic-tiff", "hamamatsu", "dicom", None} <= seen
    with pytest.raises(TypeError):
        slidestream.detect_vendor(12)  # type: ignore[arg-type]


def test_open_slide_falls_back_to_pillow_only_for_non_slides():
    """open_slide follows openslide-python's rule with slidestream's detection: a detected
    slide is opened or refused with an OpenSlideError, never handed to Pillow; a file that is
    not a slide (detect_format None) goes to ImageSlide, and Pillow's error propagates when
    Pillow cannot open it either, the same error as openslide-python's."""
    for path in _every_test_file():
        try:
            theirs = openslide.open_slide(str(path))
        except Exception as e:  # noqa: BLE001 - the outcome is compared below
            theirs = e
        try:
            ours = slidestream.open_slide(path)
        except Exception as e:  # noqa: BLE001
            ours = e
        name = path.name
        if isinstance(theirs, openslide.ImageSlide):
            assert isinstance(ours, slidestream.ImageSlide), (name, ours)
            assert ours.dimensions == theirs.dimensions
        elif isinstance(theirs, openslide.OpenSlide):
            # OpenSlide reads it; slidestream opens it too, or refuses the vendor.
            if isinstance(ours, BaseException):
                assert isinstance(ours, slidestream.OpenSlideUnsupportedFormatError), (name, ours)
                assert slidestream.detect_vendor(path) not in SUPPORTED_VENDORS
            else:
                assert isinstance(ours, slidestream.OpenSlide), (name, ours)
                assert ours.level_count == theirs.level_count
        elif isinstance(theirs, openslide.OpenSlideError):
            # Detected, refused by OpenSlide: an OpenSlideError, or a slide where slidestream
            # reads more (WebP tiles).
            assert isinstance(ours, (slidestream.OpenSlideError, slidestream.OpenSlide)), (name, ours)
        else:  # not a slide and Pillow refuses it: Pillow's own error, as openslide-python
            assert type(ours) is type(theirs), (name, ours, theirs)
        for s in (ours, theirs):
            if not isinstance(s, BaseException):
                s.close()


def test_open_slide_refuses_detected_slides_it_cannot_read():
    """The files of issue 12: a DICOM WSI (OpenSlideUnsupportedFormatError until issue 16's
    driver) opens as an OpenSlide, not a one-level ImageSlide; unopenable.tiff (a generic TIFF with compression
    52479) is an OpenSlideError. The NDPI (OpenSlide: 7 levels) opens as an OpenSlide since
    issue 15's hamamatsu driver, with OpenSlide's 7 levels."""
    td = locate_testdata()
    ndpi = td / "test3-DAPI-2-387.ndpi"
    dicom = sorted((td / "CMU-1-Small-Region-dicom").glob("*.dcm"))[0]
    with openslide.open_slide(str(ndpi)) as theirs:
        assert isinstance(theirs, openslide.OpenSlide) and theirs.level_count == 7
    assert slidestream.detect_vendor(ndpi) == "hamamatsu"
    with slidestream.open_slide(ndpi) as ours:
        assert isinstance(ours, slidestream.OpenSlide) and ours.level_count == 7
    # DICOM WSI opens as an OpenSlide since issue 16's dicom driver, with OpenSlide's levels.
    for path in [dicom, td / "camelyon-jpeg-ybr.dcm"]:
        assert slidestream.detect_vendor(path) == "dicom"
        with openslide.open_slide(str(path)) as theirs, slidestream.open_slide(str(path)) as ours:
            assert isinstance(ours, slidestream.OpenSlide)
            assert ours.level_dimensions == theirs.level_dimensions
    unopenable = td / "unopenable.tiff"
    with pytest.raises(openslide.OpenSlideError):
        openslide.open_slide(str(unopenable))
    with pytest.raises(slidestream.OpenSlideError) as ei:
        slidestream.open_slide(unopenable)
    assert "52479" in str(ei.value)
    assert not isinstance(ei.value, PIL_Image.UnidentifiedImageError)
