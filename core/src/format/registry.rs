//! The ordered driver table: one line per driver, vendor drivers first, `generic-tiff` last
//! (it takes any tiled TIFF), as OpenSlide's format table in `openslide.c`.

use super::{aperio, generic_tiff, hamamatsu, FormatDriver};

/// Drivers in the order detection tries them.
pub static DRIVERS: &[&dyn FormatDriver] = &[
    &hamamatsu::Hamamatsu, // OpenSlide tries hamamatsu-ndpi before aperio
    &aperio::Aperio,
    &generic_tiff::GenericTiff, // last: accepts every tiled TIFF
];
