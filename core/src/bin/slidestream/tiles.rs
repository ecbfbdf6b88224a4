//! `tiles`: every tile of a level read and decoded, on the CPU (the pipeline, through the
//! host cache) or into device memory (`--device cuda[:N]`).

use std::path::Path;
use std::time::Instant;

use slidestream::{Error, Slide};

use crate::output::{gpu_stats_json, print_gpu_stats};

pub(crate) fn tiles(path: &Path, level: usize, batch: usize, json: bool) -> Result<(), Error> {
    let slide = Slide::open(path)?;
    let img = &slide
        .index()
        .levels
        .get(level)
        .ok_or_else(|| Error::Usage(format!("{}: level {level} does not exist (level count {})", path.display(), slide.level_count())))?
        .image;
    let coords: Vec<(u64, u64)> = (0..img.tiles_down()).flat_map(|r| (0..img.tiles_across()).map(move |c| (c, r))).collect();
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
    // Rates count decoded tiles only: a missing tile (a sparse TIFF's, an NDPI's empty
    // cell) costs nothing, and a level with none decoded has no rate to report.
    let rate = |n: f64| if decoded == 0 { None } else { Some(n / secs) };
    let decoded_px = if coords.is_empty() { 0.0 } else { px as f64 * decoded as f64 / coords.len() as f64 };
    if json {
        let v = serde_json::json!({
            "level": level, "tiles": coords.len(), "decoded_tiles": decoded, "missing_tiles": coords.len() - decoded, "seconds": secs,
            "tiles_per_s": rate(decoded as f64), "megapixels_per_s": rate(decoded_px / 1e6),
            "bytes_read": io.bytes, "requests": io.requests, "threads": threads,
            "cache": {"hits": cs.hits, "misses": cs.misses, "evictions": cs.evictions, "resident_bytes": cs.resident_bytes, "capacity_bytes": cs.capacity_bytes},
        });
        println!("{v}");
    } else {
        println!(
            "level {level}: {} tiles ({} decoded, {} missing) of {}x{} px in {:.3} s with {threads} threads",
            coords.len(),
            decoded,
            coords.len() - decoded,
            img.tile_width,
            img.tile_height,
            secs
        );
        match (rate(decoded as f64), rate(decoded_px / 1e6)) {
            (Some(t), Some(mp)) => println!("throughput: {t:.0} decoded tiles/s, {mp:.1} MP/s"),
            _ => println!("throughput: none: no tile of level {level} is stored (all {} are missing), nothing was decoded", coords.len()),
        }
        println!("io: {} bytes in {} requests ({:.1} MB/s)", io.bytes, io.requests, io.bytes as f64 / 1e6 / secs);
        println!("cache: {} hits, {} misses, {} evictions, {} of {} bytes resident", cs.hits, cs.misses, cs.evictions, cs.resident_bytes, cs.capacity_bytes);
    }
    Ok(())
}

/// `cpu` → None; `cuda` / `cuda:N` → Some(N).
pub(crate) fn parse_device(s: &str) -> Result<Option<usize>, Error> {
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

/// `tiles --device cuda`: every tile of a level into device memory, tile-aligned batches.
pub(crate) fn tiles_device(path: &Path, level: usize, batch: usize, json: bool, device: usize) -> Result<(), Error> {
    use slidestream::gpu::DeviceOptions;
    let slide = Slide::open(path)?;
    let img = &slide.index().levels.get(level).ok_or_else(|| Error::Usage(format!("{}: level {level} does not exist", path.display())))?.image;
    let ds = slide.level_downsamples()[level];
    let (tw, th) = (img.tile_width as u64, img.tile_height as u64);
    let locs: Vec<(i64, i64)> = (0..img.tiles_down())
        .flat_map(|r| (0..img.tiles_across()).map(move |c| (((c * tw) as f64 * ds).round() as i64, ((r * th) as f64 * ds).round() as i64)))
        .collect();
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
            eprintln!(
                "[slidestream gpu trace] tiles: read_regions_device {:.1} ms, drop {:.1} ms",
                t_read.as_secs_f64() * 1e3,
                (t.elapsed() - t_read).as_secs_f64() * 1e3
            );
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
