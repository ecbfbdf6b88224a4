"""Smoke test of benches/compare.py on a tiny workload with whichever readers are installed,
so the harness cannot rot. No timing assertions."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SLIDE = ROOT / "assets" / "CMU-1-Small-Region.svs"
_target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
BIN = next((p for p in (_target / "release" / "slidestream", _target / "debug" / "slidestream") if p.exists()),
           _target / "release" / "slidestream")


@pytest.mark.skipif(not BIN.exists(), reason="slidestream binary not built (run cargo build)")
def test_compare_runs_and_reports_every_reader(tmp_path):
    out = tmp_path / "r.json"
    res = subprocess.run(
        [sys.executable, str(ROOT / "benches" / "compare.py"), str(SLIDE), "--patches", "20", "--rounds", "1",
         "--size", "128", "--binary", str(BIN), "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert "| slidestream |" in res.stdout
    data = json.loads(out.read_text())
    rates = data["patches_per_s"]
    assert "slidestream" in rates and all(v > 0 for v in rates.values())
    # OpenSlide is a test requirement (scripts/requirements-test.txt), so it must be compared.
    assert any(k.startswith("openslide") for k in rates), rates
