"""Exception hierarchy of slidestream.

All slidestream errors derive from :class:`SlideError`. Operating-system failures (missing
file, permission denied, read errors) are raised as the built-in :class:`FileNotFoundError`,
:class:`PermissionError` or :class:`OSError` instead. Messages name the file and, where
relevant, the level and tile, e.g. ``"/data/a.svs: level 0: tile (3, 7): JPEG: Bogus marker
length"``.
"""


class SlideError(Exception):
    """Base class of every slidestream error."""


class UnsupportedFormatError(SlideError):
    """The file is not a slide slidestream reads, or it uses an unsupported feature
    (the message names it, e.g. ``BitsPerSample 16`` or ``Compression 52479``)."""


class CorruptDataError(SlideError):
    """The file is damaged: a corrupt tile or broken structure. Naming file, level and tile;
    the slide stays usable for other reads."""


class LimitsExceededError(SlideError, MemoryError):
    """A request or a header value exceeds a configured limit (e.g. a region larger than
    ``SLIDESTREAM_MAX_REGION_BYTES``); nothing was allocated."""


class InvalidArgumentError(SlideError, ValueError):
    """The call's arguments are invalid (no such level or associated image, closed slide)."""


class GpuError(SlideError):
    """The GPU path is unavailable or failed."""


__all__ = [
    "SlideError",
    "UnsupportedFormatError",
    "CorruptDataError",
    "LimitsExceededError",
    "InvalidArgumentError",
    "GpuError",
]
