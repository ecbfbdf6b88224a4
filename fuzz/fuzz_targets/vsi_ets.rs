//! An Olympus VSI slide held in memory (a bundle: the `.vsi`, then its
//! `_<name>_/stack<id>/frame_t*.ets`); the mutator changes one of the two files (the `.vsi`'s
//! record tree and preview TIFF, or the ETS headers, tiles and tile table). Must give pixels or
//! a typed error.
#![no_main]
use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};
use slidestream::fuzzing::{mutate_member, run};

fuzz_target!(|data: &[u8]| {
    let _ = run("vsi_ets", data);
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    mutate_member(data, size, max_size, seed, |n| n.ends_with(".vsi") || n.ends_with(".ets"), |d| 0..d.len(), fuzzer_mutate)
});
