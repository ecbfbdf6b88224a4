//! An NDPI file (Hamamatsu's TIFF-like layout: 32-bit offsets with their high bits in extra
//! words, the vendor tags, restart markers), opened from memory and read. Must give pixels or a
//! typed error.
#![no_main]
use libfuzzer_sys::fuzz_target;
use slidestream::fuzzing::run;

fuzz_target!(|data: &[u8]| {
    let _ = run("ndpi_tags", data);
});
