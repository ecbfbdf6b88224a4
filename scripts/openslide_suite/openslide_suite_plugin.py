"""pytest plugin for running openslide-python's own test suite (from its sdist, unmodified)
against slidestream's OpenSlide drop-in; loaded by ``scripts/openslide-python-suite.sh`` with
``-p openslide_suite_plugin``.

- Refuses to run (``pytest.UsageError``) unless ``import openslide`` is slidestream's drop-in
  (``py/openslide-shim`` first on ``PYTHONPATH``): the suite must never pass by testing the
  real openslide-python.
- :data:`PENDING` lists the tests that cannot pass yet, with the reason (docs/python.md lists
  the same). Each is marked ``xfail(strict=True)`` that must fail by slidestream refusing its
  fixture with ``OpenSlideUnsupportedFormatError``, and only while slidestream refuses it: once
  the driver exists the test runs normally and must pass. An entry whose test is not collected
  is an error when its file was collected (the list stays in step with the suite).
"""

from __future__ import annotations

import pathlib

import pytest

#: node id → (fixture the test opens, why it cannot pass yet).
#: Empty since issue 16's dicom driver (TestDicomSlide, boxes_0.dcm, now runs and must pass).
PENDING: dict[str, tuple[str, str]] = {}


def pytest_configure(config: pytest.Config) -> None:
    import openslide
    import slidestream.openslide

    if openslide is not slidestream.openslide:
        raise pytest.UsageError(
            f"'import openslide' gives {getattr(openslide, '__file__', openslide)!r}, not slidestream's "
            "drop-in: put py/openslide-shim first on PYTHONPATH"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import openslide

    fixtures = pathlib.Path(config.rootpath) / "tests" / "fixtures"
    collected = {item.nodeid for item in items}
    files = {nodeid.split("::")[0] for nodeid in collected}
    # Only entries of files that were collected (running one file checks that file's).
    stale = sorted(n for n in set(PENDING) - collected if n.split("::")[0] in files)
    if stale and not config.getoption("keyword") and not config.getoption("markexpr"):
        raise pytest.UsageError(f"openslide_suite_plugin.PENDING names tests the suite does not have: {stale}")
    for item in items:
        pending = PENDING.get(item.nodeid)
        if pending is None:
            continue
        fixture, reason = pending
        try:
            openslide.OpenSlide(fixtures / fixture).close()
        except openslide.OpenSlideUnsupportedFormatError:
            item.add_marker(
                pytest.mark.xfail(reason=reason, raises=openslide.OpenSlideUnsupportedFormatError, strict=True)
            )
