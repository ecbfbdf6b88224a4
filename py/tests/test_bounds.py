"""Bounded reads from Python (issue 13, F1/F2/F7): Ctrl-C stops a long read between waves of
tiles, and thumbnails of large levels are reduced while read instead of read whole."""

import pathlib
import signal

import numpy as np
import pytest

import slidestream
from slidestream import _slidestream, _thumbnail

REPO = pathlib.Path(__file__).resolve().parents[2]
CMU = REPO / "assets" / "CMU-1-Small-Region.svs"

needs_test_hooks = pytest.mark.skipif(not _slidestream._test_hooks, reason="extension built without the test-hooks feature")


@needs_test_hooks
def test_ctrl_c_between_waves_raises_keyboard_interrupt_and_the_slide_stays_usable():
    # A 1 MiB working set: CMU-1-Small-Region's 130 tiles of level 0 take ~65 waves.
    with slidestream.config.scope(read_working_bytes=1 << 20):
        s = slidestream.Slide(CMU, cache_bytes=64 << 20)
    w, h = s.dimensions
    # SIGINT's flag is raised (PyErr_SetInterrupt, as Ctrl-C) at the 4th check, i.e. after
    # 4 waves; Python's default handler turns it into KeyboardInterrupt inside the call.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    _slidestream._test_sigint_after_checks(3)
    try:
        with pytest.raises(KeyboardInterrupt):
            s.read_region((0, 0), 0, (w, h))
    finally:
        _slidestream._test_sigint_after_checks(-1)
        signal.signal(signal.SIGINT, previous)
    stopped = s.cache_stats()["insertions"]
    assert 0 < stopped < 130, f"{stopped} tiles decoded before the interrupt"
    # The slide keeps working and the whole read completes afterwards.
    whole = s.read_region((0, 0), 0, (w, h))
    assert whole.shape == (h, w, 4) and s.cache_stats()["insertions"] == 130
    # Threads other than the main one never see the check: a read there completes.
    import threading

    _slidestream._test_sigint_after_checks(0)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", s.read_regions([(0, 0)], 0, (w, h))))
    t.start()
    t.join()
    _slidestream._test_sigint_after_checks(-1)
    assert out["r"].shape == (1, h, w, 3)


def _gradient_slide(tmp_path, width, height):
    """An uncompressed tiled RGB TIFF of a smooth gradient (generic-tiff), 256² tiles."""
    tifffile = pytest.importorskip("tifffile")
    y, x = np.mgrid[0:height, 0:width]
    img = np.stack([(x * 255 // width), (y * 255 // height), ((x + y) * 255 // (width + height))], axis=-1).astype(np.uint8)
    path = tmp_path / "gradient.tif"
    tifffile.imwrite(path, img, tile=(256, 256), photometric="rgb")
    return path, img


def test_thumbnail_of_a_large_level_is_reduced_while_read_and_close_to_the_whole_read(tmp_path, monkeypatch):
    pytest.importorskip("PIL")
    path, _ = _gradient_slide(tmp_path, 4608, 4352)  # 80 MiB of RGBA: over the whole-read limit
    assert _thumbnail.is_large((4608, 4352))
    s = slidestream.Slide(path)
    calls = []
    real = slidestream.Slide.read_level_reduced

    def spy(self, level, max_factor, **kw):
        calls.append(max_factor)
        return real(self, level, max_factor, **kw)

    monkeypatch.setattr(slidestream.Slide, "read_level_reduced", spy)
    osr = slidestream.OpenSlide(path)
    for size in [(300, 300), (1000, 700)]:
        reduced_np = s.get_thumbnail(size)
        reduced_pil = np.asarray(osr.get_thumbnail(size))
        with monkeypatch.context() as m:
            m.setattr(_thumbnail, "WHOLE_LEVEL_BYTES", 1 << 40)
            whole_np = s.get_thumbnail(size)
            whole_pil = np.asarray(osr.get_thumbnail(size))
        assert reduced_pil.shape == whole_pil.shape, size
        for a, b in [(reduced_np, whole_np), (reduced_pil, whole_pil)]:
            assert abs(a.shape[0] - b.shape[0]) <= 1 and abs(a.shape[1] - b.shape[1]) <= 1
            h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
            d = np.abs(a[:h, :w].astype(int) - b[:h, :w].astype(int))
            assert d.mean() < 1.5, (size, d.mean())
    assert len(calls) == 4 and all(f >= 2 for f in calls), calls
