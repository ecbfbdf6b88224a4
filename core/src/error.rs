//! Error taxonomy.
//!
//! Every fallible slidestream call returns [`Error`]. The variants follow the split used by
//! image-rs/image-tiff (format / unsupported / usage / limits) plus I/O and GPU:
//!
//! * [`Error::Format`]: the file is damaged or breaks its format's rules (a corrupt tile, a tag
//!   with an impossible value, an IFD chain that loops).
//! * [`Error::Unsupported`]: the file is valid but uses a feature slidestream does not read
//!   (16-bit samples, palette colour, an unknown compression), or no format driver recognised it.
//! * [`Error::Usage`]: the caller asked for something impossible (a level that does not exist).
//! * [`Error::Io`]: the operating system refused a read or an open.
//! * [`Error::Limits`]: a header value or a request would need more memory or work than the
//!   configured limits allow; nothing was allocated.
//! * [`Error::Gpu`]: the GPU path is unavailable or failed.
//! * [`Error::Config`]: a `SLIDESTREAM_*` setting (or `RAYON_NUM_THREADS`, capped at
//!   [`crate::config::MAX_THREADS`]) has a value that is not accepted.
//! * [`Error::Interrupted`]: the process's interrupt check stopped a long call.
//!
//! Errors are [`Clone`]: the OS error of [`Error::Io`] is shared through an [`Arc`] (its kind and
//! errno survive a clone), so a failure that concerns many patches of a batch is reported to
//! each of them as the same error. Errors from tile decoding carry a typed [`CodecError`]
//! ([`Error::codec_error`]), so callers classify them by type, never by message text.
//!
//! Every error that concerns a file carries a [`Location`] naming the file and, where relevant,
//! the level (or associated image) and the tile, so one line of text is enough to find the fault.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Where an error happened: the file, and optionally the level or associated image and the
/// tile (column, row in the tile grid of that level).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// The slide file.
    pub path: PathBuf,
    /// Pyramid level (0 = full resolution) or associated image name.
    pub image: Option<ImageRef>,
    /// Tile column and row in the level's tile grid (for strips: column 0, row = strip index).
    pub tile: Option<(u64, u64)>,
}

/// A level or an associated image, as named in error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageRef {
    /// Pyramid level index.
    Level(usize),
    /// Associated image name (`thumbnail`, `label`, `macro`, ...).
    Associated(String),
}

impl Location {
    /// A location naming only the file.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Location { path: path.into(), image: None, tile: None }
    }

    /// The same location narrowed to an image (level or associated image).
    pub fn with_image(mut self, image: ImageRef) -> Self {
        self.image = Some(image);
        self
    }

    /// The same location narrowed to one tile.
    pub fn with_tile(mut self, col: u64, row: u64) -> Self {
        self.tile = Some((col, row));
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        match &self.image {
            Some(ImageRef::Level(l)) => write!(f, ": level {l}")?,
            Some(ImageRef::Associated(n)) => write!(f, ": associated image '{n}'")?,
            None => {}
        }
        if let Some((c, r)) = self.tile {
            write!(f, ": tile ({c}, {r})")?;
        }
        Ok(())
    }
}

/// Why a tile's codestream could not be decoded (JPEG, JPEG 2000, WebP, deflate, LZW, zstd).
///
/// Carried by the [`Error::Format`] or [`Error::Limits`] a decode returns (see
/// [`CodecError::is_limit`] for which); read it with [`Error::codec_error`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The stream's header claims more pixels than the tile holds: decoding it would allocate
    /// more than the tile. Checked from the header, before any pixel buffer is allocated.
    #[error("stream larger than the tile: {width}x{height} pixels for a {tile_width}x{tile_height} tile")]
    LargerThanTile {
        /// Stream width in pixels.
        width: u32,
        /// Stream height in pixels.
        height: u32,
        /// Nominal tile (or strip) width in pixels.
        tile_width: u32,
        /// Nominal tile (or strip) height in pixels.
        tile_height: u32,
    },
    /// The stream decodes to fewer pixels than the part of the tile inside the image.
    #[error("stream of {width}x{height} pixels does not cover the {valid_width}x{valid_height} pixels of the tile inside the image")]
    SmallerThanTile {
        /// Stream width in pixels.
        width: u32,
        /// Stream height in pixels.
        height: u32,
        /// Width of the part of the tile inside the image.
        valid_width: u32,
        /// Height of the part of the tile inside the image.
        valid_height: u32,
    },
    /// The caller's output buffer cannot hold the decoded pixels.
    #[error("output buffer of {have} bytes for {width}x{height} RGBA pixels ({need} bytes)")]
    BufferTooSmall {
        /// Bytes the buffer holds.
        have: usize,
        /// Bytes the decode writes (`width × height × 4`).
        need: usize,
        /// Width of the decode in pixels.
        width: u32,
        /// Height of the decode in pixels.
        height: u32,
    },
    /// A multi-scan (progressive) JPEG stream with more scans than
    /// [`crate::codec::jpeg_scans::MAX_SCANS`]: each scan revisits every block of its
    /// components, so the work grows with scans × image size, not with the stream's bytes.
    #[error("JPEG stream of more than {limit} scans")]
    TooManyScans {
        /// Most scans decoded.
        limit: u32,
    },
    /// A multi-scan (progressive) JPEG stream whose whole-image coefficient buffer (libjpeg's
    /// `jdcoefct.c`: 128 bytes per 8 × 8 block of every component) exceeds the limit
    /// ([`crate::codec::jpeg_scans::MAX_COEF_BYTES`]). Checked from the markers, before decoding.
    #[error("JPEG stream needs a {bytes}-byte coefficient buffer (limit {limit} bytes)")]
    DecoderMemory {
        /// Bytes the decoder would allocate.
        bytes: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The data is damaged or uses a coding the decoder refuses, in the codec's words
    /// (e.g. "malformed JPEG marker at byte 812", "12-bit JPEG (only 8-bit is read)").
    #[error("{0}")]
    Data(String),
}

impl CodecError {
    /// `true` for failures that are limits (the stream or the output would exceed a size
    /// bound: [`Error::Limits`]), `false` for damaged data ([`Error::Format`]).
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            CodecError::LargerThanTile { .. } | CodecError::BufferTooSmall { .. } | CodecError::TooManyScans { .. } | CodecError::DecoderMemory { .. }
        )
    }

    /// The same error with `prefix` in front of its text (e.g. "plane 1: ", "WebP: "); only
    /// [`CodecError::Data`] carries free text, the typed cases are returned unchanged.
    pub fn context(self, prefix: &str) -> Self {
        match self {
            CodecError::Data(m) => CodecError::Data(format!("{prefix}{m}")),
            typed => typed,
        }
    }
}

impl From<String> for CodecError {
    fn from(m: String) -> Self {
        CodecError::Data(m)
    }
}

impl From<&str> for CodecError {
    fn from(m: &str) -> Self {
        CodecError::Data(m.to_owned())
    }
}

/// GPU-specific failures (the `cuda` feature and the run-time CUDA libraries).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// The crate was built without the `cuda` feature.
    #[error("slidestream was built without the `cuda` feature")]
    NotCompiled,
    /// CUDA, nvJPEG or cuFile could not be loaded or initialised.
    #[error("GPU unavailable: {0}")]
    Unavailable(String),
    /// A CUDA / nvJPEG / cuFile call failed.
    #[error("GPU call failed: {0}")]
    Call(String),
    /// CUDA was initialised in a parent process and this process is a `fork` of it: CUDA
    /// contexts do not survive `fork` (CUDA programming guide), so the GPU path refuses to run.
    #[error("CUDA was initialised in process {parent} before this process ({child}) was forked from it; CUDA cannot be used in a forked child: start workers with the 'spawn' or 'forkserver' method, or open GPU work only after the fork")]
    Fork {
        /// Process that initialised CUDA.
        parent: u32,
        /// This process.
        child: u32,
    },
}

/// The one error type of the crate. See the module documentation for the meaning of each kind.
///
/// Build errors with the constructors ([`Error::format`], [`Error::io`], ...), not variant
/// literals: variants may gain fields.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file is damaged or violates its format.
    #[error("{at}: {message}")]
    Format {
        /// File, level and tile concerned.
        at: Location,
        /// What is wrong, in words.
        message: String,
        /// The decoder's typed reason when a tile's codestream failed to decode (its text is
        /// `message`, so it is not a `source()` too).
        codec: Option<CodecError>,
    },
    /// A valid file using a feature slidestream does not support, or a file no driver recognised.
    #[error("{at}: unsupported: {feature}")]
    Unsupported {
        /// File, level and tile concerned.
        at: Location,
        /// The unsupported feature, named (e.g. "BitsPerSample 16", "Compression 52479").
        feature: String,
    },
    /// The caller's request is invalid (no such level, no such associated image...).
    #[error("{0}")]
    Usage(String),
    /// The operating system failed an open or read.
    #[error("{at}: {source}")]
    Io {
        /// File concerned.
        at: Location,
        /// The OS error, shared by clones of this error (kind and errno:
        /// `source.kind()`, `source.raw_os_error()`).
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A size or count exceeds a configured or structural limit; nothing was allocated.
    #[error("{at}: limit exceeded: {message}")]
    Limits {
        /// File concerned (may be empty for pure request-size checks).
        at: Location,
        /// Which limit, with the numbers.
        message: String,
        /// The decoder's typed reason when a tile's codestream exceeded a limit.
        codec: Option<CodecError>,
    },
    /// GPU path failure.
    #[error("{0}")]
    Gpu(#[from] GpuError),
    /// A `SLIDESTREAM_*` setting (environment variable or `config::set`) has a value that is
    /// not accepted; nothing was done with it.
    #[error("{variable}={value:?}: expected {expected}")]
    Config {
        /// The variable, e.g. `SLIDESTREAM_COMPAT_MODE`.
        variable: String,
        /// The text given.
        value: String,
        /// The accepted values, in words (from the settings table).
        expected: String,
    },
    /// The call was stopped by the process's interrupt check ([`crate::interrupt`]; in Python,
    /// Ctrl-C: `KeyboardInterrupt`) between two waves of work. Nothing is half-written that
    /// the caller could mistake for a result; the slide stays usable.
    #[error("interrupted")]
    Interrupted,
}

impl Error {
    /// Convenience constructor for [`Error::Format`].
    pub fn format(at: &Location, message: impl Into<String>) -> Self {
        Error::Format { at: at.clone(), message: message.into(), codec: None }
    }
    /// Convenience constructor for [`Error::Unsupported`].
    pub fn unsupported(at: &Location, feature: impl Into<String>) -> Self {
        Error::Unsupported { at: at.clone(), feature: feature.into() }
    }
    /// Convenience constructor for [`Error::Limits`].
    pub fn limits(at: &Location, message: impl Into<String>) -> Self {
        Error::Limits { at: at.clone(), message: message.into(), codec: None }
    }
    /// Convenience constructor for [`Error::Io`]; the OS error is moved into an [`Arc`].
    /// An io error that carries an interruption (a remote wait stopped by the process's
    /// interrupt check, [`crate::interrupt`]) becomes [`Error::Interrupted`].
    pub fn io(at: &Location, source: std::io::Error) -> Self {
        if crate::interrupt::is_io(&source) {
            return Error::Interrupted;
        }
        Error::Io { at: at.clone(), source: Arc::new(source) }
    }
    /// An [`Error::Io`] from a borrowed io error (one request's error shared by the tiles it
    /// carried): the OS error number is kept where there is one (so `raw_os_error` and the
    /// Python `OSError` subclass stay right), else the kind and the message.
    pub fn io_shared(at: &Location, source: &std::io::Error) -> Self {
        if crate::interrupt::is_io(source) {
            return Error::Interrupted;
        }
        let copy = match source.raw_os_error() {
            Some(errno) => std::io::Error::from_raw_os_error(errno),
            None => std::io::Error::new(source.kind(), source.to_string()),
        };
        Error::io(at, copy)
    }
    /// A tile decode failure at `at`: [`Error::Limits`] when [`CodecError::is_limit`], else
    /// [`Error::Format`]; either carries `codec` ([`Error::codec_error`]) and its text.
    pub fn decode(at: &Location, codec: CodecError) -> Self {
        let message = codec.to_string();
        if codec.is_limit() {
            Error::Limits { at: at.clone(), message, codec: Some(codec) }
        } else {
            Error::Format { at: at.clone(), message, codec: Some(codec) }
        }
    }
    /// Convenience constructor for [`Error::Config`].
    pub fn config(variable: impl Into<String>, value: impl Into<String>, expected: impl Into<String>) -> Self {
        Error::Config { variable: variable.into(), value: value.into(), expected: expected.into() }
    }

    /// The decoder's typed reason, for errors that come from decoding a tile.
    pub fn codec_error(&self) -> Option<&CodecError> {
        match self {
            Error::Format { codec, .. } | Error::Limits { codec, .. } => codec.as_ref(),
            _ => None,
        }
    }

    /// The OS error of an [`Error::Io`] (its `kind()` and `raw_os_error()`).
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }

    /// The message without the location prefix (for nesting in other messages).
    pub fn message(&self) -> String {
        match self {
            Error::Format { message, .. } | Error::Limits { message, .. } => message.clone(),
            Error::Unsupported { feature, .. } => format!("unsupported: {feature}"),
            Error::Io { source, .. } => source.to_string(),
            Error::Usage(m) => m.clone(),
            Error::Gpu(g) => g.to_string(),
            Error::Config { .. } | Error::Interrupted => self.to_string(),
        }
    }

    /// The same error with its location narrowed to tile (`col`, `row`) (no-op for errors
    /// without a location). Lets hot paths build locations only when something fails.
    pub fn with_tile(mut self, col: u64, row: u64) -> Self {
        match &mut self {
            Error::Format { at, .. } | Error::Unsupported { at, .. } | Error::Io { at, .. } | Error::Limits { at, .. } => {
                at.tile = Some((col, row));
            }
            Error::Usage(_) | Error::Gpu(_) | Error::Config { .. } | Error::Interrupted => {}
        }
        self
    }

    /// A short, stable name of the error kind (`format`, `unsupported`, `usage`, `io`,
    /// `limits`, `gpu`, `config`, `interrupted`), used by the CLI and the Python bindings to map errors.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Error::Format { .. } => "format",
            Error::Unsupported { .. } => "unsupported",
            Error::Usage(_) => "usage",
            Error::Io { .. } => "io",
            Error::Limits { .. } => "limits",
            Error::Gpu(_) => "gpu",
            Error::Config { .. } => "config",
            Error::Interrupted => "interrupted",
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_io_errors_keep_the_errno_or_the_kind() {
        let at = Location::file("x.svs");
        let os = std::io::Error::from_raw_os_error(5);
        let e = Error::io_shared(&at, &os);
        assert_eq!(e.io_error().unwrap().raw_os_error(), Some(5));
        let plain = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "read past end of file");
        let e = Error::io_shared(&at, &plain);
        assert_eq!(e.io_error().unwrap().kind(), std::io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("read past end of file"), "{e}");
    }

    #[test]
    fn clones_keep_the_os_error_kind_and_errno() {
        let at = Location::file("/no/such/slide.svs").with_tile(3, 4);
        let os = std::fs::File::open("/no/such/slide.svs").unwrap_err();
        let e = Error::io(&at, os);
        let c = e.clone();
        for err in [&e, &c] {
            let io = err.io_error().expect("an io error");
            assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
            assert_eq!(io.raw_os_error(), Some(2), "ENOENT survives the clone");
            assert_eq!(err.kind_name(), "io");
        }
        assert_eq!(e.to_string(), c.to_string());
        // The clone shares the OS error rather than re-creating it from text.
        match (&e, &c) {
            (Error::Io { source: a, .. }, Error::Io { source: b, .. }) => assert!(Arc::ptr_eq(a, b)),
            _ => unreachable!(),
        }
        // with_tile on a clone narrows the clone only.
        let narrowed = c.clone().with_tile(7, 8);
        assert!(narrowed.to_string().contains("tile (7, 8)") && e.to_string().contains("tile (3, 4)"), "{narrowed} / {e}");
    }

    #[test]
    fn decode_errors_are_classified_by_type() {
        let at = Location::file("s.svs").with_image(ImageRef::Level(0)).with_tile(1, 0);
        let big = CodecError::LargerThanTile { width: 64, height: 64, tile_width: 32, tile_height: 32 };
        let e = Error::decode(&at, big.clone());
        assert!(matches!(e, Error::Limits { .. }), "{e}");
        assert_eq!(e.codec_error(), Some(&big));
        assert_eq!(e.kind_name(), "limits");
        let small = Error::decode(&at, CodecError::BufferTooSmall { have: 10, need: 4096, width: 32, height: 32 });
        assert_eq!(small.kind_name(), "limits");
        for data in [
            CodecError::SmallerThanTile { width: 16, height: 16, valid_width: 32, valid_height: 32 },
            CodecError::Data("malformed JPEG marker at byte 2".into()),
        ] {
            let e = Error::decode(&at, data.clone());
            assert!(matches!(e, Error::Format { .. }), "{e}");
            assert_eq!(e.codec_error(), Some(&data));
            assert_eq!(e.message(), data.to_string());
        }
        // The location prefix and the codec's text, as before the typed payload.
        assert_eq!(e.to_string(), "s.svs: level 0: tile (1, 0): limit exceeded: stream larger than the tile: 64x64 pixels for a 32x32 tile");
        // Errors not from a decoder carry none.
        assert_eq!(Error::format(&at, "bad tag").codec_error(), None);
        assert_eq!(CodecError::Data("x".into()).context("plane 1: "), CodecError::Data("plane 1: x".into()));
        assert_eq!(big.clone().context("plane 1: "), big);
    }

    #[test]
    fn config_errors_are_one_line_naming_the_variable() {
        let e = Error::config("SLIDESTREAM_COMPAT_MODE", "of", "on, off or auto");
        assert_eq!(e.to_string(), "SLIDESTREAM_COMPAT_MODE=\"of\": expected on, off or auto");
        assert_eq!(e.kind_name(), "config");
        assert_eq!(e.clone().with_tile(1, 1).to_string(), e.to_string());
    }
}
