//! Error taxonomy.
//!
//! Every fallible slidestream call returns [`Error`]. The variants follow the split used by
//! image-rs/image-tiff (format / unsupported / usage / limits) plus I/O and GPU:
//!
//! * [`Error::Format`]: the file is damaged or breaks its format's rules (a corrupt tile, a tag
//!   with an impossible value, an IFD chain that loops).
//! * [`Error::Unsupported`]: the file is valid but uses a feature slidestream does not read
//!   (16-bit samples, CMYK, an unknown compression), or no format driver recognised it.
//! * [`Error::Usage`]: the caller asked for something impossible (a level that does not exist).
//! * [`Error::Io`]: the operating system refused a read or an open.
//! * [`Error::Limits`]: a header value or a request would need more memory or work than the
//!   configured limits allow; nothing was allocated.
//! * [`Error::Gpu`]: the GPU path is unavailable or failed.
//! * [`Error::Config`]: a `SLIDESTREAM_*` setting has a value that is not accepted.
//!
//! Every error that concerns a file carries a [`Location`] naming the file and, where relevant,
//! the level (or associated image) and the tile, so one line of text is enough to find the fault.

use std::fmt;
use std::path::PathBuf;

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

/// GPU-specific failures (the `cuda` feature and the run-time CUDA libraries).
#[derive(Debug, thiserror::Error)]
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
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file is damaged or violates its format.
    #[error("{at}: {message}")]
    Format {
        /// File, level and tile concerned.
        at: Location,
        /// What is wrong, in words.
        message: String,
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
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A size or count exceeds a configured or structural limit; nothing was allocated.
    #[error("{at}: limit exceeded: {message}")]
    Limits {
        /// File concerned (may be empty for pure request-size checks).
        at: Location,
        /// Which limit, with the numbers.
        message: String,
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
}

impl Error {
    /// Convenience constructor for [`Error::Format`].
    pub fn format(at: &Location, message: impl Into<String>) -> Self {
        Error::Format { at: at.clone(), message: message.into() }
    }
    /// Convenience constructor for [`Error::Unsupported`].
    pub fn unsupported(at: &Location, feature: impl Into<String>) -> Self {
        Error::Unsupported { at: at.clone(), feature: feature.into() }
    }
    /// Convenience constructor for [`Error::Limits`].
    pub fn limits(at: &Location, message: impl Into<String>) -> Self {
        Error::Limits { at: at.clone(), message: message.into() }
    }
    /// Convenience constructor for [`Error::Io`].
    pub fn io(at: &Location, source: std::io::Error) -> Self {
        Error::Io { at: at.clone(), source }
    }

    /// The message without the location prefix (for nesting in other messages).
    pub fn message(&self) -> String {
        match self {
            Error::Format { message, .. } | Error::Limits { message, .. } => message.clone(),
            Error::Unsupported { feature, .. } => format!("unsupported: {feature}"),
            Error::Io { source, .. } => source.to_string(),
            Error::Usage(m) => m.clone(),
            Error::Gpu(g) => g.to_string(),
            Error::Config { .. } => self.to_string(),
        }
    }

    /// The same error with its location narrowed to tile (`col`, `row`) (no-op for errors
    /// without a location). Lets hot paths build locations only when something fails.
    pub fn with_tile(mut self, col: u64, row: u64) -> Self {
        match &mut self {
            Error::Format { at, .. } | Error::Unsupported { at, .. } | Error::Io { at, .. } | Error::Limits { at, .. } => {
                at.tile = Some((col, row));
            }
            Error::Usage(_) | Error::Gpu(_) | Error::Config { .. } => {}
        }
        self
    }

    /// A short, stable name of the error kind (`format`, `unsupported`, `usage`, `io`,
    /// `limits`, `gpu`), used by the CLI and the Python bindings to map errors.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Error::Format { .. } => "format",
            Error::Unsupported { .. } => "unsupported",
            Error::Usage(_) => "usage",
            Error::Io { .. } => "io",
            Error::Limits { .. } => "limits",
            Error::Gpu(_) => "gpu",
            Error::Config { .. } => "config",
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
