"""What docs/python.md "Install" promises: the OpenSlide shim installs as a package, and the
extras cover every optional import."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import slidestream

REPO = Path(__file__).resolve().parents[2]


def test_openslide_shim_installs_and_is_the_drop_in(tmp_path):
    # pip builds it in an isolated environment with setuptools from the package index, from a
    # copy (setuptools writes build/ and *.egg-info beside the sources it builds).
    import shutil

    src = tmp_path / "shim"
    shutil.copytree(REPO / "py" / "openslide-shim", src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert (target / "openslide" / "__init__.py").is_file()
    pkg = str(Path(slidestream.__file__).resolve().parents[1])
    code = "import openslide, openslide.deepzoom, slidestream; assert openslide.OpenSlide is slidestream.OpenSlide; assert openslide.deepzoom.DeepZoomGenerator is slidestream.deepzoom.DeepZoomGenerator; print('ok')"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), pkg]))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


def test_extras_cover_every_optional_import():
    tomllib = pytest.importorskip("tomllib")
    meta = tomllib.loads((REPO / "py" / "pyproject.toml").read_text())["project"]
    extras = meta["optional-dependencies"]
    flat = " ".join(" ".join(v) for v in extras.values())
    # The optional packages slidestream's modules import, by the distribution that gives them.
    imported = set()
    for p in (REPO / "py" / "python" / "slidestream").rglob("*.py"):
        for m in re.finditer(r"^\s*(?:from|import) (PIL|torch|dask|distributed|pandas|zarr|tqdm|matplotlib)\b", p.read_text(), re.M):
            imported.add(m.group(1))
    dist = {"PIL": "pillow", "pandas": "dask[array,dataframe]"}
    for mod in sorted(imported):
        want = dist.get(mod, mod)
        assert want in flat, f"{mod} is imported by slidestream but no extra installs {want}"
    assert set(extras["all"]) >= {d for k, v in extras.items() if k != "all" for d in v}
    assert meta["dependencies"] == ["numpy>=1.22"]
