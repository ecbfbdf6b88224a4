//! A MIRAX slide held in memory (a bundle: `.mrxs`, `Slidedat.ini`, `Index.dat`, data files),
//! opened by the whole driver and read; the mutator changes `Slidedat.ini` only (key-file
//! syntax, the settings and everything sized by them). Must give pixels or a typed error:
//! never a panic, hang or allocation without bound.
#![no_main]
use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};
use slidestream::fuzzing::{mutate_member, run};

fuzz_target!(|data: &[u8]| {
    let _ = run("mirax_ini", data);
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    mutate_member(data, size, max_size, seed, |n| n.ends_with("/Slidedat.ini"), |d| 0..d.len(), fuzzer_mutate)
});
