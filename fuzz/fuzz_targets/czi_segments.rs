//! A Zeiss CZI file (ZISRAW segments: file header, subblock directory, subblock headers,
//! metadata XML, attachments; zstd and JPEG XR subblocks), opened from memory and read,
//! channels included. Must give pixels or a typed error.
#![no_main]
use libfuzzer_sys::fuzz_target;
use slidestream::fuzzing::run;

fuzz_target!(|data: &[u8]| {
    let _ = run("czi_segments", data);
});
