//! `slidestream`: command-line front end (info, region, associated, tiles).
//!
//! Errors print one line `error: …` on stderr (naming the file, and the level and tile where
//! relevant) and exit with status 1.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use slidestream::{Error, Slide};

#[derive(Parser)]
#[command(name = "slidestream", version, about = "Whole-slide image loader: slide info, regions, tile throughput")]
struct Cli {
    /// Worker threads for decoding (default: all cores).
    #[arg(long, global = true)]
    threads: Option<usize>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print vendor, levels, properties and associated images of a slide.
    Info {
        /// Slide file.
        path: PathBuf,
        /// Print JSON (keys: vendor, level_count, level_dimensions, level_downsamples,
        /// level_tile_sizes, properties, associated_images).
        #[arg(long)]
        json: bool,
        /// Print why each format driver accepted or declined the file.
        #[arg(long)]
        why: bool,
        /// Print the I/O configuration and counters: bytes and requests the open took, the
        /// GPU compat mode (`SLIDESTREAM_COMPAT_MODE`), the I/O path in effect and why.
        #[arg(long)]
        io_stats: bool,
    },
    /// Read a region and write it as an RGBA PNG.
    Region {
        /// Slide file.
        path: PathBuf,
        /// Top-left corner in level-0 pixels, "X,Y" (may be negative).
        #[arg(long, value_parser = parse_pair_i64, allow_hyphen_values = true)]
        location: (i64, i64),
        /// Pyramid level.
        #[arg(long, default_value_t = 0)]
        level: usize,
        /// Size in pixels of that level, "W,H".
        #[arg(long, value_parser = parse_pair_u64)]
        size: (u64, u64),
        /// Output PNG file.
        #[arg(long, short)]
        output: PathBuf,
    },
    /// Write an associated image (thumbnail, label, macro) as an RGBA PNG.
    Associated {
        /// Slide file.
        path: PathBuf,
        /// Associated image name.
        name: String,
        /// Output PNG file.
        #[arg(long, short)]
        output: PathBuf,
    },
    /// Read and decode every tile of a level through the pipeline; print throughput, bytes,
    /// requests and cache statistics.
    Tiles {
        /// Slide file.
        path: PathBuf,
        /// Pyramid level.
        #[arg(long, default_value_t = 0)]
        level: usize,
        /// Tiles per batch handed to the pipeline.
        #[arg(long, default_value_t = 512)]
        batch: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// `cpu`, or `cuda` / `cuda:N`: read the tiles into device memory (tile-aligned batched
        /// device reads) and report bytes and requests per I/O path and decodes per backend.
        #[arg(long, default_value = "cpu")]
        device: String,
    },
    /// Probe the GPU stack (CUDA driver, devices, nvJPEG, hardware JPEG engines); with a slide,
    /// decode its JPEG tiles with batched nvJPEG (planar, as coded), compare them with the CPU
    /// decoder and time GPU decoding.
    GpuProbe {
        /// Slide file whose JPEG tiles to decode (optional).
        path: Option<PathBuf>,
        /// Pyramid level.
        #[arg(long, default_value_t = 0)]
        level: usize,
        /// Tiles per nvJPEG batch.
        #[arg(long, default_value_t = 256)]
        batch: usize,
        /// Most tiles to decode (repeating the level's tiles if it has fewer).
        #[arg(long, default_value_t = 4096)]
        tiles: usize,
    },
    /// Read regions on the GPU (nvJPEG + assembly kernel) and compare them with the CPU path;
    /// with --patches, time random level-0 patches read file → device.
    GpuRegion {
        /// Slide file.
        path: PathBuf,
        /// Patch edge in pixels for the timing run.
        #[arg(long, default_value_t = 256)]
        size: u64,
        /// Random patches to time (0 = correctness only).
        #[arg(long, default_value_t = 0)]
        patches: usize,
        /// Patches per batched call in the timing run.
        #[arg(long, default_value_t = 4096)]
        batch: usize,
    },
    /// Random-patch benchmark: read N patches at random level-0 locations (one caller thread)
    /// and print patches/s. Locations come from --locations (a file of "x,y" lines, level-0
    /// pixels) or from a seeded generator.
    Bench {
        /// Slide file.
        path: PathBuf,
        /// Pyramid level.
        #[arg(long, default_value_t = 0)]
        level: usize,
        /// Patch edge in pixels of the level.
        #[arg(long, default_value_t = 256)]
        size: u64,
        /// Number of patches.
        #[arg(long, default_value_t = 2000)]
        patches: usize,
        /// Seed of the location generator.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// File of "x,y" level-0 locations, one per line (overrides --patches/--seed).
        #[arg(long)]
        locations: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn parse_pair<T: std::str::FromStr>(s: &str) -> Result<(T, T), String> {
    let (a, b) = s.split_once(',').ok_or_else(|| format!("expected two numbers \"A,B\", got {s:?}"))?;
    let p = |v: &str| v.trim().parse::<T>().map_err(|_| format!("not a number: {v:?}"));
    Ok((p(a)?, p(b)?))
}
fn parse_pair_i64(s: &str) -> Result<(i64, i64), String> {
    parse_pair(s)
}
fn parse_pair_u64(s: &str) -> Result<(u64, u64), String> {
    parse_pair(s)
}

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        eprintln!("error: internal error (please report): {msg}");
    }));
    let cli = Cli::parse();
    if let Some(n) = cli.threads {
        let _ = rayon::ThreadPoolBuilder::new().num_threads(n.max(1)).build_global();
    }
    match std::panic::catch_unwind(|| run(cli.cmd)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("error: {}", one_line(&e.to_string()));
            ExitCode::from(1)
        }
        Err(_) => ExitCode::from(1),
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

fn run(cmd: Cmd) -> Result<(), Error> {
    match cmd {
        Cmd::Info { path, json, why, io_stats } => info(&path, json, why, io_stats),
        Cmd::Region { path, location, level, size, output } => {
            let slide = Slide::open(&path)?;
            let r = slide.read_region(location, level, size)?;
            write_png(&output, r.width, r.height, r.data)
        }
        Cmd::Associated { path, name, output } => {
            let slide = Slide::open(&path)?;
            let r = slide.read_associated(&name)?;
            write_png(&output, r.width, r.height, r.data)
        }
        Cmd::Tiles { path, level, batch, json, device } => match parse_device(&device)? {
            None => tiles(&path, level, batch.max(1), json),
            Some(d) => tiles_device(&path, level, batch.max(1), json, d),
        },
        Cmd::GpuRegion { path, size, patches, batch } => gpu_region(&path, size, patches, batch),
        Cmd::GpuProbe { path, level, batch, tiles } => gpu_probe(path.as_deref(), level, batch.max(1), tiles),
        Cmd::Bench { path, level, size, patches, seed, locations, json } => bench(&path, level, size, patches, seed, locations, json),
    }
}

fn write_png(path: &Path, w: u64, h: u64, data: Vec<u8>) -> Result<(), Error> {
    let at = slidestream::error::Location::file(path);
    let (w32, h32) = match (u32::try_from(w), u32::try_from(h)) {
        (Ok(a), Ok(b)) if a > 0 && b > 0 => (a, b),
        _ => return Err(Error::Usage(format!("{}: cannot write a {w}x{h} PNG", path.display()))),
    };
    let img = image::RgbaImage::from_raw(w32, h32, data)
        .ok_or_else(|| Error::Usage(format!("{}: buffer does not match {w}x{h}", path.display())))?;
    img.save_with_format(path, image::ImageFormat::Png).map_err(|e| match e {
        image::ImageError::IoError(io) => Error::io(&at, io),
        other => Error::io(&at, std::io::Error::other(other.to_string())),
    })
}

fn info(path: &Path, json: bool, why: bool, io_stats: bool) -> Result<(), Error> {
    if why {
        let report = Slide::detect(path)?;
        print!("{report}");
        if report.chosen().is_none() {
            println!("=> no driver accepted {}", path.display());
        }
    }
    let slide = Slide::open(path)?;
    if io_stats {
        print_io_stats(&slide, json);
        return Ok(());
    }
    let props = slide.properties();
    if json {
        let v = serde_json::json!({
            "vendor": slide.vendor(),
            "level_count": slide.level_count(),
            "level_dimensions": slide.level_dimensions().iter().map(|&(w, h)| [w, h]).collect::<Vec<_>>(),
            "level_downsamples": slide.level_downsamples(),
            "level_tile_sizes": slide.level_tile_sizes().iter().map(|&(w, h)| [w, h]).collect::<Vec<_>>(),
            "properties": props,
            "associated_images": slide.associated_images().into_iter().map(|(k, (w, h))| (k, [w, h])).collect::<std::collections::BTreeMap<_, _>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(());
    }
    let (w, h) = slide.dimensions();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "file:        {}", path.display());
    let _ = writeln!(out, "vendor:      {}", slide.vendor());
    let _ = writeln!(out, "dimensions:  {w} x {h} px");
    if let Some((mx, my)) = slide.mpp() {
        let _ = writeln!(out, "mpp:         {mx} x {my} µm/px");
    }
    let _ = writeln!(out, "levels:      {}", slide.level_count());
    for (i, l) in slide.index().levels.iter().enumerate() {
        let im = &l.image;
        let _ = writeln!(
            out,
            "  [{i}] {} x {} px, downsample {:.4}, tiles {}x{} px ({} x {}), {}",
            im.width, im.height, l.downsample, im.tile_width, im.tile_height, im.tiles_across, im.tiles_down,
            im.codec.compression.name()
        );
    }
    for (name, (aw, ah)) in slide.associated_images() {
        let _ = writeln!(out, "associated:  {name} {aw} x {ah} px");
    }
    let _ = writeln!(out, "properties:");
    for (k, v) in props {
        let _ = writeln!(out, "  {k} = {}", one_line(v));
    }
    Ok(())
}

fn tiles(path: &Path, level: usize, batch: usize, json: bool) -> Result<(), Error> {
    let slide = Slide::open(path)?;
    let img = &slide
        .index()
        .levels
        .get(level)
        .ok_or_else(|| Error::Usage(format!("{}: level {level} does not exist (level count {})", path.display(), slide.level_count())))?
        .image;
    let coords: Vec<(u64, u64)> = (0..img.tiles_down).flat_map(|r| (0..img.tiles_across).map(move |c| (c, r))).collect();
    let pb = indicatif::ProgressBar::new(coords.len() as u64);
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) || json {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let t0 = Instant::now();
    let mut decoded = 0usize;
    for chunk in coords.chunks(batch) {
        decoded += slide.read_tiles(level, chunk)?;
        pb.inc(chunk.len() as u64);
    }
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    pb.finish_and_clear();
    let px = img.width * img.height;
    let io = slide.io_counters();
    let cs = slide.cache_stats();
    let threads = rayon::current_num_threads();
    if json {
        let v = serde_json::json!({
            "level": level, "tiles": coords.len(), "decoded_tiles": decoded, "seconds": secs,
            "tiles_per_s": coords.len() as f64 / secs, "megapixels_per_s": px as f64 / 1e6 / secs,
            "bytes_read": io.bytes, "requests": io.requests, "threads": threads,
            "cache": {"hits": cs.hits, "misses": cs.misses, "evictions": cs.evictions, "resident_bytes": cs.resident_bytes, "capacity_bytes": cs.capacity_bytes},
        });
        println!("{v}");
    } else {
        println!("level {level}: {} tiles ({} decoded, {} missing) of {}x{} px in {:.3} s with {threads} threads",
            coords.len(), decoded, coords.len() - decoded, img.tile_width, img.tile_height, secs);
        println!("throughput: {:.0} tiles/s, {:.1} MP/s", coords.len() as f64 / secs, px as f64 / 1e6 / secs);
        println!("io: {} bytes in {} requests ({:.1} MB/s)", io.bytes, io.requests, io.bytes as f64 / 1e6 / secs);
        println!("cache: {} hits, {} misses, {} evictions, {} of {} bytes resident", cs.hits, cs.misses, cs.evictions, cs.resident_bytes, cs.capacity_bytes);
    }
    Ok(())
}

/// `cpu` → None; `cuda` / `cuda:N` → Some(N).
fn parse_device(s: &str) -> Result<Option<usize>, Error> {
    match s {
        "cpu" => Ok(None),
        "cuda" => Ok(Some(0)),
        _ => s
            .strip_prefix("cuda:")
            .and_then(|n| n.parse().ok())
            .map(Some)
            .ok_or_else(|| Error::Usage(format!("--device must be cpu, cuda or cuda:N, got {s:?}"))),
    }
}

fn gpu_stats_json(st: &slidestream::gpu::GpuStats) -> serde_json::Value {
    serde_json::json!({
        "compat_mode": st.compat_mode, "io_path": st.io_path, "io_reason": st.io_reason,
        "posix_bytes": st.posix_bytes, "posix_requests": st.posix_requests,
        "cufile_gds_bytes": st.cufile_gds_bytes, "cufile_gds_requests": st.cufile_gds_requests,
        "cufile_compat_bytes": st.cufile_compat_bytes, "cufile_compat_requests": st.cufile_compat_requests,
        "cufile_handle_failures": st.cufile_handle_failures, "cufile_handle_error": st.cufile_handle_error,
        "tile_bytes": st.tile_bytes, "read_amplification": st.read_amplification(),
        "decoded_hardware": st.decoded_hardware, "decoded_device_bitstream": st.decoded_device_bitstream,
        "decoded_hybrid": st.decoded_hybrid, "decoded_cpu": st.decoded_cpu,
        "decoded_cpu_partial": st.decoded_cpu_partial,
        "gpu_lanes": st.gpu_lanes, "cpu_workers": st.cpu_workers,
        "gpu_batch_fallbacks": st.gpu_batch_fallbacks, "cpu_fallback_reason": st.cpu_fallback_reason,
        "nvjpeg_backend": st.nvjpeg_backend, "hardware_engines": st.hardware_engines,
        "cache": {"hits": st.cache.hits, "misses": st.cache.misses, "evictions": st.cache.evictions, "entries": st.cache.entries,
                  "resident_bytes": st.cache.resident_bytes, "capacity_bytes": st.cache.capacity_bytes},
        "device_tile_bytes": st.device_tile_bytes,
    })
}

fn print_gpu_stats(st: &slidestream::gpu::GpuStats) {
    println!("gpu io: compat mode {}, path {}{}", st.compat_mode, st.io_path, if st.io_reason.is_empty() { String::new() } else { format!(" ({})", st.io_reason) });
    println!(
        "gpu io: posix {} bytes / {} requests, cuFile GDS {} / {}, cuFile compat {} / {}; tile bytes {}, read amplification {:.3}",
        st.posix_bytes, st.posix_requests, st.cufile_gds_bytes, st.cufile_gds_requests, st.cufile_compat_bytes, st.cufile_compat_requests, st.tile_bytes, st.read_amplification()
    );
    if st.cufile_handle_failures > 0 {
        println!("gpu io: cuFile refused {} file(s): {}", st.cufile_handle_failures, st.cufile_handle_error);
    }
    println!(
        "gpu decode: {} hardware, {} device-bitstream, {} hybrid, {} CPU ({} of them partial; {} failed batches; {} lanes, {} CPU workers); nvJPEG {}, {} engines{}",
        st.decoded_hardware,
        st.decoded_device_bitstream,
        st.decoded_hybrid,
        st.decoded_cpu,
        st.decoded_cpu_partial,
        st.gpu_batch_fallbacks,
        st.gpu_lanes,
        st.cpu_workers,
        st.nvjpeg_backend,
        st.hardware_engines,
        if st.cpu_fallback_reason.is_empty() { String::new() } else { format!("; last CPU fallback: {}", st.cpu_fallback_reason) }
    );
    let c = &st.cache;
    println!(
        "gpu cache: {} hits, {} misses, {} evictions, {} of {} bytes resident; {} bytes of device memory held by tiles",
        c.hits, c.misses, c.evictions, c.resident_bytes, c.capacity_bytes, st.device_tile_bytes
    );
}

/// `info --io-stats`: what opening the slide read, and the GPU I/O path in effect (starting
/// the GPU path when one is present).
fn print_io_stats(slide: &Slide, json: bool) {
    let io = slide.io_counters();
    let gpu = slidestream::gpu::start(0);
    if json {
        let g = match &gpu {
            Ok(st) => gpu_stats_json(st),
            Err(e) => serde_json::json!({"error": e.to_string(), "compat_mode": slidestream::gpu::CompatMode::from_env().map_or("invalid", |m| m.as_str())}),
        };
        println!("{}", serde_json::json!({"cpu": {"bytes": io.bytes, "requests": io.requests}, "gpu": g}));
        return;
    }
    println!("cpu io: {} bytes in {} requests since open (positional reads of the slide file)", io.bytes, io.requests);
    match gpu {
        Ok(st) => print_gpu_stats(&st),
        Err(e) => println!("gpu io: compat mode {}; {e}", slidestream::gpu::CompatMode::from_env().map_or("invalid", |m| m.as_str())),
    }
}

/// `tiles --device cuda`: every tile of a level into device memory, tile-aligned batches.
fn tiles_device(path: &Path, level: usize, batch: usize, json: bool, device: usize) -> Result<(), Error> {
    use slidestream::gpu::DeviceOptions;
    let slide = Slide::open(path)?;
    let img = &slide.index().levels.get(level).ok_or_else(|| Error::Usage(format!("{}: level {level} does not exist", path.display())))?.image;
    let ds = slide.level_downsamples()[level];
    let (tw, th) = (img.tile_width as u64, img.tile_height as u64);
    let locs: Vec<(i64, i64)> =
        (0..img.tiles_down).flat_map(|r| (0..img.tiles_across).map(move |c| (((c * tw) as f64 * ds).round() as i64, ((r * th) as f64 * ds).round() as i64))).collect();
    let opts = DeviceOptions { device, channels: 3, ..DeviceOptions::default() };
    slidestream::gpu::start(device)?;
    let before = slidestream::gpu::stats(device);
    let t0 = Instant::now();
    let mut failed = 0;
    let trace = slidestream::config::settings()?.gpu_trace;
    for chunk in locs.chunks(batch) {
        let t = Instant::now();
        let b = slide.read_regions_device(chunk, level, (tw, th), &opts)?;
        failed += b.errors.iter().filter(|e| e.is_some()).count();
        let t_read = t.elapsed();
        drop(b);
        if trace {
            eprintln!("[slidestream gpu trace] tiles: read_regions_device {:.1} ms, drop {:.1} ms", t_read.as_secs_f64() * 1e3, (t.elapsed() - t_read).as_secs_f64() * 1e3);
        }
    }
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    let st = slidestream::gpu::stats(device);
    let px = img.width * img.height;
    if json {
        let v = serde_json::json!({
            "level": level, "tiles": locs.len(), "failed_tiles": failed, "seconds": secs, "device": device,
            "tiles_per_s": locs.len() as f64 / secs, "megapixels_per_s": px as f64 / 1e6 / secs,
            "gpu_before": gpu_stats_json(&before), "gpu": gpu_stats_json(&st),
        });
        println!("{v}");
    } else {
        println!("level {level}: {} tiles of {tw}x{th} px to cuda:{device} in {:.3} s ({failed} failed), batches of {batch}", locs.len(), secs);
        println!("throughput: {:.0} tiles/s, {:.1} MP/s", locs.len() as f64 / secs, px as f64 / 1e6 / secs);
        print_gpu_stats(&st);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn bench(path: &Path, level: usize, size: u64, patches: usize, seed: u64, locations: Option<PathBuf>, json: bool) -> Result<(), Error> {
    if size == 0 || patches == 0 {
        return Err(Error::Usage(format!("bench needs --size ≥ 1 and --patches ≥ 1 (got {size} and {patches})")));
    }
    let slide = Slide::open(path)?;
    let dims = slide.level_dimensions();
    let &(lw, lh) = dims
        .get(level)
        .ok_or_else(|| Error::Usage(format!("{}: level {level} does not exist (level count {})", path.display(), slide.level_count())))?;
    let ds = slide.level_downsamples()[level];
    let locs: Vec<(i64, i64)> = match locations {
        Some(f) => {
            let text = std::fs::read_to_string(&f).map_err(|e| Error::io(&slidestream::error::Location::file(&f), e))?;
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| parse_pair_i64(l).map_err(|e| Error::Usage(format!("{}: {e}", f.display()))))
                .collect::<Result<_, _>>()?
        }
        None => {
            // xorshift64*: deterministic, dependency-free.
            let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut next = |n: u64| {
                state ^= state >> 12;
                state ^= state << 25;
                state ^= state >> 27;
                state.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
            };
            (0..patches)
                .map(|_| {
                    let x = next(lw.saturating_sub(size).max(1));
                    let y = next(lh.saturating_sub(size).max(1));
                    ((x as f64 * ds) as i64, (y as f64 * ds) as i64)
                })
                .collect()
        }
    };
    let mut buf = vec![0u8; (size * size * 4) as usize];
    let t0 = Instant::now();
    let mut checksum = 0u64;
    for &loc in &locs {
        slide.read_region_into(loc, level, (size, size), &mut buf)?;
        checksum = checksum.wrapping_add(buf[buf.len() / 2] as u64);
    }
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    let n = locs.len() as f64;
    let io = slide.io_counters();
    let threads = rayon::current_num_threads();
    if json {
        println!("{}", serde_json::json!({
            "patches": locs.len(), "size": size, "level": level, "seconds": secs, "patches_per_s": n / secs,
            "megapixels_per_s": n * (size * size) as f64 / 1e6 / secs, "bytes_read": io.bytes, "requests": io.requests,
            "threads": threads, "checksum": checksum,
        }));
    } else {
        println!("{} random {size}x{size} patches of level {level} in {secs:.3} s: {:.0} patches/s ({:.1} MP/s), {threads} decode threads",
            locs.len(), n / secs, n * (size * size) as f64 / 1e6 / secs);
        println!("io: {} bytes in {} requests", io.bytes, io.requests);
    }
    Ok(())
}

fn gpu_probe(path: Option<&Path>, level: usize, batch: usize, max_tiles: usize) -> Result<(), Error> {
    use slidestream::gpu::probe;
    let r = probe()?;
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
    // The batched-nvJPEG decode probe of a slide's tiles (the GPU path's first prototype) is an
    // example program now.
    Err(Error::Usage(format!(
        "the nvJPEG decode probe of a slide moved to `cargo run --release --features cuda --example nvjpeg_batch -- {} {level} {batch} {max_tiles}`",
        path.display()
    )))
}

/// `gpu-region`: GPU reads checked against the CPU path on every level (RGBA and RGB), then
/// random level-0 patches file → device, one region per call and in batches.
fn gpu_region(path: &Path, size: u64, patches: usize, batch: usize) -> Result<(), Error> {
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
        "{}: {regions} regions over all levels (RGBA and RGB): GPU vs CPU max abs diff {worst}; tiles decoded: {} hardware, {} device-bitstream, {} hybrid, {} CPU; io path {}{}",
        path.display(),
        st.decoded_hardware,
        st.decoded_device_bitstream,
        st.decoded_hybrid,
        st.decoded_cpu,
        st.io_path,
        if st.io_reason.is_empty() { String::new() } else { format!(" ({})", st.io_reason) }
    );
    println!("  nvJPEG: {}, {} hardware engines; last CPU fallback: {}", st.nvjpeg_backend, st.hardware_engines, if st.cpu_fallback_reason.is_empty() { "none" } else { &st.cpu_fallback_reason });
    if patches > 0 {
        let (w, h) = slide.dimensions();
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
            let t0 = Instant::now();
            for chunk in locs.chunks(batch.max(1)) {
                slide.read_regions_device(chunk, 0, (size, size), &rgb)?.into_result()?;
            }
            let secs = t0.elapsed().as_secs_f64();
            let st = slidestream::gpu::stats(0);
            println!(
                "{patches} random {size}x{size} level-0 patches file -> device RGB, batches of {batch} ({}): {:.0} patches/s; read amplification {:.3}, {} tiles hardware / {} CPU ({} partial), cache hits {} misses {}",
                if cached { "device cache warm" } else { "device cache cold" },
                patches as f64 / secs,
                st.read_amplification(),
                st.decoded_hardware,
                st.decoded_cpu,
                st.decoded_cpu_partial,
                st.cache.hits,
                st.cache.misses
            );
        }
    }
    Ok(())
}
