//! Philips, Ventana, Leica, OME-TIFF and ARGOS XML (and the key=value descriptions of Trestle and
//! Huron): a bundle of texts (`ifd<N>.<tag>.xml`) and a
//! TIFF template (a generated vendor slide); each text is stored as that tag of that IFD and
//! the file is opened by the vendor's driver and read. The mutator changes one XML text only.
//! Must give pixels or a typed error.
#![no_main]
use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};
use slidestream::fuzzing::{mutate_member, run};

fuzz_target!(|data: &[u8]| {
    let _ = run("vendor_xml", data);
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    mutate_member(data, size, max_size, seed, |n| n.ends_with(".xml"), |d| 0..d.len(), fuzzer_mutate)
});
