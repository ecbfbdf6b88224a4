//! Builds `src/codec/jpeg_part.c` (partial JPEG decoding through libjpeg's API) against the
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
}
