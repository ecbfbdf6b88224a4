"""Remote slides (issue 17): every shared test slide over S3 (moto) and HTTP (nginx) reads the
same as the local file; faults injected by scripts/faultproxy.py give the documented typed
errors (docs/remote.md "Errors"); the open cost and the on-disk index cache.

The servers come from the ``remote_servers`` fixture (py/tests/conftest.py). Reads compare
slidestream remote against slidestream local, byte for byte.
"""

from __future__ import annotations

import errno
import os
import pathlib
import shutil
import sys
import time
import urllib.parse
import uuid
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import slidestream
from slidestream import config

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
from faultproxy import ProxyControl  # noqa: E402
import remote_servers as rs  # noqa: E402

TESTDATA = rs.default_testdata()
SLIDE_SUFFIXES = (".svs", ".tif", ".tiff", ".ndpi", ".scn", ".bif", ".mrxs", ".dcm")
# Regions per level: at most this many pixels per side (keeps moto and the run small).
REGION = 192


def _shared_slides() -> List[str]:
    """Top-level files of the shared test data that are slides (or meant to be refused)."""
    if not TESTDATA.is_dir():
        return []
    return sorted(p.name for p in TESTDATA.iterdir() if p.is_file() and p.name.endswith(SLIDE_SUFFIXES))


def _vendor_root() -> pathlib.Path | None:
    root = os.environ.get("SLIDESTREAM_VENDOR_SLIDES")
    return pathlib.Path(root) if root and pathlib.Path(root, "MANIFEST.md").is_file() else None


def _vendor_slides() -> List[str]:
    """Generated vendor slides of one file each (top-level files with a slide suffix)."""
    root = _vendor_root()
    if root is None:
        return []
    return sorted(p.name for p in root.iterdir() if p.is_file() and p.name.endswith(SLIDE_SUFFIXES))


SHARED = _shared_slides()
VENDOR = _vendor_slides()


# -- helpers -------------------------------------------------------------------------------
def s3_options(state: Dict[str, Any], endpoint: str | None = None) -> Dict[str, Any]:
    """storage_options for the moto server (or a proxy in front of it)."""
    return {
        "endpoint": endpoint or state["s3"]["endpoint"],
        "region": state["region"],
        "access_key_id": state["credentials"]["access_key_id"],
        "secret_access_key": state["credentials"]["secret_access_key"],
    }


def s3_url(state: Dict[str, Any], key: str) -> str:
    return f"s3://{state['bucket']}/{key}"


def http_url(base: str, key: str) -> str:
    return base.rstrip("/") + "/" + urllib.parse.quote(key)


def open_remote(state: Dict[str, Any], kind: str, key: str, via_proxy: bool = False, **kw: Any) -> slidestream.Slide:
    """Open ``key`` over ``kind`` ("s3" or "http"), directly or through that server's proxy."""
    if kind == "s3":
        endpoint = state["s3"]["proxy"] if via_proxy else state["s3"]["endpoint"]
        return slidestream.Slide(s3_url(state, key), storage_options=s3_options(state, endpoint), **kw)
    base = state["http"]["proxy"] if via_proxy else state["http"]["base"]
    return slidestream.Slide(http_url(base, key), **kw)


def outcome(fn, *args, **kwargs) -> Tuple[str, Any]:
    """("ok", value) or ("err", exception class) of a call."""
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the class is what is compared
        return "err", type(exc)


def regions_of(slide: slidestream.Slide) -> List[Tuple[Tuple[int, int], int, Tuple[int, int]]]:
    """(level-0 location, level, size) of a few regions per level: a corner, the middle, one
    across the right/bottom edges, one half outside the top-left."""
    out = []
    for level, ((w, h), ds) in enumerate(zip(slide.level_dimensions, slide.level_downsamples)):
        rw, rh = min(REGION, w), min(REGION, h)
        for lx, ly in ((0, 0), (w // 2 - rw // 2, h // 2 - rh // 2), (w - rw // 2, h - rh // 2), (-rw // 2, -rh // 2)):
            out.append(((int(lx * ds), int(ly * ds)), level, (rw, rh)))
    return out


def assert_same_slide(local: slidestream.Slide, remote: slidestream.Slide) -> None:
    """Metadata, associated images and region pixels of ``remote`` equal ``local``'s."""
    assert remote.vendor == local.vendor
    assert remote.level_dimensions == local.level_dimensions
    assert remote.level_downsamples == local.level_downsamples
    assert remote.level_tile_sizes == local.level_tile_sizes
    assert dict(remote.properties) == dict(local.properties)
    assert remote.color_profile == local.color_profile
    assert sorted(remote.associated_images) == sorted(local.associated_images)
    for name in local.associated_images:
        lo, ro = outcome(local.read_associated, name), outcome(remote.read_associated, name)
        assert lo[0] == ro[0], (name, lo, ro)
        if lo[0] == "ok":
            np.testing.assert_array_equal(ro[1], lo[1], err_msg=f"associated {name}")
        else:
            assert ro[1] is lo[1], (name, lo, ro)
    for loc, level, size in regions_of(local):
        lo, ro = outcome(local.read_region, loc, level, size), outcome(remote.read_region, loc, level, size)
        assert lo[0] == ro[0], (loc, level, size, lo, ro)
        if lo[0] == "ok":
            np.testing.assert_array_equal(ro[1], lo[1], err_msg=f"region {loc} level {level} size {size}")
        else:
            assert ro[1] is lo[1], (loc, level, size, lo, ro)
    # One batch per level: the plan's ranged GETs go out together (read_many).
    for level, (w, h) in enumerate(local.level_dimensions):
        ds = local.level_downsamples[level]
        size = (min(64, w), min(64, h))
        locs = np.array([[int(x * ds), int(y * ds)] for x, y in ((0, 0), (w // 3, h // 3), (w - 10, h - 10))])
        lo, ro = outcome(local.read_regions, locs, level, size), outcome(remote.read_regions, locs, level, size)
        assert lo[0] == ro[0], (level, lo, ro)
        if lo[0] == "ok":
            np.testing.assert_array_equal(ro[1], lo[1], err_msg=f"read_regions level {level}")


def check_same_as_local(local_path: pathlib.Path, open_remote_fn) -> None:
    """Open locally and remotely: the same error class, or the same slide."""
    kind, local = outcome(slidestream.Slide, local_path)
    if kind == "err":
        with pytest.raises(Exception) as info:
            open_remote_fn()
        assert type(info.value) is local, f"local open raised {local.__name__}, remote {info.value!r}"
        return
    with local, open_remote_fn() as remote:
        assert_same_slide(local, remote)


@pytest.fixture
def proxies(remote_servers):
    """Control clients of the two proxies (rules and logs emptied before and after a test)."""
    ctl = {"s3": ProxyControl(remote_servers["s3"]["proxy"]), "http": ProxyControl(remote_servers["http"]["proxy"])}
    for c in ctl.values():
        c.clear_rules()
        c.clear_log()
    yield ctl
    for c in ctl.values():
        c.clear_rules()


def proxy_path(state: Dict[str, Any], kind: str, key: str) -> str:
    """The request path the proxy sees for ``key`` (moto: path-style /bucket/key)."""
    quoted = urllib.parse.quote(key)
    return f"/{state['bucket']}/{quoted}" if kind == "s3" else "/" + quoted


def s3_put(state: Dict[str, Any], key: str, source: pathlib.Path) -> None:
    rs.s3_client(state["s3"]["endpoint"]).upload_file(str(source), state["bucket"], key)


def scratch_copy(state: Dict[str, Any], kind: str, source: pathlib.Path) -> str:
    """Put a copy of ``source`` under a new scratch key and return the key."""
    key = f"scratch/{uuid.uuid4().hex}-{source.name}"
    if kind == "s3":
        s3_put(state, key, source)
    else:
        dest = pathlib.Path(state["http"]["scratch_dir"]) / key.split("/", 1)[1]
        shutil.copyfile(source, dest)
    return key


def scratch_replace(state: Dict[str, Any], kind: str, key: str, source: pathlib.Path) -> None:
    """Replace the scratch object ``key`` with the bytes of ``source``."""
    if kind == "s3":
        s3_put(state, key, source)
    else:
        dest = pathlib.Path(state["http"]["scratch_dir"]) / key.split("/", 1)[1]
        tmp = dest.with_suffix(".tmp")
        shutil.copyfile(source, tmp)
        os.replace(tmp, dest)


# -- every slide, remote == local -----------------------------------------------------------
@pytest.mark.parametrize("kind", ["s3", "http"])
@pytest.mark.parametrize("name", SHARED)
def test_shared_slide_same_as_local(remote_servers, kind, name):
    check_same_as_local(TESTDATA / name, lambda: open_remote(remote_servers, kind, name))


@pytest.mark.parametrize("kind", ["s3", "http"])
@pytest.mark.parametrize("name", VENDOR)
def test_vendor_slide_same_as_local(remote_servers, kind, name):
    if not remote_servers.get("vendor"):
        pytest.skip("the servers were started without SLIDESTREAM_VENDOR_SLIDES")
    path = _vendor_root() / name
    check_same_as_local(path, lambda: open_remote(remote_servers, kind, "vendor/" + name))


def _multifile_slides() -> List[Tuple[str, str]]:
    """(key prefix, file to open relative to its data root) of every slide of several files
    with a reference (``reference-multifile/*/regions.json`` names the file): the shared DICOM
    series and the generated DICOM series."""
    import json

    out = []
    for prefix, root in (("", TESTDATA), ("vendor/", _vendor_root())):
        refs = root / "reference-multifile" if root is not None else None
        if refs is None or not refs.is_dir():
            continue
        for d in sorted(refs.iterdir()):
            f = d / "regions.json"
            if f.is_file():
                out.append((prefix, json.loads(f.read_text())["open"]))
    return out


MULTIFILE = _multifile_slides()


@pytest.mark.parametrize("prefix,name", MULTIFILE, ids=[p + n for p, n in MULTIFILE])
def test_series_over_s3_same_as_local(remote_servers, prefix, name):
    """A DICOM series opened by the URL of one instance finds its other instances with one LIST
    of the prefix and reads as the local series does (docs/remote.md, slides of several files)."""
    if prefix and not remote_servers.get("vendor"):
        pytest.skip("the servers were started without SLIDESTREAM_VENDOR_SLIDES")
    root = TESTDATA if not prefix else _vendor_root()
    check_same_as_local(root / name, lambda: open_remote(remote_servers, "s3", prefix + name))
    with open_remote(remote_servers, "s3", prefix + name) as remote:
        st = remote.io_stats()["remote"]
        # One HEAD per object examined, one LIST, the readahead blocks: never one request per
        # structure read.
        files = len(list((root / name).parent.iterdir()))
        assert 1 <= st["open_requests"] <= 1 + 2 * files + st["open_bytes"] // (256 << 10) + files, st


@pytest.mark.parametrize("prefix,name", MULTIFILE, ids=[p + n for p, n in MULTIFILE])
def test_series_instance_over_http_reads_alone(remote_servers, prefix, name):
    """Plain HTTP has no listing: the instance is read by itself (docs/remote.md), its levels a
    subset of the series' (same size, same pixels), never another slide."""
    if prefix and not remote_servers.get("vendor"):
        pytest.skip("the servers were started without SLIDESTREAM_VENDOR_SLIDES")
    root = TESTDATA if not prefix else _vendor_root()
    kind, remote = outcome(open_remote, remote_servers, "http", prefix + name)
    if kind == "err":
        # An instance that is not a slide by itself (a concatenation part, say): a typed error.
        assert issubclass(remote, (slidestream.UnsupportedFormatError, slidestream.CorruptDataError)), remote
        return
    with remote, slidestream.Slide(root / name) as local:
        assert remote.vendor == local.vendor == "dicom"
        assert remote.level_count <= local.level_count
        w, h = remote.level_dimensions[0]
        if (w, h) in local.level_dimensions:
            lv = local.level_dimensions.index((w, h))
            ds = local.level_downsamples[lv]
            size = (min(REGION, w), min(REGION, h))
            np.testing.assert_array_equal(remote.read_region((0, 0), 0, size), local.read_region((0, 0), lv, size))
            assert ds >= 1


@pytest.mark.parametrize("name", ["CMU-1-Small-Region.svs", "boxes.tiff"])
def test_drop_in_openslide_over_s3_and_http(remote_servers, name):
    from slidestream.openslide import OpenSlide, open_slide

    local = OpenSlide(str(TESTDATA / name))
    remotes = [
        OpenSlide(s3_url(remote_servers, name), storage_options=s3_options(remote_servers)),
        open_slide(http_url(remote_servers["http"]["base"], name)),
    ]
    try:
        for remote in remotes:
            assert remote.level_dimensions == local.level_dimensions
            assert dict(remote.properties) == dict(local.properties)
            assert sorted(remote.associated_images) == sorted(local.associated_images)
            for loc, level, size in ((0, 0), 0, (100, 80)), ((150, 120), local.level_count - 1, (50, 40)):
                np.testing.assert_array_equal(
                    np.asarray(remote.read_region(loc, level, size)), np.asarray(local.read_region(loc, level, size))
                )
    finally:
        local.close()
        for remote in remotes:
            remote.close()


# -- faults --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["s3", "http"])
def test_403_is_permission_error(remote_servers, proxies, kind):
    key = "boxes.tiff"
    proxies[kind].add_rule(path=proxy_path(remote_servers, kind, key), action="status", status=403, count=None)
    with pytest.raises(PermissionError) as info:
        open_remote(remote_servers, kind, key, via_proxy=True)
    assert key in str(info.value)


@pytest.mark.parametrize("kind", ["s3", "http"])
def test_404_is_file_not_found(remote_servers, proxies, kind):
    key = "cog.tiff"
    proxies[kind].add_rule(path=proxy_path(remote_servers, kind, key), action="status", status=404, count=None)
    with pytest.raises(FileNotFoundError):
        open_remote(remote_servers, kind, key, via_proxy=True)
    # And a key that really is missing, from the servers themselves.
    with pytest.raises(FileNotFoundError) as info:
        open_remote(remote_servers, kind, "no-such-slide.svs")
    assert "no-such-slide.svs" in str(info.value)


@pytest.mark.parametrize("kind", ["s3", "http"])
def test_500_twice_then_success(remote_servers, proxies, kind):
    key = "tiled-rgb-u8.tif"
    with slidestream.Slide(TESTDATA / key) as local, open_remote(remote_servers, kind, key, via_proxy=True) as remote:
        before = remote.io_stats()["remote"]["requests"]
        proxies[kind].clear_log()
        proxies[kind].add_rule(path=proxy_path(remote_servers, kind, key), method="GET", action="status", status=500, count=2)
        px = remote.read_region((0, 0), 0, (100, 100))
        np.testing.assert_array_equal(px, local.read_region((0, 0), 0, (100, 100)))
        path = proxy_path(remote_servers, kind, key)
        statuses = [e["status"] for e in proxies[kind].log() if e["method"] == "GET" and e["path"] == path]
        assert statuses[:2] == [500, 500] and statuses[2] in (200, 206), statuses
        # io_stats counts requests as the planner sent them (object_store's retries inside one
        # are not separate requests), none of them failed; the proxy log above saw the retries.
        after = remote.io_stats()["remote"]
        assert after["requests"] > before
        assert after["failed"] == 0


@pytest.mark.parametrize("kind", ["s3", "http"])
def test_slow_server_times_out_then_reads(remote_servers, proxies, kind):
    key = "tiled-jpeg-rgb-u8.tif"
    with config.scope(SLIDESTREAM_REMOTE_TIMEOUT_MS=300, SLIDESTREAM_REMOTE_RETRIES=1):
        remote = open_remote(remote_servers, kind, key, via_proxy=True)
    with slidestream.Slide(TESTDATA / key) as local, remote:
        proxies[kind].add_rule(path=proxy_path(remote_servers, kind, key), method="GET", action="delay_ms", delay_ms=3000, count=None)
        with pytest.raises(TimeoutError) as info:
            remote.read_region((0, 0), 0, (64, 64))
        assert key in str(info.value)
        proxies[kind].clear_rules()
        np.testing.assert_array_equal(remote.read_region((0, 0), 0, (64, 64)), local.read_region((0, 0), 0, (64, 64)))


@pytest.mark.parametrize("mode", ["body", "range"])
@pytest.mark.parametrize("kind", ["s3", "http"])
def test_truncated_response_is_oserror(remote_servers, proxies, kind, mode):
    key = "quad-tile.jpg.tiff"
    with config.scope(SLIDESTREAM_REMOTE_RETRIES=1):
        remote = open_remote(remote_servers, kind, key, via_proxy=True)
    with slidestream.Slide(TESTDATA / key) as local, remote:
        proxies[kind].add_rule(path=proxy_path(remote_servers, kind, key), method="GET", action="truncate", mode=mode, count=None)
        with pytest.raises(OSError):
            remote.read_region((0, 0), 0, (256, 256))
        # The proxy cut an answer as asked: a short body under the promised length, or a 206
        # whose Content-Range is correct but shorter than the range asked.
        path = proxy_path(remote_servers, kind, key)
        assert f"truncate-{mode}" in [e["action"] for e in proxies[kind].log() if e["path"] == path]
        proxies[kind].clear_rules()
        np.testing.assert_array_equal(remote.read_region((0, 0), 0, (256, 256)), local.read_region((0, 0), 0, (256, 256)))


@pytest.mark.parametrize("kind", ["s3", "http"])
def test_dropped_connection_then_success(remote_servers, proxies, kind):
    key = "tiff_tiled_planar_lzw.tiff"
    with slidestream.Slide(TESTDATA / key) as local, open_remote(remote_servers, kind, key, via_proxy=True) as remote:
        proxies[kind].add_rule(path=proxy_path(remote_servers, kind, key), method="GET", action="close", count=1)
        np.testing.assert_array_equal(remote.read_region((0, 0), 0, (128, 128)), local.read_region((0, 0), 0, (128, 128)))
        path = proxy_path(remote_servers, kind, key)
        actions = [e["action"] for e in proxies[kind].log() if e["method"] == "GET" and e["path"] == path]
        assert actions.count("close") == 1 and actions.count(None) >= 1, actions


@pytest.mark.parametrize("kind", ["s3", "http"])
def test_object_replaced_while_open_is_estale(remote_servers, kind):
    key = scratch_copy(remote_servers, kind, TESTDATA / "boxes.tiff")
    with slidestream.Slide(TESTDATA / "boxes.tiff") as local, open_remote(remote_servers, kind, key) as remote:
        np.testing.assert_array_equal(remote.read_region((0, 0), 0, (64, 64)), local.read_region((0, 0), 0, (64, 64)))
        scratch_replace(remote_servers, kind, key, TESTDATA / "cog.tiff")
        with pytest.raises(OSError) as info:
            remote.read_region((128, 128), 0, (64, 64))
        assert info.value.errno == errno.ESTALE, info.value
        # Still fails (never mixed bytes) on every later uncached read.
        with pytest.raises(OSError) as info:
            remote.read_region((0, 0), 3, (37, 31))
        assert info.value.errno == errno.ESTALE


def test_unknown_storage_option_is_value_error(remote_servers):
    opts = dict(s3_options(remote_servers), no_such_option="1")
    with pytest.raises(slidestream.InvalidArgumentError) as info:
        slidestream.Slide(s3_url(remote_servers, "boxes.tiff"), storage_options=opts)
    assert isinstance(info.value, ValueError)
    assert "no_such_option" in str(info.value)


def test_storage_options_with_local_path_is_value_error():
    with pytest.raises(slidestream.InvalidArgumentError):
        slidestream.Slide(TESTDATA / "boxes.tiff", storage_options={"region": "us-east-1"})


@pytest.mark.parametrize(
    "url", ["ftp://example.invalid/slide.svs", "s3:///key.svs", "s3://bucket", "s3://", "http://"]
)
def test_bad_url_is_invalid_argument(url):
    """docs/remote.md "Errors": a bad URL is an InvalidArgumentError naming it (not a local
    path that happens not to exist)."""
    with pytest.raises(slidestream.InvalidArgumentError) as info:
        slidestream.Slide(url)
    assert url in str(info.value)


def test_http_requests_match_the_server_log(remote_servers):
    """io_stats()["remote"] counts every request nginx saw for the object (HEAD + GETs)."""
    key = scratch_copy(remote_servers, "http", TESTDATA / "tiled-rgb-u8.tif")
    uri = "/" + key

    def served(expected: int) -> List[str]:
        # nginx logs a request after answering it: wait (bounded) for the lines to land.
        for _ in range(100):
            lines = pathlib.Path(remote_servers["http"]["access_log"]).read_text().splitlines()
            mine = [ln for ln in lines if ln.split(" ")[1] == uri]
            if len(mine) >= expected:
                return mine
            time.sleep(0.05)
        return mine

    with open_remote(remote_servers, "http", key) as remote:
        st = remote.io_stats()["remote"]
        assert len(served(st["open_requests"])) == st["open_requests"]
        remote.read_regions(np.array([[0, 0], [200, 300]]), 0, (64, 64))
        st = remote.io_stats()["remote"]
        lines = served(st["requests"])
        assert len(lines) == st["requests"] > st["open_requests"]
        assert sum(int(ln.rsplit(" ", 1)[1]) for ln in lines) == st["bytes"]
        assert [ln.split(" ")[0] for ln in lines].count("HEAD") == 1


# -- open cost and the index cache ---------------------------------------------------------
def test_open_cost_table(remote_servers):
    rows = []
    readahead = int(config.get("SLIDESTREAM_REMOTE_READAHEAD_BYTES"))
    for name in SHARED:
        kind, local = outcome(slidestream.Slide, TESTDATA / name)
        if kind == "err":
            continue
        with local, open_remote(remote_servers, "s3", name) as remote:
            st = remote.io_stats()["remote"]
            size = (TESTDATA / name).stat().st_size
            blocks = -(-size // readahead)
            rows.append((name, st["open_requests"], st["open_bytes"], blocks, size))
            assert st["index_cache"] == "off"
            assert st["url"] == s3_url(remote_servers, name)
            assert st["open_requests"] >= 1
            assert 0 < st["open_bytes"] <= size
            # One HEAD, then at most one GET per readahead block of the object (docs/remote.md:
            # one GET per run of missing blocks, each block fetched once), and one LIST for a
            # format that looks for its other files (DICOM).
            listing = 1 if slidestream.detect_vendor(TESTDATA / name) == "dicom" else 0
            assert st["open_requests"] <= 1 + blocks + listing, (name, st, blocks)
            # The open's requests are counted in the slide's totals.
            assert st["requests"] >= st["open_requests"] and st["bytes"] >= st["open_bytes"]
    print("\n| slide | open_requests | open_bytes | readahead blocks | size (B) |\n|---|---:|---:|---:|---:|")
    for row in rows:
        print("| {} | {} | {} | {} | {} |".format(*row))
    assert rows


@pytest.mark.parametrize("kind", ["s3", "http"])
def test_index_cache_reopen_costs_nothing_then_estale(remote_servers, kind, tmp_path):
    key = scratch_copy(remote_servers, kind, TESTDATA / "CMU-1-Small-Region.svs")
    with config.scope(SLIDESTREAM_REMOTE_INDEX_CACHE=str(tmp_path)):
        first = open_remote(remote_servers, kind, key)
        second = open_remote(remote_servers, kind, key)
    with first, second:
        assert first.io_stats()["remote"]["index_cache"] == "miss"
        st = second.io_stats()["remote"]
        assert st["index_cache"] == "hit"
        assert st["open_requests"] == 0 and st["open_bytes"] == 0
        assert dict(second.properties) == dict(first.properties)
        assert second.level_dimensions == first.level_dimensions
        for loc, level, size in regions_of(first):
            np.testing.assert_array_equal(second.read_region(loc, level, size), first.read_region(loc, level, size))
    assert any(tmp_path.iterdir())
    scratch_replace(remote_servers, kind, key, TESTDATA / "tcga-cr-7395-01a-01-ts1.svs")
    with config.scope(SLIDESTREAM_REMOTE_INDEX_CACHE=str(tmp_path)):
        third = open_remote(remote_servers, kind, key)
    with third:
        assert third.io_stats()["remote"]["index_cache"] == "hit"
        with pytest.raises(OSError) as info:
            third.read_region((0, 0), 0, (240, 240))
        assert info.value.errno == errno.ESTALE
