"""Smoke tests of benches/model_fed.py --quick, so the harness cannot rot. No timing
assertions. Without torch every row must be reported as skipped with a reason; with CPU torch
and torchvision the CPU rows must run (tiny models on 48² crops)."""
import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benches" / "model_fed.py"


def run_quick(tmp_path, *only):
    cmd = [sys.executable, str(SCRIPT), "--quick", "--dir", str(tmp_path / "slides"), "--out", str(tmp_path / "out"),
           "--models", "resnet18", "--extras", "--only", *only]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "out" / "model_fed.jsonl").read_text().splitlines()]
    for r in rows:
        assert r["status"] in ("ok", "skipped"), r
        if r["status"] == "skipped":
            assert r["reason"], r
    return {r["row"]: r for r in rows}, (tmp_path / "out" / "model_fed.md").read_text()


def test_quick_run_reports_every_row(tmp_path):
    by, md = run_quick(tmp_path, "resnet18-")
    assert {"resnet18-synthetic", "resnet18-loader-device", "resnet18-loader-bg", "resnet18-loader-other-proc", "resnet18-loader-cpu",
            "resnet18-dataset-workers", "resnet18-cucim-workers", "resnet18-openslide-workers", "resnet18-loader-bg-sync",
            "resnet18-loader-cpu-pin"} <= set(by)
    assert "| resnet18-synthetic |" in md and "| resnet18, training |" in md


@pytest.mark.skipif(importlib.util.find_spec("torch") is None or importlib.util.find_spec("torchvision") is None,
                    reason="needs torch and torchvision")
def test_quick_cpu_rows_run(tmp_path):
    by, md = run_quick(tmp_path, "resnet18-synthetic", "resnet18-loader-cpu", "resnet18-dataset-workers", "resnet18-openslide-workers")
    for name in ("resnet18-synthetic", "resnet18-loader-cpu", "resnet18-dataset-workers"):
        assert by[name]["status"] == "ok" and by[name]["images_per_s"] > 0, by[name]
    assert by["resnet18-loader-cpu"]["of_synthetic"] > 0
    assert "| resnet18-loader-cpu | ok |" in md
