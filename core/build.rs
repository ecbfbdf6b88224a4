//! Builds `src/codec/jpeg_sm_host.c` (the SM JPEG decoder's C, for its host tests) and
//! `src/codec/jpeg_part.c` (partial JPEG decoding through libjpeg's API) against the
//! libjpeg-turbo headers that turbojpeg-sys exports (`DEP_TURBOJPEG_INCLUDE`); its symbols
//! come from the same static libturbojpeg that turbojpeg-sys links.

fn main() {
    println!("cargo:rerun-if-changed=src/codec/jpeg_part.c");
    let mut b = cc::Build::new();
    b.file("src/codec/jpeg_part.c").warnings(true);
    if let Ok(dirs) = std::env::var("DEP_TURBOJPEG_INCLUDE") {
        for d in dirs.split(',').filter(|d| !d.is_empty()) {
            b.include(d);
        }
    }
    b.compile("slidestream_jpeg_part");

    // The SM JPEG decoder's C (also compiled by NVRTC for the GPU), for its host tests.
    println!("cargo:rerun-if-changed=src/codec/jpeg_sm.h");
    println!("cargo:rerun-if-changed=src/codec/jpeg_sm_warp.h");
    println!("cargo:rerun-if-changed=src/codec/jpeg_sm_warp_sync.h");
    println!("cargo:rerun-if-changed=src/codec/jpeg_sm_host.c");
    cc::Build::new().file("src/codec/jpeg_sm_host.c").flag_if_supported("-fwrapv").opt_level(3).warnings(true).compile("slidestream_jpeg_sm");
}
