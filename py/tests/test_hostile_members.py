"""Slides of several files under attack, through the Python API (the Rust side is
``core/tests/hostile_members.rs``): a MIRAX key file claiming a camera grid of billions of
images, files named outside the slide's folder, and members touched, rewritten or replaced
between the open and their first read. Each gives the library's exception — never a dead
interpreter — and the handle stays usable. Reads of members run on the CPU path and, where a
GPU is usable, on the device path (``read_regions(device="cuda")``), which reads slides of
several files through the same identity-checked sources."""

from __future__ import annotations

import errno
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import slidestream
from _parity_helpers import locate_testdata, vendor_slides

HAS_GPU = slidestream.cuda_available()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not HAS_GPU, reason="no usable CUDA device"))]


def _read(s, level, size, device):
    """Patch (0, 0) of `level` as an RGB numpy array, read on `device`."""
    if device == "cpu":
        return s.read_regions([(0, 0)], level, size)
    import cupy  # the device array through __cuda_array_interface__

    return cupy.asnumpy(cupy.asarray(s.read_regions([(0, 0)], level, size, device=device)))


@pytest.fixture
def mirax(tmp_path):
    """A copy of the generated ``mirax-bmp`` slide (two data files) in ``tmp_path/slide``."""
    root = vendor_slides()
    if root is None or not (root / "mirax-bmp.mrxs").is_file():
        pytest.skip("no generated MIRAX slides (run scripts/make_vendor_slides.py)")
    d = tmp_path / "slide"
    d.mkdir()
    shutil.copy(root / "mirax-bmp.mrxs", d / "s.mrxs")
    shutil.copytree(root / "mirax-bmp", d / "s")
    return d / "s.mrxs"


def _edit_ini(mrxs: pathlib.Path, old: str, new: str) -> None:
    ini = mrxs.with_suffix("") / "Slidedat.ini"
    text = ini.read_text()
    assert old in text, old
    ini.write_text(text.replace(old, new))


def _ini_value(mrxs: pathlib.Path, key: str) -> str:
    for line in (mrxs.with_suffix("") / "Slidedat.ini").read_text().splitlines():
        if line.startswith(key + "="):
            return line
    raise AssertionError(key)


@pytest.mark.parametrize("xy", [(100000, 100000), (30000, 30000), (10000, 10000), (2**31 - 1, 2**31 - 1)])
def test_a_camera_grid_of_billions_of_images_is_a_limits_error(mirax, xy):
    # Before: an abort of the interpreter (100000²), gigabytes (10000², 30000²), or a
    # PanicException (2³¹−1). The open runs in a child so that a regression cannot kill the
    # test run.
    _edit_ini(mirax, _ini_value(mirax, "IMAGENUMBER_X"), f"IMAGENUMBER_X={xy[0]}")
    _edit_ini(mirax, _ini_value(mirax, "IMAGENUMBER_Y"), f"IMAGENUMBER_Y={xy[1]}")
    code = textwrap.dedent(
        f"""
        import slidestream
        try:
            slidestream.Slide({str(mirax)!r})
        except slidestream.LimitsExceededError as e:
            assert "IMAGENUMBER_X" in str(e), e
            print("limits")
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "limits", (r.returncode, r.stdout, r.stderr[-2000:])


@pytest.mark.parametrize("value", ["../Data0001.dat", "ABSOLUTE", "../../../../etc/passwd", "sub/../../x.dat"])
def test_mirax_data_files_outside_the_folder_are_refused(mirax, value):
    outside = mirax.parent / "Data0001.dat"
    shutil.copy(mirax.with_suffix("") / "Data0001.dat", outside)
    if value == "ABSOLUTE":
        value = str(outside)
    _edit_ini(mirax, "FILE_1=Data0001.dat", f"FILE_1={value}")
    with pytest.raises(slidestream.CorruptDataError, match=r"\[DATAFILE\] FILE_1.*slide's folder") as ei:
        slidestream.Slide(mirax)
    assert str(outside.stat().st_size) not in str(ei.value), "the outside file's size is revealed"
    # The OpenSlide drop-in refuses it the same way.
    from slidestream.openslide import OpenSlide, OpenSlideError

    with pytest.raises(OpenSlideError):
        OpenSlide(str(mirax))


def test_a_mirax_data_file_linking_out_of_the_folder_is_refused(mirax):
    member = mirax.with_suffix("") / "Data0001.dat"
    target = mirax.parent / "elsewhere.dat"
    shutil.move(member, target)
    os.symlink(target, member)
    with pytest.raises(slidestream.CorruptDataError, match="symbolic link") as ei:
        slidestream.Slide(mirax)
    assert "elsewhere" not in str(ei.value)


@pytest.fixture
def dicom(tmp_path):
    """A copy of the shared DICOM test slide's folder."""
    src = locate_testdata() / "CMU-1-Small-Region-dicom"
    if not src.is_dir():
        pytest.skip("no DICOM test slide")
    d = tmp_path / "dicom"
    shutil.copytree(src, d)
    for p in d.iterdir():
        p.chmod(0o644)
    return d


def _member(d: pathlib.Path, level: int) -> pathlib.Path:
    return next(p for p in d.iterdir() if p.name.startswith(f"level-{level}-"))


@pytest.mark.parametrize("device", DEVICES)
def test_dicom_members_touched_after_open_read_and_changed_ones_raise_estale(dicom, device):
    with slidestream.Slide(_member(dicom, 0)) as s, slidestream.Slide(_member(dicom, 0)) as ref:
        # Touched (same bytes, new mtime) before its first read: reads as before. It failed
        # with "size 351190 → 351190 bytes, or replaced" for the life of the handle.
        l1 = _member(dicom, 1)
        later = time.time() + 60
        os.utime(l1, (later, later))
        np.testing.assert_array_equal(_read(s, 1, (64, 64), device), ref.read_regions([(0, 0)], 1, (64, 64)))
        # Rewritten in place with other bytes of the same length: ESTALE.
        l2 = _member(dicom, 2)
        data = bytearray(l2.read_bytes())
        data[-100] ^= 0xFF
        l2.write_bytes(bytes(data))
        os.utime(l2, (later + 60, later + 60))
        with pytest.raises(OSError) as ei:
            _read(s, 2, (64, 64), device)
        assert ei.value.errno == errno.ESTALE and "changed since the slide was opened" in str(ei.value), ei.value
        # The handle stays usable.
        np.testing.assert_array_equal(_read(s, 0, (32, 32), device), ref.read_regions([(0, 0)], 0, (32, 32)))


@pytest.mark.parametrize("device", DEVICES)
def test_a_mirax_member_swapped_for_a_link_after_open_is_stale(mirax, device):
    # The open checked the member; a link put in its place afterwards (to an outside copy with
    # the same bytes) is another file: never read.
    with slidestream.Slide(mirax) as s:
        for member in sorted(mirax.with_suffix("").glob("Data*.dat")):
            outside = mirax.parent / f"copy-{member.name}"
            shutil.copy(member, outside)
            member.unlink()
            os.symlink(outside, member)
        w, h = s.level_dimensions[0]
        with pytest.raises(OSError) as ei:
            _read(s, 0, (w, h), device)
        assert ei.value.errno == errno.ESTALE, ei.value
        assert "copy-" not in str(ei.value)
