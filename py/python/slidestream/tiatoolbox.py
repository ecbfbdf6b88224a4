"""TIAToolbox reader: :class:`SlidestreamWSIReader`, a ``tiatoolbox.wsicore.wsireader.WSIReader``
that reads with slidestream.

``import slidestream`` never imports TIAToolbox, and neither does ``import slidestream.tiatoolbox``:
TIAToolbox is imported the first time ``slidestream.tiatoolbox.SlidestreamWSIReader`` is looked
up, because the class derives from TIAToolbox's ``WSIReader``. Without TIAToolbox that lookup
raises :class:`ImportError` naming the package to install (``pip install tiatoolbox``).

The reader is TIAToolbox's ``OpenSlideWSIReader`` with slidestream in OpenSlide's place: the same
metadata (``info``), the same choice of level, padding, resampling (OpenCV) and background
composite — only the region read from the level comes from :meth:`slidestream.Slide.read_region`
(OpenSlide's semantics). Pass an instance wherever TIAToolbox takes a ``WSIReader``
(``WSIReader.open`` returns it unchanged, so engines and patch extractors accept it)::

    from slidestream.tiatoolbox import SlidestreamWSIReader

    wsi = SlidestreamWSIReader("a.svs")
    wsi.info.as_dict()                                   # mpp, objective_power, level_dimensions, ...
    img = wsi.read_rect((1000, 2000), (256, 256), resolution=0.5, units="mpp")  # (256, 256, 3) uint8
    img = wsi.read_bounds((1000, 2000, 3000, 4000), resolution=1, units="level")
    thumb = wsi.slide_thumbnail(resolution=1.25, units="power")

Coordinate frame (TIAToolbox's): ``location`` = (x, y) and ``bounds`` = (left, top, right,
bottom) in **level-0 (baseline) pixels** unless ``coord_space="resolution"``; ``size`` =
(width, height) of the **output**. ``resolution`` is in ``units``: ``"level"`` (pyramid level;
fractional levels interpolate the downsample), ``"mpp"`` (micrometres per pixel), ``"power"``
(objective magnification) or ``"baseline"`` (output pixels per level-0 pixel). The level read is
the coarsest one at least as fine as the request; its pixels are then resized with
``interpolation`` (``"optimize"``: area when shrinking, cubic when enlarging; or
``"nearest"``, ``"linear"``, ``"cubic"``, ``"lanczos"``, ``"area"``). Areas outside the slide
are padded (``pad_mode``, ``pad_constant_values``, numpy's ``pad``), and transparent pixels are
composited over white. Output: numpy ``uint8`` (height, width, 3), RGB.

Errors are TIAToolbox's: :class:`ValueError` for units other than the four above, a level past
the last, ``"mpp"`` / ``"power"`` on a slide without that metadata (and nothing to infer it
from), an unknown interpolation; :class:`FileNotFoundError` for a missing file. slidestream's
own errors (:class:`~slidestream.UnsupportedFormatError`, :class:`~slidestream.CorruptDataError`)
pass through.
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Tuple, Union

import numpy as np

from ._slide import Slide

__all__ = ["SlidestreamWSIReader"]


_TIA: List[Tuple[Any, Any, Any]] = []  # the modules below, once imported


def _tia() -> Tuple[Any, Any, Any]:
    """TIAToolbox's wsireader module, WSIMeta and utils package, or an ImportError that names
    the package to install."""
    if _TIA:
        return _TIA[0]
    try:
        wsireader = importlib.import_module("tiatoolbox.wsicore.wsireader")
        wsimeta = importlib.import_module("tiatoolbox.wsicore.wsimeta")
        utils = importlib.import_module("tiatoolbox.utils")
    except ImportError as e:
        raise ImportError(
            "slidestream.tiatoolbox.SlidestreamWSIReader needs TIAToolbox (`pip install tiatoolbox`); "
            f"slidestream itself does not depend on it ({e})"
        ) from e
    _TIA[:] = [(wsireader, wsimeta.WSIMeta, utils)]
    return _TIA[0]


class _ReaderMethods:
    """A TIAToolbox ``WSIReader`` that reads with slidestream (see :mod:`slidestream.tiatoolbox`).

    Args:
        input_img: the slide: a path (``str`` / :class:`pathlib.Path`), a URL slidestream reads
            (``s3://``, ``https://``, ...), or an open :class:`slidestream.Slide` (used as is).
        mpp: ``(mpp_x, mpp_y)`` or a number: micrometres per level-0 pixel, overriding the
            slide's metadata.
        power: objective power of level 0, overriding the slide's metadata.
        post_proc: TIAToolbox's post-processing of each read (``"auto"``: none for this reader,
            as for OpenSlide's; a callable; ``None``; or the name of one in
            ``tiatoolbox.utils.postproc_defs``).
        cache_bytes, storage_options: passed to :class:`slidestream.Slide` when a path is given.

    Attributes:
        slide: the open :class:`slidestream.Slide`.

    Raises :class:`FileNotFoundError` for a missing file, TypeError for an ``mpp`` / ``power``
    that is not a number (TIAToolbox's checks), and slidestream's errors for a file it cannot
    open (:class:`~slidestream.UnsupportedFormatError`, ...).
    """

    def __init__(
        self,
        input_img: Union[str, Path, Slide],
        mpp: Any = None,
        power: Any = None,
        post_proc: Any = "auto",
        *,
        cache_bytes: Optional[int] = None,
        storage_options: Optional[Mapping[str, Any]] = None,
    ) -> None:
        given = input_img if isinstance(input_img, Slide) else None
        if given is not None:
            input_img = given.path
        super().__init__(input_img=input_img, mpp=mpp, power=power, post_proc=post_proc)  # type: ignore[call-arg]
        if given is not None:
            self.slide = given
        else:
            self.slide = Slide(str(self.input_path), cache_bytes=cache_bytes, storage_options=dict(storage_options or {}) or None)  # type: ignore[attr-defined]

    def _info(self) -> Any:
        """The slide's metadata as TIAToolbox's ``WSIMeta``, as its OpenSlide reader makes it:
        ``slide_dimensions`` (level-0 (width, height)), ``level_count``, ``level_dimensions``
        ((width, height) each), ``level_downsamples``, ``vendor`` (``openslide.vendor``),
        ``objective_power`` (``openslide.objective-power``), ``mpp`` ((x, y) µm per level-0 pixel
        from ``openslide.mpp-x/y``, else the TIFF resolution tags), ``axes`` ``"YXS"``,
        ``file_path`` and ``raw`` (every property, OpenSlide's names). A missing objective power
        is inferred from the mpp and a missing mpp from the power (with a warning), as
        TIAToolbox does."""
        wsireader, WSIMeta, _ = _tia()
        props = dict(self.slide.properties)
        power_prop = props.get("openslide.objective-power")
        objective_power = float(power_prop) if power_prop is not None else None
        mpp = wsireader.OpenSlideWSIReader._estimate_mpp(props)
        objective_power, mpp = self._estimate_mpp_objective_power(objective_power=objective_power, mpp=mpp)  # type: ignore[attr-defined]
        return WSIMeta(
            file_path=self.input_path,  # type: ignore[attr-defined]
            axes="YXS",
            objective_power=objective_power,
            slide_dimensions=self.slide.dimensions,
            level_count=self.slide.level_count,
            level_dimensions=self.slide.level_dimensions,
            level_downsamples=self.slide.level_downsamples,
            vendor=props.get("openslide.vendor"),
            mpp=mpp,
            raw=dict(**props),
        )

    def _read_level(self, location: Any, level: Any, size: Any) -> np.ndarray:
        """uint8 RGBA (height, width, 4) of ``level`` from level-0 ``location``, alpha 0 outside."""
        return np.asarray(self.slide.read_region(tuple(location), int(level), tuple(size)))

    def _finish(self, im_region: np.ndarray) -> np.ndarray:
        _, _, utils = _tia()
        if self.post_proc is not None:  # type: ignore[attr-defined]
            im_region = self.post_proc(im_region)  # type: ignore[attr-defined]
        return utils.transforms.background_composite(image=im_region, alpha=False)

    def read_rect(
        self,
        location: Any,
        size: Any,
        resolution: Any = 0,
        units: str = "level",
        interpolation: str = "optimize",
        pad_mode: str = "constant",
        pad_constant_values: Any = 0,
        coord_space: str = "baseline",
        **kwargs: Any,
    ) -> np.ndarray:
        """A region of output ``size`` (width, height) whose top-left corner is ``location``
        (x, y) in level-0 pixels (or in the requested resolution's pixels with
        ``coord_space="resolution"``), at ``resolution`` in ``units`` (see the module): numpy
        uint8 (height, width, 3), RGB. The field of view grows with coarser resolutions.
        Raises ValueError for invalid units, a level past the last or missing mpp / power."""
        _, _, utils = _tia()
        if coord_space == "resolution":
            return self.read_rect_at_resolution(  # type: ignore[attr-defined, no-any-return]
                location, size, resolution=resolution, units=units, interpolation=interpolation,
                pad_mode=pad_mode, pad_constant_values=pad_constant_values,
            )
        read_level, level_location, level_size, post_read_scale, _ = self.find_read_rect_params(  # type: ignore[attr-defined]
            location=location, size=size, resolution=resolution, units=units,
        )
        im_region = self._read_level(location, read_level, level_size)
        im_region = utils.image.crop_and_pad_edges(
            bounds=utils.transforms.locsize2bounds(level_location, level_size),
            max_dimensions=self.info.level_dimensions[read_level],  # type: ignore[attr-defined]
            region=im_region,
            pad_mode=pad_mode,
            pad_constant_values=pad_constant_values,
        )
        im_region = utils.transforms.imresize(
            img=im_region, scale_factor=post_read_scale, output_size=size, interpolation=interpolation,
        )
        return self._finish(im_region)

    def read_bounds(
        self,
        bounds: Any,
        resolution: Any = 0,
        units: str = "level",
        interpolation: str = "optimize",
        pad_mode: str = "constant",
        pad_constant_values: Any = 0,
        coord_space: str = "baseline",
        **kwargs: Any,
    ) -> np.ndarray:
        """The region inside ``bounds`` (left, top, right, bottom) in level-0 pixels (or in the
        requested resolution's pixels with ``coord_space="resolution"``) at ``resolution`` in
        ``units`` (see the module): numpy uint8 (height, width, 3), RGB, its size the bounds'
        size at that resolution. The field of view stays fixed whatever the resolution. Raises
        ValueError for invalid units, a level past the last or missing mpp / power."""
        _, _, utils = _tia()
        bounds_at_baseline = bounds
        if coord_space == "resolution":
            bounds_at_baseline = self.bounds_at_resolution_to_baseline(bounds, resolution, units)  # type: ignore[attr-defined]
            _, size_at_requested = utils.transforms.bounds2locsize(bounds)
            read_level, bounds_at_read_level, _, post_read_scale = self.find_read_bounds_params(  # type: ignore[attr-defined]
                bounds_at_baseline, resolution=resolution, units=units,
            )
        else:
            read_level, bounds_at_read_level, size_at_requested, post_read_scale = self.find_read_bounds_params(  # type: ignore[attr-defined]
                bounds_at_baseline, resolution=resolution, units=units,
            )
        location_at_baseline = bounds_at_baseline[:2]
        _, size_at_read_level = utils.transforms.bounds2locsize(bounds_at_read_level)
        im_region = self._read_level(location_at_baseline, read_level, size_at_read_level)
        im_region = utils.image.crop_and_pad_edges(
            bounds=bounds_at_read_level,
            max_dimensions=self.info.level_dimensions[read_level],  # type: ignore[attr-defined]
            region=im_region,
            pad_mode=pad_mode,
            pad_constant_values=pad_constant_values,
        )
        if coord_space == "resolution":
            im_region = utils.transforms.imresize(img=im_region, output_size=size_at_requested, interpolation=interpolation)
        else:
            im_region = utils.transforms.imresize(
                img=im_region, scale_factor=post_read_scale, output_size=size_at_requested, interpolation=interpolation,
            )
        return self._finish(im_region)


def _make_reader_class() -> type:
    # The class derives from TIAToolbox's WSIReader, so it can only be made once TIAToolbox is
    # imported; the methods live in _ReaderMethods (first in the MRO, so super() reaches
    # WSIReader and its read_rect / read_bounds / _info are overridden).
    base = _tia()[0].WSIReader
    return type(base)(
        "SlidestreamWSIReader",
        (_ReaderMethods, base),
        {"__module__": __name__, "__qualname__": "SlidestreamWSIReader", "__doc__": _ReaderMethods.__doc__},
    )


_MAKE_LOCK = threading.Lock()


def __getattr__(name: str) -> Any:
    if name == "SlidestreamWSIReader":
        with _MAKE_LOCK:  # one class per process, even when threads race to make it
            cls = globals().get("SlidestreamWSIReader")
            if cls is None:
                cls = _make_reader_class()
                # Cached so pickling finds the very same class (pickle checks identity).
                globals()["SlidestreamWSIReader"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(list(globals()) + ["SlidestreamWSIReader"])


if TYPE_CHECKING:  # what type checkers see; at run time the class comes from __getattr__
    SlidestreamWSIReader = _ReaderMethods
