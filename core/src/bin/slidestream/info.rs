//! `info`: vendor, levels, properties and associated images; `--why` (driver verdicts) and
//! `--io-stats` (what the command read, GPU I/O path).

use std::io::Write;
use std::path::Path;

use slidestream::{Error, IoCounters, Slide};

use crate::output::{gpu_stats_json, one_line, print_gpu_stats};

pub(crate) fn info(path: &Path, json: bool, why: bool, io_stats: bool) -> Result<(), Error> {
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
            im.width,
            im.height,
            l.downsample,
            im.tile_width,
            im.tile_height,
            im.tiles_across(),
            im.tiles_down(),
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

/// The remote counters of `info --io-stats --json` (`null` for a local slide).
fn remote_json(slide: &Slide) -> serde_json::Value {
    #[cfg(feature = "remote")]
    if let (Some((at_open, now)), Some(r)) = (slide.remote_stats(), slide.remote_source()) {
        return serde_json::json!({
            "url": r.url(), "requests": now.requests, "bytes": now.bytes, "failed": now.failed,
            "open_requests": at_open.requests, "open_bytes": at_open.bytes, "index_cache": r.index_cache_use().as_str(), "index_cache_rejected": now.index_cache_rejected,
        });
    }
    let _ = slide;
    serde_json::Value::Null
}

/// `info --io-stats`: what this command read from the slide file (the open's structure reads
/// plus any reads since), and the GPU I/O path in effect (starting the GPU path when one is
/// present).
fn print_io_stats(slide: &Slide, json: bool) {
    let open = slide.open_io_counters();
    let since = slide.io_counters();
    let total = IoCounters { requests: open.requests + since.requests, bytes: open.bytes + since.bytes };
    let gpu = slidestream::gpu::start(0);
    if json {
        let g = match &gpu {
            Ok(st) => gpu_stats_json(st),
            Err(e) => serde_json::json!({"error": e.to_string(), "compat_mode": slidestream::gpu::CompatMode::from_env().map_or("invalid", |m| m.as_str())}),
        };
        let cpu = serde_json::json!({
            "bytes": total.bytes, "requests": total.requests,
            "open_bytes": open.bytes, "open_requests": open.requests,
        });
        println!("{}", serde_json::json!({"cpu": cpu, "gpu": g, "remote": remote_json(slide)}));
        return;
    }
    #[cfg(feature = "remote")]
    if let (Some((at_open, now)), Some(r)) = (slide.remote_stats(), slide.remote_source()) {
        println!(
            "remote io: {} HTTP requests, {} bytes received (open: {} requests, {} bytes; index cache {}; {})",
            now.requests,
            now.bytes,
            at_open.requests,
            at_open.bytes,
            r.index_cache_use().as_str(),
            r.url()
        );
    }
    println!(
        "cpu io: {} bytes in {} requests (open: {} bytes in {} requests; positional reads of the slide file)",
        total.bytes, total.requests, open.bytes, open.requests
    );
    match gpu {
        Ok(st) => print_gpu_stats(&st),
        Err(e) => println!("gpu io: compat mode {}; {e}", slidestream::gpu::CompatMode::from_env().map_or("invalid", |m| m.as_str())),
    }
}
