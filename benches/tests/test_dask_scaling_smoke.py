"""Smoke test of benches/dask_scaling.py (1 and 2 workers over copies of the bundled slide), so
the harness cannot rot. No timing assertions: only that both runs finished, counted the same
slides and patches and wrote the report."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benches" / "dask_scaling.py"
CMU = ROOT / "assets" / "CMU-1-Small-Region.svs"


def test_two_worker_counts(tmp_path):
    pytest.importorskip("distributed")
    pytest.importorskip("zarr")
    d = tmp_path / "slides"
    d.mkdir()
    for i in range(3):
        os.link(CMU, d / f"s{i}.svs")
    out = tmp_path / "scaling.json"
    cmd = [sys.executable, str(SCRIPT), str(d), "--workers", "1,2", "--level", "0", "--patch", "128", "--thumbnail", "256", "--out", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    rep = json.loads(out.read_text())
    assert [r["workers"] for r in rep["results"]] == [1, 2]
    a, b = rep["results"]
    assert a["slides"] == b["slides"] == 3 and a["patches"] == b["patches"] > 0
    assert a["efficiency_total"] == 1.0 and b["efficiency_total"] > 0
