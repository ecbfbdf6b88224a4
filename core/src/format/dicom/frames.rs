//! Where each frame of a DICOM file's PixelData is: the Extended Offset Table, the Basic
//! Offset Table, or (neither) one walk over the encapsulated items at open; native (explicit VR
//! little endian) frames by arithmetic.
//!
//! Facts: DICOM PS3.5 §A.4 (encapsulated pixel data: items tagged (FFFE,E000) with a 32-bit
//! length, the first being the Basic Offset Table of 32-bit offsets from the first fragment's
//! item tag, ended by (FFFE,E0DD)); PS3.3 C.7.6.3.1.8 (ExtendedOffsetTable, 64-bit offsets);
//! the rules libdicom applies for OpenSlide 4.0.1 (`dicom-file.c`): the EOT is used only when
//! its length is 8 × NumberOfFrames; a BOT must have NumberOfFrames entries; without either,
//! each item is one frame and the item count must equal NumberOfFrames; reading a frame reads
//! the one item at its offset (frames of several fragments are not read by OpenSlide).

use crate::error::{Error, Location, Result};
use crate::index::{SourceId, TileLoc};
use crate::io::ByteSource;

use super::header::PixelData;

const ITEM: [u8; 4] = [0xFE, 0xFF, 0x00, 0xE0];
const SEQ_END: [u8; 4] = [0xFE, 0xFF, 0xDD, 0xE0];

/// Read the 8-byte item header at `pos`: (tag bytes, length).
fn item_at(src: &dyn ByteSource, pos: u64, at: &Location) -> Result<([u8; 4], u64)> {
    let mut b = [0u8; 8];
    if pos.checked_add(8).is_none_or(|e| e > src.len()) {
        return Err(Error::format(at, format!("PixelData item at offset {pos} lies past the end of the file")));
    }
    src.read_exact_at(&mut b, pos).map_err(|e| Error::io(at, e))?;
    Ok(([b[0], b[1], b[2], b[3]], u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as u64))
}

/// The frame (item payload) whose item tag is at `pos`.
fn frame_item(src: &dyn ByteSource, pos: u64, at: &Location, k: usize) -> Result<(u64, u64)> {
    if pos.checked_add(8).is_none_or(|e| e > src.len()) {
        return Err(Error::format(at, format!("frame {k}: offset {pos} lies past the end of the file (offset table wrong)")));
    }
    let (tag, len) = item_at(src, pos, at)?;
    if tag != ITEM {
        return Err(Error::format(at, format!("frame {k}: no PixelData item at offset {pos} (offset table wrong)")));
    }
    if (pos + 8).checked_add(len).is_none_or(|e| e > src.len()) {
        return Err(Error::format(at, format!("frame {k}: item of {len} bytes at offset {pos} runs past the end of the file")));
    }
    Ok((pos + 8, len))
}

/// The byte range of each of the `frames` frames of a file (`source` in the slide), in frame
/// order. `frame_bytes` is Rows × Columns × 3 for native pixel data.
///
/// # Errors
/// `Format` when a table or item lies past the end of the file, the tables' counts disagree
/// with NumberOfFrames, or the items are not one per frame.
pub(crate) fn frame_locs(
    src: &dyn ByteSource,
    at: &Location,
    source: SourceId,
    pixel: PixelData,
    eot: Option<(u64, u64)>,
    frames: u64,
    frame_bytes: u64,
) -> Result<Vec<TileLoc>> {
    let file_len = src.len();
    let loc = |(offset, length): (u64, u64)| TileLoc { source, offset, length };
    if let Some(len) = pixel.length {
        // Native: frame i at i × frame_bytes of the value. As libdicom, a frame past the end of
        // a truncated file fails when read (the core keeps such ranges; reading one is a
        // `Format` error), the frames before it read; a count beyond what the file could hold
        // even so is refused here.
        let room = file_len.saturating_sub(pixel.offset) / frame_bytes.max(1) + 1;
        if frames > room {
            return Err(Error::format(at, format!("NumberOfFrames {frames} of {frame_bytes} bytes each cannot fit in PixelData of {len} bytes in a file of {file_len} bytes")));
        }
        return Ok((0..frames).map(|i| loc((pixel.offset + i * frame_bytes, frame_bytes))).collect());
    }
    // Each frame needs at least an 8-byte item: a count above that is a hostile header.
    if frames > file_len / 8 {
        return Err(Error::format(at, format!("NumberOfFrames {frames} cannot fit in a file of {file_len} bytes")));
    }
    let (tag, bot_len) = item_at(src, pixel.offset, at)?;
    if tag != ITEM {
        return Err(Error::format(at, "encapsulated PixelData does not start with an item (Basic Offset Table)"));
    }
    let first = pixel.offset + 8 + bot_len;
    if first > file_len {
        return Err(Error::format(at, format!("Basic Offset Table of {bot_len} bytes runs past the end of the file")));
    }
    let n = frames as usize;
    if let Some((eot_at, eot_len)) = eot.filter(|&(_, l)| Some(l) == frames.checked_mul(8)) {
        if eot_at.saturating_add(eot_len) > file_len {
            return Err(Error::format(at, "ExtendedOffsetTable runs past the end of the file"));
        }
        let mut raw = vec![0u8; eot_len as usize];
        src.read_exact_at(&mut raw, eot_at).map_err(|e| Error::io(at, e))?;
        return raw
            .chunks_exact(8)
            .enumerate()
            .map(|(k, c)| {
                let off = u64::from_le_bytes(c.try_into().unwrap_or_default());
                frame_item(src, first.saturating_add(off), at, k).map(loc)
            })
            .collect();
    }
    if bot_len > 0 {
        if bot_len != frames * 4 {
            return Err(Error::format(at, format!("Basic Offset Table of {bot_len} bytes for {frames} frames")));
        }
        let mut raw = vec![0u8; bot_len as usize];
        src.read_exact_at(&mut raw, pixel.offset + 8).map_err(|e| Error::io(at, e))?;
        return raw
            .chunks_exact(4)
            .enumerate()
            .map(|(k, c)| frame_item(src, first + u32::from_le_bytes(c.try_into().unwrap_or_default()) as u64, at, k).map(loc))
            .collect();
    }
    // No table: each item is one frame.
    let mut out = Vec::with_capacity(n);
    let mut pos = first;
    loop {
        let (tag, len) = item_at(src, pos, at)?;
        if tag == SEQ_END {
            break;
        }
        if out.len() == n {
            return Err(Error::format(at, format!("too many frames in PixelData (NumberOfFrames {frames})")));
        }
        out.push(loc(frame_item(src, pos, at, out.len())?));
        pos += 8 + len;
    }
    if out.len() != n {
        return Err(Error::format(at, format!("too few frames in PixelData: {} items for NumberOfFrames {frames}", out.len())));
    }
    Ok(out)
}
