"""Substitutes slidestream's OpenSlide drop-in for openslide-python.

With this folder's parent (``py/openslide-shim``) first on ``PYTHONPATH``, ``import openslide``,
``import openslide.deepzoom`` and ``import openslide.lowlevel`` give the module objects
``slidestream.openslide``, ``slidestream.openslide.deepzoom`` and
``slidestream.openslide.lowlevel`` (not copies: ``openslide.OpenSlide is
slidestream.OpenSlide``). An installed openslide-python is shadowed, not used. This is how the
project runs openslide-python's own test suite against slidestream
(``scripts/openslide-python-suite.sh``); see docs/python.md, "OpenSlide drop-in".
"""

import sys

import slidestream.openslide as _dropin
import slidestream.openslide.deepzoom
import slidestream.openslide.lowlevel

for _sub in ("deepzoom", "lowlevel"):
    sys.modules[f"{__name__}.{_sub}"] = sys.modules[f"slidestream.openslide.{_sub}"]
sys.modules[__name__] = _dropin
