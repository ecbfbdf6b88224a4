//! Well-known tag numbers (TIFF 6.0 unless noted).
#![allow(missing_docs)]

pub const NEW_SUBFILE_TYPE: u16 = 254;
pub const IMAGE_WIDTH: u16 = 256;
pub const IMAGE_LENGTH: u16 = 257;
pub const BITS_PER_SAMPLE: u16 = 258;
pub const COMPRESSION: u16 = 259;
pub const PHOTOMETRIC: u16 = 262;
pub const FILL_ORDER: u16 = 266;
pub const DOCUMENT_NAME: u16 = 269;
pub const IMAGE_DESCRIPTION: u16 = 270;
pub const MAKE: u16 = 271;
pub const MODEL: u16 = 272;
pub const STRIP_OFFSETS: u16 = 273;
pub const ORIENTATION: u16 = 274;
pub const SAMPLES_PER_PIXEL: u16 = 277;
pub const ROWS_PER_STRIP: u16 = 278;
pub const STRIP_BYTE_COUNTS: u16 = 279;
pub const X_RESOLUTION: u16 = 282;
pub const Y_RESOLUTION: u16 = 283;
pub const PLANAR_CONFIGURATION: u16 = 284;
pub const X_POSITION: u16 = 286;
pub const Y_POSITION: u16 = 287;
pub const RESOLUTION_UNIT: u16 = 296;
pub const SOFTWARE: u16 = 305;
pub const DATE_TIME: u16 = 306;
pub const ARTIST: u16 = 315;
pub const HOST_COMPUTER: u16 = 316;
pub const PREDICTOR: u16 = 317;
pub const TILE_WIDTH: u16 = 322;
pub const TILE_LENGTH: u16 = 323;
pub const TILE_OFFSETS: u16 = 324;
pub const TILE_BYTE_COUNTS: u16 = 325;
pub const SUB_IFDS: u16 = 330;
/// InkSet (TIFF 6.0 section 16): 1 = CMYK (the default), 2 = not CMYK.
pub const INK_SET: u16 = 332;
pub const EXTRA_SAMPLES: u16 = 338;
pub const SAMPLE_FORMAT: u16 = 339;
pub const JPEG_TABLES: u16 = 347;
pub const YCBCR_SUBSAMPLING: u16 = 530;
pub const REFERENCE_BLACK_WHITE: u16 = 532;
pub const COPYRIGHT: u16 = 33432;
/// ICC profile (TIFF/EP, "InterColorProfile").
pub const ICC_PROFILE: u16 = 34675;
/// Number of z-planes / depth (SGI); > 1 is read only when equal to TileDepth (one slice).
pub const IMAGE_DEPTH: u16 = 32997;
/// Depth of a tile in z-planes (SGI).
pub const TILE_DEPTH: u16 = 32998;
