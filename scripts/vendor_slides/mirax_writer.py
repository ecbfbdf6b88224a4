"""Writing the files of a 3DHISTECH MIRAX slide: ``X.mrxs`` (never read by OpenSlide; written
empty, as the detection needs only the name) beside a folder ``X/`` holding ``Slidedat.ini``,
``Index.dat`` and the ``Data*.dat`` files. Used by ``mirax.py`` (the slides) and its bad-input
cases.

Layout as OpenSlide 4.0.1's ``openslide-vendor-mirax.c`` reads it (facts checked on the
oracle, see ``/work/notes/issue16-plan.md`` §2):

* ``Slidedat.ini`` (GKeyFile): ``[GENERAL]`` SLIDE_ID, IMAGENUMBER_X/Y,
  OBJECTIVE_MAGNIFICATION, CameraImageDivisionsPerSide; ``[HIERARCHICAL]`` HIER_0 = the
  "Slide zoom level" with one section per level, NONHIER names/values/sections (a nonhier
  record's number is the sum of the counts of the names before it plus the value index);
  ``[DATAFILE]`` FILE_COUNT, FILE_i; per level IMAGE_CONCAT_FACTOR (exponent), OVERLAP_X/Y,
  MICROMETER_PER_PIXEL_X/Y, IMAGE_FILL_COLOR_BGR, DIGITIZER_WIDTH/HEIGHT, IMAGE_FORMAT.
* ``Index.dat``: ``"01.02"`` + SLIDE_ID, then two int32 LE pointers (hier table, nonhier
  table). Hier table: one pointer per zoom level to a list head ``[0][first page]``; a page is
  ``[count][next page or 0]`` + count records ``[image_index][offset][length][fileno]``
  (image_index = y * IMAGENUMBER_X + x, level-0 image units). Nonhier table: one pointer per
  record number to ``[0][page]``; a page is ``[1][0][0][0][offset][size][fileno]``.
* Position records: 9 bytes per camera position, ``[flag (0/1)][x int32][y int32]`` (level-0
  pixels divided by the level-0 concat), raw (VIMSLIDE_POSITION_BUFFER) or zlib-deflated
  (StitchingIntensityLayer).
* BMP24 images: BITMAPFILEHEADER + BITMAPINFOHEADER (40 bytes), 24-bit BI_RGB, bottom-up,
  BGR, rows padded to 4 bytes.
"""

from __future__ import annotations

import dataclasses
import io
import pathlib
import struct
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from PIL import Image


def jpeg(img: np.ndarray, quality: int = 95, subsampling: int = 0) -> bytes:
    """JPEG of an (h, w, 3) uint8 array (4:4:4 by default, so tints do not bleed far)."""
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", quality=quality, subsampling=subsampling)
    return buf.getvalue()


def png(img: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "PNG")
    return buf.getvalue()


def bmp24(img: np.ndarray) -> bytes:
    """A bottom-up 24-bit BI_RGB BMP with a BITMAPINFOHEADER (the one layout OpenSlide 4.0.1's
    BMP reader takes)."""
    h, w = img.shape[:2]
    stride = (w * 3 + 3) & ~3
    rows = np.zeros((h, stride), np.uint8)
    rows[:, : w * 3] = img[::-1, :, ::-1].reshape(h, w * 3)
    data = rows.tobytes()
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(data), 2835, 2835, 0, 0)
    head = b"BM" + struct.pack("<IHHI", 14 + len(info) + len(data), 0, 0, 14 + len(info))
    return head + info + data


ENCODERS = {"JPEG": jpeg, "PNG": png, "BMP24": bmp24}


@dataclasses.dataclass
class Record:
    """Where a stored image or blob lies: data file number, offset, length."""

    fileno: int
    offset: int
    length: int


class DataFiles:
    """The ``Data*.dat`` files being written: ``add`` appends bytes to one and returns their
    record."""

    def __init__(self, count: int):
        self.files = [bytearray() for _ in range(count)]

    def add(self, fileno: int, data: bytes) -> Record:
        f = self.files[fileno]
        # A few filler bytes between blobs, so that offsets are not all contiguous.
        f += b"\0" * (len(f) % 3)
        rec = Record(fileno, len(f), len(data))
        f += data
        return rec

    def names(self) -> List[str]:
        return [f"Data{k:04d}.dat" for k in range(len(self.files))]


def index_dat(slide_id: str, levels: Sequence[Sequence[Tuple[int, Record]]], pages0: int, nonhier: Sequence[Record],
              nonhier_second: int = 0) -> bytes:
    """The bytes of ``Index.dat``: ``levels[k]`` is level k's (image_index, record) list in
    file order (level 0 split into ``pages0`` pages chained by their ``next`` pointers, other
    levels one page each); ``nonhier[n]`` is nonhier record number n; ``nonhier_second``: the
    value after a nonhier page's count of 1 (OpenSlide ignores it; 0, or 1253 in some real
    slides)."""
    i32 = lambda v: struct.pack("<i", v)  # noqa: E731
    out = bytearray(b"01.02" + slide_id.encode())
    root = len(out)
    out += b"\0" * 8
    # Nonhier pages first (somewhere in the middle of the file, as real ones are).
    nonhier_ptrs = []
    for rec in nonhier:
        page = len(out)
        out += i32(1) + i32(nonhier_second) + i32(0) + i32(0) + i32(rec.offset) + i32(rec.length) + i32(rec.fileno)
        head = len(out)
        out += i32(0) + i32(page)
        nonhier_ptrs.append(head)
    nonhier_table = len(out)
    for p in nonhier_ptrs:
        out += i32(p)
    heads = []
    for k, recs in enumerate(levels):
        n = pages0 if k == 0 else 1
        chunks = [list(recs[j * len(recs) // n : (j + 1) * len(recs) // n]) for j in range(n)]
        page_at = []
        for chunk in chunks:
            page_at.append(len(out))
            out += i32(len(chunk)) + i32(0)
            for image_index, rec in chunk:
                out += i32(image_index) + i32(rec.offset) + i32(rec.length) + i32(rec.fileno)
        for a, b in zip(page_at, page_at[1:]):
            out[a + 4 : a + 8] = i32(b)
        head = len(out)
        out += i32(0) + i32(page_at[0])
        heads.append(head)
    hier_table = len(out)
    for h in heads:
        out += i32(h)
    out[root : root + 8] = i32(hier_table) + i32(nonhier_table)
    return bytes(out)


def position_buffer(positions: Sequence[Tuple[int, int, int]]) -> bytes:
    """9-byte records ``[flag][x][y]`` of every camera position."""
    return b"".join(struct.pack("<Bii", f, x, y) for f, x, y in positions)


@dataclasses.dataclass
class Ini:
    """``Slidedat.ini`` as ordered groups of (key, value) lines; ``text()`` writes it (with a
    UTF-8 BOM when ``bom``, as 3DHISTECH's software does), then each group's ``extra_lines``
    (written as they are) after its keys, then ``tail``."""

    groups: Dict[str, List[Tuple[str, str]]] = dataclasses.field(default_factory=dict)
    bom: bool = False
    extra_lines: Dict[str, List[str]] = dataclasses.field(default_factory=dict)
    tail: str = ""

    def set(self, group: str, key: str, value) -> None:
        self.groups.setdefault(group, []).append((key, str(value)))

    def text(self) -> bytes:
        lines = []
        for g, kvs in self.groups.items():
            lines.append(f"[{g}]")
            lines += [f"{k}={v}" for k, v in kvs]
            lines += self.extra_lines.get(g, [])
        body = "\r\n".join(lines) + "\r\n" + self.tail
        return (b"\xef\xbb\xbf" if self.bom else b"") + body.encode()


def write_slide(out_dir: pathlib.Path, name: str, ini: Ini, index: bytes, data: DataFiles,
                mrxs: bytes = b"", skip: Optional[Sequence[str]] = ()) -> pathlib.Path:
    """Write ``out_dir/name.mrxs`` and the folder ``out_dir/name/`` (files named in ``skip``
    are left out, for bad-input cases); returns the ``.mrxs`` path."""
    folder = out_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    files = {"Slidedat.ini": ini.text(), "Index.dat": index}
    files.update(zip(data.names(), (bytes(f) for f in data.files)))
    for fname, content in files.items():
        if fname not in skip:
            (folder / fname).write_bytes(content)
    path = out_dir / f"{name}.mrxs"
    path.write_bytes(mrxs)
    return path
