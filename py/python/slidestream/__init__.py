"""slidestream: a whole-slide image loader for digital pathology.

Quick start::

    import slidestream
    with slidestream.Slide("slide.svs") as s:
        print(s.dimensions, s.level_count, s.properties["openslide.vendor"])
        rgba = s.read_region((1000, 1000), 0, (256, 256))      # (256, 256, 4) uint8
        rgb = s.read_regions([(0, 0), (512, 512)], 0, (256, 256))  # (2, 256, 256, 3) uint8
        if slidestream.cuda_available():
            d = s.read_regions([(0, 0), (512, 512)], 0, (256, 256), device="cuda")
            t = torch.from_dlpack(d)       # with PyTorch: a CUDA tensor, no copy

GPU: ``read_region`` / ``read_regions`` take ``device="cuda"`` (or ``"cuda:N"``, an int, a
``torch.device``) and return a :class:`DeviceArray` in GPU memory (DLPack and CUDA Array
Interface, zero-copy into PyTorch / CuPy); :func:`cuda_available`, :func:`gpu_probe`,
:func:`gpu_stats`, :func:`gpu_reset_stats`, :func:`gpu_clear_cache`.

Settings (``SLIDESTREAM_*``): :mod:`slidestream.config` (``get``, ``set``, ``scope``). Format
detection without opening: :func:`detect_vendor` (and :func:`format_verdicts`, each format
driver's reason).

Drop-in for openslide-python: ``import slidestream.openslide as openslide`` (the namespace of
openslide-python's ``openslide``, with ``openslide.deepzoom`` and ``openslide.lowlevel``);
also ``from slidestream import OpenSlide, open_slide`` and
``slidestream.deepzoom.DeepZoomGenerator``. PyTorch: :mod:`slidestream.torch`; Dask:
:mod:`slidestream.dask` (both import their framework lazily). Prefetching batches across
slides for training and inference: :class:`PatchBatches` (numpy / :class:`DeviceArray`, no
framework) and :class:`slidestream.torch.PatchLoader` (tensors).
"""

import os as _os
from typing import TYPE_CHECKING, Any

# 32 hardware work queues per GPU instead of CUDA's 8, unless the variable is set already: with
# 8, the device engine's streams share queues with a model's stream and wait behind every
# kernel the model queued ahead (slidestream.gpu_stats()["cuda_connections"]; docs/python.md,
# "Next to a model"). CUDA reads it when the process's first context is made, so this must run
# before torch, cupy or another library touches the GPU: import slidestream first.
_os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")

from . import config  # noqa: E402
from ._errors import (
    ConfigError,
    CorruptDataError,
    GpuError,
    GpuForkError,
    GpuUnavailableError,
    InvalidArgumentError,
    LimitsExceededError,
    SlideError,
    UnsupportedFormatError,
)
from ._patches import read_patches
from .loader import BatchMeta, PatchBatches
from ._slide import AssociatedImages, Slide
from ._slidestream import (
    DeviceArray,
    core_version,
    cuda_available,
    detect_vendor,
    format_verdicts,
    gpu_clear_cache,
    gpu_probe,
    gpu_reset_stats,
    gpu_stats,
)

if TYPE_CHECKING:  # imported lazily at run time (see __getattr__)
    from ._compat import (
        AbstractSlide,
        ImageSlide,
        OpenSlide,
        OpenSlideCache,
        OpenSlideError,
        OpenSlideUnsupportedFormatError,
        OpenSlideVersionError,
        open_slide,
    )

__version__ = core_version()

__all__ = [
    "Slide",
    "read_patches",
    "PatchBatches",
    "BatchMeta",
    "AssociatedImages",
    "SlideError",
    "UnsupportedFormatError",
    "CorruptDataError",
    "LimitsExceededError",
    "InvalidArgumentError",
    "ConfigError",
    "GpuError",
    "GpuUnavailableError",
    "GpuForkError",
    "DeviceArray",
    "detect_vendor",
    "format_verdicts",
    "config",
    "cuda_available",
    "gpu_probe",
    "gpu_stats",
    "gpu_reset_stats",
    "gpu_clear_cache",
    "OpenSlide",
    "open_slide",
    "OpenSlideError",
    "OpenSlideUnsupportedFormatError",
    "OpenSlideVersionError",
    "ImageSlide",
    "OpenSlideCache",
    "__version__",
]


_COMPAT_NAMES = (
    "OpenSlide",
    "open_slide",
    "OpenSlideError",
    "OpenSlideUnsupportedFormatError",
    "OpenSlideVersionError",
    "ImageSlide",
    "AbstractSlide",
    "OpenSlideCache",
)


# Pure-Python submodules, importable as attributes (slidestream.sampling.GridSampler, ...).
from . import annotations, progress, resolution, sampling  # noqa: E402


def __getattr__(name: str) -> Any:
    # The OpenSlide-compatible layer imports Pillow lazily; load it on first use.
    if name in _COMPAT_NAMES or name.startswith("PROPERTY_NAME_"):
        from . import _compat

        return getattr(_compat, name)
    raise AttributeError(f"module 'slidestream' has no attribute {name!r}")
