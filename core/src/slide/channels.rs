//! Native-depth, per-channel reads: [`Slide::read_region_channels`] and
//! [`Slide::channel_names`]. CPU only and uncached: it decodes each tile it needs with
//! [`crate::codec::decode_native`] (the RGBA tile cache holds 8-bit pixels only).

use crate::codec::{decode_native, Samples};
use crate::error::{Error, Location, Result};
use crate::geometry::{level_origin, tile_span, Rect};
use crate::index::{ImageIndex, Photometric, SampleBits};
use crate::io::ByteSource;
use crate::read::{locate, locate_tile, MAX_TILE_BYTES};

use super::Slide;

/// A region's channels at their stored depth: row-major, shape (height, width, channels),
/// channel-last; pixels outside the image and in missing tiles are 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelRegion {
    /// Width in pixels.
    pub width: u64,
    /// Height in pixels.
    pub height: u64,
    /// The names of the returned channels, in order.
    pub names: Vec<String>,
    /// `width × height × names.len()` samples: `U8` for 8-bit images, `U16` for 16-bit.
    pub data: Samples,
}

impl ChannelRegion {
    /// Number of channels.
    pub fn channels(&self) -> usize {
        self.names.len()
    }
}

/// Where channel `c` of a level is: the image and the sample within its pixels.
struct ChannelSource<'a> {
    image: &'a ImageIndex,
    sample: usize,
}

fn sample_names(img: &ImageIndex) -> Vec<String> {
    let n = img.codec.samples_per_pixel as usize;
    let names: &[&str] = match (img.codec.photometric, n) {
        (Photometric::MinIsBlack, 1) => &["gray"],
        (Photometric::MinIsBlack, _) => &["gray", "alpha"],
        (_, 3) => &["R", "G", "B"],
        _ => &["R", "G", "B", "A"],
    };
    names.iter().map(|s| s.to_string()).collect()
}

impl Slide {
    /// The names of the slide's channels, in the order [`read_region_channels`] indexes them:
    /// from the format's metadata for channels stored as separate images (OME-TIFF
    /// `Channel/@Name`, `"C<i>"` when unnamed), else the stored samples of level 0: `gray`
    /// (+ `alpha`), or `R`, `G`, `B` (+ `A`).
    ///
    /// [`read_region_channels`]: Self::read_region_channels
    pub fn channel_names(&self) -> Vec<String> {
        match &self.index.channels {
            Some(ch) => ch.names.clone(),
            None => sample_names(&self.index.levels[0].image),
        }
    }

    /// The display colour (R, G, B) of each channel of [`channel_names`](Self::channel_names),
    /// in the same order: from the format's metadata for channels stored as separate images
    /// (QPTIFF `Color`, OME-XML `Channel/@Color`, CZI `Channel/Color`; the R, G, B samples of
    /// a CZI BGR channel get the primaries), `None` where the file gives none; for a slide's
    /// stored samples, `R`, `G`, `B` are the primaries and `gray`, `alpha`, `A` have none.
    pub fn channel_colors(&self) -> Vec<Option<[u8; 3]>> {
        match &self.index.channels {
            Some(ch) => (0..ch.names.len()).map(|c| ch.color(c)).collect(),
            None => sample_names(&self.index.levels[0].image)
                .iter()
                .map(|n| match n.as_str() {
                    "R" => Some([255, 0, 0]),
                    "G" => Some([0, 255, 0]),
                    "B" => Some([0, 0, 255]),
                    _ => None,
                })
                .collect(),
        }
    }

    /// Read a region's channels at their stored depth (8- or 16-bit unsigned), not converted
    /// to RGBA.
    ///
    /// * `location`: (x, y) of the top-left pixel in **level-0** coordinates (may be
    ///   negative); the level origin is `floor(location / downsample)`, as `read_region`.
    /// * `level`: pyramid level; `size`: (width, height) in pixels of that level.
    /// * `channels`: indices into [`channel_names`](Self::channel_names), in the order wanted
    ///   (repeats allowed); `None` = all.
    ///
    /// Returns [`ChannelRegion`]: shape (height, width, channels), `u8` or `u16` as stored;
    /// 0 outside the image and in missing tiles. JPEG, JPEG 2000 and WebP tiles give the
    /// decoder's 8-bit channels (RGB after any YCbCr conversion). CPU only, not cached.
    ///
    /// # Errors
    /// [`Error::Usage`] for a level or channel index that does not exist or an empty channel
    /// list; [`Error::Limits`] when the output (at its sample size) exceeds
    /// `max_region_bytes` or a tile exceeds [`MAX_TILE_BYTES`]; [`Error::Format`] when
    /// channels of different depths are asked for together, or a tile is corrupt (naming
    /// level and tile); [`Error::Io`] for read failures.
    pub fn read_region_channels(&self, location: (i64, i64), level: usize, size: (u64, u64), channels: Option<&[usize]>) -> Result<ChannelRegion> {
        let (img, ds, at) = locate::level(&self.index, level)?;
        let all_names = self.channel_names();
        let wanted: Vec<usize> = match channels {
            Some(c) => c.to_vec(),
            None => (0..all_names.len()).collect(),
        };
        if wanted.is_empty() {
            return Err(Error::Usage("read_region_channels: empty channel list".into()));
        }
        if let Some(&bad) = wanted.iter().find(|&&c| c >= all_names.len()) {
            return Err(Error::Usage(format!("channel {bad} does not exist (channel count {})", all_names.len())));
        }
        let sources: Vec<ChannelSource<'_>> = wanted
            .iter()
            .map(|&c| match &self.index.channels {
                Some(ch) => ChannelSource { image: &ch.levels[level][c], sample: ch.sample(c) },
                None => ChannelSource { image: img, sample: c },
            })
            .collect();
        let wide = !matches!(sources[0].image.codec.sample_bits, SampleBits::U8);
        if sources.iter().any(|s| !matches!(s.image.codec.sample_bits, SampleBits::U8) != wide) {
            return Err(Error::format(&at, "channels of different sample depths asked for together"));
        }
        let n = wanted.len();
        let bps: u64 = if wide { 2 } else { 1 };
        let bytes = size.0.checked_mul(size.1).and_then(|v| v.checked_mul(n as u64 * bps));
        let max = self.config.max_region_bytes;
        let count = match bytes {
            Some(b) if b <= max && usize::try_from(b).is_ok() => (b / bps) as usize,
            _ => return Err(Error::limits(&at, format!("region of {}x{}x{n} samples exceeds max_region_bytes ({max} bytes)", size.0, size.1))),
        };
        let mut data = if wide { Samples::U16(vec![0; count]) } else { Samples::U8(vec![0; count]) };
        let rect = Rect { x: level_origin(location.0, ds), y: level_origin(location.1, ds), w: size.0, h: size.1 };
        // Channels that share an image (the samples of one level) decode its tiles once.
        let mut done = vec![false; n];
        for k in 0..n {
            if done[k] {
                continue;
            }
            let group: Vec<usize> = (k..n).filter(|&j| std::ptr::eq(sources[j].image, sources[k].image) || sources[j].image == sources[k].image).collect();
            for &j in &group {
                done[j] = true;
            }
            let picks: Vec<(usize, usize)> = group.iter().map(|&j| (j, sources[j].sample)).collect();
            self.paint_channels(sources[k].image, &rect, &at, &picks, n, &mut data)?;
        }
        Ok(ChannelRegion { width: size.0, height: size.1, names: wanted.iter().map(|&c| all_names[c].clone()).collect(), data })
    }

    /// Decode the tiles of `img` under `rect` (level pixels) and copy sample `s` of each pixel
    /// to output channel `o` for every `(o, s)` of `picks`; the output has `n` channels.
    fn paint_channels(&self, img: &ImageIndex, rect: &Rect, at: &Location, picks: &[(usize, usize)], n: usize, out: &mut Samples) -> Result<()> {
        let Some(clip) = rect.clip(img.width, img.height) else { return Ok(()) };
        // One tile's decode must fit in the working set, as every CPU read (checked before
        // anything is read).
        let bps: u64 = if !matches!(img.codec.sample_bits, SampleBits::U8) { 2 } else { 1 };
        let tile_bytes = img.tile_width as u64 * img.tile_height as u64 * img.codec.samples_per_pixel.max(4) as u64 * bps;
        if tile_bytes > self.config.read_working_bytes {
            return Err(Error::limits(at, format!("a tile needs {tile_bytes} bytes to decode, more than read_working_bytes ({})", self.config.read_working_bytes)));
        }
        // Per stored tile, the parts of it to copy: (x0, y0, x1, y1) in tile pixels and the
        // offset from tile pixels to output pixels. Regular grids: the tile's part under the
        // region; positioned grids (stitched tiles, CZI subblocks): each visible piece's part.
        let mut work: Vec<((u64, u64), Vec<Part>)> = Vec::new();
        if img.grid.is_positioned() {
            let mut by_tile: std::collections::BTreeMap<(u64, u64), Vec<Part>> = Default::default();
            let (cx0, cy0, cx1, cy1) = (clip.x, clip.y, clip.x + clip.w as i64, clip.y + clip.h as i64);
            for q in img.grid.pieces_in(&clip) {
                let (ix0, iy0) = (q.x.max(cx0), q.y.max(cy0));
                let (ix1, iy1) = ((q.x + q.width as i64).min(cx1), (q.y + q.height as i64).min(cy1));
                if ix0 >= ix1 || iy0 >= iy1 {
                    continue;
                }
                // Tile pixel (u, v) shows at level pixel (u + q.x - src_x, v + q.y - src_y).
                let (dx, dy) = (q.x - q.src_x as i64, q.y - q.src_y as i64);
                let part = ((ix0 - dx) as u64, (iy0 - dy) as u64, (ix1 - dx) as u64, (iy1 - dy) as u64, dx - rect.x, dy - rect.y);
                by_tile.entry((q.row, q.col)).or_default().push(part);
            }
            work.extend(by_tile.into_iter().map(|((r, c), v)| ((c, r), v)));
        } else {
            let (cols, rows) = tile_span(&clip, img.tile_width, img.tile_height);
            for row in rows {
                for col in cols.clone() {
                    let (x0, y0, x1, y1) = img.part_of_tile(&clip, col, row);
                    let (tx, ty) = img.tile_origin(col, row);
                    work.push(((col, row), vec![(x0, y0, x1, y1, tx as i64 - rect.x, ty as i64 - rect.y)]));
                }
            }
        }
        for ((col, row), parts) in work {
            let tat = at.clone().with_tile(col, row);
            if locate_tile(img, &*self.src, col, row, at)?.is_none() {
                continue; // missing: 0
            }
            let mut planes = Vec::with_capacity(img.planes());
            for l in img.tile_locs(col, row) {
                if l.length > MAX_TILE_BYTES {
                    return Err(Error::limits(&tat, format!("tile of {} bytes exceeds {MAX_TILE_BYTES}", l.length)));
                }
                let mut buf = vec![0u8; l.length as usize];
                self.src.read_exact_at(&mut buf, crate::io::multi::address(l)).map_err(|e| Error::io(&tat, e))?;
                planes.push(buf);
            }
            let refs: Vec<&[u8]> = planes.iter().map(Vec::as_slice).collect();
            let g = img.chunk_geometry(col, row);
            let t = decode_native(&img.codec, &refs, g, &tat).map_err(|e| e.with_tile(col, row))?;
            let tc = t.channels;
            if let Some(&(_, s)) = picks.iter().find(|&&(_, s)| s >= tc) {
                return Err(Error::format(&tat, format!("tile decodes to {tc} channels, sample {s} asked for")));
            }
            for (x0, y0, x1, y1, ox, oy) in parts {
                let place = Placement { x0, y0, x1, y1, ox, oy, out_w: rect.w as usize, n, tw: t.width as usize, tc };
                match (&t.samples, &mut *out) {
                    (Samples::U8(src), Samples::U8(dst)) => place.copy(src, dst, picks),
                    (Samples::U16(src), Samples::U16(dst)) => place.copy(src, dst, picks),
                    _ => return Err(Error::format(&tat, "tile depth differs from the image's")),
                }
            }
        }
        Ok(())
    }
}

/// A part of a stored tile to copy: (x0, y0, x1, y1) in tile pixels, half-open, and the offset
/// (x, y) from tile pixels to output pixels.
type Part = (u64, u64, u64, u64, i64, i64);

/// Where a decoded tile's part `[x0, x1) × [y0, y1)` (tile pixels) goes in the output: tile
/// pixel (x, y) is output pixel (x + ox, y + oy); the output is `out_w` pixels wide with `n`
/// channels, the tile `tw` pixels wide with `tc`.
struct Placement {
    x0: u64,
    y0: u64,
    x1: u64,
    y1: u64,
    ox: i64,
    oy: i64,
    out_w: usize,
    n: usize,
    tw: usize,
    tc: usize,
}

impl Placement {
    fn copy<T: Copy>(&self, src: &[T], dst: &mut [T], picks: &[(usize, usize)]) {
        for y in self.y0..self.y1 {
            let orow = (y as i64 + self.oy) as usize * self.out_w;
            let irow = y as usize * self.tw;
            for x in self.x0..self.x1 {
                let o = (orow + (x as i64 + self.ox) as usize) * self.n;
                let i = (irow + x as usize) * self.tc;
                for &(c, s) in picks {
                    dst[o + c] = src[i + s];
                }
            }
        }
    }
}
