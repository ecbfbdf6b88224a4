"""Type aliases shared by the modules and the compiled module's stub (``_slidestream.pyi``),
so that an argument has one spelling everywhere. Run-time objects (``typing.Union``s); nothing
here is checked at run time — the checks are in :mod:`slidestream._args`."""

from __future__ import annotations

import os
from typing import Tuple, Union

__all__ = ["PathLike", "Size", "Background"]

#: A file path: ``str``, ``bytes`` or ``os.PathLike`` (a URL is a ``str``).
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
#: A size in pixels: ``(width, height)``, or one int ``n`` for ``(n, n)``.
Size = Union[int, Tuple[int, int]]
#: A background colour: a grey level 0–255 or an ``(r, g, b)`` triple.
Background = Union[int, Tuple[int, int, int]]
