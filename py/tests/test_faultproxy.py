"""scripts/faultproxy.py itself, in front of the test nginx (ranges, ETags): forwarding with
keep-alive, each rule action, the rule counts, the request log and the control API's errors."""

from __future__ import annotations

import http.client
import json
import pathlib
import sys
import urllib.error
import urllib.parse

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
from faultproxy import ProxyControl, RuleError, validate_rule  # noqa: E402
import remote_servers as rs  # noqa: E402

KEY = "tiled-rgb-u8.tif"  # 416408 bytes
DATA = (rs.default_testdata() / KEY).read_bytes() if (rs.default_testdata() / KEY).is_file() else b""


@pytest.fixture
def proxy(remote_servers):
    ctl = ProxyControl(remote_servers["http"]["proxy"])
    ctl.clear_rules()
    ctl.clear_log()
    yield ctl
    ctl.clear_rules()


@pytest.fixture
def conn(remote_servers):
    u = urllib.parse.urlsplit(remote_servers["http"]["proxy"])
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    yield c
    c.close()


def own_log(proxy: ProxyControl) -> list:
    """The proxy log's entries for KEY: requests of earlier tests (delayed ones) may still land."""
    return [e for e in proxy.log() if e["path"] == "/" + KEY]


def get(conn: http.client.HTTPConnection, path: str, rng: str | None = None, method: str = "GET"):
    conn.request(method, path, headers={"Range": rng} if rng else {})
    resp = conn.getresponse()
    return resp, resp.read()


def test_forwards_ranges_and_keeps_alive(proxy, conn):
    resp, body = get(conn, "/" + KEY, "bytes=100-1099")
    assert resp.status == 206 and body == DATA[100:1100]
    assert resp.getheader("Content-Range") == f"bytes 100-1099/{len(DATA)}"
    etag = resp.getheader("ETag")
    assert etag
    resp, body = get(conn, "/" + KEY)  # same connection
    assert resp.status == 200 and body == DATA and resp.getheader("ETag") == etag
    resp, body = get(conn, "/" + KEY, method="HEAD")
    assert resp.status == 200 and body == b"" and int(resp.getheader("Content-Length")) == len(DATA)
    log = own_log(proxy)
    assert [(e["method"], e["range"], e["status"], e["bytes"]) for e in log] == [
        ("GET", "bytes=100-1099", 206, 1000),
        ("GET", None, 200, len(DATA)),
        ("HEAD", None, 200, 0),
    ]
    assert proxy.stats()["requests"] >= 3


def test_status_rule_counts_down(proxy, conn):
    proxy.add_rule(path=KEY, method="GET", action="status", status=503, count=2)
    for _ in range(2):
        resp, body = get(conn, "/" + KEY, "bytes=0-9")
        assert resp.status == 503
        assert b"<Code>SlowDown</Code>" in body and resp.getheader("Content-Type") == "application/xml"
    assert proxy.rules() == []
    resp, body = get(conn, "/" + KEY, "bytes=0-9")
    assert resp.status == 206 and body == DATA[:10]
    assert [e["action"] for e in own_log(proxy)] == ["status", "status", None]


def test_rule_matches_method_and_path_only(proxy, conn):
    proxy.add_rule(path="other-file", action="status", status=404, count=None)
    proxy.add_rule(path=KEY, method="HEAD", action="status", status=403, count=None)
    resp, _ = get(conn, "/" + KEY, "bytes=0-9")
    assert resp.status == 206
    resp, body = get(conn, "/" + KEY, method="HEAD")
    assert resp.status == 403 and body == b""
    assert len(proxy.rules()) == 2  # count None: never used up


def test_truncate_body_breaks_the_promised_length(proxy, conn):
    proxy.add_rule(path=KEY, action="truncate", mode="body", bytes=10)
    conn.request("GET", "/" + KEY, headers={"Range": "bytes=0-999"})
    resp = conn.getresponse()
    assert resp.status == 206 and resp.getheader("Content-Length") == "1000"
    with pytest.raises(http.client.IncompleteRead) as info:
        resp.read()
    assert info.value.partial == DATA[:10]
    assert own_log(proxy)[-1]["action"] == "truncate-body"


def test_truncate_range_sends_a_shorter_correct_range(proxy, conn):
    proxy.add_rule(path=KEY, action="truncate", mode="range", bytes=100)
    resp, body = get(conn, "/" + KEY, "bytes=1000-1999")
    assert resp.status == 206
    assert resp.getheader("Content-Range") == f"bytes 1000-1099/{len(DATA)}"
    assert body == DATA[1000:1100]
    resp, body = get(conn, "/" + KEY, "bytes=0-3")  # connection still usable
    assert body == DATA[:4]


def test_close_drops_the_connection(proxy, conn):
    proxy.add_rule(path=KEY, action="close")
    conn.request("GET", "/" + KEY)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        conn.getresponse()
    assert own_log(proxy)[-1] == {**own_log(proxy)[-1], "status": None, "action": "close"}


def test_delay_rule_then_forwards(proxy, conn):
    proxy.add_rule(path=KEY, action="delay_ms", delay_ms=50)
    resp, body = get(conn, "/" + KEY, "bytes=0-9")
    assert resp.status == 206 and body == DATA[:10]
    entry = own_log(proxy)[-1]
    assert (entry["action"], entry["status"]) == ("delay_ms", 206)


def test_config_changes_the_added_delay(proxy):
    before = proxy.stats()["delay_ms"]
    try:
        proxy.set_delay(5)
        assert proxy.stats()["delay_ms"] == 5
    finally:
        proxy.set_delay(before)


@pytest.mark.parametrize(
    "rule",
    [
        {"action": "explode"},
        {"action": "status", "status": 200},
        {"action": "status", "status": 503, "count": 0},
        {"action": "truncate", "mode": "sideways"},
        {"action": "delay_ms", "delay_ms": -1},
        {"action": "close", "colour": "red"},
    ],
)
def test_bad_rules_are_refused(proxy, rule):
    with pytest.raises(RuleError):
        validate_rule(rule)
    with pytest.raises(urllib.error.HTTPError) as info:
        proxy.add_rule(**rule)
    assert info.value.code == 400
    assert "error" in json.loads(info.value.read())
    assert proxy.rules() == []
