"""The numpy-first :class:`Slide` (a thin Python layer over the Rust core)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, Optional, Tuple

import numpy as np

from . import _thumbnail
from ._slidestream import Slide as _CoreSlide


def _rebuild(
    cls: type, path: bytes, cache_bytes: Optional[int], closed: bool = False, storage_options: Optional[dict] = None
) -> "Slide":
    slide = cls(path, cache_bytes=cache_bytes, lazy=True, storage_options=storage_options or None)
    if closed:
        slide.close()
    return slide


def _check_thumbnail_size(size: Any) -> Tuple[int, int]:
    """A thumbnail ``size`` (max_width, max_height): a pair of positive ints (see
    :func:`slidestream._args.check_positive_size`)."""
    from ._args import check_positive_size

    return check_positive_size(size)


class AssociatedImages(Mapping):
    """Lazy read-only mapping: associated image name → numpy uint8 array (height, width, 4),
    RGBA. Images are decoded when looked up, not when the slide is opened."""

    def __init__(self, slide: "Slide") -> None:
        self._slide = slide
        self._sizes = dict(slide._associated_sizes())

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._sizes:
            raise KeyError(name)
        return self._slide.read_associated(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._sizes)

    def __len__(self) -> int:
        return len(self._sizes)

    def sizes(self) -> Mapping[str, Tuple[int, int]]:
        """(width, height) in pixels of every associated image, without decoding."""
        return MappingProxyType(self._sizes)

    def __repr__(self) -> str:
        return f"<AssociatedImages {list(self._sizes)}>"


class Slide(_CoreSlide):
    """An open whole-slide image (Aperio SVS, pyramidal tiled TIFF/BigTIFF).

    ``Slide(path, *, cache_bytes=None, storage_options=None)``; ``path`` is ``str``, ``bytes``
    or ``os.PathLike`` (non-ASCII names work), or the URL of a slide in object storage or on an
    HTTP server (``"s3://bucket/key.svs"``, ``"gs://…"``, ``"az://…"``, ``"https://…"``),
    read by ranged requests; ``storage_options`` (dict of str → str / bool / int) configures
    the store: ``endpoint``, ``region``, ``access_key_id``, ``secret_access_key``,
    ``session_token``, ``anonymous``, ``allow_http`` or any of object_store's keys
    (docs/remote.md); the providers' environment variables (``AWS_*``, ``GOOGLE_*``,
    ``AZURE_*``) apply too. ``cache_bytes`` gives this slide a private tile cache of that many
    bytes; by default all slides of the process share one (``SLIDESTREAM_CACHE_BYTES``,
    256 MiB).

    Coordinates follow OpenSlide: ``location`` = (x, y) in level-0 pixels, ``size`` =
    (width, height) in pixels of the level read. Arrays are ``uint8``, row-major, and own the
    decoded buffer (no copy); they support ``__dlpack__`` (``torch.from_dlpack``,
    ``np.from_dlpack``).

    GPU: ``read_region`` and ``read_regions`` take ``device=`` (``None`` / ``"cpu"``: numpy, as
    above; ``"cuda"``, ``"cuda:N"``, an int ``N`` or a ``torch.device``: a
    :class:`~slidestream.DeviceArray` in that GPU's memory, same shape and pixels, zero-copy
    into PyTorch / CuPy through DLPack or ``__cuda_array_interface__``). Without a usable GPU
    those calls raise :class:`~slidestream.GpuUnavailableError`; see
    :func:`~slidestream.cuda_available`.

    Thread-safe (reads release the GIL), picklable (path + options; the copy reopens lazily),
    and fork-safe (state is re-created in a child process). Use as a context manager or call
    :meth:`close`.

    Raises :class:`FileNotFoundError` / :class:`PermissionError` / :class:`OSError`,
    :class:`~slidestream.UnsupportedFormatError`, :class:`~slidestream.CorruptDataError`,
    :class:`~slidestream.LimitsExceededError`.
    """

    @property
    def properties(self) -> Mapping[str, str]:
        """Read-only mapping of properties with OpenSlide's names (``openslide.vendor``,
        ``openslide.level-count``, ``openslide.mpp-x``, ``openslide.quickhash-1``, ...),
        ``tiff.*`` tags and vendor keys (``aperio.*``)."""
        return MappingProxyType(self._properties())

    @property
    def associated_images(self) -> AssociatedImages:
        """Lazy mapping name → RGBA numpy array (height, width, 4) of the associated images
        (``thumbnail``, ``label``, ``macro``)."""
        return AssociatedImages(self)

    def get_thumbnail(self, size: Any, *, background: Any = 255) -> np.ndarray:
        """A thumbnail fitting in ``size`` = (max_width, max_height) pixels (an int ``n`` is
        ``(n, n)``), aspect ratio kept:
        numpy uint8 array (height, width, 3), RGB, transparent pixels composited over
        ``background``. Reads the best level for the downsample, then resizes (Pillow's
        Lanczos when Pillow is installed, else area averaging). A level of more than 64 MiB of
        RGBA is reduced while it is read (:meth:`read_level_reduced`) instead of read whole:
        memory stays bounded whatever the level's size.

        Raises :class:`TypeError` when ``size`` is not an int or a pair of ints and
        :class:`~slidestream.InvalidArgumentError` (a ValueError) when the width or height is
        not positive."""
        # Checked first, whatever reads the thumbnail below.
        from ._args import normalize_size

        size = normalize_size(size)
        w0, h0 = self.dimensions
        downsample = max(w0 / size[0], h0 / size[1])
        level = self.get_best_level_for_downsample(downsample)
        lw, lh = self.level_dimensions[level]
        # The size openslide-python's get_thumbnail gives: Pillow's thumbnail(size) of the
        # level (its aspect ratio, rounded as Pillow rounds), or the level itself if it fits.
        final = _thumbnail.pil_thumbnail_size(lw, lh, size) or (lw, lh)
        if _thumbnail.is_large((lw, lh)):
            # Bounded memory: reduced while read, to at least twice the thumbnail.
            region = _thumbnail.reduced_level(self, level, (lw, lh), final, background)
        else:
            region = self.read_regions([(0, 0)], level, (lw, lh), background=background)[0]
        rh, rw = region.shape[:2]
        if (rw, rh) == final:
            return region
        try:
            from PIL import Image

            return np.asarray(Image.fromarray(region).resize(final, Image.Resampling.LANCZOS, reducing_gap=2.0))
        except ImportError:
            tw, th = final
            ys = (np.arange(th + 1) * rh / th).astype(int)
            xs = (np.arange(tw + 1) * rw / tw).astype(int)
            acc = np.add.reduceat(np.add.reduceat(region.astype(np.uint32), ys[:-1], axis=0), xs[:-1], axis=1)
            counts = np.outer(np.diff(ys), np.diff(xs))[..., None]
            return (acc / counts + 0.5).astype(np.uint8)

    def _repr_html_(self) -> str:
        """The slide in a Jupyter notebook: its thumbnail (256 pixels a side, PNG; omitted
        without Pillow or when it cannot be read), file name, vendor, level-0 size, mpp,
        objective power, a table of the levels (size, downsample, tile size) and the
        associated images with their sizes. A closed slide shows its repr."""
        import html

        if self.closed:
            return html.escape(repr(self))
        props = self.properties
        esc = html.escape
        name = os.path.basename(os.fsdecode(bytes(self.path_bytes))) or os.fsdecode(bytes(self.path_bytes))
        img = ""
        try:
            import base64
            import io

            from PIL import Image

            buf = io.BytesIO()
            Image.fromarray(self.get_thumbnail((256, 256))).save(buf, format="PNG")
            img = f'<img src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}" style="max-width:256px" alt="thumbnail"/>'
        except Exception:  # no Pillow, or a damaged pyramid: the facts still show
            img = ""
        mpp_x, mpp_y = props.get("openslide.mpp-x"), props.get("openslide.mpp-y")
        mpp = f"{float(mpp_x):.4g} × {float(mpp_y):.4g} µm/px" if mpp_x and mpp_y else "unknown"
        power = props.get("openslide.objective-power") or "unknown"
        w0, h0 = self.dimensions
        facts = [("file", name), ("vendor", props.get("openslide.vendor", "?")), ("size", f"{w0:,} × {h0:,} px"), ("mpp", mpp), ("objective", power)]
        rows = "".join(f"<tr><th style='text-align:left'>{esc(k)}</th><td style='text-align:left'>{esc(str(v))}</td></tr>" for k, v in facts)
        levels = "".join(
            f"<tr><td>{i}</td><td>{w:,} × {h:,}</td><td>{d:.4g}</td><td>{tw} × {th}</td></tr>"
            for i, ((w, h), d, (tw, th)) in enumerate(zip(self.level_dimensions, self.level_downsamples, self.level_tile_sizes))
        )
        assoc = ", ".join(f"{esc(k)} ({w} × {h})" for k, (w, h) in self.associated_images.sizes().items()) or "none"
        return (
            "<div style='display:flex;gap:1em;align-items:flex-start'>"
            f"<div>{img}</div><div><table>{rows}</table>"
            "<table><tr><th>level</th><th>size (px)</th><th>downsample</th><th>tile</th></tr>"
            f"{levels}</table><div>associated images: {assoc}</div></div></div>"
        )

    def __reduce__(self):
        # The storage options travel with the pickle (a worker reopens the remote slide with
        # them): credentials in them are as safe as the pickle is.
        return (_rebuild, (type(self), bytes(self.path_bytes), self.cache_bytes, self.closed, dict(self.storage_options)))

    def __fspath__(self) -> str:  # pragma: no cover - convenience
        return os.fsdecode(bytes(self.path_bytes))
