//! The slide index: plain, immutable data describing every level, associated image and
//! source file of a slide. Format drivers describe a slide as a `format::SlideLayout`;
//! `format::finish` checks it and turns it into a [`SlideIndex`]. No pixel data is read to
//! build it; ICC profiles are kept as byte ranges ([`BlobRef`]) and read when asked for.
//!
//! * [`SlideIndex`]: levels, associated images, properties, ICC references, source files.
//! * [`Level`] = [`ImageIndex`] (geometry, tile size, [`Grid`], [`CodecInfo`]) + downsample.
//! * [`Grid`]: regular, sparse or positioned tiles; each tile's bytes are [`TileLoc`]s
//!   (source file, offset, length); readers ask [`ImageIndex::tile`] /
//!   [`ImageIndex::tiles_in_rect`].
//! * [`CodecInfo`] with [`TileStream`]: how a tile is coded and how its codestream is framed.
//!
//! Everything here is `Send + Sync` and cheap to share (`Arc`).

mod channels;
mod codec;
mod grid;
mod image;
mod positioned;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use channels::ChannelPlanes;
pub use codec::{Alpha, CodecInfo, Compression, Photometric, SampleBits, TileStream};
pub use grid::{Grid, Piece, PositionedGrid, PositionedTile, RegularGrid, SourceId, SparseGrid, TileLoc, TileRef};
pub use image::{ImageIndex, Level};

/// What identifies a file beyond its path, so a reader can check it opens the same file the
/// index was built from (POSIX `stat`: device, inode, size, modification time; and, where
/// recorded, a hash of the file's first and last bytes).
///
/// Two identities are the same file ([`FileIdentity::same_file`]) when device, inode and size
/// agree and either the modification time or the content sample does: a file only touched
/// (same bytes, new mtime) is still the file the index describes; a file rewritten in place
/// with other bytes of the same length is not, when a sample was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    /// `st_dev`.
    pub device: u64,
    /// `st_ino`.
    pub inode: u64,
    /// `st_size` in bytes.
    pub size: u64,
    /// `st_mtime` in nanoseconds since the Unix epoch.
    pub mtime_ns: i128,
    /// The first 8 bytes of SHA-256 over the file's first and last [`FileIdentity::SAMPLE_BYTES`]
    /// bytes ([`crate::io::posix::FileSource::identity`]); `None` when not sampled.
    pub sample: Option<u64>,
}

impl FileIdentity {
    /// Bytes hashed at each end of the file for [`FileIdentity::sample`].
    pub const SAMPLE_BYTES: u64 = 4096;

    /// The identity in `meta` (from `fstat` of an open file, preferably), without a sample.
    pub fn of(meta: &std::fs::Metadata) -> FileIdentity {
        use std::os::unix::fs::MetadataExt;
        FileIdentity {
            device: meta.dev(),
            inode: meta.ino(),
            size: meta.len(),
            mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
            sample: None,
        }
    }

    /// Whether device, inode and size agree (the same file object, not truncated or grown).
    pub fn same_object(&self, now: &FileIdentity) -> bool {
        (self.device, self.inode, self.size) == (now.device, now.inode, now.size)
    }
}

/// One file a slide is read from ([`SlideIndex::sources`], addressed by [`SourceId`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// The path (for the primary file: the name the slide was opened by).
    pub path: PathBuf,
    /// Length in bytes at open.
    pub len: u64,
    /// Device, inode, size and mtime when the source is a local file (`None` for memory and
    /// other byte sources).
    pub identity: Option<FileIdentity>,
}

/// A byte string the index refers to without holding it (an ICC profile): read on request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobRef {
    /// The bytes, when they were at hand anyway (e.g. stored inline in a TIFF IFD entry).
    Bytes(Arc<[u8]>),
    /// A byte range of a source file, checked at open to lie inside it.
    Range(TileLoc),
}

impl BlobRef {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            BlobRef::Bytes(b) => b.len() as u64,
            BlobRef::Range(r) => r.length,
        }
    }

    /// `true` when the blob holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Everything known about a slide after open: levels, associated images, properties, ICC.
#[derive(Debug, Clone)]
pub struct SlideIndex {
    /// The files the slide is read from; [`SourceId`] indexes this list. Source 0 is the file
    /// the slide was opened by.
    pub sources: Vec<SourceFile>,
    /// Format driver that opened it (`aperio`, `generic-tiff`); also `openslide.vendor`.
    pub vendor: &'static str,
    /// Pyramid levels, level 0 (full resolution) first, decreasing in size with increasing
    /// downsamples (checked by `format::finish`).
    pub levels: Vec<Level>,
    /// Associated images by name (`thumbnail`, `label`, `macro`): geometry and byte ranges;
    /// pixels are read on request.
    pub associated: BTreeMap<String, ImageIndex>,
    /// Properties with OpenSlide's names (`openslide.*`, `tiff.*`, vendor keys).
    pub properties: BTreeMap<String, String>,
    /// Where the ICC profile of the pyramid is (read on request; its size is
    /// `openslide.icc-size`).
    pub icc: Option<BlobRef>,
    /// Where the ICC profiles of associated images are.
    pub associated_icc: BTreeMap<String, BlobRef>,
    /// Channels stored as separate images (OME-TIFF multichannel), per level; `None` when the
    /// channels are the samples of each level's image.
    pub channels: Option<ChannelPlanes>,
}

impl SlideIndex {
    /// Level-0 dimensions (width, height) in pixels.
    pub fn dimensions(&self) -> (u64, u64) {
        (self.levels[0].image.width, self.levels[0].image.height)
    }

    /// The path the slide was opened by (source 0).
    pub fn path(&self) -> &Path {
        &self.sources[0].path
    }

    /// Length in bytes of the file the slide was opened by (source 0).
    pub fn file_len(&self) -> u64 {
        self.sources[0].len
    }

    /// The level `k`, if it exists.
    pub fn level(&self, k: usize) -> Option<&Level> {
        self.levels.get(k)
    }
}
