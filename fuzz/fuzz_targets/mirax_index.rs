//! A MIRAX slide held in memory (as `mirax_ini`); the mutator changes `Index.dat` only (its
//! header, the record lists of each zoom level and of the non-hierarchical layers, and the
//! placement of the images they point at). Must give pixels or a typed error.
#![no_main]
use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};
use slidestream::fuzzing::{mutate_member, run};

fuzz_target!(|data: &[u8]| {
    let _ = run("mirax_index", data);
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    mutate_member(data, size, max_size, seed, |n| n.ends_with("/Index.dat"), |d| 0..d.len(), fuzzer_mutate)
});
