"""User-facing text speaks the user's language: README.md, CHANGELOG.md, the user guides under
docs/ and every docstring a user reads (``help()`` on the Python modules, the stub and the
compiled module) carry no words of the project's own bookkeeping — issue or item numbers,
machines "lent" for a run, work-session folders such as ``.device/``. (Development notes —
docs/architecture.md, benchmarks.md, gpu.md, robustness.md — may.)"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "py" / "python" / "slidestream"
USER_DOCS = ["README.md", "CHANGELOG.md", "docs/python.md", "docs/settings.md", "docs/formats.md", "docs/remote.md", "docs/openslide-notes.md"]
INTERNAL = re.compile(r"\bissues? \d+|\bitems? \d+\b|\blent\b|\.device/|\bsessions?\b", re.I)


def _hits(text: str) -> list:
    return [text[max(0, m.start() - 30) : m.end() + 30].replace("\n", " ") for m in INTERNAL.finditer(text)]


def test_the_pattern_finds_internal_words():
    assert _hits("Stripped TIFF (issue 31, item 1): on the lent H200, see .device/run.sh")
    assert not _hits("AWS_SESSION_TOKEN, session_token, an item of the list, 31 items")


@pytest.mark.parametrize("doc", USER_DOCS)
def test_user_docs_have_no_internal_words(doc):
    path = REPO / doc
    if not path.exists():
        pytest.skip(f"{doc} not present")
    assert not _hits(path.read_text(encoding="utf-8")), f"{doc}: {_hits(path.read_text(encoding='utf-8'))}"


def test_docstrings_have_no_internal_words():
    found = []
    for p in sorted(PKG.rglob("*.py")) + [PKG / "_slidestream.pyi"]:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node) or ""
                found += [f"{p.name}:{getattr(node, 'name', '<module>')}: {h}" for h in _hits(doc)]
    from slidestream import _slidestream

    for name, obj in vars(_slidestream).items():
        found += [f"_slidestream.{name}: {h}" for h in _hits(getattr(obj, "__doc__", None) or "")]
        if isinstance(obj, type):
            for member, value in vars(obj).items():
                found += [f"_slidestream.{name}.{member}: {h}" for h in _hits(getattr(value, "__doc__", None) or "")]
    assert not found, found
