"""``ImageSlide``: a plain image (PNG, JPEG, ...) with the slide interface of the OpenSlide
drop-in (openslide-python's ``openslide.ImageSlide``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional, Tuple, Union

from ._args import check_int
from ._compat_common import AbstractSlide, Filename, _check_location, _check_size, _pil_image
from ._errors import InvalidArgumentError

if TYPE_CHECKING:  # Pillow is optional and imported lazily at run time.
    from PIL import Image

__all__ = ["ImageSlide"]


class ImageSlide(AbstractSlide):
    """A plain image (PNG, JPEG, ...) read with Pillow, with the slide interface: one level,
    no properties, no associated images. ``ImageSlide(file)``: a path or a PIL image (which
    is not closed by :meth:`close`). After :meth:`close`, reads raise :class:`ValueError`
    (as openslide-python's)."""

    def __init__(self, file: Union[Filename, "Image.Image"]) -> None:
        super().__init__()
        pil = _pil_image()
        self._file_arg = file
        self._image: Optional["Image.Image"]
        if isinstance(file, pil.Image):
            self._close = False
            self._image = file
        else:
            self._close = True
            self._image = pil.open(file)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._file_arg!r})"

    @classmethod
    def detect_format(cls, filename: Filename) -> Optional[str]:
        """Pillow's format name (``PNG``, ``JPEG``, ...), or None if Pillow cannot open it."""
        pil = _pil_image()
        try:
            with pil.open(filename) as img:
                return str(img.format) if img.format is not None else None
        except (OSError, ValueError):
            return None

    def _img(self) -> "Image.Image":
        if self._image is None:
            raise ValueError("Cannot read from a closed slide")
        return self._image

    def close(self) -> None:
        """Close the image file (if this slide opened it)."""
        if self._close and self._image is not None:
            self._image.close()
        self._image = None

    @property
    def level_count(self) -> int:
        """Always 1."""
        return 1

    @property
    def level_dimensions(self) -> Tuple[Tuple[int, int], ...]:
        """((width, height),) of the image."""
        w, h = self._img().size
        return ((w, h),)

    @property
    def level_downsamples(self) -> Tuple[float, ...]:
        """(1.0,)."""
        return (1.0,)

    @property
    def properties(self) -> Mapping[str, str]:
        """Empty."""
        return {}

    @property
    def associated_images(self) -> Mapping[str, "Image.Image"]:
        """Empty."""
        return {}

    def _icc_bytes(self) -> Optional[bytes]:
        icc = self._img().info.get("icc_profile")
        return bytes(icc) if icc else None

    def get_best_level_for_downsample(self, downsample: float) -> int:
        """Always 0."""
        return 0

    def read_region(self, location: Tuple[int, int], level: int, size: Tuple[int, int]) -> "Image.Image":
        """PIL ``RGBA`` image of ``size`` pixels at ``location``; transparent outside. A level
        other than 0 raises :class:`~slidestream.InvalidArgumentError` (an OpenSlideError), as
        openslide-python's."""
        pil = _pil_image()
        img = self._img()
        if check_int(level, "level") != 0:
            raise InvalidArgumentError("Invalid level")
        w, h = _check_size(size)
        x, y = _check_location(location)
        out = pil.new("RGBA", (w, h), (0, 0, 0, 0))
        iw, ih = img.size
        l, t = max(x, 0), max(y, 0)
        r, b = min(x + w, iw), min(y + h, ih)
        if r > l and b > t:
            crop = img.crop((l, t, r, b))
            if crop.mode != "RGBA":
                crop = crop.convert("RGBA")
            out.paste(crop, (l - x, t - y))
        icc = self._icc_bytes()
        if icc is not None:
            out.info["icc_profile"] = icc
        return out
