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


class ConfigError(SlideError, ValueError):
    """A ``SLIDESTREAM_*`` setting has a value that does not parse or is out of range, or the
    setting does not exist. Raised by :func:`slidestream.config.set` / :func:`~slidestream.config.get`
    and, for a bad value in the environment, by the first open or read that uses the setting.
    The message names the variable, the value and the accepted values."""


class GpuError(SlideError):
    """A device read (``device="cuda"``) or another GPU call failed: a CUDA, nvJPEG or cuFile
    call returned an error (the message names the call and its status code). The subclasses
    say why the GPU could not be used at all."""


class GpuUnavailableError(GpuError):
    """No usable GPU in this process: libcuda / nvJPEG could not be loaded, ``cuInit`` failed
    or there is no CUDA device (:func:`slidestream.cuda_available` is False). The CPU path
    (``device=None``) still works."""


class GpuForkError(GpuError):
    """This process was forked from one that had already initialised CUDA; CUDA cannot be
    used in such a child. Start workers with the ``spawn`` or ``forkserver`` method, or make
    the first device read only after forking. The message names both process ids."""


__all__ = [
    "SlideError",
    "UnsupportedFormatError",
    "CorruptDataError",
    "LimitsExceededError",
    "InvalidArgumentError",
    "ConfigError",
    "GpuError",
    "GpuUnavailableError",
    "GpuForkError",
]
