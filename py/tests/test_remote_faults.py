"""Remote slides (issue 17), faults: errors injected by scripts/faultproxy.py in front of the
test servers give the documented typed errors (docs/remote.md "Errors"), and the slide stays
usable after them; bad URLs and storage options.

The servers come from the ``remote_servers`` fixture (py/tests/conftest.py). Reads compare
slidestream remote against slidestream local, byte for byte.
"""

from __future__ import annotations

import errno
import pathlib
import time
from typing import List

import numpy as np
import pytest

import slidestream
from slidestream import config

from _remote_helpers import *  # noqa: F401,F403 - the servers' helpers, ProxyControl, rs, the `proxies` fixture


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


