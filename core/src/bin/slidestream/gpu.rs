//! `gpu-probe` and `gpu-region`: the GPU stack and GPU reads checked against the CPU path.

use std::path::Path;
use std::time::Instant;

use slidestream::{Error, Location, Slide};

use crate::args::within_limit;

/// `gpu-probe [SLIDE]`: the CUDA driver, devices, nvJPEG and its hardware engines (with a slide:
/// a pointer to the `nvjpeg_batch` example, which holds the prototype decoder comparison).
pub(crate) fn gpu_probe(path: Option<&Path>, level: usize, batch: usize, max_tiles: usize) -> Result<(), Error> {
    let r = slidestream::gpu::probe()?;
    println!("cuda driver {}.{}", r.driver_version / 1000, r.driver_version % 1000 / 10);
    for (i, (name, ma, mi)) in r.devices.iter().enumerate() {
        println!("device {i}: {name} (sm_{ma}{mi})");
    }
    match r.nvjpeg_version {
        Some((a, b, c)) => println!("nvjpeg {a}.{b}.{c}, hardware engines: {}", r.hardware_engines),
        None => println!("nvjpeg unavailable"),
    }
    if let Some(why) = &r.hardware_reason {
        println!("hardware backend unavailable: {why}");
    }
    let Some(path) = path else { return Ok(()) };
    probe_decoders(path, level, batch, max_tiles)
}

/// The batched-nvJPEG decode probe of a slide's tiles (the GPU path's first prototype) is an
/// example program now.
fn probe_decoders(path: &Path, level: usize, batch: usize, max_tiles: usize) -> Result<(), Error> {
    Err(Error::Usage(format!(
        "the nvJPEG decode probe of a slide moved to `cargo run --release --features cuda,unstable --example nvjpeg_batch -- {} {level} {batch} {max_tiles}`",
        path.display()
    )))
}

/// CPU time (user + system) of the whole process so far, in seconds, from `getrusage`; 0 if the
/// call fails. Divided by wall time it gives the host cores a measurement kept busy.
fn process_cpu_seconds() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage into the zeroed buffer it is given.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) } != 0 {
        return 0.0;
    }
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// `gpu-region`: GPU reads checked against the CPU path on every level (RGBA and RGB), then
/// random level-0 patches file → device, one region per call and in batches.
pub(crate) fn gpu_region(path: &Path, size: u64, patches: usize, batch: usize) -> Result<(), Error> {
    use slidestream::gpu::DeviceOptions;
    let slide = Slide::open(path)?;
    let rgba = DeviceOptions::default();
    let rgb = DeviceOptions { channels: 3, background: [255, 255, 255], ..DeviceOptions::default() };
    let mut worst = 0u8;
    let mut regions = 0;
    for level in 0..slide.level_count() {
        let (w, h) = slide.level_dimensions()[level];
        let ds = slide.level_downsamples()[level];
        let l0 = |v: i64| (v as f64 * ds) as i64;
        let rects = [
            (0i64, 0i64, 300u64, 200u64),
            (w as i64 / 3, h as i64 / 3, 517, 259),
            (w as i64 - 100, h as i64 - 50, 300, 300),
            (-37, -11, 128, 128),
            (w as i64 + 10, 0, 64, 64),
        ];
        for (x, y, rw, rh) in rects {
            let loc = (l0(x), l0(y));
            let cpu = slide.read_region(loc, level, (rw, rh))?;
            let host = slide.read_region_device(loc, level, (rw, rh), &rgba)?.to_host()?;
            worst = worst.max(host.iter().zip(&cpu.data).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0));
            let mut cpu3 = vec![0u8; (rw * rh * 3) as usize];
            slide.read_regions_rgb_into(&[loc], level, (rw, rh), rgb.background, &mut cpu3)?;
            let host3 = slide.read_regions_device(&[loc], level, (rw, rh), &rgb)?.into_result()?.to_host()?;
            worst = worst.max(host3.iter().zip(&cpu3).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0));
            regions += 2;
        }
    }
    let st = slidestream::gpu::stats(0);
    println!(
        "{}: {regions} regions over all levels (RGBA and RGB): GPU vs CPU max abs diff {worst}; tiles decoded: {} hardware, {} device-bitstream, {} hybrid, {} SM, {} CPU; io path {}{}",
        path.display(),
        st.decoded_hardware,
        st.decoded_device_bitstream,
        st.decoded_hybrid,
        st.decoded_sm,
        st.decoded_cpu,
        st.io_path,
        if st.io_reason.is_empty() { String::new() } else { format!(" ({})", st.io_reason) }
    );
    println!(
        "  nvJPEG: {}, {} hardware engines; last CPU fallback: {}",
        st.nvjpeg_backend,
        st.hardware_engines,
        if st.cpu_fallback_reason.is_empty() { "none" } else { &st.cpu_fallback_reason }
    );
    if patches > 0 {
        let (w, h) = slide.dimensions();
        if size > w || size > h {
            return Err(Error::Usage(format!("{}: --size {size} is larger than level 0 ({w}x{h})", path.display())));
        }
        // Every buffer sized by an argument is checked before it is allocated: the two location
        // lists (16 bytes a patch each) and one batch's RGB output.
        let (max, at) = (slide.config().max_region_bytes, Location::file(path));
        within_limit(&at, &format!("{patches} patch locations (twice)"), (patches as u64).checked_mul(32), max)?;
        let per_batch = batch.min(patches) as u64;
        within_limit(
            &at,
            &format!("{per_batch} patches of {size}x{size}x3"),
            per_batch.checked_mul(size).and_then(|v| v.checked_mul(size)).and_then(|v| v.checked_mul(3)),
            max,
        )?;
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |m: u64| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            s.wrapping_mul(0x2545_F491_4F6C_DD1D) % m.max(1)
        };
        let locs: Vec<(i64, i64)> = (0..patches).map(|_| (next(w - size) as i64, next(h - size) as i64)).collect();
        // Warm-up on other locations: lanes, pinned and device buffers, nvJPEG states are
        // created on first use and must not be timed.
        let other: Vec<(i64, i64)> = (0..patches).map(|_| (next(w - size) as i64, next(h - size) as i64)).collect();
        for chunk in other.chunks(batch.max(1)) {
            slide.read_regions_device(chunk, 0, (size, size), &rgb)?.into_result()?;
        }
        for &l in other.iter().take(64) {
            slide.read_region_device(l, 0, (size, size), &rgba)?;
        }
        slidestream::gpu::clear_device_cache(0);
        slidestream::gpu::reset_stats(0);
        let t0 = Instant::now();
        for &l in &locs {
            slide.read_region_device(l, 0, (size, size), &rgba)?;
        }
        let secs = t0.elapsed().as_secs_f64();
        println!("{patches} random {size}x{size} level-0 patches file -> device, one region per call: {:.0} patches/s", patches as f64 / secs);
        for cached in [false, true] {
            if !cached {
                slidestream::gpu::clear_device_cache(0);
            }
            slidestream::gpu::reset_stats(0);
            let (t0, cpu0) = (Instant::now(), process_cpu_seconds());
            for chunk in locs.chunks(batch.max(1)) {
                slide.read_regions_device(chunk, 0, (size, size), &rgb)?.into_result()?;
            }
            let secs = t0.elapsed().as_secs_f64();
            let cores = (process_cpu_seconds() - cpu0) / secs;
            let st = slidestream::gpu::stats(0);
            println!(
                "{patches} random {size}x{size} level-0 patches file -> device RGB, batches of {batch} ({}): {:.0} patches/s, {cores:.1} host cores busy; read amplification {:.3}, {} tiles hardware / {} SM ({} partial) / {} CPU ({} partial), cache hits {} misses {}",
                if cached { "device cache warm" } else { "device cache cold" },
                patches as f64 / secs,
                st.read_amplification(),
                st.decoded_hardware,
                st.decoded_sm,
                st.decoded_sm_partial,
                st.decoded_cpu,
                st.decoded_cpu_partial,
                st.cache.hits,
                st.cache.misses
            );
        }
    }
    Ok(())
}
