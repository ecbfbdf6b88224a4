//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod jpeg;
pub mod mirax;
pub mod tiffwriter;

use std::path::PathBuf;

/// `$SLIDESTREAM_TESTDATA`, else `../shared/testdata` beside the repository, or `None` (with a
/// message) when absent. (The variable lets test executables built here run on another machine.)
pub fn testdata() -> Option<PathBuf> {
    let p =
        std::env::var_os("SLIDESTREAM_TESTDATA").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata"));
    if p.join("MANIFEST.md").exists() {
        Some(p)
    } else {
        eprintln!("SKIP: {} not found; real-slide tests skipped", p.display());
        None
    }
}

/// `$SLIDESTREAM_VENDOR_SLIDES`, else `target/vendor-slides` of the workspace: the slides
/// `scripts/make_vendor_slides.py` generates in each vendor's layout, with OpenSlide's
/// references (same layout as the shared test data). `None` (with a message) when absent.
pub fn vendor_slides() -> Option<PathBuf> {
    let p = std::env::var_os("SLIDESTREAM_VENDOR_SLIDES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/vendor-slides"));
    if p.join("MANIFEST.md").exists() {
        Some(p)
    } else {
        eprintln!("SKIP: {} not found (run scripts/make_vendor_slides.py); generated-slide tests skipped", p.display());
        None
    }
}

/// The roots holding slides with OpenSlide references: the shared test data and the generated
/// vendor slides, those present.
pub fn reference_roots() -> Vec<PathBuf> {
    testdata().into_iter().chain(vendor_slides()).collect()
}

/// Vendors slidestream has a driver for (the rest must be refused with `Unsupported`): the
/// names of the registered format drivers (`format::registry::DRIVERS`), so a new driver's
/// files are compared with their references as soon as it is registered. (A hand-kept list
/// here went out of step with the registry twice: `sakura` and `zeiss` files were skipped or
/// refused by the reference tests.)
pub fn supported_vendors() -> Vec<&'static str> {
    slidestream::format::registry::DRIVERS.iter().map(|d| d.name()).collect()
}

/// Decode a PNG to RGBA8: (width, height, bytes).
pub fn decode_png(path: &std::path::Path) -> (u32, u32, Vec<u8>) {
    let img = image::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).to_rgba8();
    (img.width(), img.height(), img.into_raw())
}

/// Largest per-byte absolute difference (panics on length mismatch).
pub fn max_abs_diff(a: &[u8], b: &[u8]) -> u8 {
    assert_eq!(a.len(), b.len(), "buffer sizes differ");
    a.iter().zip(b).map(|(x, y)| x.abs_diff(*y)).max().unwrap_or(0)
}

/// `true` when a CUDA device is there (device 0's engine started and its background warm-up
/// done, so tiles go to nvJPEG); otherwise prints why `test` is skipped and returns `false`.
#[cfg(feature = "cuda")]
pub fn gpu_present(test: &str) -> bool {
    use slidestream::gpu;
    match gpu::probe() {
        Ok(r) if !r.devices.is_empty() => {
            wait_for_warm_lanes();
            true
        }
        Ok(_) => {
            eprintln!("{test}: skipped: no CUDA device");
            false
        }
        Err(e) => {
            eprintln!("{test}: skipped: {e}");
            false
        }
    }
}

/// Start device 0's engine and wait (at most 120 s) for its background warm-up: with
/// `SLIDESTREAM_GPU_WARMUP=first` (the default) the first reads of a process decode on the CPU
/// until a lane is warm, and these tests check which decoders ran.
#[cfg(feature = "cuda")]
fn wait_for_warm_lanes() {
    use slidestream::gpu;
    if gpu::start(0).is_err() {
        return;
    }
    let t = std::time::Instant::now();
    while t.elapsed() < std::time::Duration::from_secs(120) {
        let w = gpu::stats(0).warmup;
        if !w.starts_with("first") || w.contains("background") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// RGBA pixels composited over `bg` as the RGB batch paths do: `(c·a + bg·(255 − a) + 127) / 255`
/// per channel (the independent reference the batch tests compare with).
pub fn composite(rgba: &[u8], bg: [u8; 3]) -> Vec<u8> {
    rgba.chunks_exact(4)
        .flat_map(|p| {
            let a = p[3] as u32;
            let f = |c: usize| ((p[c] as u32 * a + bg[c] as u32 * (255 - a) + 127) / 255) as u8;
            [f(0), f(1), f(2)]
        })
        .collect()
}
