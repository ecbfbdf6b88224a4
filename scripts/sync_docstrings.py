"""One source for the compiled extension's docstrings.

The docstrings of ``slidestream._slidestream`` (classes, methods, properties, module functions)
are the Rust doc comments of ``py/src/*.rs`` (pyo3 turns them into ``__doc__``); the type stub
``py/python/slidestream/_slidestream.pyi`` carries the same text so that editors and type
checkers show it. ``py/tests/test_stubs.py`` fails when the two differ.

Usage (from the repository root, with the extension built into the venv):

    python scripts/sync_docstrings.py --check        # exit 1 and list members that differ
    python scripts/sync_docstrings.py --to-rust      # write the stub's docstrings into py/src
"""

from __future__ import annotations

import argparse
import ast
import inspect
import pathlib
import re
import sys
from typing import Dict, Iterator, List, Optional, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
STUB = ROOT / "py" / "python" / "slidestream" / "_slidestream.pyi"
RUST = ROOT / "py" / "src"


def stub_docs(stub_path: pathlib.Path = STUB) -> Dict[str, str]:
    """Map ``Class``, ``Class.member`` and ``function`` to the stub's docstring (the last
    documented definition wins, so an ``@overload`` group counts once)."""
    tree = ast.parse(stub_path.read_text())
    out: Dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            doc = ast.get_docstring(node)
            if doc:
                out[node.name] = doc
            for f in node.body:
                if isinstance(f, ast.FunctionDef):
                    doc = ast.get_docstring(f)
                    if doc:
                        out[f"{node.name}.{f.name}"] = doc
        elif isinstance(node, ast.FunctionDef):
            doc = ast.get_docstring(node)
            if doc:
                out[node.name] = doc
    return out


def runtime_doc(module, name: str) -> Optional[str]:
    """The compiled member's ``__doc__``, cleaned as ``inspect.cleandoc`` cleans docstrings;
    None when it has none. ``__new__`` is documented on the class in pyo3, so it is skipped."""
    obj = _runtime_object(module, name)
    doc = getattr(obj, "__doc__", None) if obj is not None else None
    return inspect.cleandoc(doc) if doc else None


def _runtime_object(module, name: str):
    obj = module
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def compared_names(module, docs: Dict[str, str]) -> List[str]:
    """Members whose runtime docstring must equal the stub's. Left out: ``__new__`` (pyo3 puts
    a constructor's documentation on its class), names that exist only in the stub (typing
    helpers such as protocols), and slot methods (``__len__``, ...) whose ``__doc__`` CPython
    gives its slot wrappers."""
    names = []
    for n in sorted(docs):
        obj = _runtime_object(module, n)
        if n.endswith(".__new__") or obj is None:
            continue
        if type(obj).__name__ in ("wrapper_descriptor", "method-wrapper", "slot wrapper"):
            continue
        names.append(n)
    return names


def differences(module, docs: Dict[str, str]) -> List[str]:
    """Compared members whose runtime ``__doc__`` differs from the stub's docstring."""
    return [n for n in compared_names(module, docs) if runtime_doc(module, n) != docs[n]]


def _doc_blocks(text: str) -> Iterator[Tuple[int, int, str, str]]:
    """Contiguous ``///`` blocks of a Rust file: (first line, end line, indent, cleaned text)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)///", lines[i])
        if not m:
            i += 1
            continue
        j = i
        body = []
        while j < len(lines) and re.match(r"^\s*///", lines[j]):
            s = lines[j].strip()[3:]
            body.append(s[1:] if s.startswith(" ") else s)
            j += 1
        yield i, j, m.group(1), inspect.cleandoc("\n".join(body))
        i = j


def to_rust(module, docs: Dict[str, str]) -> List[str]:
    """Rewrite each differing member's Rust doc comment with the stub's docstring. A member is
    found by its current doc comment's text (what pyo3 made its ``__doc__``), or, when it has
    none, by ``fn NAME(`` in the pymethods blocks. Returns the members it could not place."""
    unplaced = []
    files = {p: p.read_text() for p in sorted(RUST.glob("*.rs"))}
    for name in differences(module, docs):
        new = docs[name].split("\n")
        current = runtime_doc(module, name)
        done = False
        for path, text in files.items():
            lines = text.split("\n")
            if current is not None:
                hits = [b for b in _doc_blocks(text) if b[3] == current]
                if len(hits) != 1:
                    continue
                start, end, indent, _ = hits[0]
            else:
                fn = name.split(".")[-1]
                idx = [k for k, line in enumerate(lines) if re.match(rf"^\s*(pub\s+)?fn {re.escape(fn)}\b", line)]
                if len(idx) != 1:
                    continue
                start = end = idx[0]
                while start > 0 and lines[start - 1].strip().startswith("#["):
                    start -= 1
                end = start
                indent = re.match(r"^(\s*)", lines[idx[0]]).group(1)
            block = [f"{indent}///" + (f" {line}" if line else "") for line in new]
            lines[start:end] = block
            files[path] = "\n".join(lines)
            done = True
            break
        if not done:
            unplaced.append(name)
    for path, text in files.items():
        if path.read_text() != text:
            path.write_text(text)
    return unplaced


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true", help="list members whose docstrings differ")
    g.add_argument("--to-rust", action="store_true", help="write the stub's docstrings into py/src")
    args = ap.parse_args(argv)
    from slidestream import _slidestream

    docs = stub_docs()
    if args.check:
        diff = differences(_slidestream, docs)
        for n in diff:
            print(n)
        return 1 if diff else 0
    unplaced = to_rust(_slidestream, docs)
    for n in unplaced:
        print("not placed:", n, file=sys.stderr)
    return 1 if unplaced else 0


if __name__ == "__main__":
    sys.exit(main())
