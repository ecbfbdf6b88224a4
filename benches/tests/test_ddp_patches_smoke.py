"""Smoke test of benches/ddp_patches.py, so the harness cannot rot: its helpers (world sizes,
slide discovery, the device check, the report's arithmetic) without torch; the refusals as a
subprocess; and, when torch is installed, a whole run on the CPU path (``--device cpu``,
``gloo``, two processes) writing its JSON report. No timing assertions."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benches" / "ddp_patches.py"
DATA = pathlib.Path(os.environ.get("SLIDESTREAM_TESTDATA", ROOT.parent / "shared" / "testdata"))
CMU = DATA / "CMU-1-Small-Region.svs"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def load():
    spec = importlib.util.spec_from_file_location("ddp_patches", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # imports without torch
    return mod


def test_helpers_without_torch(tmp_path):
    m = load()
    assert "torch" not in sys.modules or HAS_TORCH
    assert m.parse_world_sizes("1,2") == [1, 2] and m.parse_world_sizes("4") == [4]
    for bad in ("", "0", "1,1", "a", "2,-1"):
        with pytest.raises(m.Refused):
            m.parse_world_sizes(bad)
    (tmp_path / "a.svs").write_bytes(b"x")
    (tmp_path / "b.tiff").write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("x")
    found = m.find_slides([str(tmp_path), str(tmp_path / "*.svs")])
    assert found == [str(tmp_path / "a.svs"), str(tmp_path / "b.tiff")]
    with pytest.raises(m.Refused):
        m.find_slides([str(tmp_path / "nothing-*.svs")])
    m.check_devices([1, 2], "cuda", 2)
    m.check_devices([4], "cpu", 0)
    with pytest.raises(m.Refused, match="needs 2 GPUs; torch.cuda.device_count\\(\\) is 1"):
        m.check_devices([1, 2], "cuda", 1)
    one = m.summarize(1, [{"rank": 0, "patches": 1000, "seconds": 2.0}])
    two = m.summarize(2, [{"rank": 1, "patches": 1000, "seconds": 1.25}, {"rank": 0, "patches": 1000, "seconds": 1.0}])
    assert one["total_patches_per_s"] == 500.0
    assert [r["rank"] for r in two["ranks"]] == [0, 1] and [r["patches_per_s"] for r in two["ranks"]] == [1000.0, 800.0]
    assert two["seconds"] == 1.25 and two["total_patches_per_s"] == 1600.0, "the slowest rank's time"
    ups = m.speedups([one, two])
    assert ups == {"1": 1.0, "2": 3.2}
    assert "| 2 | 1000, 800 | 1600 | 3.20 |" in m.markdown([one, two], ups)
    with pytest.raises(ValueError):
        m.summarize(2, [{"rank": 0, "patches": 1, "seconds": 1.0}])


def run_script(*args, timeout=600):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(not CMU.exists(), reason=f"test slide not found under {DATA}")
def test_refusals():
    res = run_script("--slides", str(CMU), "--world-sizes", "0")
    assert res.returncode == 2 and "--world-sizes" in res.stderr
    res = run_script("--slides", str(CMU.parent / "no-such-*.svs"))
    assert res.returncode == 2 and "no slide found" in res.stderr
    if not HAS_TORCH:
        res = run_script("--slides", str(CMU))
        assert res.returncode == 2 and "needs PyTorch" in res.stderr
    else:
        res = run_script("--slides", str(CMU), "--world-sizes", "1,999")
        assert res.returncode == 2 and "needs 999 GPUs" in res.stderr


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
@pytest.mark.skipif(not CMU.exists(), reason=f"test slide not found under {DATA}")
@pytest.mark.parametrize("sampler", ["grid", "random"])
def test_a_cpu_run_of_two_world_sizes_writes_its_report(tmp_path, sampler):
    out = tmp_path / "ddp.json"
    res = run_script("--slides", str(CMU), "--device", "cpu", "--world-sizes", "1,2", "--batch", "8", "--size", "64", "--warmup", "1",
                     "--batches", "3", "--sampler", sampler, "--min-tissue", "0", "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    rep = json.loads(out.read_text())
    assert [r["world_size"] for r in rep["runs"]] == [1, 2]
    for r in rep["runs"]:
        assert [x["rank"] for x in r["ranks"]] == list(range(r["world_size"]))
        assert all(x["patches"] == 3 * 8 and x["patches_per_s"] > 0 for x in r["ranks"])
        assert r["patches"] == 24 * r["world_size"]
    assert set(rep["speedup"]) == {"1", "2"} and rep["speedup"]["1"] == 1.0
    assert "| 2 |" in res.stdout
