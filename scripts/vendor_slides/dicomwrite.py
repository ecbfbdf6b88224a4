"""Writing DICOM VL Whole Slide Microscopy instances with pydicom for the generated slides
(``dicom.py``): tiles and their encodings, and one instance per call of ``write``.

Facts (what OpenSlide 4.0.1 and libdicom read; DICOM PS3.3 A.32.8 and C.8.12.4, PS3.5 A.4):
the file is Part 10 (preamble, ``DICM``, explicit VR little endian file meta) with
MediaStorageSOPClassUID = VL WSI; ImageType[2] is the flavor (VOLUME / LABEL / OVERVIEW /
THUMBNAIL); every frame is Columns x Rows pixels (edge tiles padded; the total pixel matrix
crops them); encapsulated pixel data holds one fragment per frame, located by the Basic Offset
Table, the Extended Offset Table (7FE0,0001) or neither; native pixel data is the frames'
RGB bytes back to back. TILED_SPARSE frames carry their 1-based pixel position in
PerFrameFunctionalGroupsSequence[i].PlanePositionSlideSequence[0].
"""

from __future__ import annotations

import dataclasses
import io
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

SOP_WSI = "1.2.840.10008.5.1.4.1.1.77.1.6"
TS_EXPLICIT = "1.2.840.10008.1.2.1"
TS_JPEG = "1.2.840.10008.1.2.4.50"
TS_JPEG_LS = "1.2.840.10008.1.2.4.80"
TS_J2K_LOSSLESS = "1.2.840.10008.1.2.4.90"
TS_J2K = "1.2.840.10008.1.2.4.91"
TS_HTJ2K_LOSSLESS = "1.2.840.10008.1.2.4.201"
TS_HTJ2K_LOSSLESS_RPCL = "1.2.840.10008.1.2.4.202"
TS_HTJ2K = "1.2.840.10008.1.2.4.203"
ENCAPSULATED = {TS_JPEG, TS_JPEG_LS, TS_J2K_LOSSLESS, TS_J2K, TS_HTJ2K_LOSSLESS, TS_HTJ2K_LOSSLESS_RPCL, TS_HTJ2K}


def uid(*parts: str) -> str:
    """A deterministic UID for the names ``parts``: ``2.25.`` + a 128-bit integer from their
    SHA-256 (PS3.5 B.2 form; pydicom's ``generate_uid(prefix=None)`` is random)."""
    import hashlib

    h = hashlib.sha256("\0".join(["slidestream-dicomgen", *parts]).encode()).digest()
    return "2.25." + str(int.from_bytes(h[:16], "big"))


def tiles(img: np.ndarray, tw: int, th: int) -> List[Tuple[int, int, np.ndarray]]:
    """(column, row, tile) of ``img`` in raster order, each ``th`` x ``tw``, padded by repeating
    the edge pixels."""
    h, w = img.shape[:2]
    out = []
    for r, y in enumerate(range(0, h, th)):
        for c, x in enumerate(range(0, w, tw)):
            part = img[y:y + th, x:x + tw]
            out.append((c, r, np.pad(part, ((0, th - part.shape[0]), (0, tw - part.shape[1]), (0, 0)), mode="edge")))
    return out


def jpeg_ybr(tile: np.ndarray, quality: int = 90) -> bytes:
    """Baseline JPEG, YCbCr 4:2:2 (PhotometricInterpretation YBR_FULL_422)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(tile, "RGB").save(buf, "JPEG", quality=quality, subsampling=1)
    return buf.getvalue()


def jpeg_rgb(tile: np.ndarray, quality: int = 90) -> bytes:
    """Baseline JPEG coding the R, G, B samples as given (Adobe APP14 transform 0; Photometric
    RGB, which OpenSlide decodes without colour transform)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(tile, "RGB").save(buf, "JPEG", quality=quality, subsampling=0, keep_rgb=True)
    return buf.getvalue()


def j2k(tile: np.ndarray, lossless: bool, mct: bool) -> bytes:
    """A JPEG 2000 codestream (no JP2 box, OpenJPEG through Pillow): reversible 5/3 wavelet when
    ``lossless`` (with ``mct``: the RCT, Photometric YBR_RCT; without: RGB), else the 9/7
    wavelet with the ICT (YBR_ICT)."""
    from PIL import Image

    buf = io.BytesIO()
    kw = {} if lossless else {"irreversible": True, "quality_mode": "rates", "quality_layers": [8]}
    Image.fromarray(tile, "RGB").save(buf, "JPEG2000", no_jp2=True, mct=1 if mct else 0, **kw)
    return buf.getvalue()


def htj2k(tile: np.ndarray, lossless: bool, mct: bool = True) -> bytes:
    """A High-Throughput JPEG 2000 codestream (ISO/IEC 15444-15; OpenJPH through imagecodecs):
    reversible 5/3 wavelet when ``lossless`` (with ``mct``: the RCT, Photometric YBR_RCT;
    without: RGB), else the 9/7 wavelet with the ICT (YBR_ICT) at quantisation step 0.005."""
    import imagecodecs

    if lossless:
        return bytes(imagecodecs.htj2k_encode(tile, reversible=True, rgb=mct, planar=False))
    return bytes(imagecodecs.htj2k_encode(tile, level=0.005, reversible=False, rgb=True, planar=False))


def htj2k_decode(frame: bytes) -> np.ndarray:
    """OpenJPH's decode of an HTJ2K frame (an independent decoder: slidestream and Pillow use
    OpenJPEG), (h, w, 3) uint8."""
    import imagecodecs

    d = np.asarray(imagecodecs.htj2k_decode(frame))
    return np.moveaxis(d, 0, -1) if d.ndim == 3 and d.shape[0] == 3 and d.shape[-1] != 3 else d


def raw(tile: np.ndarray) -> bytes:
    """The tile's RGB bytes (native explicit VR little endian pixel data)."""
    return np.ascontiguousarray(tile, np.uint8).tobytes()


def decode(frame: bytes, ts: str, tw: int, th: int) -> np.ndarray:
    """What a decoder gives for ``frame`` (Pillow: libjpeg-turbo / OpenJPEG, as OpenSlide
    uses), (th, tw, 3) uint8."""
    from PIL import Image

    if ts == TS_EXPLICIT:
        return np.frombuffer(frame, np.uint8).reshape(th, tw, 3)
    im = Image.open(io.BytesIO(frame))
    im.load()
    return np.asarray(im.convert("RGB"))


@dataclasses.dataclass
class Instance:
    """One instance file. ``frames`` are the encoded frames in stored order; ``positions``
    (TILED_SPARSE only) the 1-based (column, row) pixel position of each; ``concat`` =
    (ConcatenationUID, InConcatenationNumber, InConcatenationTotalNumber or None,
    ConcatenationFrameOffsetNumber); ``offsets`` = "bot", "eot" or "none" (encapsulated
    syntaxes); ``dim_org`` the DimensionOrganizationType ("auto": TILED_SPARSE with
    ``positions``, else TILED_FULL; ``None``: absent); ``edit`` changes the data set last (bad
    inputs, properties)."""

    path: str
    flavor: str
    ts: str
    photometric: str
    tile: Tuple[int, int]
    total: Tuple[int, int]
    frames: Sequence[bytes]
    series_uid: str
    sop_uid: str
    study_uid: str
    positions: Optional[Sequence[Tuple[int, int]]] = None
    concat: Optional[Tuple[str, int, Optional[int], int]] = None
    offsets: str = "bot"
    icc: Optional[bytes] = None
    pixel_spacing: Optional[Tuple[str, str]] = ("0.0005", "0.0005")
    objective: Optional[str] = None
    sop_class: str = SOP_WSI
    dim_org: Optional[str] = "auto"
    edit: Optional[Callable[[object], None]] = None


def write(inst: Instance, out_path) -> None:
    """Write ``inst`` as a Part 10 file at ``out_path``."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.encaps import encapsulate, encapsulate_extended
    from pydicom.sequence import Sequence as Seq

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = inst.sop_class
    meta.MediaStorageSOPInstanceUID = inst.sop_uid
    meta.TransferSyntaxUID = inst.ts
    meta.ImplementationClassUID = "1.2.826.0.1.3680043.10.1519.1"
    meta.ImplementationVersionName = "SLIDESTREAM_GEN"
    ds = Dataset()
    ds.file_meta = meta
    ds.preamble = b"\0" * 128
    ds.SOPClassUID = inst.sop_class
    ds.SOPInstanceUID = inst.sop_uid
    ds.StudyInstanceUID = inst.study_uid
    ds.SeriesInstanceUID = inst.series_uid
    ds.FrameOfReferenceUID = uid(inst.series_uid, "frame-of-reference")
    ds.Modality = "SM"
    ds.ImageType = ["DERIVED" if inst.flavor == "VOLUME" else "ORIGINAL", "PRIMARY", inst.flavor, "NONE"]
    ds.Manufacturer = "slidestream generator"
    ds.StudyDate = "20260101"
    ds.StudyTime = "120000"
    ds.ContentDate = "20260101"
    ds.ContentTime = "120000"
    ds.PatientName = "Generated^Slide"
    ds.PatientID = "GEN-1"
    ds.InstanceNumber = 1
    ds.SeriesNumber = 1
    if inst.dim_org == "auto":
        ds.DimensionOrganizationType = "TILED_SPARSE" if inst.positions is not None else "TILED_FULL"
    elif inst.dim_org is not None:
        ds.DimensionOrganizationType = inst.dim_org
    ds.TotalPixelMatrixColumns, ds.TotalPixelMatrixRows = inst.total
    ds.TotalPixelMatrixFocalPlanes = 1
    ds.Columns, ds.Rows = inst.tile
    ds.NumberOfFrames = len(inst.frames)
    ds.SamplesPerPixel = 3
    ds.PhotometricInterpretation = inst.photometric
    ds.PlanarConfiguration = 0
    ds.BitsAllocated = 8
    ds.BitsStored = 8
    ds.HighBit = 7
    ds.PixelRepresentation = 0
    ds.ImagedVolumeWidth = 1.5
    ds.ImagedVolumeHeight = 1.25
    ds.ImagedVolumeDepth = 0.0
    if inst.ts in (TS_JPEG, TS_J2K):
        ds.LossyImageCompression = "01"
    if inst.pixel_spacing is not None:
        pm = Dataset()
        pm.PixelSpacing = list(inst.pixel_spacing)
        pm.SliceThickness = "0.001"
        sfg = Dataset()
        sfg.PixelMeasuresSequence = Seq([pm])
        ds.SharedFunctionalGroupsSequence = Seq([sfg])
    op = Dataset()
    op.OpticalPathIdentifier = "1"
    ill = Dataset()
    ill.CodeValue = "111744"
    ill.CodingSchemeDesignator = "DCM"
    ill.CodeMeaning = "Brightfield illumination"
    op.IlluminationTypeCodeSequence = Seq([ill])
    if inst.icc is not None:
        op.ICCProfile = inst.icc
    if inst.objective is not None:
        op.ObjectiveLensPower = inst.objective
    ds.OpticalPathSequence = Seq([op])
    ds.NumberOfOpticalPaths = 1
    if inst.concat is not None:
        cuid, num, total, frame_off = inst.concat
        ds.ConcatenationUID = cuid
        ds.InConcatenationNumber = num
        if total is not None:
            ds.InConcatenationTotalNumber = total
        ds.ConcatenationFrameOffsetNumber = frame_off
        ds.SOPInstanceUIDOfConcatenationSource = uid(cuid, "source")
    if inst.positions is not None:
        items = []
        for col, row in inst.positions:
            pp = Dataset()
            pp.ColumnPositionInTotalImagePixelMatrix = col
            pp.RowPositionInTotalImagePixelMatrix = row
            pp.XOffsetInSlideCoordinateSystem = "0"
            pp.YOffsetInSlideCoordinateSystem = "0"
            item = Dataset()
            item.PlanePositionSlideSequence = Seq([pp])
            items.append(item)
        ds.PerFrameFunctionalGroupsSequence = Seq(items)
    frames = list(inst.frames)
    if inst.ts in ENCAPSULATED:
        if inst.offsets == "eot":
            data, eot, eot_len = encapsulate_extended(frames)
            ds.PixelData = data
            ds.ExtendedOffsetTable = eot
            ds.ExtendedOffsetTableLengths = eot_len
        else:
            ds.PixelData = encapsulate(frames, has_bot=inst.offsets == "bot")
        ds["PixelData"].VR = "OB"
        ds["PixelData"].is_undefined_length = True
    else:
        ds.PixelData = b"".join(frames)
        ds["PixelData"].VR = "OB"
    if inst.edit is not None:
        inst.edit(ds)
    ds.save_as(out_path, enforce_file_format=True)
