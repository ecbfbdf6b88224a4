"""Smoke test of benches/compare.py on a tiny workload with whichever readers are installed,
so the harness cannot rot. No timing assertions (only that every rate is positive)."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
SLIDE = ROOT / "assets" / "CMU-1-Small-Region.svs"
COMPARE = ROOT / "benches" / "compare.py"
_target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
BIN = next((p for p in (_target / "release" / "slidestream", _target / "debug" / "slidestream") if p.exists()), None)


def _has(module):
    return importlib.util.find_spec(module) is not None


def _load_compare():
    spec = importlib.util.spec_from_file_location("compare", COMPARE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_compare_runs_and_reports_every_present_reader(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, str(COMPARE), str(SLIDE), "--quick", "--testdata", "none", "--patches", "8", "--batch", "8",
           "--batch-large", "12", "--scan-tiles", "12", "--rounds", "1", "--cache", "warm", "--out", str(out), "--name", "smoke",
           "--binary", str(BIN) if BIN else str(tmp_path / "no-such-binary")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    md = (out / "compare-smoke.md").read_text()
    data = json.loads((out / "compare-smoke.json").read_text())
    assert res.stdout.strip() and "| rand256-1t" in md

    expected = {"slidestream", "slidestream-1dt"}
    if BIN:
        expected.add("slidestream-cli")
    expected |= {name for name, module in (("openslide", "openslide"), ("tiffslide", "tiffslide"), ("fastslide", "fastslide"),
                                           ("cucim-cpu", "cucim")) if _has(module)}
    run = set(data["readers_run"])
    assert expected <= run, (expected - run, data["unavailable"])
    # OpenSlide is a test requirement (scripts/requirements-test.txt), so it must be compared.
    assert "openslide" in run
    # Readers that are not installed are reported as unavailable, with a reason.
    for name in set(data["args"]["readers"]) - run:
        assert data["unavailable"].get(name), name

    (slide,) = data["slides"]
    results = slide["results"]
    # every workload that applies to a one-level 2220x2967 slide ran for every present reader
    for wl in ("rand256-1t", "rand512-1t", "rand256-mt", "rand512-mt", "scan-l0", "batch1024", "batch4096"):
        entry = results[f"{wl}|warm"]
        for r in run:
            s = entry["readers"][r]
            if "na" in s:
                assert r == "slidestream-cli" and wl != "rand256-1t" and wl != "rand512-1t", (wl, r, s)
                continue
            assert "error" not in s, (wl, r, s)
            assert s["patches_per_s"] > 0 and s["mp_per_s"] > 0 and s["ratio"] > 0, (wl, r, s)
            assert s["n"] > 0 and len(s["runs_s"]) == 1
            assert data["labels"][r] in md
    assert results["rand256-l1|warm"]["na"]  # the slide has one level
    assert results["batch1024|warm"]["readers"]["slidestream"]["api"] == "batch"
    assert results["batch1024|warm"]["readers"]["openslide"]["api"] == "loop"
    assert results["batch4096|warm"]["readers"]["slidestream"]["n"] == 12
    assert not data["failures"] and not data["dropped"]
    # the CUDA row is skipped cleanly (with its reason) unless this build has a CUDA path
    import slidestream

    if not (callable(getattr(slidestream, "cuda_available", None)) and slidestream.cuda_available()):
        assert "slidestream-cuda" not in run and "cuda_available" in data["unavailable"]["slidestream-cuda"]
    # readers agree on the pixels of a sample (OpenSlide is the reference implementation)
    assert slide["diffs"]["openslide"] is not None and slide["diffs"]["openslide"] <= 2

    if _has("matplotlib"):
        pngs = sorted(p.name for p in out.glob("*.png"))
        assert pngs == ["compare-smoke-CMU-1-Small-Region-rates.png", "compare-smoke-CMU-1-Small-Region-ratios.png"], pngs
        assert all((out / p).stat().st_size > 1000 for p in pngs)
        assert "compare-smoke-CMU-1-Small-Region-rates.png" in md
    else:
        assert "plots skipped" in data.get("plot_note", "")

    # the report can be re-written from its JSON without measuring again
    again = tmp_path / "again"
    res = subprocess.run([sys.executable, str(COMPARE), "--from-json", str(out / "compare-smoke.json"), "--out", str(again)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (again / "compare-smoke.md").read_text() == md


def test_cold_fallback_reads_a_fresh_copy(tmp_path):
    """Where the page cache cannot be dropped, a cold run reads a fresh copy of the file."""
    compare = _load_compare()
    src = tmp_path / "slide.svs"
    src.write_bytes(b"x" * 100_000)
    pc = compare.PageCache(False)
    pc.method = "fresh-copy"
    path, cleanup = pc.cold(str(src))
    assert path != str(src) and open(path, "rb").read() == src.read_bytes()
    cleanup()
    assert not os.path.exists(path)


def test_locations_are_seeded_and_level_aware():
    compare = _load_compare()
    import argparse

    args = argparse.Namespace(patches=50, batch=16, testdata_patches=10, scan_tiles=7, seed=3)
    dims, downs, tile = [[48000, 48000], [12000, 12000], [3000, 3000]], [1.0, 4.0, 16.0], [240, 240]
    a, _ = compare.make_locs("rand256-l2", dims, downs, tile, args)
    b, _ = compare.make_locs("rand256-l2", dims, downs, tile, args)
    assert (a == b).all() and a.shape == (50, 6)
    assert (a[:, 0] == a[:, 2] * 16).all() and (a[:, 2] <= 3000 - 256).all()  # level-0 = level-native × downsample
    scan, _ = compare.make_locs("scan-l0", dims, downs, tile, args)
    assert scan.shape[0] == 7 and scan[1, 0] == 240  # row-major, capped
    none, why = compare.make_locs("rand256-l2", dims[:1], downs[:1], tile, args)
    assert none is None and "level 2" in why


def _dead(pid):
    """True once `pid` is gone or a zombie (killed, not reaped yet by its new parent)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_hung_and_crashed_measurements_are_recorded_and_the_run_goes_on(tmp_path):
    """A measurement that hangs is killed (its whole process group) after --measure-timeout-s
    and recorded as a timeout; one that aborts is recorded as crashed; the run continues."""
    out, pidfile = tmp_path / "out", tmp_path / "pids"
    env = dict(os.environ, COMPARE_TEST_FAULT="slidestream-1dt=hang,openslide=crash", COMPARE_TEST_FAULT_PIDFILE=str(pidfile))
    cmd = [sys.executable, str(COMPARE), str(SLIDE), "--quick", "--testdata", "none", "--patches", "8", "--batch", "8",
           "--rounds", "2", "--cache", "warm", "--readers", "slidestream,slidestream-1dt,openslide", "--workloads", "rand256-1t,batch1024",
           "--measure-timeout-s", "2", "--max-timeouts", "1", "--out", str(out), "--name", "fault", "--no-plots",
           "--binary", str(tmp_path / "no-such-binary")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads((out / "compare-fault.json").read_text())
    md = (out / "compare-fault.md").read_text()
    first, second = data["slides"][0]["results"]["rand256-1t|warm"], data["slides"][0]["results"]["batch1024|warm"]
    hung = first["readers"]["slidestream-1dt"]
    assert hung["status"] == "timeout" and hung["outcomes"][1] == "skipped", hung  # round 2 not retried
    assert first["readers"]["openslide"]["status"] == "crashed" and first["readers"]["openslide"]["signal"] == "SIGABRT"
    assert first["readers"]["slidestream"]["patches_per_s"] > 0 and second["readers"]["slidestream"]["patches_per_s"] > 0
    # --max-timeouts 1: the hung reader is dropped for the rest of the run; the crashing one is not
    assert "slidestream-1dt" in data["dropped"] and second["readers"]["slidestream-1dt"]["status"] == "skipped"
    assert second["readers"]["openslide"]["status"] == "crashed"
    statuses = sorted((f["reader"], f["status"]) for f in data["failures"])
    assert statuses == [("openslide", "crashed")] * 4 + [("slidestream-1dt", "timeout")], statuses
    assert "**timed out** after 2 s" in md and "**crashed** (SIGABRT)" in md and "## Failed runs" in md
    # the hung worker's child (same process group) was killed with it
    pids = [int(x) for x in pidfile.read_text().split()]
    assert len(pids) == 1
    deadline = time.monotonic() + 10
    while not _dead(pids[0]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _dead(pids[0])


FAKE_CUDA = textwrap.dedent('''
    # Test double of slidestream's CUDA Python API (cuda_available, read_region(s)(device="cuda"),
    # gpu_stats) over the CPU reads, so compare.py's slidestream-cuda code runs without a GPU.
    import slidestream

    _rr, _rrs = slidestream.Slide.read_region, slidestream.Slide.read_regions
    _st = dict(io_path="posix", io_reason="", posix_bytes=0, cufile_compat_bytes=0, tile_bytes=0, decoded_hardware=0,
               decoded_cpu=0, cache_hits=0, cache_misses=0, read_amplification=0.0, fake_batch_calls=0)

    def _count(n, px):
        _st["decoded_hardware"] += n
        _st["cache_misses"] += n
        _st["tile_bytes"] += px
        _st["posix_bytes"] += px

    def read_region(self, location, level, size, device="cpu"):
        out = _rr(self, location, level, size)
        if device == "cuda":
            _count(1, size[0] * size[1])
        return out

    def read_regions(self, locations, level, size, device="cpu"):
        out = _rrs(self, locations, level, size)
        if device == "cuda":
            _count(len(out), len(out) * size[0] * size[1])
            _st["fake_batch_calls"] += 1
        return out

    def gpu_stats(device=0):
        d = dict(_st)
        d["read_amplification"] = d["posix_bytes"] / d["tile_bytes"] if d["tile_bytes"] else 0.0
        return d

    slidestream.Slide.read_region, slidestream.Slide.read_regions = read_region, read_regions
    slidestream.cuda_available, slidestream.gpu_stats = (lambda: True), gpu_stats
''')


def test_slidestream_cuda_row_with_a_fake_cuda_api(tmp_path):
    """The slidestream-cuda row against a test double of the CUDA API (no GPU here): per-patch
    reads with device="cuda", one read_regions per batch, the scan in chunks of --scan-batch
    tiles of one size, gpu_stats of the timed reads in the JSON and the report."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(FAKE_CUDA)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    cmd = [sys.executable, str(COMPARE), str(SLIDE), "--quick", "--testdata", "none", "--patches", "8", "--batch", "8",
           "--batch-large", "12", "--scan-tiles", "12", "--scan-batch", "5", "--rounds", "1", "--cache", "warm",
           "--readers", "slidestream,slidestream-cuda", "--workloads", "rand256-1t,rand256-mt,scan-l0,batch1024,batch4096",
           "--out", str(out), "--name", "fakecuda", "--no-plots", "--binary", str(tmp_path / "no-such-binary")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads((out / "compare-fakecuda.json").read_text())
    md = (out / "compare-fakecuda.md").read_text()
    assert "slidestream-cuda" in data["readers_run"], data["unavailable"]
    (slide,) = data["slides"]
    assert slide["diffs"]["slidestream-cuda"] == 0  # the probe's device sample, copied back
    res = slide["results"]
    for wl, api, calls in (("rand256-1t", "loop", 0), ("rand256-mt", "mt", 0), ("batch1024", "batch", 1), ("batch4096", "batch", 1),
                           ("scan-l0", "batch", 4)):  # 12 tiles: 9 of 240², 1 of 60×240, then 2 of 240²: 5+4, 1, 2
        s = res[f"{wl}|warm"]["readers"]["slidestream-cuda"]
        assert "error" not in s and s["patches_per_s"] > 0 and s["api"] == api, (wl, s)
        timed = s["gpu_stats_timed"]  # the counters of the timed reads only (the warm-up read excluded)
        assert timed["decoded_hardware"] == s["n"] and timed["fake_batch_calls"] == calls, (wl, timed)
        assert timed["read_amplification"] == 1.0 and timed["io_path"] == "posix"
        assert s["gpu_stats"]["decoded_hardware"] == s["n"] + 1  # cumulative: the warm-up read too
    assert "GPU path of `slidestream-cuda`" in md and "I/O path posix; read amplification 1.00" in md
    assert "GPU targets (`slidestream-cuda`)" in md and "not met" in md
