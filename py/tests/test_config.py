"""slidestream.config (the settings table from Python) and bad SLIDESTREAM_* values.

A bad value raises slidestream.ConfigError, a ValueError naming the variable: through
config.set, and from the environment at the first open (checked in a fresh interpreter, since
the process reads some settings once). Per-process settings and environment cases run in
subprocesses; the in-process tests use per-open settings and restore every override.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import slidestream
from slidestream import config
from _parity_helpers import locate_testdata


def _clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIDESTREAM_")}
    env.update(extra)
    return env


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_clean_env(**env))


def test_table_lists_every_setting_with_its_default():
    rows = config.table()
    assert [r.name for r in rows] == config.names()
    assert len(set(config.names())) == len(rows) >= 14
    for want in ("SLIDESTREAM_CACHE_BYTES", "SLIDESTREAM_COMPAT_MODE", "SLIDESTREAM_MAX_REGION_BYTES"):
        assert want in config.names()
    for r in rows:
        assert r.name.startswith("SLIDESTREAM_") and r.accepted and r.doc and r.unit
        assert isinstance(r.per_process, bool)
    assert {r.name for r in rows if r.per_process} >= {"SLIDESTREAM_CACHE_BYTES", "SLIDESTREAM_COMPAT_MODE"}
    # Without overrides or environment, get() is the table's default (fresh interpreter).
    code = "from slidestream import config\nfor r in config.table(): assert config.get(r.name) == r.default, r\nprint('ok')"
    r = _run(code)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_set_get_reset_and_short_names():
    name = "SLIDESTREAM_MAX_REGION_BYTES"
    before = config.get(name)
    try:
        config.set(name, 1 << 20)
        assert config.get(name) == str(1 << 20)
        assert config.get("max_region_bytes") == config.get("MAX_REGION_BYTES") == str(1 << 20)
        config.set("partial_decode_max_fraction", 0.25)
        assert config.get("SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION") == "0.25"
    finally:
        config.reset(name)
        config.reset("partial_decode_max_fraction")
    assert config.get(name) == before


def test_bad_values_raise_config_error_and_change_nothing():
    name = "SLIDESTREAM_MAX_REGION_BYTES"
    before = config.get(name)
    for bad in ("lots", "-5", "0", "1.5", ""):
        with pytest.raises(slidestream.ConfigError) as ei:
            config.set(name, bad)
        assert isinstance(ei.value, ValueError) and isinstance(ei.value, slidestream.SlideError)
        assert name in str(ei.value)
        assert config.get(name) == before
    with pytest.raises(slidestream.ConfigError, match="SLIDESTREAM_COMPAT_MODE"):
        config.set("compat_mode", "of")
    with pytest.raises(slidestream.ConfigError, match="SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION"):
        config.set("partial_decode_max_fraction", 2)
    with pytest.raises(slidestream.InvalidArgumentError, match="unknown setting"):
        config.set("SLIDESTREAM_NO_SUCH_THING", "1")
    with pytest.raises(ValueError):
        config.get("no_such_thing")
    with pytest.raises(TypeError):
        config.set("max_region_bytes", [1])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        config.get(5)  # type: ignore[arg-type]


def test_scope_restores_previous_overrides_and_their_absence():
    a, b = "SLIDESTREAM_MAX_REGION_BYTES", "SLIDESTREAM_PLAN_MAX_GAP_BYTES"
    default_a, default_b = config.get(a), config.get(b)
    with config.scope(max_region_bytes=1000, plan_max_gap_bytes=0):
        assert (config.get(a), config.get(b)) == ("1000", "0")
        with config.scope({a: "2000"}):
            assert config.get(a) == "2000"
        assert config.get(a) == "1000"
        with pytest.raises(RuntimeError):
            with config.set(a, 3000):
                assert config.get(a) == "3000"
                raise RuntimeError("leaves the block")
        assert config.get(a) == "1000"
    assert (config.get(a), config.get(b)) == (default_a, default_b)
    # All or nothing: a bad value later in the same scope undoes the earlier ones.
    with pytest.raises(slidestream.ConfigError):
        config.scope(max_region_bytes=1000, plan_max_gap_bytes="x")
    assert config.get(a) == default_a
    # An override that was there before a scope is there after it.
    config.set(a, 5000)
    try:
        with config.scope(max_region_bytes=6000):
            assert config.get(a) == "6000"
        assert config.get(a) == "5000"
    finally:
        config.reset(a)
    assert config.get(a) == default_a


def test_per_open_settings_apply_to_slides_opened_in_the_scope():
    path = locate_testdata() / "boxes.tiff"
    with config.scope(max_region_bytes=1000):
        with slidestream.Slide(path) as s:
            with pytest.raises(slidestream.LimitsExceededError):
                s.read_region((0, 0), 0, (64, 64))
            with pytest.raises(slidestream.LimitsExceededError):
                s.read_regions([(0, 0)], 0, (64, 64))
    with slidestream.Slide(path) as s:
        assert s.read_region((0, 0), 0, (64, 64)).shape == (64, 64, 4)
        assert np.asarray(s.read_regions([(0, 0)], 0, (64, 64))).shape == (1, 64, 64, 3)


@pytest.mark.parametrize(
    "variable, value",
    [("SLIDESTREAM_COMPAT_MODE", "of"), ("SLIDESTREAM_CACHE_BYTES", "lots"), ("SLIDESTREAM_CACHE_BYTES", "12k"), ("SLIDESTREAM_MAX_REGION_BYTES", "-1")],
)
def test_bad_environment_value_raises_value_error_at_first_open(variable, value):
    path = str(locate_testdata() / "boxes.tiff")
    code = (
        "import slidestream\n"
        "from slidestream import config\n"
        "for call in (lambda: slidestream.Slide(PATH), lambda: slidestream.OpenSlide(PATH), lambda: config.get(VAR)):\n"
        "    try:\n"
        "        call()\n"
        "    except ValueError as e:\n"
        "        assert isinstance(e, slidestream.ConfigError), type(e)\n"
        "        assert VAR in str(e) and repr(VAL)[1:-1] in str(e), str(e)\n"
        "    else:\n"
        "        raise SystemExit('no error')\n"
        "print('ok')\n"
    ).replace("PATH", repr(path)).replace("VAR", repr(variable)).replace("VAL", repr(value))
    r = _run(code, **{variable: value})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
    # A good override wins over the bad environment value.
    good = {"SLIDESTREAM_COMPAT_MODE": "on", "SLIDESTREAM_CACHE_BYTES": "1048576", "SLIDESTREAM_MAX_REGION_BYTES": "1048576"}[variable]
    code = (
        f"import slidestream\nslidestream.config.set({variable!r}, {good!r})\n"
        f"s = slidestream.Slide({path!r})\nprint(s.read_region((0, 0), 0, (8, 8)).shape)\n"
    )
    r = _run(code, **{variable: value})
    assert r.returncode == 0 and r.stdout.strip() == "(8, 8, 4)", r.stdout + r.stderr


def test_per_process_settings_cannot_change_once_in_use():
    path = str(locate_testdata() / "boxes.tiff")
    code = (
        "import slidestream\nfrom slidestream import config\n"
        "config.set('cache_bytes', 1 << 20)\n"
        f"s = slidestream.Slide({path!r})\n"
        "assert s.cache_stats()['capacity_bytes'] == 1 << 20, s.cache_stats()\n"
        "config.set('cache_bytes', 1 << 20)  # the same value: accepted\n"
        "try:\n"
        "    config.set('cache_bytes', 1 << 21)\n"
        "except slidestream.InvalidArgumentError as e:\n"
        "    assert 'SLIDESTREAM_CACHE_BYTES' in str(e)\n"
        "else:\n"
        "    raise SystemExit('changed a setting in use')\n"
        "assert config.get('cache_bytes') == str(1 << 20)\n"
        "print('ok')\n"
    )
    r = _run(code)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_open_slide_does_not_hide_a_bad_setting_behind_pillow():
    """A bad setting is not a verdict on the file: open_slide raises ConfigError for a plain
    image too, instead of falling back to Pillow."""
    png = str(locate_testdata() / "reference" / "boxes.tiff" / "center_l0.png")
    code = (
        "import slidestream\n"
        "try:\n"
        f"    slidestream.open_slide({png!r})\n"
        "except slidestream.ConfigError as e:\n"
        "    print('ConfigError')\n"
    )
    r = _run(code, SLIDESTREAM_COMPAT_MODE="of")
    assert r.returncode == 0 and r.stdout.strip() == "ConfigError", r.stdout + r.stderr


@pytest.mark.parametrize("preset", [None, "4"])
def test_import_raises_cuda_connections_unless_set(preset):
    """`import slidestream` gives the process 32 CUDA hardware work queues when
    CUDA_DEVICE_MAX_CONNECTIONS is unset (the device engine's streams must not share a queue with
    a model's stream), and keeps a value the user set."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    if preset is not None:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = preset
    code = "import os, slidestream; print(os.environ['CUDA_DEVICE_MAX_CONNECTIONS'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == (preset or "32")


def test_decode_threads_is_fixed_at_first_read_and_changes_are_not_silent(tmp_path):
    """SLIDESTREAM_DECODE_THREADS sizes the decode pool at the first open of a fresh process;
    config.set to another value afterwards is refused; a later RAYON_NUM_THREADS change warns
    (once) at the next open."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    cmu = Path(__file__).resolve().parents[2] / "assets" / "CMU-1-Small-Region.svs"
    code = textwrap.dedent(
        f"""
        import os, warnings
        import slidestream
        slidestream.config.set("decode_threads", 3)
        s = slidestream.Slide({str(cmu)!r})
        s.read_regions([(0, 0), (500, 500), (1000, 1000), (1500, 1500)], 0, (256, 256))
        import glob, re
        comms = [open(p).read().strip() for p in glob.glob("/proc/self/task/*/comm")]
        print("pool", slidestream.config.get("decode_threads"), sum(bool(re.fullmatch(r"slidestream-\\d+", c)) for c in comms))
        try:
            slidestream.config.set("decode_threads", 5)
            print("set: accepted")
        except slidestream.InvalidArgumentError as e:
            print("set: refused", "DECODE_THREADS" in str(e))
        slidestream.config.set("decode_threads", 3)  # the value in use: accepted
        os.environ["RAYON_NUM_THREADS"] = "7"
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            slidestream.Slide({str(cmu)!r}).read_region((0, 0), 0, (8, 8))
            slidestream.Slide({str(cmu)!r}).read_region((0, 0), 0, (8, 8))
        print("warnings", len(w), [str(x.message)[:60] for x in w])
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RAYON_NUM_THREADS", "SLIDESTREAM_DECODE_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "pool 3 3" in lines, lines  # three decode threads named slidestream-N
    assert "set: refused True" in lines
    w = [ln for ln in lines if ln.startswith("warnings")][0]
    assert w.startswith("warnings 1") and "RAYON_NUM_THREADS changed from unset to 7" in w
    with pytest.raises(slidestream.ConfigError):
        slidestream.config.set("decode_threads", 0)
    with pytest.raises(slidestream.ConfigError):
        slidestream.config.set("decode_threads", 2000)


_NICE_CODE = """
import glob, json, os, re, sys
import numpy as np
import slidestream
from slidestream.torch import PatchLoader
s = slidestream.Slide(sys.argv[1])
# A read of many patches builds the decode pool and the I/O pool; a PatchLoader starts its
# read-ahead threads (kept until closed).
s.read_regions([(x, y) for x in range(0, 1800, 300) for y in range(0, 1800, 300)], 0, (256, 256))
class Rows:
    def sample(self, n):
        return np.array([[0, 0, 64 * i, 64 * i] for i in range(n)], dtype=np.int64)
try:
    ld = PatchLoader([s], Rows(), (64, 64), batch_size=4, num_batches=50, prefetch=2, readers=2)
    next(iter(ld))
except ImportError:  # no torch: the pools' threads are still checked
    ld = None
def nice(task):
    with open(task + "/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])  # field 19 of proc(5): nice
got = {}
for t in glob.glob("/proc/self/task/*"):
    try:
        comm = open(t + "/comm").read().strip()
        got.setdefault(re.sub(r"\\d+$", "N", comm), set()).add(nice(t))
    except OSError:
        pass  # a thread that ended meanwhile
main = nice("/proc/self/task/%d" % os.getpid())
print(json.dumps({"main": main, "threads": {k: sorted(v) for k, v in got.items()}, "set": slidestream.config.get("thread_nice")}))
try:
    slidestream.config.set("thread_nice", 3)
    print("set: accepted")
except slidestream.InvalidArgumentError as e:
    print("set: refused", "SLIDESTREAM_THREAD_NICE" in str(e))
if ld is not None:
    ld.close()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
@pytest.mark.parametrize("value", [None, "7"])
def test_thread_nice_lowers_only_slidestreams_own_threads(value):
    """SLIDESTREAM_THREAD_NICE raises the nice value of the decode pool, the I/O pool and
    PatchLoader's read-ahead threads by the increment, never the caller's thread; fixed for the
    process at the first open (config.set to another value is refused)."""
    import json
    from pathlib import Path

    cmu = Path(__file__).resolve().parents[2] / "assets" / "CMU-1-Small-Region.svs"
    env = _clean_env(**({"SLIDESTREAM_THREAD_NICE": value} if value else {}), SLIDESTREAM_DECODE_THREADS="2", SLIDESTREAM_IO_DEPTH="4")
    out = subprocess.run([sys.executable, "-c", _NICE_CODE, str(cmu)], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    got = json.loads(lines[0])
    base, inc = got["main"], int(value or 0)
    want = min(19, base + inc)
    threads = got["threads"]
    assert threads.get("slidestream-N") == [want], threads  # the decode pool
    # The I/O pool exists only once a read went past the page cache; PatchLoader needs torch.
    for name in ("slidestream-io-N", "slidestream-prefetch-N"):
        assert threads.get(name, [want]) == [want], threads
    others = {k: v for k, v in threads.items() if not k.startswith("slidestream-")}
    assert all(v == [base] for v in others.values()), others  # the caller's threads keep theirs
    assert got["set"] == (value or "0")
    assert "set: refused True" in lines, lines


@pytest.mark.parametrize("bad", ["20", "-1", "high"])
def test_thread_nice_rejects_bad_values(bad):
    with pytest.raises(slidestream.ConfigError, match="SLIDESTREAM_THREAD_NICE"):
        config.set("thread_nice", bad)
    from pathlib import Path

    cmu = Path(__file__).resolve().parents[2] / "assets" / "CMU-1-Small-Region.svs"
    out = subprocess.run([sys.executable, "-c", "import sys, slidestream\ntry:\n    slidestream.Slide(sys.argv[1])\nexcept slidestream.ConfigError as e:\n    print('ConfigError', e)\n", str(cmu)],
                         capture_output=True, text=True, timeout=120, env=_clean_env(SLIDESTREAM_THREAD_NICE=bad))
    assert out.returncode == 0 and out.stdout.startswith("ConfigError") and "SLIDESTREAM_THREAD_NICE" in out.stdout, (out.stdout, out.stderr[-2000:])
