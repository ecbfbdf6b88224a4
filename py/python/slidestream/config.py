"""Settings of slidestream: the ``SLIDESTREAM_*`` variables, read and changed at run time.

Every setting is one row of the core's table (docs/settings.md; :func:`table` here): name,
default, unit, accepted values and meaning. The value in effect is, in this order, an override
made with :func:`set` (or :func:`scope`), the environment variable (empty counts as unset), or
the default. Names are the environment variables (``"SLIDESTREAM_CACHE_BYTES"``) or, for
short, the same without the prefix in any case (``"cache_bytes"``)::

    import slidestream
    slidestream.config.get("cache_bytes")            # '268435456'
    slidestream.config.set("max_region_bytes", 1 << 30)
    with slidestream.config.scope(partial_decode_max_fraction=0):
        ...                                          # slides opened here decode whole tiles
    # the previous override (or none) is back

A value that does not parse or is out of range raises :class:`slidestream.ConfigError` (a
:class:`ValueError`) naming the variable and the accepted values, and changes nothing; an
unknown name raises :class:`slidestream.InvalidArgumentError` (also a ``ValueError``). A bad
value in the environment raises ``ConfigError`` from the first open (or :func:`get`) that uses
it. Settings marked ``per_process`` are read once per process (the shared tile cache, the GPU
engine); changing one after that raises ``InvalidArgumentError`` instead of being ignored.

Overrides are process-wide (all threads), as KvikIO's ``defaults``; per-open settings take
effect for slides opened afterwards.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple, Type, Union

from ._slidestream import _config_get, _config_set, _config_table

__all__ = ["Setting", "Value", "table", "names", "get", "set", "reset", "scope"]

#: What a setting can be set to: text as documented, or an int / float / bool written as
#: text (``True`` → ``"true"``); ``None`` removes the override.
Value = Union[str, int, float, bool, None]

_PREFIX = "SLIDESTREAM_"
# Overrides made through this module (the core holds the same ones), for restoring scopes.
_LOCK = threading.RLock()
_OVERRIDES: Dict[str, str] = {}


class Setting(NamedTuple):
    """One row of the settings table (all text, as in docs/settings.md)."""

    #: Environment variable, e.g. ``SLIDESTREAM_CACHE_BYTES``.
    name: str
    #: Default value.
    default: str
    #: Unit (``bytes``, ``tiles``, ``fraction``, ``—`` for enumerations).
    unit: str
    #: Accepted values, in words.
    accepted: str
    #: What the setting does and when it is read.
    doc: str
    #: True when the setting is read once per process (changes after that are refused).
    per_process: bool


def table() -> List[Setting]:
    """Every setting, in the order of docs/settings.md."""
    return [
        Setting(d["name"], d["default"], d["unit"], d["accepted"], d["doc"], bool(d["per_process"]))
        for d in _config_table()
    ]


def names() -> List[str]:
    """The names (environment variables) of every setting, in table order."""
    return [s.name for s in table()]


def _name(name: str) -> str:
    """The table name for ``name`` (full or short, any case); unknown names are returned as
    given, for the core to refuse with the list of known names."""
    if not isinstance(name, str):
        raise TypeError(f"setting name must be a str, got {type(name).__name__}")
    known = names()
    upper = name.upper()
    for candidate in (name, upper, _PREFIX + upper):
        if candidate in known:
            return candidate
    return name


def _text(value: Value) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    raise TypeError(f"setting value must be a str, int, float, bool or None, got {type(value).__name__}")


def get(name: str) -> str:
    """The value in effect for setting ``name``, as text: the override, the environment
    variable or the default. Raises ConfigError when that text is not accepted (a bad
    environment value), InvalidArgumentError for an unknown name."""
    return _config_get(_name(name))


class _Scope:
    """Overrides applied by :func:`set` / :func:`scope`; as a context manager, restores the
    overrides that were in place before (or their absence) on exit."""

    def __init__(self, changes: Mapping[str, Value]) -> None:
        self._previous: List[Tuple[str, Optional[str]]] = []
        with _LOCK:
            try:
                for raw_name, value in changes.items():
                    name, text = _name(raw_name), _text(value)
                    before = _OVERRIDES.get(name)
                    _config_set(name, text)
                    self._previous.append((name, before))
                    _record(name, text)
            except BaseException:
                self._restore()
                raise

    def _restore(self) -> None:
        with _LOCK:
            while self._previous:
                name, before = self._previous.pop()
                _config_set(name, before)
                _record(name, before)

    def __enter__(self) -> "_Scope":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self._restore()


def _record(name: str, text: Optional[str]) -> None:
    if text is None:
        _OVERRIDES.pop(name, None)
    else:
        _OVERRIDES[name] = text


def set(name: Union[str, Mapping[str, Value]], value: Value = None) -> _Scope:
    """Override setting ``name`` with ``value`` for this process (``None`` removes the
    override); or, given a mapping, several at once (all or none). Values are checked first:
    ConfigError for a value not accepted, InvalidArgumentError for an unknown name or a
    per-process setting already in use; nothing changes then.

    Returns a context manager: ``with config.set("gpu_trace", True): ...`` restores the
    previous overrides on exit, as :func:`scope`."""
    changes: Mapping[str, Value] = name if isinstance(name, Mapping) else {name: value}
    return _Scope(changes)


def reset(name: str) -> None:
    """Remove the override of setting ``name`` (the environment variable or the default
    applies again)."""
    set(name, None)


def scope(settings: Optional[Mapping[str, Value]] = None, /, **kwargs: Value) -> _Scope:
    """Context manager overriding settings for the duration of a ``with`` block and
    restoring the previous overrides (or their absence) afterwards, also when the block
    raises: ``with config.scope(max_region_bytes=1 << 20): ...`` or
    ``with config.scope({"SLIDESTREAM_MAX_REGION_BYTES": "1048576"}): ...``. Errors as
    :func:`set`."""
    changes: Dict[str, Value] = dict(settings or {})
    changes.update(kwargs)
    return _Scope(changes)
