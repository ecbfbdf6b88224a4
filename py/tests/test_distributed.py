"""The rank split of ``slidestream.PatchBatches`` (issue 18): each of ``world_size`` processes
reads its own share of the samples, as ``torch.utils.data.DistributedSampler``.

No torch and no GPU needed. The expected shares are computed here from the rule itself
(DistributedSampler's: pad by repeating from the start, or cut the tail; rank r takes every
world_size-th entry from r), with plain Python lists, never by calling the code under test;
the shuffle of epoch e is the documented ``default_rng(SeedSequence(seed, spawn_key=(e,)))``
permutation. A two-process run (``spawn``, CPU reads of real slides) checks disjointness,
coverage and pixels against a single-process read. When torch is importable, the index sets
are also compared with torch's own DistributedSampler.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import multiprocessing as mp
import os
import pathlib
import sys
import types
from typing import List, Tuple

import numpy as np
import pytest

import slidestream
from slidestream import PatchBatches, Slide
from slidestream.sampling import GridSampler, RandomPatchSampler

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(os.environ.get("SLIDESTREAM_TESTDATA", REPO.parent / "shared" / "testdata"))
CMU = DATA / "CMU-1-Small-Region.svs"
SMALL = DATA / "small_aperio.svs"
needs_data = pytest.mark.skipif(not (CMU.exists() and SMALL.exists()), reason=f"test slides not found under {DATA}")
SIZE = (8, 8)


@pytest.fixture(scope="module")
def small():
    s = Slide(SMALL)
    yield s
    s.close()


def rule_share(order: List[int], rank: int, world_size: int, drop_last: bool) -> List[int]:
    """DistributedSampler's split of ``order``, written out step by step."""
    n = len(order)
    if drop_last and n % world_size != 0:
        per_rank = math.ceil((n - world_size) / world_size)
    else:
        per_rank = math.ceil(n / world_size)
    total = per_rank * world_size
    idx = list(order)
    if not drop_last:
        pad = total - n
        while pad > 0:  # repeat from the start, as often as needed
            take = idx[: min(pad, n)]
            idx += take
            pad -= len(take)
    else:
        idx = idx[:total]
    assert len(idx) == total
    return [idx[i] for i in range(rank, total, world_size)]


def documented_order(n: int, shuffle: bool, seed: int, epoch: int) -> List[int]:
    if not shuffle:
        return list(range(n))
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(epoch,)))
    return [int(v) for v in rng.permutation(n)]


def synthetic_rows(n: int) -> np.ndarray:
    """``n`` distinct rows on slide 0 (small_aperio, 16x16: most are past the edge, read as
    background; the split never looks at pixels)."""
    rows = np.zeros((n, 4), np.int64)
    rows[:, 2] = np.arange(n) * 3 - 20
    rows[:, 3] = np.arange(n) % 7
    return rows


def indices_of(loader: PatchBatches) -> Tuple[List[int], List[int]]:
    """The indices read in one epoch and the batch sizes."""
    idx: List[int] = []
    sizes: List[int] = []
    for batch, meta in loader:
        assert batch.shape[0] == meta.rows.shape[0] == meta.indices.shape[0]
        assert np.array_equal(meta.rows, loader.rows[meta.indices])
        idx += [int(i) for i in meta.indices]
        sizes.append(batch.shape[0])
    return idx, sizes


@needs_data
@pytest.mark.parametrize("n", [0, 1, 5, 12, 23])
@pytest.mark.parametrize("world_size", [1, 2, 3, 8])
@pytest.mark.parametrize("batch_size", [1, 4])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
def test_shares_follow_the_rule_are_disjoint_and_cover(small, n, world_size, batch_size, drop_last, shuffle):
    rows = synthetic_rows(n)
    seed = 11
    shares = []
    for epoch in (0, 1):
        full = documented_order(n, shuffle, seed, epoch)
        per_epoch = []
        for rank in range(world_size):
            loader = PatchBatches([small], rows, SIZE, batch_size=batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last,
                                  rank=rank, world_size=world_size)
            loader.set_epoch(epoch)
            want = rule_share(full, rank, world_size, drop_last)
            assert loader.order(epoch).tolist() == want
            k = len(want)
            n_batches = k // batch_size if drop_last else math.ceil(k / batch_size)
            assert len(loader) == n_batches
            got, sizes = indices_of(loader)
            want_read = want[: n_batches * batch_size]
            assert got == want_read
            assert all(s == batch_size for s in sizes[:-1]) and (not sizes or 0 < sizes[-1] <= batch_size)
            if drop_last:
                assert all(s == batch_size for s in sizes)
            per_epoch.append(want)
        # Every rank has as many rows (and batches) as the others.
        assert len({len(s) for s in per_epoch}) <= 1
        flat = [i for s in per_epoch for i in s]
        if drop_last or n % world_size == 0:
            assert len(flat) == len(set(flat)), "no row twice without padding"
        if not drop_last:
            assert set(flat) == set(range(n)), "every row is read"
            assert len(flat) == (math.ceil(n / world_size) * world_size if n else 0)
        else:
            assert len(flat) == (n // world_size) * world_size
        shares.append(per_epoch)
    if shuffle and len({i for s in shares[0] for i in s}) >= 5:
        assert shares[0] != shares[1], "the order changes per epoch"


@needs_data
def test_seed_none_is_common_to_every_rank(small):
    rows = synthetic_rows(40)
    loaders = [PatchBatches([small], rows, SIZE, shuffle=True, rank=r, world_size=4) for r in range(4)]
    assert [ld.seed for ld in loaders] == [0] * 4
    for epoch in (0, 3):
        full = documented_order(40, True, 0, epoch)
        assert [ld.order(epoch).tolist() for ld in loaders] == [rule_share(full, r, 4, False) for r in range(4)]
    # One process alone still draws a fresh seed (as before the split existed).
    alone = {PatchBatches([small], rows, SIZE, shuffle=True).seed for _ in range(3)}
    assert len(alone) == 3


@needs_data
def test_rank_arguments_are_checked(small):
    rows = synthetic_rows(4)
    for kwargs in ({"rank": 0}, {"world_size": 2}, {"rank": 2, "world_size": 2}, {"rank": -1, "world_size": 2},
                   {"rank": 0, "world_size": 0}):
        with pytest.raises(ValueError):
            PatchBatches([small], rows, SIZE, **kwargs)
    for kwargs in ({"rank": True, "world_size": 2}, {"rank": 0, "world_size": 2.0}, {"rank": "0", "world_size": 2}):
        with pytest.raises(TypeError):
            PatchBatches([small], rows, SIZE, **kwargs)
    ld = PatchBatches([small], rows, SIZE, rank=np.int64(1), world_size=np.int32(3))
    assert (ld.rank, ld.world_size) == (1, 3) and "rank=1, world_size=3" in repr(ld)


class FakeDist(types.ModuleType):
    """Stands in for ``torch.distributed`` in ``sys.modules`` (the defaults read it there)."""

    def __init__(self, initialized: bool, rank: int, world_size: int) -> None:
        super().__init__("torch.distributed")
        self._init, self._rank, self._ws = initialized, rank, world_size

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self._init

    def get_rank(self) -> int:
        return self._rank

    def get_world_size(self) -> int:
        return self._ws


@needs_data
def test_defaults_come_from_an_initialised_torch_distributed(small, monkeypatch):
    rows = synthetic_rows(9)
    monkeypatch.setitem(sys.modules, "torch.distributed", FakeDist(False, 2, 3))
    ld = PatchBatches([small], rows, SIZE)
    assert (ld.rank, ld.world_size) == (0, 1), "a group that is not initialised does not split"
    monkeypatch.setitem(sys.modules, "torch.distributed", FakeDist(True, 2, 3))
    ld = PatchBatches([small], rows, SIZE)
    assert (ld.rank, ld.world_size) == (2, 3)
    assert ld.order(0).tolist() == rule_share(list(range(9)), 2, 3, False)
    ld = PatchBatches([small], rows, SIZE, rank=0, world_size=1)
    assert (ld.rank, ld.world_size) == (0, 1), "explicit values win"
    monkeypatch.delitem(sys.modules, "torch.distributed")
    assert PatchBatches([small], rows, SIZE).world_size == 1


@needs_data
def test_random_sampler_split_per_rank_and_epoch():
    with Slide(CMU) as cmu:
        root = RandomPatchSampler([cmu], (32, 32), min_tissue=0.0, seed=5)
        a = root.split(0, 2).sample(64)
        b = root.split(1, 2).sample(64)
        assert not np.array_equal(a, b), "ranks draw different patches"
        assert len({tuple(r) for r in a} & {tuple(r) for r in b}) < 8, "hardly any patch in common"
        assert np.array_equal(root.split(0, 2).sample(64), a), "the same split is the same stream"
        assert not np.array_equal(root.split(0, 2, epoch=1).sample(64), a), "epochs differ"
        assert root.split(1, 2, epoch=3).split_of == (1, 2, 3) and root.split_of is None
        # The root's own stream is left alone by splitting.
        twin = RandomPatchSampler([cmu], (32, 32), min_tissue=0.0, seed=5)
        assert np.array_equal(root.sample(16), twin.sample(16))
        for bad in ((2, 2), (-1, 2), (0, 0)):
            with pytest.raises(ValueError):
                root.split(*bad)
        with pytest.raises(TypeError):
            root.split(True, 2)
        with pytest.raises(ValueError):
            root.split(0, 2, epoch=-1)

        # The loader draws epoch e of rank r from split(r, world_size, epoch=e).
        def epoch_rows(rank: int, epoch: int) -> np.ndarray:
            ld = PatchBatches([cmu], root, (32, 32), batch_size=6, num_batches=3, rank=rank, world_size=2)
            ld.set_epoch(epoch)
            return np.concatenate([m.rows for _, m in ld])

        for rank, epoch in ((0, 0), (1, 0), (1, 2)):
            s = root.split(rank, 2, epoch=epoch)
            want = np.concatenate([s.sample(6) for _ in range(3)])
            assert np.array_equal(epoch_rows(rank, epoch), want)
        assert not np.array_equal(epoch_rows(0, 0), epoch_rows(1, 0))
        # One process: the sampler's own stream, continuing across epochs (as before).
        ld = PatchBatches([cmu], RandomPatchSampler([cmu], (32, 32), min_tissue=0.0, seed=5), (32, 32), batch_size=4, num_batches=2)
        got = np.concatenate([np.concatenate([m.rows for _, m in ld]) for _ in range(2)])
        fresh = RandomPatchSampler([cmu], (32, 32), min_tissue=0.0, seed=5)
        assert np.array_equal(got, np.concatenate([fresh.sample(4) for _ in range(4)]))


@needs_data
def test_a_sampler_without_split_is_used_as_is(small):
    class Fixed:
        def __init__(self) -> None:
            self.calls = 0

        def sample(self, n: int) -> np.ndarray:
            self.calls += 1
            return synthetic_rows(n)

    s = Fixed()
    ld = PatchBatches([small], s, SIZE, batch_size=3, num_batches=2, rank=1, world_size=2)
    assert ld.epoch_sampler(0) is s
    assert [m.rows.tolist() for _, m in ld] == [synthetic_rows(3).tolist()] * 2 and s.calls == 2


def _rank_worker(args: Tuple[int, int, List[str], np.ndarray]) -> List[Tuple[int, List[int], str]]:
    """One rank of the two-process run: (index, row, sha256 of the patch's pixels) per patch."""
    rank, world_size, paths, rows = args
    out = []
    with PatchBatches(paths, rows, (24, 16), batch_size=5, shuffle=True, seed=3, rank=rank, world_size=world_size) as ld:
        assert len(ld) == math.ceil(math.ceil(len(rows) / world_size) / 5)
        for batch, meta in ld:
            for k in range(batch.shape[0]):
                out.append((int(meta.indices[k]), meta.rows[k].tolist(), hashlib.sha256(np.ascontiguousarray(batch[k]).tobytes()).hexdigest()))
    return out


@needs_data
def test_two_processes_read_disjoint_shares_with_the_same_pixels():
    with Slide(CMU) as cmu:
        grid = GridSampler(cmu, (24, 16), stride=(200, 230), min_tissue=0).patches
    extra = np.array([(1, 0, x, y) for x, y in [(0, 0), (-4, 2), (5, 5), (9, -3), (1, 12)]], np.int64)
    rows = np.concatenate([grid, extra])
    if len(rows) % 2 == 0:
        rows = rows[:-1]
    n = len(rows)
    paths = [str(CMU), str(SMALL)]
    with mp.get_context("spawn").Pool(2) as pool:
        shares = pool.map(_rank_worker, [(r, 2, paths, rows) for r in range(2)])
    idx = [[i for i, _, _ in s] for s in shares]
    assert len(idx[0]) == len(idx[1]) == (n + 1) // 2
    full = documented_order(n, True, 3, 0)
    assert idx == [rule_share(full, r, 2, False) for r in range(2)]
    assert set(idx[0]) | set(idx[1]) == set(range(n)), "together the ranks read every row"
    both = set(idx[0]) & set(idx[1])
    assert both == {full[0]}, "only the padding row (the order's first) is read twice"
    with Slide(CMU) as a, Slide(SMALL) as b:
        want = slidestream.read_patches([a, b], rows, (24, 16))
    for share in shares:
        for i, row, digest in share:
            assert row == rows[i].tolist()
            assert digest == hashlib.sha256(np.ascontiguousarray(want[i]).tobytes()).hexdigest()


@needs_data
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
@pytest.mark.parametrize("n", [1, 7, 24, 31])
@pytest.mark.parametrize("world_size", [2, 3, 5])
@pytest.mark.parametrize("drop_last", [False, True])
def test_same_index_sets_as_torch_distributed_sampler(small, n, world_size, drop_last):
    from torch.utils.data import DistributedSampler

    rows = synthetic_rows(n)
    for rank in range(world_size):
        ds = DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=False, drop_last=drop_last)
        positions = list(ds)
        ld = PatchBatches([small], rows, SIZE, rank=rank, world_size=world_size, drop_last=drop_last)
        assert ld.order(0).tolist() == positions
        # With a shuffle, the split is the same rule applied to the loader's own permutation.
        sh = PatchBatches([small], rows, SIZE, shuffle=True, seed=4, rank=rank, world_size=world_size, drop_last=drop_last)
        perm = documented_order(n, True, 4, 2)
        assert sh.order(2).tolist() == [perm[p] for p in positions]


class FakeCuda(types.ModuleType):
    """Stands in for ``torch.cuda`` in ``sys.modules``: ``device=`` parsing reads it there."""

    def __init__(self, initialized: bool, current: int) -> None:
        super().__init__("torch.cuda")
        self._init, self._current = initialized, current
        self.asked = 0

    def is_initialized(self) -> bool:
        return self._init

    def current_device(self) -> int:
        self.asked += 1
        return self._current


class FakeTorchDevice:
    """What the parser looks at of a ``torch.device``: ``.type`` and ``.index``."""

    def __init__(self, type: str, index):  # noqa: A002 - torch's attribute names
        self.type, self.index = type, index


def test_cuda_without_an_index_is_torchs_current_device(monkeypatch):
    parse = slidestream._slidestream._parse_device
    monkeypatch.delitem(sys.modules, "torch.cuda", raising=False)
    assert parse("cuda") == 0 and parse(FakeTorchDevice("cuda", None)) == 0, "no torch: device 0"
    fake = FakeCuda(False, 3)
    monkeypatch.setitem(sys.modules, "torch.cuda", fake)
    assert parse("cuda") == 0 and fake.asked == 0, "torch's CUDA not initialised: 0, and it is not initialised by asking"
    fake = FakeCuda(True, 3)
    monkeypatch.setitem(sys.modules, "torch.cuda", fake)
    assert parse("cuda") == 3 and parse(FakeTorchDevice("cuda", None)) == 3
    assert parse("cuda:1") == 1 and parse(FakeTorchDevice("cuda", 2)) == 2 and parse(5) == 5, "an explicit index wins"
    assert parse("cpu") is None and parse(None) is None
    monkeypatch.setitem(sys.modules, "torch.cuda", FakeCuda(True, -1))
    with pytest.raises(ValueError):
        parse("cuda")
