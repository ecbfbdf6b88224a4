"""Helpers of the remote-slide tests (test_remote.py, test_remote_faults.py): the slides to
test, URLs and storage options for the test servers (scripts/remote_servers.py), the
local-vs-remote comparison, the proxies' control clients and scratch objects."""
from __future__ import annotations

import os
import pathlib
import shutil
import sys
import urllib.parse
import uuid
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import slidestream

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
from faultproxy import ProxyControl  # noqa: E402
import remote_servers as rs  # noqa: E402

# What the test modules take with `from _remote_helpers import *` (the proxy client, the
# servers' module and the helpers below; `proxies` is a fixture).
__all__ = [
    "ProxyControl",
    "rs",
    "REGION",
    "SHARED",
    "SLIDE_SUFFIXES",
    "TESTDATA",
    "VENDOR",
    "_shared_slides",
    "_vendor_root",
    "_vendor_slides",
    "assert_same_slide",
    "check_same_as_local",
    "http_url",
    "open_remote",
    "outcome",
    "proxies",
    "proxy_path",
    "regions_of",
    "s3_options",
    "s3_put",
    "s3_url",
    "scratch_copy",
    "scratch_replace",
]

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
