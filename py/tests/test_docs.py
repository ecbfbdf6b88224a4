"""Every Python snippet of README.md and docs/python.md runs.

README.md's blocks run as written, from the repository root (they read the bundled
``assets/CMU-1-Small-Region.svs``). docs/python.md's blocks are fragments of one story that
name placeholder files (``"a.svs"``, ``"slide.svs"``, ``"fluo.ome.tif"``) and variables
(``paths``, ``slides``, ``rows``, ...): each runs in its own process, in a folder where those
files exist (copies of the test slides, a generated 4-channel OME-TIFF) after a short prelude
that defines those variables — the same for every block, so a block that uses a name the
prelude does not give fails. A block that needs torch, dask, distributed, zarr, monai or
tiatoolbox is skipped where that is not installed; one that reads on a GPU where none is usable.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import slidestream

REPO = Path(__file__).resolve().parents[2]
CMU = REPO / "assets" / "CMU-1-Small-Region.svs"


def _blocks(doc: str):
    text = (REPO / doc).read_text(encoding="utf-8")
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        line = text.count("\n", 0, m.start()) + 1
        out.append(pytest.param(doc, m.group(1), id=f"{doc}:{line}"))
    return out


def _needs(block: str):
    """The optional packages a block imports (in a block guarded by ``cuda_available()``, only
    its unindented imports count), and whether it reads on a GPU without such a guard."""
    guarded = "cuda_available()" in block
    need = set()
    for line in block.splitlines():
        if guarded and line[:1].isspace():
            continue
        m = re.match(r"\s*(?:import|from)\s+([\w.]+)", line)
        if m:
            for part in re.split(r",\s*", line.split("import", 1)[1]) if line.lstrip().startswith("import") else [m.group(1)]:
                root = part.strip().split(" ")[0].split(".")
                name = root[1] if root[0] == "slidestream" and len(root) > 1 else root[0]
                if name in ("torch", "dask", "distributed", "zarr", "monai", "tiatoolbox"):
                    need.add(name)
    gpu = "cuda" in block and not guarded
    return sorted(need), gpu


PRELUDE = textwrap.dedent(
    """
    import numpy as np
    import slidestream
    # The names docs/python.md's fragments take as given.
    paths = ["a.svs", "b.svs", "c.svs", "slide.svs"]
    slides = [slidestream.Slide(p) for p in paths]
    locs = [(0, 0), (700, 900), (1500, 2000)]
    rows = np.array([(0, 0, 0, 0), (1, 0, 512, 512), (2, 0, 1000, 1000), (3, 1, 200, 200)], np.int64)
    def fn(batch, rows):
        return {"score": batch.reshape(len(batch), -1).mean(axis=1).astype("f4")}
    def summarize(slide):
        return slide.dimensions
    def patch_stats(batch):
        return batch.reshape(len(batch), -1, 3).mean(axis=1).astype(np.float32).repeat(2, axis=1)[:, :4]
    """
)


def _workdir(tmp_path: Path, testdata: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    for name in ("a.svs", "b.svs", "c.svs"):
        shutil.copy(CMU, d / name)
    shutil.copy(testdata / "tcga-cr-7395-01a-01-ts1.svs", d / "slide.svs")  # two levels
    tifffile = pytest.importorskip("tifffile")
    data = np.random.default_rng(0).integers(0, 4000, (4, 1024, 1024), dtype=np.uint16)
    with tifffile.TiffWriter(d / "fluo.ome.tif", ome=True) as w:
        w.write(data, tile=(256, 256), subifds=1, metadata={"axes": "CYX", "Channel": {"Name": ["DAPI", "GFP", "Cy3", "Cy5"]}})
        w.write(data[:, ::2, ::2], tile=(256, 256), subfiletype=1)
    return d


def _run(code: str, cwd: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path(slidestream.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")] if p)
    env.setdefault("SLIDESTREAM_PROGRESS", "0")
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"the snippet failed:\n{code}\n--- stderr:\n{out.stderr[-4000:]}"


@pytest.mark.parametrize("doc, block", _blocks("README.md") + _blocks("docs/python.md"))
def test_snippet_runs(doc, block, tmp_path):
    need, gpu = _needs(block)
    for m in need:
        if importlib.util.find_spec(m) is None:
            pytest.skip(f"needs {m}")
    if gpu and not slidestream.cuda_available():
        pytest.skip("reads on a GPU")
    if doc == "README.md":
        _run(block, REPO)
    else:
        from _parity_helpers import locate_testdata

        _run(PRELUDE + "\n" + block, _workdir(tmp_path, locate_testdata()))


def test_every_doc_has_snippets():
    """The parametrisation above found the blocks (a change of fence style would skip them)."""
    assert len(_blocks("README.md")) >= 2 and len(_blocks("docs/python.md")) >= 10
