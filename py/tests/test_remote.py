"""Remote slides (issue 17): every shared test slide over S3 (moto) and HTTP (nginx) reads the
same as the local file; faults injected by scripts/faultproxy.py give the documented typed
errors (docs/remote.md "Errors"); the open cost and the on-disk index cache.

The servers come from the ``remote_servers`` fixture (py/tests/conftest.py). Reads compare
slidestream remote against slidestream local, byte for byte.
"""

from __future__ import annotations

import errno
from typing import List, Tuple

import numpy as np
import pytest

import slidestream
from slidestream import config

from _remote_helpers import *  # noqa: F401,F403 - the servers' helpers, ProxyControl, rs, the `proxies` fixture


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
    if not name.lower().endswith(".dcm"):
        pytest.skip("a DICOM series' instance alone; other slides of several files need their other files")
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
