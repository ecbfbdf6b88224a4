"""Remote slides against hostile input and hung servers, and the Python boundary: a URL the
HTTP client cannot carry, a panic inside the core, Ctrl-C while a server never answers, a
non-file at an index cache entry's name, Ctrl-C before the first array of a process.

The servers are local (_range_server.py); the cases that could hang without their fix run in a
child interpreter with a watchdog, so a regression fails instead of stalling the run."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import slidestream
from slidestream import InvalidArgumentError, SlideError, _slidestream

TESTS = pathlib.Path(__file__).resolve().parent
CMU = TESTS.parents[1] / "assets" / "CMU-1-Small-Region.svs"
needs_test_hooks = pytest.mark.skipif(not _slidestream._test_hooks, reason="extension built without the test-hooks feature")

# Each remote request attempt may wait 10 minutes: only Ctrl-C can end these waits in time.
SLOW = {"SLIDESTREAM_REMOTE_TIMEOUT_MS": "600000", "SLIDESTREAM_REMOTE_RETRIES": "0"}


def _child(code: str, env: dict[str, str] | None = None, watchdog_s: float = 120) -> list[str]:
    """Run `code` in a fresh interpreter (the tests folder on sys.path, TESTS and CMU defined);
    its stdout lines. A child still running after `watchdog_s` fails the test."""
    # SIGINT gets Python's own handler back: a test run started in the background by a
    # non-interactive shell (`cmd &`) passes SIGINT ignored to every child, and a Python
    # started with it ignored never raises KeyboardInterrupt.
    prelude = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        f"sys.path.insert(0, {str(TESTS)!r}); TESTS = {str(TESTS)!r}; CMU = {str(CMU)!r}\n"
    )
    try:
        r = subprocess.run(
            [sys.executable, "-c", prelude + textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=watchdog_s,
            env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the child was still running after {watchdog_s} s: {e.stdout!r} {e.stderr!r}")
    assert r.returncode == 0, f"exit {r.returncode}: {r.stdout}\n{r.stderr}"
    return r.stdout.split()


def test_a_url_too_long_for_the_http_client_is_invalid_argument():
    # object_store panicked ("request must be valid: InvalidUri(TooLong)"): PanicException, a
    # BaseException that `except Exception` misses.
    url = "http://127.0.0.1:9/" + "a" * 66000 + ".svs"
    with pytest.raises(InvalidArgumentError, match="at most 8192") as e:
        slidestream.Slide(url)
    assert isinstance(e.value, Exception) and isinstance(e.value, ValueError)
    assert len(str(e.value)) < 400, "the message does not repeat the whole URL"
    for bad in ["http://127.0.0.1:9/a\nb.svs", "s3://bucket/a b.svs", "s3://bucket/" + "k" * 1025]:
        with pytest.raises(InvalidArgumentError):
            slidestream.Slide(bad, storage_options={"anonymous": True})


@needs_test_hooks
def test_a_panic_inside_the_core_is_a_slide_error_not_a_panic_exception():
    _slidestream._test_panic_in_next_call("injected")
    with pytest.raises(SlideError, match=r"internal error \(please report\): injected") as e:
        slidestream.Slide(CMU)
    assert type(e.value) is SlideError and isinstance(e.value, Exception)
    s = slidestream.Slide(CMU)
    for read in (lambda: s.read_region((0, 0), 0, (64, 64)), lambda: s.read_regions([(0, 0)], 0, (64, 64))):
        _slidestream._test_panic_in_next_call("in a read")
        with pytest.raises(SlideError, match="in a read"):
            read()
        assert read().shape[-3:-1] == (64, 64), "the slide stays usable"


_WAIT = """
import os, signal, threading, time
import slidestream
from _range_server import RangeServer

def ctrl_c(srv):
    # SIGINT (as Ctrl-C) once the server holds a request unanswered.
    srv.stalled.wait(60)
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGINT)

def outcome(fn):
    try:
        fn()
        return "completed"
    except KeyboardInterrupt:
        return "KeyboardInterrupt"
    except BaseException as e:
        return type(e).__name__
"""


@pytest.mark.parametrize("stall", ["head", "open-get"])
def test_ctrl_c_stops_an_open_whose_server_never_answers(stall):
    # Before: nothing happened until the request timeout, and the KeyboardInterrupt was lost.
    out = _child(
        _WAIT
        + f"""
srv = RangeServer(CMU, stall={stall == 'head'}, stall_get={stall == 'open-get'})
threading.Thread(target=ctrl_c, args=(srv,), daemon=True).start()
print(outcome(lambda: slidestream.Slide(srv.url())))
""",
        env=SLOW,
    )
    assert out == ["KeyboardInterrupt"]


def test_ctrl_c_stops_a_tile_read_whose_server_never_answers_and_the_slide_stays_usable():
    out = _child(
        _WAIT
        + """
srv = RangeServer(CMU)
s = slidestream.Slide(srv.url())
srv.stall.set()
threading.Thread(target=ctrl_c, args=(srv,), daemon=True).start()
print(outcome(lambda: s.read_region((0, 0), 0, (300, 300))))
srv.stall.clear()
print(s.read_region((0, 0), 0, (300, 300)).shape == (300, 300, 4))
""",
        env=SLOW,
    )
    assert out == ["KeyboardInterrupt", "True"]


def test_a_fifo_at_the_index_cache_entry_is_a_counted_miss_not_a_hang(tmp_path):
    # Before: the open read the FIFO and blocked forever, deaf to Ctrl-C.
    out = _child(
        f"""
import hashlib, os
import slidestream
from _range_server import RangeServer
srv = RangeServer(CMU)
url = srv.url()
entry = os.path.join({str(tmp_path)!r}, hashlib.sha256(url.encode()).hexdigest() + ".ssidx")
os.mkfifo(entry)
with slidestream.config.scope(SLIDESTREAM_REMOTE_INDEX_CACHE={str(tmp_path)!r}):
    st = slidestream.Slide(url).io_stats()["remote"]
    print(st["index_cache"], st["index_cache_rejected"])
    # The entry was rewritten as a regular file: the next open is served from it.
    print(os.path.isfile(entry) and not os.path.islink(entry))
    st = slidestream.Slide(url).io_stats()["remote"]
    print(st["index_cache"], st["index_cache_rejected"], st["requests"])
"""
    )
    assert out == ["miss", "1", "True", "hit", "0", "0"]


@needs_test_hooks
def test_ctrl_c_before_the_first_array_of_a_process_is_a_keyboard_interrupt():
    # Before: rust-numpy loaded NumPy's C API at the first array, ran Python code meanwhile
    # (the SIGINT handler raised there) and panicked: "PanicException: Failed to access
    # NumPy array API capsule: KeyboardInterrupt". The API is now loaded at import.
    out = _child(
        """
import slidestream
from slidestream import _slidestream
s = slidestream.Slide(CMU)
_slidestream._test_sigint_after_next_call()
try:
    s.read_region((0, 0), 0, (64, 64))
    print("completed")
except KeyboardInterrupt:
    print("KeyboardInterrupt")
except BaseException as e:
    print(type(e).__name__)
"""
    )
    assert out == ["KeyboardInterrupt"]
