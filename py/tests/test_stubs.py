"""The type stubs of the extension (slidestream/_slidestream.pyi) and the inline annotations of
the pure-Python modules agree with the runtime package: ``python -m mypy.stubtest slidestream``
must report nothing (entries in py/stubtest-allowlist.txt excepted). Skipped without mypy."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

PY_DIR = pathlib.Path(__file__).resolve().parents[1]


def test_stubtest_passes(tmp_path):
    pytest.importorskip("mypy.stubtest")
    cmd = [sys.executable, "-m", "mypy.stubtest", "slidestream", "--mypy-config-file", str(PY_DIR / "pyproject.toml")]
    allowlist = PY_DIR / "stubtest-allowlist.txt"
    if allowlist.exists():
        cmd += ["--allowlist", str(allowlist)]
    # Run from an empty folder so mypy's cache stays out of the source tree.
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_stub_covers_every_runtime_member():
    """Every public method / property of the compiled Slide appears in the stub with a
    docstring (stubtest checks presence and signatures, not documentation)."""
    import ast

    from slidestream import _slidestream

    stub = ast.parse((PY_DIR / "python" / "slidestream" / "_slidestream.pyi").read_text())
    classes = {n.name: n for n in stub.body if isinstance(n, ast.ClassDef)}
    assert "Slide" in classes
    documented = {
        f.name
        for f in classes["Slide"].body
        if isinstance(f, ast.FunctionDef) and ast.get_docstring(f)
    }
    runtime = {n for n in vars(_slidestream.Slide) if not n.startswith("__") or n in ("__new__", "__enter__", "__exit__")}
    runtime -= {"__doc__", "__module__"}
    missing = sorted(runtime - documented)
    assert not missing, f"undocumented in _slidestream.pyi: {missing}"
    # DeviceArray: every runtime member (protocol dunders included) documented in the stub.
    assert "DeviceArray" in classes
    documented = {
        f.name
        for f in classes["DeviceArray"].body
        if isinstance(f, ast.FunctionDef) and ast.get_docstring(f)
    }
    runtime = {n for n in vars(_slidestream.DeviceArray) if not n.startswith("__")}
    runtime |= {"__len__", "__cuda_array_interface__", "__dlpack__", "__dlpack_device__", "__array__"}
    missing = sorted(runtime - documented)
    assert not missing, f"DeviceArray members undocumented in _slidestream.pyi: {missing}"
    functions = {f.name for f in stub.body if isinstance(f, ast.FunctionDef) and ast.get_docstring(f)}
    runtime_functions = {n for n, v in vars(_slidestream).items() if callable(v) and not isinstance(v, type)}
    # Test hooks (feature `test-hooks` only) are not API and stay out of the stub.
    runtime_functions = {n for n in runtime_functions if not n.startswith("_test_")}
    missing = sorted(runtime_functions - functions)
    assert not missing, f"module functions undocumented in _slidestream.pyi: {missing}"
    assert "core_version" in functions
    assert (PY_DIR / "python" / "slidestream" / "py.typed").exists()


def test_runtime_docstrings_equal_the_stub():
    """One source for the compiled module's docstrings: every class, method, property and
    function documented in ``_slidestream.pyi`` has exactly that text as its runtime ``__doc__``
    (the Rust doc comments pyo3 turns into ``__doc__``). ``python scripts/sync_docstrings.py
    --check`` lists the members that differ; ``--to-rust`` writes the stub's text into py/src."""
    import importlib.util

    from slidestream import _slidestream

    spec = importlib.util.spec_from_file_location("sync_docstrings", PY_DIR.parent / "scripts" / "sync_docstrings.py")
    assert spec is not None and spec.loader is not None
    sync = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync)
    docs = sync.stub_docs()
    compared = sync.compared_names(_slidestream, docs)
    assert len(compared) >= 60 and "Slide.read_region" in compared and "Slide" in compared
    assert sync.differences(_slidestream, docs) == []
