"""The OpenSlide drop-in's handle semantics against live openslide-python 1.4.7 + OpenSlide
4.0.1: closed handles, latched (sticky) errors, levels that do not exist, ctypes-style argument
errors, version attributes, the ``slidestream.openslide`` namespace and its ``lowlevel``
module, and the ``py/openslide-shim`` substitution. Each behaviour is checked on both
libraries, so the oracle decides; the native ``slidestream.Slide`` is checked to keep its own
semantics (typed errors, usable after a failed read)."""

from __future__ import annotations

import ctypes
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import slidestream
from _parity_helpers import locate_testdata

openslide = pytest.importorskip("openslide")
pytest.importorskip("PIL.Image")
import openslide.deepzoom  # noqa: E402, F811 (a submodule import rebinds the package name)
import openslide.lowlevel  # noqa: E402

import slidestream.openslide as dropin  # noqa: E402
import slidestream.openslide.deepzoom  # noqa: E402
import slidestream.openslide.lowlevel  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]


def _both(name: str):
    """(openslide-python's OpenSlide, the drop-in's) of a shared test slide."""
    path = str(locate_testdata() / name)
    return openslide.OpenSlide(path), dropin.OpenSlide(path)


def _outcome(call):
    """("ok", value) or ("raises", the exception's kind) of ``call()``, comparable across the
    two libraries."""
    try:
        value = call()
    except ctypes.ArgumentError:
        return ("raises", "ArgumentError")
    except KeyError:
        return ("raises", "KeyError")
    except (openslide.OpenSlideError, slidestream.OpenSlideError):
        return ("raises", "OpenSlideError")
    if hasattr(value, "tobytes") and hasattr(value, "mode"):  # a PIL image
        return ("ok", (value.mode, value.size, value.tobytes()))
    if hasattr(value, "profile"):  # an ImageCms profile
        return ("ok", value.tobytes())
    return ("ok", value)


# Operations on an open slide object, as (name, call(slide, props_before, assoc_before)).
OPERATIONS = [
    ("level_count", lambda s, p, a: s.level_count),
    ("dimensions", lambda s, p, a: s.dimensions),
    ("level_dimensions", lambda s, p, a: s.level_dimensions),
    ("level_downsamples", lambda s, p, a: s.level_downsamples),
    ("best_level", lambda s, p, a: s.get_best_level_for_downsample(2.0)),
    ("read_region", lambda s, p, a: s.read_region((0, 0), 0, (8, 8))),
    ("read_region_empty", lambda s, p, a: s.read_region((0, 0), 0, (0, 5))),
    ("read_region_negative", lambda s, p, a: s.read_region((0, 0), 0, (-1, 5))),
    ("missing_level", lambda s, p, a: s.read_region((0, 0), 99, (8, 8))),
    ("properties_before", lambda s, p, a: p["openslide.vendor"]),
    ("properties_len", lambda s, p, a: len(p)),
    ("properties_now", lambda s, p, a: dict(s.properties)),
    ("associated_before", lambda s, p, a: a["label"]),
    ("associated_names", lambda s, p, a: list(s.associated_images)),
    ("color_profile", lambda s, p, a: s.color_profile),
    ("thumbnail", lambda s, p, a: s.get_thumbnail((16, 16))),
    ("set_cache", lambda s, p, a: s.set_cache(_cache_for(s))),
]


def _cache_for(slide):
    """An OpenSlideCache of the slide's own library."""
    return (openslide if isinstance(slide, openslide.OpenSlide) else dropin).OpenSlideCache(0)


def _outcomes(slide, props, assoc):
    return {name: _outcome(lambda: op(slide, props, assoc)) for name, op in OPERATIONS}


@pytest.mark.parametrize("name", ["boxes.tiff", "small_aperio.svs"])
def test_closed_handle_as_openslide(name):
    """After close(): every operation (close too, and lookups in mappings taken before) raises
    ctypes.ArgumentError on both; color_profile and empty reads still work, as openslide-python.
    Ours is also a ValueError (slidestream's InvalidArgumentError)."""
    theirs, ours = _both(name)
    before = [(s, s.properties, s.associated_images) for s in (theirs, ours)]
    for s in (theirs, ours):
        s.close()
    t, o = (_outcomes(*b) for b in before)
    assert o == t
    assert t["level_count"] == ("raises", "ArgumentError")
    for s in (theirs, ours):
        with pytest.raises(ctypes.ArgumentError):
            s.close()
    with pytest.raises(ValueError):
        ours.read_region((0, 0), 0, (8, 8))
    with pytest.raises(slidestream.InvalidArgumentError):
        ours.level_count
    # The native API keeps its own error for a closed slide.
    native = slidestream.Slide(locate_testdata() / name)
    native.close()
    with pytest.raises(slidestream.InvalidArgumentError) as ei:
        native.read_region((0, 0), 0, (8, 8))
    assert not isinstance(ei.value, ctypes.ArgumentError)


def test_context_manager_closes_as_openslide():
    theirs, ours = _both("boxes.tiff")
    for s in (theirs, ours):
        with s as entered:
            assert entered is s and s.level_count == 4
        with pytest.raises(ctypes.ArgumentError):
            s.level_count


@pytest.mark.parametrize("first", ["read_region", "associated_image", "deepzoom_tile", "thumbnail"])
def test_read_errors_latch_as_openslide(first):
    """unreadable.svs: the first failing read raises OpenSlideError and every later operation
    but close() raises it too (same message), on both; close() works, then ArgumentError."""
    theirs, ours = _both("unreadable.svs")
    firsts = {
        "read_region": lambda s, dz: s.read_region((0, 0), 0, (16, 16)),
        "associated_image": lambda s, dz: s.associated_images["thumbnail"],
        "deepzoom_tile": lambda s, dz: dz.get_tile(dz.level_count - 1, (0, 0)),
        "thumbnail": lambda s, dz: s.get_thumbnail((8, 8)),
    }
    errors = []
    for s, dz in ((theirs, openslide.deepzoom.DeepZoomGenerator(theirs)), (ours, dropin.deepzoom.DeepZoomGenerator(ours))):
        assert s.properties["openslide.vendor"] == "aperio"
        with pytest.raises((openslide.OpenSlideError, slidestream.OpenSlideError)) as ei:
            firsts[first](s, dz)
        errors.append(str(ei.value))
    t = _outcomes(theirs, theirs.properties, theirs.associated_images)
    o = _outcomes(ours, ours.properties, ours.associated_images)
    assert o == t
    assert t["properties_now"] == ("raises", "OpenSlideError")
    with pytest.raises(slidestream.OpenSlideError) as ei:
        ours.properties["openslide.vendor"]
    assert str(ei.value) == errors[1]  # the first error's message, as OpenSlide
    for s in (theirs, ours):
        s.close()
        with pytest.raises(ctypes.ArgumentError):
            s.level_count
    # The native Slide is not latched: the bad tile fails again, everything else works.
    with slidestream.Slide(locate_testdata() / "unreadable.svs") as native:
        with pytest.raises(slidestream.CorruptDataError):
            native.read_region((0, 0), 0, (16, 16))
        assert native.properties["openslide.vendor"] == "aperio"
        assert native.level_count == 1


@pytest.mark.parametrize("name", ["boxes.tiff", "CMU-1-Small-Region.svs"])
def test_missing_levels_read_transparent_as_openslide(name):
    theirs, ours = _both(name)
    n = ours.level_count
    for level in (-1, n, n + 7, np.int64(n)):
        for loc, size in (((0, 0), (100, 100)), ((-5, 3), (7, 1))):
            a, b = theirs.read_region(loc, int(level), size), ours.read_region(loc, level, size)
            assert (b.mode, b.size) == (a.mode, a.size) == ("RGBA", size)
            assert b.tobytes() == a.tobytes() == bytes(4 * size[0] * size[1])
            assert b.info.get("icc_profile") == a.info.get("icc_profile")


def test_argument_errors_as_openslide():
    """Bad arguments raise ctypes.ArgumentError on both (ours also TypeError / ValueError)."""
    boxes = str(locate_testdata() / "boxes.tiff")
    cases = [
        lambda m: m.OpenSlide(None),
        lambda m: m.OpenSlide(3),
        lambda m: m.OpenSlide.detect_format(None),
        lambda m: m.OpenSlideCache(-1),
        lambda m: m.OpenSlideCache(1.3),
        lambda m: m.OpenSlide(boxes).read_region((1.5, 0), 0, (4, 4)),
        lambda m: m.OpenSlide(boxes).read_region((0, 0), 0.0, (4, 4)),
    ]
    for case in cases:
        for module in (openslide, dropin):
            with pytest.raises(ctypes.ArgumentError):
                case(module)
    with pytest.raises(TypeError):
        dropin.OpenSlide(None)
    with pytest.raises(ValueError):
        dropin.OpenSlideCache(-1)
    for module in (openslide, dropin):
        with pytest.raises(TypeError):
            module.OpenSlide(boxes).set_cache(None)


def test_version_attributes_as_openslide():
    assert dropin.__library_version__ == openslide.__library_version__ == "4.0.1"
    assert dropin.__version__ == openslide.__version__
    assert dropin.lowlevel.get_version() == openslide.lowlevel.get_version()
    assert issubclass(dropin.OpenSlideVersionError, dropin.OpenSlideError)
    assert dropin.OpenSlideVersionError is slidestream.OpenSlideVersionError
    e, t = dropin.OpenSlideVersionError("4.0.0"), openslide.OpenSlideVersionError("4.0.0")
    assert (str(e), e.minimum_version) == (str(t), t.minimum_version)


def test_namespace_matches_openslide_python():
    """Every public name of openslide, openslide.deepzoom and openslide.lowlevel exists in the
    drop-in; lowlevel's functions are available (as with OpenSlide 4.0)."""
    def public(module) -> list:
        """Names the module defines (not what it imports from elsewhere)."""
        names = []
        for n, v in vars(module).items():
            if n.startswith("_") or n == "annotations" or hasattr(ctypes, n):
                continue  # private, __future__, or ctypes (cdll: no libopenslide here)
            if isinstance(v, type(os)):
                if v.__name__.startswith(module.__name__ + "."):  # a submodule
                    names.append(n)
            elif not callable(v) or getattr(v, "__module__", "").startswith("openslide"):
                names.append(n)
        return names

    for theirs, ours in ((openslide, dropin), (openslide.deepzoom, dropin.deepzoom), (openslide.lowlevel, dropin.lowlevel)):
        missing = [n for n in public(theirs) if not hasattr(ours, n)]
        assert not missing, (ours.__name__, missing)
    for n in dir(openslide.lowlevel):
        if n.startswith("_") or hasattr(ctypes, n):  # getattr(cdll, n) would dlopen n
            continue
        if getattr(getattr(openslide.lowlevel, n), "available", False):
            assert getattr(getattr(dropin.lowlevel, n), "available", False) is True, n
    assert dropin.OpenSlide is slidestream.OpenSlide and dropin.deepzoom.DeepZoomGenerator is slidestream.deepzoom.DeepZoomGenerator


@pytest.mark.parametrize("name", ["boxes.tiff", "small_aperio.svs", "unreadable.svs"])
def test_lowlevel_matches_openslide(name):
    path = str(locate_testdata() / name)
    results = []
    for ll in (openslide.lowlevel, dropin.lowlevel):
        h = ll.open(path)
        names = ll.get_associated_image_names(h)
        calls = [
            lambda: ll.detect_vendor(path),
            lambda: ll.get_level_count(h),
            lambda: [ll.get_level_dimensions(h, i) for i in range(-1, 6)],
            lambda: [ll.get_level_downsample(h, i) for i in range(-1, 6)],
            lambda: ll.get_best_level_for_downsample(h, 3.0),
            lambda: ll.get_property_names(h),
            lambda: ll.get_property_value(h, "openslide.vendor"),
            lambda: ll.get_property_value(h, b"openslide.vendor"),
            lambda: ll.get_property_value(h, "no such property"),
            lambda: names,
            lambda: [ll.get_associated_image_dimensions(h, n) for n in names + ["nothing"]],
            lambda: ll.get_icc_profile_size(h),
            lambda: ll.read_icc_profile(h),
            lambda: [ll.get_associated_image_icc_profile_size(h, n) for n in names],
            lambda: ll.get_error(h),
            lambda: ll.read_region(h, 0, 0, 0, 4, 4).size,
            lambda: ll.get_error(h),
            lambda: ll.get_level_count(h),
            lambda: ll.close(h),
            lambda: ll.get_level_count(h),
        ]
        results.append([_outcome(c) for c in calls])
    t, o = results
    # Error messages differ between the libraries; their presence does not.
    o = [("ok", "message") if i in (14, 16) and r[1] is not None else r for i, r in enumerate(o)]
    t = [("ok", "message") if i in (14, 16) and r[1] is not None else r for i, r in enumerate(t)]
    assert o == t


def test_associated_images_repr_as_openslide():
    theirs, ours = _both("small_aperio.svs")

    def mangle(o) -> str:
        return re.sub("0x[0-9a-fA-F]+", "(mangled)", repr(o))

    assert mangle(ours.associated_images) == mangle(theirs.associated_images)
    assert repr(ours.properties) == repr(theirs.properties)


def test_shim_substitutes_the_drop_in():
    """py/openslide-shim on PYTHONPATH: ``import openslide`` (and its submodules) are the
    drop-in's module objects, shadowing the installed openslide-python."""
    code = (
        "import openslide, openslide.deepzoom, openslide.lowlevel, slidestream, slidestream.openslide\n"
        "from openslide.deepzoom import DeepZoomGenerator\n"
        "assert openslide is slidestream.openslide, openslide\n"
        "assert openslide.deepzoom is slidestream.openslide.deepzoom\n"
        "assert openslide.lowlevel is slidestream.openslide.lowlevel\n"
        "assert DeepZoomGenerator is slidestream.deepzoom.DeepZoomGenerator\n"
        "assert openslide.OpenSlide is slidestream.OpenSlide\n"
        "print(openslide.__library_version__)\n"
    )
    paths = [str(REPO / "py" / "openslide-shim"), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "4.0.1"



def test_io_errors_latch_as_openslide(tmp_path):
    """A slide file truncated after it was opened: the read fails on both with an
    OpenSlideError (ours is also an OSError, as the native API raises it) and the error
    latches; the native Slide raises OSError on the bad tile and stays usable."""
    import shutil

    path = tmp_path / "truncated.svs"
    shutil.copy(locate_testdata() / "CMU-1-Small-Region.svs", path)
    theirs, ours = openslide.OpenSlide(str(path)), dropin.OpenSlide(path)
    native = slidestream.Slide(path)
    levels = native.level_count
    os.truncate(path, 10000)
    with pytest.raises(openslide.OpenSlideError):
        theirs.read_region((1000, 1000), 0, (256, 256))
    with pytest.raises(slidestream.OpenSlideError) as ei:
        ours.read_region((1000, 1000), 0, (256, 256))
    assert isinstance(ei.value, OSError)
    t = _outcomes(theirs, theirs.properties, theirs.associated_images)
    o = _outcomes(ours, ours.properties, ours.associated_images)
    assert o == t and t["level_count"] == ("raises", "OpenSlideError")
    with pytest.raises(OSError):
        native.read_region((1000, 1000), 0, (256, 256))
    assert native.level_count == levels
    for s in (theirs, ours, native):
        s.close()


def test_lowlevel_caches():
    """cache_create checks its capacity as OpenSlideCache; set_cache takes the handle of either
    (OpenSlideCache._openslide_cache is one), nothing else."""
    ll = dropin.lowlevel
    h = ll.open(str(locate_testdata() / "boxes.tiff"))
    ll.set_cache(h, ll.cache_create(1 << 20))
    ll.set_cache(h, dropin.OpenSlideCache(0)._openslide_cache)
    for module in (openslide.lowlevel, ll):
        with pytest.raises(ctypes.ArgumentError):
            module.cache_create(-1)
    with pytest.raises(ctypes.ArgumentError):
        ll.set_cache(h, object())
    ll.cache_release(ll.cache_create(0))
    ll.close(h)
    with pytest.raises(ctypes.ArgumentError):
        ll.set_cache(h, ll.cache_create(0))
