"""``BatchMeta.downsample``: level-0 pixels per output pixel of every patch of a loader batch,
by level and at a physical resolution, on the native read-ahead and on the producer thread."""
from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

from slidestream import PatchBatches, Slide
from slidestream.resolution import resolve

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(os.environ.get("SLIDESTREAM_TESTDATA", REPO.parent / "shared" / "testdata"))
CMU = REPO / "assets" / "CMU-1-Small-Region.svs"  # one level, mpp 0.499
TCGA = DATA / "tcga-cr-7395-01a-01-ts1.svs"  # two levels (1, 2.0005), no mpp

pytestmark = pytest.mark.skipif(not TCGA.exists(), reason=f"{TCGA} not found")
PATHS = {"native": {}, "thread": {"transform": lambda b: b}}


@pytest.fixture
def slides():
    s = [Slide(CMU), Slide(TCGA)]
    yield s
    for x in s:
        x.close()


@pytest.mark.parametrize("path", list(PATHS))
def test_downsample_by_level(slides, path):
    rows = np.array([[0, 0, 10, 20], [1, 1, 100, 200], [1, 0, 5, 5], [1, 1, 0, 0], [0, 0, 300, 40]], np.int64)
    got = [(b, m) for b, m in PatchBatches(slides, rows, 32, batch_size=2, **PATHS[path])]
    metas = [m for _, m in got]
    assert [m.index for m in metas] == [0, 1, 2]
    ds = np.concatenate([m.downsample for m in metas])
    want = np.array([slides[s].level_downsamples[level] for s, level in rows[:, :2].tolist()])
    assert ds.dtype == np.float64 and ds.shape == (5,)
    assert np.array_equal(ds, want) and ds[1] == pytest.approx(2.0005055500659967)
    for b, m in got:
        assert m.downsample.shape == (b.shape[0],)


@pytest.mark.parametrize("path", list(PATHS))
def test_downsample_at_a_resolution(slides, path):
    # CMU at 1 µm/px: level 0 read and halved (downsample 1/0.499); TCGA has no mpp: its
    # fallback says level 0 is 0.5 µm/px, so 1 µm/px is its level 1 (2.0005) resized a little.
    kw = dict(mpp=1.0, fallback_mpp=0.5)
    want_cmu = resolve(slides[0], **kw)
    want_tcga = resolve(slides[1], **kw)
    assert want_cmu.level == 0 and want_tcga.level == 1
    rows = np.array([[0, want_cmu.level, 10, 20], [1, want_tcga.level, 100, 200], [0, want_cmu.level, 40, 40]], np.int64)
    metas = [m for _, m in PatchBatches(slides, rows, 32, batch_size=3, **kw, **PATHS[path])]
    assert len(metas) == 1
    assert np.allclose(metas[0].downsample, [want_cmu.downsample, want_tcga.downsample, want_cmu.downsample], rtol=0, atol=1e-12)
    assert metas[0].downsample[0] == pytest.approx(1.0 / 0.499)


def test_a_row_past_the_levels_gets_nan_and_its_batch_raises(slides):
    rows = np.array([[0, 0, 0, 0], [1, 5, 0, 0]], np.int64)
    it = iter(PatchBatches(slides, rows, 16, batch_size=1))
    _, m0 = next(it)
    assert m0.downsample.tolist() == [1.0]
    with pytest.raises(ValueError, match="level"):
        next(it)
