"""Smoke test of benches/training_loop.py --quick (CPU rows on the test slide), so the harness
cannot rot. No timing assertions: only that the CPU rows ran, every other row says why not, and
the report is written."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benches" / "training_loop.py"


def test_quick_run_reports_every_row(tmp_path):
    cmd = [sys.executable, str(SCRIPT), "--quick", "--dir", str(tmp_path / "slides"), "--out", str(tmp_path / "out"),
           "--batches", "2", "--only", "rp-", "loader-cpu", "openslide", "cucim", "dataloader-cpu", "first-read"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "out" / "training_loop.jsonl").read_text().splitlines()]
    by = {r["row"]: r for r in rows}
    for name in ("rp-cpu-2", "loader-cpu-2", "loader-cpu-2-step", "openslide-2"):
        assert by[name]["status"] == "ok" and by[name]["patches_per_s"] > 0, by[name]
    assert 0 < by["loader-cpu-2-step"]["overlap_ratio"]
    for r in rows:
        assert r["status"] in ("ok", "skipped"), r
        if r["status"] == "skipped":
            assert r["reason"], r
    md = (tmp_path / "out" / "training_loop.md").read_text()
    assert "| rp-cpu-2 | ok |" in md
