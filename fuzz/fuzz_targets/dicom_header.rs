//! A DICOM WSI series held in memory (a bundle of instances; the first is opened), read by the
//! whole driver; the mutator changes one instance's header, offset tables and first fragment
//! items (the bytes up to 8 KiB past its PixelData tag). Must give pixels or a typed error.
#![no_main]
use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};
use slidestream::fuzzing::{dicom_header_range, mutate_member, run};

fuzz_target!(|data: &[u8]| {
    let _ = run("dicom_header", data);
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    mutate_member(data, size, max_size, seed, |n| n.ends_with(".dcm"), dicom_header_range, fuzzer_mutate)
});
