"""Threads, processes, pickling, file descriptors and bad input.

The nastiest inputs (damaged files, limits set through the environment) run in a child
interpreter so that a crash shows up as a return code instead of taking pytest down.
"""

import concurrent.futures as cf
import gc
import hashlib
import multiprocessing as mp
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from slidestream import (
    CorruptDataError,
    InvalidArgumentError,
    LimitsExceededError,
    SlideError,
    UnsupportedFormatError,
)
from slidestream import Slide

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(os.environ.get("SLIDESTREAM_TESTDATA", REPO.parent / "shared" / "testdata"))
CMU = REPO / "assets" / "CMU-1-Small-Region.svs"
BOXES = DATA / "boxes.tiff"

needs_data = pytest.mark.skipif(not BOXES.exists(), reason=f"test slides not found under {DATA}")


def digest(a):
    return hashlib.blake2b(np.ascontiguousarray(a).tobytes(), digest_size=16).hexdigest()


def random_reads(n, seed, dims):
    """(location, size) pairs on level 0, some partly or wholly outside the image."""
    rng = np.random.default_rng(seed)
    w, h = dims
    sizes = [(1, 1), (17, 5), (64, 64), (240, 240), (256, 256), (300, 97)]
    out = []
    for _ in range(n):
        sw, sh = sizes[rng.integers(len(sizes))]
        out.append(((int(rng.integers(-300, w + 50)), int(rng.integers(-300, h + 50))), (sw, sh)))
    return out


# --- threads -------------------------------------------------------------------------------------


@pytest.mark.parametrize("cache_bytes", [None, 3 * 240 * 240 * 4], ids=["shared-cache", "tiny-private-cache"])
def test_16_threads_share_one_slide(cache_bytes):
    with Slide(CMU, cache_bytes=0) as ref:
        reads = [random_reads(500, seed, ref.dimensions) for seed in range(16)]
        # Reference: one thread, no cache (every read decodes what it needs).
        expected = [[digest(ref.read_region(loc, 0, size)) for loc, size in rs] for rs in reads]

    shared = Slide(CMU, cache_bytes=cache_bytes)

    def work(rs):
        out = []
        for i, (loc, size) in enumerate(rs):
            if i % 5 == 4:  # mix in batched reads of the same patch, compared in RGBA form below
                rgb = shared.read_regions([loc], 0, size, background=0)[0]
                out.append(("rgb", digest(rgb)))
            else:
                out.append(("rgba", digest(shared.read_region(loc, 0, size))))
        return out

    with cf.ThreadPoolExecutor(16) as ex:
        got = list(ex.map(work, reads))
    with Slide(CMU) as ref:
        for t, (rs, exp, res) in enumerate(zip(reads, expected, got)):
            for i, ((loc, size), e, (kind, g)) in enumerate(zip(rs, exp, res)):
                if kind == "rgba":
                    assert g == e, f"thread {t} read {i} {loc} {size}"
                else:
                    assert g == digest(ref.read_regions([loc], 0, size, background=0)[0]), f"thread {t} read {i}"
    shared.close()


# --- pickling and paths ------------------------------------------------------------------------


@pytest.fixture
def unicode_copy(tmp_path):
    p = tmp_path / "tëst_スライド.svs"
    shutil.copyfile(CMU, p)
    return p


def test_pickle_slide_str_bytes_pathlib_and_non_ascii(unicode_copy):
    with Slide(CMU) as s:
        expected = s.read_region((500, 700), 0, (128, 96))
        props = dict(s.properties)
    for given in (str(unicode_copy), os.fsencode(str(unicode_copy)), unicode_copy, pathlib.PurePosixPath(unicode_copy)):
        s = Slide(given)
        assert s.path == str(unicode_copy)
        assert os.fsencode(s) == os.fsencode(str(unicode_copy))
        for proto in (2, pickle.HIGHEST_PROTOCOL):
            c = pickle.loads(pickle.dumps(s, protocol=proto))
            assert type(c) is Slide and c.path == s.path and not c.closed
            assert np.array_equal(c.read_region((500, 700), 0, (128, 96)), expected)
            # properties other than the file-specific ones match the original slide
            assert c.properties["openslide.quickhash-1"] == props["openslide.quickhash-1"]
            c.close()
        s.close()


def test_pickle_slide_with_non_utf8_name_and_private_cache(tmp_path):
    raw = os.fsencode(str(tmp_path)) + b"/caf\xe9-\xff.svs"  # not valid UTF-8
    with open(raw, "wb") as f:
        f.write(CMU.read_bytes())
    s = Slide(raw, cache_bytes=1 << 20)
    expected = s.read_region((0, 0), 0, (64, 64))
    c = pickle.loads(pickle.dumps(s))
    assert bytes(c.path_bytes) == raw and c.cache_bytes == 1 << 20
    assert np.array_equal(c.read_region((0, 0), 0, (64, 64)), expected)
    assert c.cache_stats()["capacity_bytes"] == 1 << 20


def test_pickle_patch_dataset_without_torch_internals(unicode_copy):
    # The torch-free core of PatchDataset pickles its slides by path.
    from slidestream.torch import _PatchSource

    ds = _PatchSource([unicode_copy, str(CMU)], [(0, 10, 10), (1, 2000, 2000)], 0, 50)
    c = pickle.loads(pickle.dumps(ds))
    assert np.array_equal(c.read_arrays([0, 1]), ds.read_arrays([0, 1]))
    assert [s.path for s in c.slides] == [str(unicode_copy), str(CMU)]


# --- processes -----------------------------------------------------------------------------------

_INHERITED = None  # the slide opened by the parent, seen by forked children


def _read_inherited(args):
    loc, size = args
    return _INHERITED.read_region(loc, 0, size)


def _read_given(args):
    slide, loc, size = args
    return slide.read_regions([loc], 0, size)[0]


def _reads(dims, n=24):
    return random_reads(n, 99, dims)


def test_fork_pool_uses_slide_opened_in_parent():
    if "fork" not in mp.get_all_start_methods():
        pytest.skip("no fork on this platform")
    global _INHERITED
    _INHERITED = Slide(CMU)
    try:
        reads = _reads(_INHERITED.dimensions)
        # Read in the parent first: its thread pool, cache and file handle exist before fork.
        expected = [_INHERITED.read_region(loc, 0, size) for loc, size in reads]
        with mp.get_context("fork").Pool(2) as pool:
            got = pool.map(_read_inherited, reads, chunksize=4)
            got2 = pool.map(_read_given, [(_INHERITED, loc, size) for loc, size in reads], chunksize=4)
        for (loc, size), e, g, g2 in zip(reads, expected, got, got2):
            assert np.array_equal(g, e), (loc, size)
            assert np.array_equal(g2, _INHERITED.read_regions([loc], 0, size)[0]), (loc, size)
        # The parent's slide still works after the children used their copies.
        assert np.array_equal(_INHERITED.read_region(reads[0][0], 0, reads[0][1]), expected[0])
    finally:
        _INHERITED.close()
        _INHERITED = None


def test_spawn_pool_reads_pickled_slides(unicode_copy):
    s = Slide(unicode_copy)
    reads = _reads(s.dimensions, 12)
    expected = [s.read_regions([loc], 0, size)[0] for loc, size in reads]
    with mp.get_context("spawn").Pool(2) as pool:
        got = pool.map(_read_given, [(s, loc, size) for loc, size in reads], chunksize=3)
    for e, g in zip(expected, got):
        assert np.array_equal(g, e)
    s.close()


# --- file descriptors ----------------------------------------------------------------------------


def open_fds():
    return len(os.listdir("/proc/self/fd"))


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")


@needs_proc
@needs_data
def test_5000_opens_and_closes_leave_no_descriptor_open(tmp_path):
    Slide(CMU).close()  # warm up: thread pool, cache
    gc.collect()
    before = open_fds()

    # The count does move while slides are open (so the checks below can fail).
    held = [Slide(CMU) for _ in range(5)]
    assert open_fds() == before + 5
    for s in held:
        s.close()
    assert open_fds() == before

    for _ in range(5000):
        s = Slide(CMU)
        s.close()
    assert open_fds() == before

    for i in range(5000):
        with Slide(BOXES) as s:
            if i % 50 == 0:
                s.read_region((0, 0), 1, (64, 64))
    assert open_fds() == before

    # Dropped without close: the handle goes with the object.
    for _ in range(1000):
        s = Slide(CMU)
        del s
    gc.collect()
    assert open_fds() == before


@needs_proc
@needs_data
def test_failed_opens_and_read_errors_leave_no_descriptor_open(tmp_path):
    Slide(CMU).close()
    gc.collect()
    before = open_fds()
    for _ in range(1000):
        for bad, exc in ((DATA / "broken.svs", UnsupportedFormatError), (DATA / "unopenable.tiff", UnsupportedFormatError),
                         (DATA / "seek_too_large.tif", SlideError), (tmp_path / "missing.svs", FileNotFoundError),
                         (tmp_path, UnsupportedFormatError)):  # a folder no driver finds a slide in
            with pytest.raises(exc):
                Slide(bad)
        with Slide(DATA / "unreadable.svs") as s:
            with pytest.raises(CorruptDataError):
                s.read_region((0, 0), 0, (16, 16))
            with pytest.raises(InvalidArgumentError):
                s.read_region((0, 0), 1, (16, 16))
        try:
            with Slide(DATA / "unreadable.svs") as s:
                s.read_regions([(0, 0)], 0, (16, 16))
        except CorruptDataError:
            pass
        else:
            pytest.fail("no CorruptDataError from read_regions of unreadable.svs")
    gc.collect()
    assert open_fds() == before


# --- errors --------------------------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize("name", ["broken.svs", "unopenable.tiff", "zero_gi.tif"])
def test_unsupported_files(name):
    with pytest.raises(UnsupportedFormatError) as ei:
        Slide(DATA / name)
    assert name in str(ei.value)
    assert isinstance(ei.value, SlideError)


@needs_data
def test_corrupt_tile_raises_and_slide_stays_usable():
    with Slide(DATA / "unreadable.svs") as s:
        for _ in range(3):
            with pytest.raises(CorruptDataError, match="tile"):
                s.read_region((0, 0), 0, (16, 16))
        # A region that misses the image decodes nothing and works.
        assert s.read_region((100, 100), 0, (8, 8)).sum() == 0
        assert s.level_count == 1


@needs_data
def test_invalid_arguments_and_closed_slide():
    s = Slide(BOXES)
    for call in (lambda: s.read_region((0, 0), 4, (8, 8)), lambda: s.read_regions([(0, 0)], 99, (8, 8))):
        with pytest.raises(InvalidArgumentError) as ei:
            call()
        assert isinstance(ei.value, ValueError)
    with pytest.raises(InvalidArgumentError):
        s.read_associated("nope")
    with pytest.raises(ValueError):
        s.read_region((0, 0), 0, (-1, 8))
    with pytest.raises(TypeError):
        Slide(42)
    s.close()
    s.close()  # twice is harmless
    assert s.closed
    for call in (lambda: s.read_region((0, 0), 0, (8, 8)), lambda: s.read_regions([(0, 0)], 0, (8, 8)), lambda: s.level_count,
                 lambda: s.properties):
        with pytest.raises(InvalidArgumentError, match="closed"):
            call()


def test_missing_path_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError) as ei:
        Slide(tmp_path / "nope.svs")
    assert ei.value.filename == str(tmp_path / "nope.svs")
    # A folder opens only as a slide of several files (DICOM); an empty one is no slide.
    with pytest.raises(UnsupportedFormatError, match="folder"):
        Slide(tmp_path)


@needs_data
def test_limits_exceeded_is_a_memory_error_and_nothing_is_allocated():
    with Slide(BOXES) as s:
        with pytest.raises(LimitsExceededError) as ei:
            s.read_region((0, 0), 0, (1 << 20, 1 << 20))  # 4 TiB of RGBA
        assert isinstance(ei.value, MemoryError)
        with pytest.raises(LimitsExceededError):
            s.read_regions(np.zeros((1 << 16, 2), np.int64), 0, (4096, 4096))


def run_child(code, env=None, timeout=120):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, env=e)


@needs_data
def test_max_region_bytes_from_environment():
    code = f"""
        import numpy as np, slidestream as ss
        s = ss.Slide({str(BOXES)!r})
        assert s.read_region((0, 0), 0, (128, 128)).nbytes == 65536          # exactly the limit
        assert s.read_regions([(0, 0)], 0, (128, 128)).shape == (1, 128, 128, 3)
        for call in (lambda: s.read_region((0, 0), 0, (129, 128)),          # 66048 RGBA bytes
                     lambda: s.read_regions([(0, 0)] * 3, 0, (128, 128)),   # 147456 RGB bytes
                     lambda: s.get_thumbnail((300, 300))):                  # whole level 0
            try:
                call()
            except ss.LimitsExceededError as e:
                assert isinstance(e, MemoryError) and "65536" in str(e), e
            else:
                raise SystemExit("no LimitsExceededError")
    """
    r = run_child(code, env={"SLIDESTREAM_MAX_REGION_BYTES": "65536"})
    assert r.returncode == 0, r.stdout + r.stderr
    # Without the variable the same read succeeds.
    r = run_child("import slidestream as ss; ss.Slide(%r).read_region((0, 0), 0, (129, 128))" % str(BOXES))
    assert r.returncode == 0, r.stderr


FUZZ = r"""
import os, sys, random, traceback
import numpy as np
import slidestream as ss

data_dir, work, seed, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
expected_errors = (ss.SlideError, OSError, ValueError)
seen = {"opened": 0, "open_errors": 0, "read_errors": 0, "reads": 0}

def exercise(path):
    try:
        s = ss.Slide(path)
    except expected_errors:
        seen["open_errors"] += 1
        return
    seen["opened"] += 1
    with s:
        dict(s.properties)
        for name in list(s.associated_images):
            try:
                s.associated_images[name]
            except expected_errors:
                seen["read_errors"] += 1
        for level, (w, h) in enumerate(s.level_dimensions):
            ds = s.level_downsamples[level]
            for _ in range(3):
                x = int(rng.randrange(max(1, w)) * ds)
                y = int(rng.randrange(max(1, h)) * ds)
                try:
                    s.read_region((x, y), level, (min(w, 300), min(h, 300)))
                    s.read_regions([(x, y), (0, 0), (-5, -5)], level, (64, 64))
                    seen["reads"] += 1
                except expected_errors:
                    seen["read_errors"] += 1

names = ["broken.svs", "unopenable.tiff", "unreadable.svs", "seek_too_large.tif", "zero_gi.tif",
         "test3-DAPI-2-387.ndpi", "sparse.tiff", "small_aperio.svs"]
for n in names:
    exercise(os.path.join(data_dir, n))

seeds = ["boxes.tiff", "small_aperio.svs", "cog.tiff", "yb10kx5k.zstd.tiff", "tiled-rgb-u8.tif",
         "usda_naip_256_webp_z3.tif", "tiff_tiled_planar_lzw.tiff", "quad-tile.jpg.tiff"]
for i in range(count):
    src = open(os.path.join(data_dir, seeds[i % len(seeds)]), "rb").read()
    b = bytearray(src)
    kind = i % 3
    if kind == 0:    # flip bytes anywhere
        for _ in range(rng.randrange(1, 20)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1:  # flip bytes in the header / first IFD, where sizes and offsets live
        for _ in range(rng.randrange(1, 6)):
            b[rng.randrange(min(len(b), 512))] = rng.randrange(256)
    else:            # truncate
        b = b[: rng.randrange(len(b))]
    p = os.path.join(work, f"m{i}.tif")
    with open(p, "wb") as f:
        f.write(b)
    try:
        exercise(p)
    except Exception:
        traceback.print_exc()
        print("UNEXPECTED exception on", p, seeds[i % len(seeds)], kind)
        sys.exit(3)
    os.unlink(p)
print(seen)
"""


@needs_data
def test_bad_and_damaged_files_never_crash_the_interpreter(tmp_path):
    r = run_child(FUZZ.replace("sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])",
                               f"{str(DATA)!r}, {str(tmp_path)!r}, 1234, 400"), timeout=300)
    # A negative return code is a signal (segfault, abort): the interpreter crashed.
    assert r.returncode == 0, f"rc={r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    seen = eval(r.stdout.strip().splitlines()[-1])
    assert seen["opened"] > 0 and seen["open_errors"] > 0 and seen["reads"] > 0


@needs_data
def test_truncated_and_zeroed_copies_raise_instead_of_crashing(tmp_path):
    raw = CMU.read_bytes()
    cut = tmp_path / "cut.svs"
    cut.write_bytes(raw[:1_000_000])  # the IFDs of this file sit after its tile data
    zeroed = tmp_path / "zeroed.svs"
    b = bytearray(raw)
    b[400_000:700_000] = bytes(300_000)  # level-0 tile data only (tiles span bytes 16..1.27 MB)
    zeroed.write_bytes(bytes(b))
    code = f"""
        import slidestream as ss
        try:
            ss.Slide({str(cut)!r})
        except (ss.SlideError, OSError) as e:
            print("cut:", type(e).__name__)
        else:
            raise SystemExit("a slide whose IFDs are missing opened")
        s = ss.Slide({str(zeroed)!r})
        ok = errors = 0
        for y in range(0, 2967, 240):
            for x in range(0, 2220, 240):
                try:
                    s.read_region((x, y), 0, (240, 240))
                    ok += 1
                except ss.CorruptDataError as e:
                    assert "tile" in str(e), e
                    errors += 1
        print("zeroed:", ok, errors)
        assert ok > 0 and errors > 0
    """
    r = run_child(code)
    assert r.returncode == 0, r.stdout + r.stderr


def test_pickled_closed_slide_stays_closed():
    s = Slide(CMU)
    s.close()
    t = pickle.loads(pickle.dumps(s))
    assert t.closed
    with pytest.raises(InvalidArgumentError):
        t.read_region((0, 0), 0, (8, 8))
    # An open slide's copy is open and reads the same pixels.
    u = Slide(CMU)
    v = pickle.loads(pickle.dumps(u))
    assert not v.closed
    assert (v.read_region((500, 500), 0, (32, 32)) == u.read_region((500, 500), 0, (32, 32))).all()
