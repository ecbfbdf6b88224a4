"""The Python layer's import order: leaves import no slidestream module that reads slides, and
no module imports one that imports it back (an import cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "py" / "python" / "slidestream"


def _imports(path: Path) -> set:
    """slidestream modules ``path`` imports, at any depth of the file (lazy imports count)."""
    mod = path.relative_to(PKG.parent).with_suffix("").as_posix().replace("/", ".")
    if mod.endswith(".__init__"):
        mod = mod[: -len(".__init__")]
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = pkg.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            if node.module is None:
                out.update(f"{target}.{a.name}" for a in node.names)
            else:
                out.add(target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("slidestream"))
    return {m for m in out if m != mod}


def _graph() -> dict:
    g = {}
    for p in PKG.rglob("*.py"):
        mod = p.relative_to(PKG.parent).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
        g[mod] = _imports(p)
    return g


def test_leaf_modules_import_no_reader():
    g = _graph()
    allowed = {"slidestream._errors", "slidestream._slidestream", "slidestream._typing"}
    for leaf in ("slidestream._args", "slidestream._errors", "slidestream._typing", "slidestream.progress"):
        assert g[leaf] <= allowed, f"{leaf} imports {sorted(g[leaf] - allowed)}"


def test_no_import_cycles_among_the_reading_modules():
    g = _graph()
    mods = ["slidestream._args", "slidestream._slide", "slidestream._patches", "slidestream._batch", "slidestream.loader", "slidestream.sampling", "slidestream._masks", "slidestream._preview", "slidestream.resolution", "slidestream.annotations"]

    def reach(start: str) -> set:
        seen, todo = set(), [start]
        while todo:
            m = todo.pop()
            for n in g.get(m, ()):
                if n in mods and n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen

    for m in mods:
        assert m not in reach(m), f"{m} imports itself back through {sorted(reach(m) & set(mods))}"
