"""The bad MIRAX slides of ``scripts/vendor_slides/mirax_bad.py`` (``bad-mirax/cases.json`` of
the generated vendor slides) through the Python API: the native ``slidestream.Slide`` raises
the class of the case's error kind (``format`` → CorruptDataError, ``unsupported`` →
UnsupportedFormatError, ``io`` → OSError) where the case says (open, or reading the whole of
level 0); the OpenSlide drop-in raises an ``OpenSlideError`` wherever live OpenSlide 4.0.1 does
(at open or at the read), as openslide-python's callers expect."""

from __future__ import annotations

import json

import pytest

import slidestream
from _parity_helpers import vendor_slides

openslide = pytest.importorskip("openslide")

NATIVE = {"format": slidestream.CorruptDataError, "unsupported": slidestream.UnsupportedFormatError, "io": OSError}


def _cases():
    root = vendor_slides()
    if root is None or not (root / "bad-mirax" / "cases.json").is_file():
        return []
    return json.loads((root / "bad-mirax" / "cases.json").read_text())["cases"]


CASES = _cases()


def _path(case):
    return vendor_slides() / "bad-mirax" / case["file"]


def test_cases_present():
    if not CASES:
        pytest.skip("no bad-mirax/cases.json (run scripts/make_vendor_slides.py)")
    assert len(CASES) >= 15


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_native_error_class_and_place(case):
    path = _path(case)
    want = NATIVE[case["kind"]]
    if case["at"] == "open":
        with pytest.raises(want) as ei:
            slidestream.Slide(path)
    else:
        with slidestream.Slide(path) as s:
            assert s.vendor == "mirax"
            w, h = s.level_dimensions[0]
            with pytest.raises(want) as ei:
                s.read_region((0, 0), 0, (w, h))
    assert case["name"] in str(ei.value), ei.value


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_drop_in_fails_where_openslide_fails(case):
    path = str(_path(case))
    if case["openslide_at"] == "open":
        with pytest.raises(openslide.OpenSlideError):
            openslide.OpenSlide(path)
        if case["at"] == "open":
            with pytest.raises(slidestream.OpenSlideError):
                slidestream.OpenSlide(path)
        return
    theirs = openslide.OpenSlide(path)
    w, h = theirs.level_dimensions[0]
    with pytest.raises(openslide.OpenSlideError):
        theirs.read_region((0, 0), 0, (w, h))
    theirs.close()
    if case["at"] == "open":
        # slidestream looks at every data file at open (documented in mirax_bad.py).
        with pytest.raises(slidestream.OpenSlideError):
            slidestream.OpenSlide(path)
        return
    with slidestream.OpenSlide(path) as ours:
        assert ours.level_dimensions[0] == (w, h)
        with pytest.raises(slidestream.OpenSlideError):
            ours.read_region((0, 0), 0, (w, h))
