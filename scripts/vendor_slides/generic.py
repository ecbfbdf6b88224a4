"""Generic tiled TIFFs that OpenSlide 4.0.1 reads through libtiff's RGBA interface and that
slidestream once refused or misread: CMYK (JPEG-coded, with and without Adobe's inverted
convention, and deflate), signed 8-bit samples, greyscale + alpha and RGB + alpha JPEG, the
bogus ImageDepth = TileDepth = 3,
a chain of more than 4096 IFDs, and a pyramid whose reduced IFDs lack the NewSubfileType
reduced-image bit (OpenSlide then shows level 0 only).

Written with ``tiffbuild`` (precompressed tiles, exact tags): JPEG tiles from Pillow (CMYK,
YCbCr) or ``jpegenc`` (2 components; CMYK without Adobe marker); deflate with zlib. Each
``check`` compares OpenSlide's pixels with the known pixels through libtiff's conversions:
CMYK -> RGB as ``(255 - K) * (255 - ink) // 255`` on the samples as coded (so Pillow's
Adobe-inverted CMYK comes out inverted), signed bytes as unsigned, alpha as written.
"""

from __future__ import annotations

import io
import zlib
from typing import Dict, List, Optional

import numpy as np

from . import jpegenc, tiffbuild as tb
from .common import Generated, Region, assert_close, downscale, tissue_like

# Level 0 has partial edge tiles (W, H not multiples of TILE); levels 1 and 2 fit in one tile:
# where OpenSlide paints two tiles at a fractional offset it rounds twice, one more than the
# parity tests allow for lossless levels (grey_alpha, JPEG, keeps 128-pixel tiles).
TILE = 256
W, H = 500, 380
REDUCED = {254: (tb.LONG, 1)}


def _tiles(img: np.ndarray, t: int = TILE):
    """Tiles of ``img`` in TIFF order, padded to ``t`` x ``t`` by repeating the edge pixels
    (so JPEG blocks cut by the image edge stay as smooth as the image)."""
    h, w = img.shape[:2]
    for y in range(0, h, t):
        for x in range(0, w, t):
            part = img[y:y + t, x:x + t]
            widths = ((0, t - part.shape[0]), (0, t - part.shape[1])) + ((0, 0),) * (img.ndim - 2)
            yield np.pad(part, widths, mode="edge")


def _deflate(img: np.ndarray) -> List[bytes]:
    return [zlib.compress(t.tobytes(), 6) for t in _tiles(img)]


def _jpegenc(img: np.ndarray, quality: int, t: int = TILE) -> List[bytes]:
    return [jpegenc.encode(x, quality) for x in _tiles(img, t)]


def _pillow_jpeg(img: np.ndarray, mode: str, quality: int = 95) -> List[bytes]:
    from PIL import Image

    out = []
    for t in _tiles(img):
        buf = io.BytesIO()
        Image.fromarray(t, mode).save(buf, "JPEG", quality=quality, subsampling=0)
        out.append(buf.getvalue())
    return out


def _ifd(img: np.ndarray, chunks: List[bytes], photometric: int, compression: int,
         extra: Optional[Dict[int, tuple]] = None, tile: int = TILE) -> tb.Ifd:
    h, w = img.shape[:2]
    spp = img.shape[2] if img.ndim == 3 else 1
    return tb.tiled_ifd(w, h, tile, chunks, spp=spp, photometric=photometric, compression=compression, extra=extra)


def _describe(text: str) -> Dict[int, tuple]:
    return {270: (tb.ASCII, text)}


def _pyramid(n: int = 3, w: int = W) -> List[np.ndarray]:
    base = tissue_like(w, H, seed=15)
    return [base] + [downscale(base, 2 ** k) for k in range(1, n)]


def _regions(levels: int, W: int = W) -> List[Region]:
    r = [
        Region("l0_origin", 0, (0, 0), (256, 256)),
        Region("l0_edge", 0, (W - 150, H - 100), (200, 150)),  # past the right/bottom edges
        Region("l0_inner", 0, (100, 90), (300, 200)),
    ]
    for k in range(1, levels):
        d = 2 ** k
        r.append(Region(f"l{k}_whole", k, (0, 0), (-(-W // d) + 10, -(-H // d) + 10)))
        r.append(Region(f"l{k}_part", k, (40 * d, 24 * d), (64, 48)))
    return r


def _read(osr, level: int) -> np.ndarray:
    w, h = osr.level_dimensions[level]
    return np.asarray(osr.read_region((0, 0), level, (w, h)))


def _cmyk_to_rgb(raw: np.ndarray) -> np.ndarray:
    """libtiff's 8-bit separated -> RGB on the samples as coded."""
    c = raw.astype(np.int32)
    k = 255 - c[..., 3:4]
    return (k * (255 - c[..., :3]) // 255).astype(np.uint8)


def _cmyk_of(rgb: np.ndarray) -> np.ndarray:
    """A CMYK image whose inks vary on their own (K not derived from the RGB)."""
    k = ((np.arange(rgb.shape[1])[None, :] * 3 + np.arange(rgb.shape[0])[:, None]) % 64).astype(np.uint8)
    return np.dstack([255 - rgb, k])


def cmyk(out) -> Generated:
    """Three CMYK levels: Pillow JPEG (Adobe APP14, inverted samples), deflate, and JPEG
    coded as given without Adobe marker."""
    lv = [_cmyk_of(x) for x in _pyramid(3)]
    ifds = [
        _ifd(lv[0], _pillow_jpeg(lv[0], "CMYK"), 5, 7, _describe("slidestream generated: CMYK JPEG (Adobe, inverted)")),
        _ifd(lv[1], _deflate(lv[1]), 5, 8, REDUCED),
        _ifd(lv[2], _jpegenc(lv[2], 95), 5, 7, {**REDUCED, 332: (tb.SHORT, 1)}),
    ]
    tb.write(out / "generic-cmyk.tif", ifds)

    def check(osr) -> None:
        # Pillow stores CMYK inverted (Adobe's convention); libtiff does not undo it.
        want = [_cmyk_to_rgb(255 - lv[0]), _cmyk_to_rgb(lv[1]), _cmyk_to_rgb(lv[2])]
        for k, tol in enumerate((10, 0, 10)):  # JPEG error grows through the CMYK product
            got = _read(osr, k)
            assert_close(got[..., :3], want[k], tol, f"generic-cmyk level {k}")
            assert (got[..., 3] == 255).all()

    return Generated("generic-cmyk.tif", "generic-tiff", [x.shape[1::-1] for x in lv], _regions(3), check=check,
                     note="CMYK: JPEG (Pillow, Adobe-inverted), deflate, JPEG without Adobe marker")


def signed8(out) -> Generated:
    """SampleFormat = 2 (signed) 8-bit RGB, deflate, two levels."""
    lv = _pyramid(2)
    sf = {339: (tb.SHORT, [2, 2, 2])}
    ifds = [
        _ifd(lv[0], _deflate(lv[0]), 2, 8, {**sf, **_describe("slidestream generated: signed 8-bit")}),
        _ifd(lv[1], _deflate(lv[1]), 2, 8, {**sf, **REDUCED}),
    ]
    tb.write(out / "generic-signed8.tif", ifds)

    def check(osr) -> None:
        for k in range(2):  # the bytes, read as unsigned
            assert_close(_read(osr, k)[..., :3], lv[k], 0, f"generic-signed8 level {k}")

    return Generated("generic-signed8.tif", "generic-tiff", [x.shape[1::-1] for x in lv], _regions(2), check=check,
                     note="SampleFormat 2 (signed) 8-bit RGB")


def _block_mask(h: int, w: int, seed: int) -> np.ndarray:
    """0/255 alpha, constant over 8x8 blocks (so JPEG at quality 100 keeps it exactly)."""
    rng = np.random.default_rng(seed)
    blocks = np.where(rng.random((-(-h // 8), -(-w // 8))) < 0.3, 0, 255).astype(np.uint8)
    return np.kron(blocks, np.ones((8, 8), np.uint8))[:h, :w]


def grey_alpha(out) -> Generated:
    """Greyscale + alpha JPEG (2 components): unassociated alpha, unspecified extra sample
    (ignored), associated alpha (grey premultiplied).

    Every level's width is a multiple of the tile width: libtiff's RGBA interface misplaces
    the rows of a 2-sample greyscale tile cut by the right image edge (its grey put routines
    skip ``tile width - valid width`` bytes, not samples, after each row), so OpenSlide's
    pixels there are not the file's, and slidestream reads the file's."""
    t = 128
    wa = 4 * t
    grey = [x[..., 1] for x in _pyramid(3, wa)]
    alpha = [_block_mask(*g.shape, seed=k) for k, g in enumerate(grey)]
    premult = (grey[2].astype(np.uint32) * alpha[2] // 255).astype(np.uint8)
    samples = [np.dstack([grey[0], alpha[0]]), np.dstack([grey[1], alpha[1]]), np.dstack([premult, alpha[2]])]
    ifds = [
        _ifd(samples[0], _jpegenc(samples[0], 100, t), 1, 7,
             {338: (tb.SHORT, 2), **_describe("slidestream generated: grey + alpha JPEG")}, tile=t),
        _ifd(samples[1], _jpegenc(samples[1], 100, t), 1, 7, {338: (tb.SHORT, 0), **REDUCED}, tile=t),
        _ifd(samples[2], _jpegenc(samples[2], 100, t), 1, 7, {338: (tb.SHORT, 1), **REDUCED}, tile=t),
    ]
    tb.write(out / "generic-grey-alpha-jpeg.tif", ifds)

    def check(osr) -> None:
        for k in range(3):
            got = _read(osr, k)
            a = alpha[k] if k != 1 else np.full_like(alpha[k], 255)
            assert_close(got[..., 3], a, 0, f"generic-grey-alpha-jpeg level {k} alpha")
            g = samples[k][..., 0]
            for c in range(3):
                assert_close(got[..., c], g, 2, f"generic-grey-alpha-jpeg level {k} grey")

    return Generated("generic-grey-alpha-jpeg.tif", "generic-tiff", [x.shape[1::-1] for x in grey], _regions(3, wa), check=check,
                     note="grey + alpha JPEG: unassociated, unspecified (ignored), associated alpha")


def rgba_jpeg(out) -> Generated:
    """RGB + alpha JPEG (4 components, decoded without colour transform): ExtraSamples 1
    (associated) on level 0, no ExtraSamples tag on level 1, which libtiff also takes as
    associated alpha. Colours are premultiplied by a block-constant 0/255 alpha (quality 100
    keeps it exactly), so alpha-0 pixels are (0, 0, 0, 0) in both readers."""
    lv = _pyramid(2)
    alpha = [_block_mask(*x.shape[:2], seed=10 + k) for k, x in enumerate(lv)]
    px = [np.dstack([(x.astype(np.uint32) * a[..., None] // 255).astype(np.uint8), a]) for x, a in zip(lv, alpha)]
    ifds = [
        _ifd(px[0], _jpegenc(px[0], 100), 2, 7, {338: (tb.SHORT, 1), **_describe("slidestream generated: RGBA JPEG")}),
        _ifd(px[1], _jpegenc(px[1], 100), 2, 7, REDUCED),
    ]
    tb.write(out / "generic-rgba-jpeg.tif", ifds)

    def check(osr) -> None:
        for k in range(2):
            got = _read(osr, k)
            assert_close(got[..., 3], alpha[k], 0, f"generic-rgba-jpeg level {k} alpha")
            seen = alpha[k] == 255
            assert_close(got[..., :3][seen], lv[k][seen], 2, f"generic-rgba-jpeg level {k} colour")
            assert (got[~seen] == 0).all(), f"generic-rgba-jpeg level {k}: transparent pixels not 0"

    return Generated("generic-rgba-jpeg.tif", "generic-tiff", [x.shape[1::-1] for x in lv], _regions(2), check=check,
                     note="RGB + alpha JPEG: ExtraSamples 1, and none (libtiff: associated alpha)")


def bogus_depth(out) -> Generated:
    """ImageDepth = TileDepth = 3 on every level (JPEG YCbCr and deflate)."""
    lv = _pyramid(2)
    depth = {32997: (tb.LONG, 3), 32998: (tb.LONG, 3)}
    ifds = [
        _ifd(lv[0], _pillow_jpeg(lv[0], "RGB"), 6, 7, {**depth, 530: (tb.SHORT, [1, 1]),
                                                       **_describe("slidestream generated: ImageDepth = TileDepth = 3")}),
        _ifd(lv[1], _deflate(lv[1]), 2, 8, {**depth, **REDUCED}),
    ]
    tb.write(out / "generic-bogus-depth.tif", ifds)

    def check(osr) -> None:
        assert_close(_read(osr, 0)[..., :3], lv[0], 12, "generic-bogus-depth level 0")
        assert_close(_read(osr, 1)[..., :3], lv[1], 0, "generic-bogus-depth level 1")

    return Generated("generic-bogus-depth.tif", "generic-tiff", [x.shape[1::-1] for x in lv], _regions(2), check=check,
                     note="ImageDepth = TileDepth = 3")


def many_ifds(out) -> Generated:
    """Level 0, 4200 tiny untiled 1x1 IFDs (skipped), then the reduced level."""
    lv = _pyramid(2)
    tiny = {256: (tb.LONG, 1), 257: (tb.LONG, 1), 258: (tb.SHORT, 8), 259: (tb.SHORT, 1), 262: (tb.SHORT, 1),
            277: (tb.SHORT, 1), 278: (tb.LONG, 1)}
    ifds = [_ifd(lv[0], _deflate(lv[0]), 2, 8, _describe("slidestream generated: 4202 IFDs"))]
    ifds += [tb.Ifd(dict(tiny), [bytes([k % 251])], tiled=False) for k in range(4200)]
    ifds.append(_ifd(lv[1], _deflate(lv[1]), 2, 8, REDUCED))
    tb.write(out / "generic-many-ifds.tif", ifds)

    def check(osr) -> None:
        for k in range(2):
            assert_close(_read(osr, k)[..., :3], lv[k], 0, f"generic-many-ifds level {k}")

    return Generated("generic-many-ifds.tif", "generic-tiff", [x.shape[1::-1] for x in lv], _regions(2), check=check,
                     note="4202 IFDs (more than 4096): level 0, 4200 untiled 1x1 IFDs, level 1")


def no_subfiletype(out) -> Generated:
    """A three-IFD pyramid whose reduced IFDs lack NewSubfileType: OpenSlide shows IFD 0
    only (its rule: IFD 0 and tiled IFDs with the reduced-image bit)."""
    lv = _pyramid(3)
    ifds = [_ifd(lv[0], _deflate(lv[0]), 2, 8, _describe("slidestream generated: no NewSubfileType"))]
    ifds.append(_ifd(lv[1], _deflate(lv[1]), 2, 8))
    ifds.append(_ifd(lv[2], _deflate(lv[2]), 2, 8, {254: (tb.LONG, 0)}))
    tb.write(out / "generic-no-subfiletype.tif", ifds)

    def check(osr) -> None:
        assert_close(_read(osr, 0)[..., :3], lv[0], 0, "generic-no-subfiletype level 0")

    return Generated("generic-no-subfiletype.tif", "generic-tiff", [lv[0].shape[1::-1]], _regions(1), check=check,
                     note="reduced IFDs without the NewSubfileType bit: one level")


def build(out) -> List[Generated]:
    """Write every generic-TIFF case into ``out``."""
    return [cmyk(out), signed8(out), grey_alpha(out), rgba_jpeg(out), bogus_depth(out), many_ifds(out), no_subfiletype(out)]
