//! The ordered driver table: one line per driver, vendor drivers first, `generic-tiff` last
//! (it takes any tiled TIFF), as OpenSlide's format table in `openslide.c`.

use super::{aperio, argos, dicom, generic_tiff, hamamatsu, huron, leica, mirax, olympus, ome_tiff, philips, qptiff, sakura, trestle, ventana, zeiss, FormatDriver};

/// Drivers in the order detection tries them.
pub static DRIVERS: &[&dyn FormatDriver] = &[
    &mirax::Mirax, // OpenSlide's table: synthetic, mirax, dicom, hamamatsu-vms-vmu, hamamatsu-ndpi, ...
    &dicom::Dicom,
    &hamamatsu::Hamamatsu, // OpenSlide tries hamamatsu-ndpi before aperio
    &zeiss::Zeiss, // not TIFF: starts with ZISRAWFILE (OpenSlide's zeiss driver rejects TIFFs)
    &sakura::Sakura,       // OpenSlide 4.0.1's table: ... hamamatsu-ndpi, sakura, trestle, aperio ...
    &trestle::Trestle,     // OpenSlide 4.0.1 tries trestle before aperio, huron and argos after it
    &aperio::Aperio,
    &huron::Huron,
    &argos::Argos,
    &leica::Leica,
    &philips::Philips,
    &ventana::Ventana, // OpenSlide's table: ... aperio, leica, philips, ventana, generic-tiff
    &olympus::Olympus,  // not in OpenSlide 4.0.1: a VSI's IFD 0 is its preview, so before the TIFF-describing drivers
    &qptiff::Qptiff,    // not in OpenSlide 4.0.1: before ome-tiff and generic-tiff (its IFD 0 is any tiled or stripped TIFF)
    &ome_tiff::OmeTiff, // not in OpenSlide 4.0.1 (its generic-tiff reads these): just before generic-tiff
    &generic_tiff::GenericTiff, // last: accepts every tiled TIFF
];
