"""Smoke test of benches/compare.py on a tiny workload with whichever readers are installed,
so the harness cannot rot. No timing assertions (only that every rate is positive)."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

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
           "--scan-tiles", "12", "--rounds", "1", "--cache", "warm", "--out", str(out), "--name", "smoke",
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
    for wl in ("rand256-1t", "rand512-1t", "rand256-mt", "rand512-mt", "scan-l0", "batch1024"):
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
