//! Several NDPI tiles decoded as one JPEG: the parts of tiles in consecutive rows of one column
//! that a read needs the same columns of ([`decode_ndpi_stack`]). A 256² patch of an NDPI level
//! with 512 × 8 restart-interval tiles needs 32 tiles per column; decoding them as one stacked
//! stream ([`super::stream::frame_ndpi_stack`]) parses the header, builds the Huffman tables
//! and sets up the decoder once instead of 32 times. The pixels equal the tiles' own decodes
//! when no vertical chroma upsampling crosses a tile edge: levels whose tiles are 8 pixels high
//! (MCU height 8: 4:4:4, 4:2:2, greyscale), the only ones the read layer stacks.

use std::cell::RefCell;

use super::{jpeg, jpeg_part, part_crop, stream, ChunkGeometry, DecodedTile, PartRect};
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
    let dec = |e: CodecError| Error::decode(at, e);
    STREAM.with(|cell| {
        let stream_buf = &mut *cell.borrow_mut();
        let r = decode_framed(codec, runs, g, wants, want, stream_buf).map_err(dec);
        if stream_buf.capacity() > MAX_KEPT_STREAM_BYTES {
            *stream_buf = Vec::new();
        }
        r
    })
}

/// Most bytes of stacked stream kept between calls on one thread.
const MAX_KEPT_STREAM_BYTES: usize = 4 << 20;

/// Frame `runs` as one stream into `stream_buf` and decode the crop `want` of it, split into
/// the tiles' parts `wants`.
fn decode_framed(codec: &crate::index::CodecInfo, runs: &[&[u8]], g: ChunkGeometry, wants: &[PartRect], want: PartRect, stream_buf: &mut Vec<u8>) -> std::result::Result<Vec<DecodedTile>, CodecError> {
    let (n, th) = (runs.len(), g.tile_height);
    stream::frame_ndpi_stack(codec, runs, th, stream_buf)?;
    let hdr = jpeg::read_header(stream_buf)?;
    if hdr.width != g.tile_width || hdr.height != th * n as u32 {
        return Err(format!("stacked NDPI stream of {}x{}", hdr.width, hdr.height).into());
    }
    let crop = part_crop(&hdr, want).ok_or_else(|| CodecError::from("stacked NDPI stream without a partial crop".to_string()))?;
    // Each tile's rows go straight from the decoder's one-row scratch into its own buffer.
    let heights: Vec<u32> = wants.iter().map(|w| w.h).collect();
    let bands = jpeg_part::decode_part_bands(stream_buf, crop, want.x - crop.x, want.w, &heights)?;
    Ok(wants.iter().zip(bands).map(|(w, rgba)| DecodedTile { x: w.x, y: w.y, width: w.w, height: w.h, opaque: true, rgba }).collect())
}

thread_local! {
    /// The stacked stream of the last [`decode_ndpi_stack`] on this thread (reused: no
    /// allocation per stack once it has grown).
    static STREAM: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}
