//! Several NDPI tiles decoded as one JPEG: the parts of tiles in consecutive rows of one column
//! that a read needs the same columns of ([`decode_ndpi_stack`]). A 256² patch of an NDPI level
//! with 512 × 8 restart-interval tiles needs 32 tiles per column; decoding them as one stacked
//! stream ([`super::stream::frame_ndpi_stack`]) parses the header, builds the Huffman tables
//! and sets up the decoder once instead of 32 times. The pixels equal the tiles' own decodes
//! when no vertical chroma upsampling crosses a tile edge: levels whose tiles are 8 pixels high
//! (MCU height 8: 4:4:4, 4:2:2, greyscale), the only ones the read layer stacks.

use super::{jpeg, part_crop, stream, ChunkGeometry, DecodedTile, PartRect};
use crate::error::{CodecError, Error, Location, Result};

/// Decode the parts `wants` (one per tile, all with the same columns; the first reaching the
/// tile's bottom, the middle ones whole in height, the last starting at its top) of the tiles
/// whose stored restart runs are `runs`, consecutive rows of one column of geometry `g`.
///
/// # Errors
/// [`Error::Usage`] when the parts do not stack as described; a decode error (not naming a
/// tile: callers decode the tiles one by one to find which) for damaged data or a stream whose
/// crop cannot be decoded partially.
pub fn decode_ndpi_stack(codec: &crate::index::CodecInfo, runs: &[&[u8]], g: ChunkGeometry, wants: &[PartRect], at: &Location) -> Result<Vec<DecodedTile>> {
    let n = runs.len();
    let th = g.tile_height;
    let stacks = n >= 2
        && wants.len() == n
        && wants.iter().all(|w| w.x == wants[0].x && w.w == wants[0].w && w.x + w.w <= g.valid_width && w.h > 0)
        && wants[..n - 1].iter().all(|w| w.y + w.h == th)
        && wants[1..].iter().all(|w| w.y == 0)
        && wants[n - 1].h <= th
        && g.valid_height == th;
    if !stacks {
        return Err(Error::Usage("NDPI parts that do not stack".into()));
    }
    let y0 = wants[0].y;
    let end = (n as u32 - 1) * th + wants[n - 1].h;
    let want = PartRect { x: wants[0].x, y: y0, w: wants[0].w, h: end - y0 };
    let mut stream_buf = Vec::new();
    let mut px = Vec::new();
    let dec = |e: CodecError| Error::decode(at, e);
    stream::frame_ndpi_stack(codec, runs, th, &mut stream_buf).map_err(dec)?;
    let hdr = jpeg::read_header(&stream_buf).map_err(dec)?;
    if hdr.width != g.tile_width || hdr.height != th * n as u32 {
        return Err(dec(format!("stacked NDPI stream of {}x{}", hdr.width, hdr.height).into()));
    }
    let crop = part_crop(&hdr, want).ok_or_else(|| dec("stacked NDPI stream without a partial crop".to_string().into()))?;
    jpeg::decode_rgba(&stream_buf, Some(crop), &mut px, |_| Ok(())).map_err(dec)?;
    let (skip, row_in, row_out) = (((want.x - crop.x) * 4) as usize, (crop.width * 4) as usize, (want.w * 4) as usize);
    let mut out = Vec::with_capacity(n);
    for (k, w) in wants.iter().enumerate() {
        let first = (k as u32 * th + w.y - y0) as usize;
        let mut rgba = Vec::with_capacity(row_out * w.h as usize);
        for row in px.chunks_exact(row_in).skip(first).take(w.h as usize) {
            rgba.extend_from_slice(&row[skip..skip + row_out]);
        }
        out.push(DecodedTile { x: w.x, y: w.y, width: w.w, height: w.h, opaque: true, rgba });
    }
    Ok(out)
}
