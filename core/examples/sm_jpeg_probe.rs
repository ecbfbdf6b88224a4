//! Issue 32, step 2: the SM JPEG decoder's deciding experiment. Collects real JPEG tiles from
//! slides, runs the SM decoder's entropy-decoding and IDCT kernels over them on a GPU, prints
//! tiles/s per stage (segment order and sorted by size; threads per block) and checks the
//! device's samples against libjpeg-turbo.
//!
//! ```text
//! cargo build --release --features cuda,unstable --example sm_jpeg_probe
//! sm_jpeg_probe [--rounds 5] [--tiles N] [--step K] [--repeat-to N] SLIDE[:LEVEL] ...
//! ```
//! `--tiles`: at most N tiles per slide (every K-th of the level, row-major); `--repeat-to`:
//! repeat the collected streams until the batch holds N (the kernels see each copy as its own
//! tile). Prints one JSON line (`SMPROBE {...}`) after the human-readable table.

use slidestream::codec::jpeg_sm::level_streams;
use slidestream::gpu::sm_decoder::probe;
use slidestream::Slide;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut rounds, mut tiles, mut step, mut repeat_to) = (5usize, usize::MAX, 1usize, 0usize);
    let mut slides = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Result<usize, String> { args.next().and_then(|v| v.parse().ok()).ok_or(format!("{name} needs a number")) };
        match a.as_str() {
            "--rounds" => rounds = num("--rounds")?,
            "--tiles" => tiles = num("--tiles")?,
            "--step" => step = num("--step")?,
            "--repeat-to" => repeat_to = num("--repeat-to")?,
            _ => slides.push(a),
        }
    }
    if slides.is_empty() {
        return Err("usage: sm_jpeg_probe [--rounds N] [--tiles N] [--step K] [--repeat-to N] SLIDE[:LEVEL] ...".into());
    }
    let mut streams = Vec::new();
    for s in &slides {
        let (path, level) = match s.rsplit_once(':') {
            Some((p, l)) if l.parse::<usize>().is_ok() => (p, l.parse::<usize>()?),
            _ => (s.as_str(), 0),
        };
        let slide = Slide::open(path)?;
        let got = level_streams(&slide, level, step, tiles)?;
        let bytes: usize = got.iter().map(|g| g.len()).sum();
        println!("{path} level {level}: {} streams, {:.1} KB mean", got.len(), bytes as f64 / got.len().max(1) as f64 / 1e3);
        streams.extend(got);
    }
    let n0 = streams.len();
    while repeat_to > streams.len() && n0 > 0 {
        let k = streams.len() % n0;
        streams.push(streams[k].clone());
    }
    let r = probe(0, &streams, rounds, true)?;
    println!(
        "{} streams: {} taken ({} segments, {} table sets, {:.1} MB compressed, {} blocks), declined: {:?}",
        r.streams,
        r.tiles,
        r.segments,
        r.table_sets,
        r.compressed_bytes as f64 / 1e6,
        r.blocks,
        r.declined
    );
    println!(
        "host prepare: {:.3} s on {} threads ({:.0} tiles/s per thread); compile {:.2} s",
        r.prepare_s,
        r.prepare_threads,
        r.tiles as f64 / (r.prepare_s * r.prepare_threads as f64),
        r.compile_s
    );
    for s in r.huffman.iter().chain(&r.idct) {
        println!(
            "{:<48} median {:>8.3} ms  min {:>8.3} ms  {:>10.0} tiles/s  {:>8.1} MB/s",
            s.variant,
            s.median_s * 1e3,
            s.min_s * 1e3,
            r.tiles as f64 / s.median_s,
            r.compressed_bytes as f64 / s.median_s / 1e6
        );
    }
    println!("failed segments: {:?}; compared with libjpeg-turbo: {} tiles, {} differ, max abs diff {}", r.failed, r.compared, r.differing, r.max_diff);
    let best_h = r.huffman.iter().map(|s| s.median_s).fold(f64::INFINITY, f64::min);
    let best_i = r.idct.iter().map(|s| s.median_s).fold(f64::INFINITY, f64::min);
    println!("huffman + idct (best variants): {:.0} tiles/s", r.tiles as f64 / (best_h + best_i));
    let stages: Vec<String> =
        r.huffman.iter().chain(&r.idct).map(|s| format!("{{\"variant\":\"{}\",\"median_s\":{},\"min_s\":{}}}", s.variant, s.median_s, s.min_s)).collect();
    println!(
        "SMPROBE {{\"streams\":{},\"tiles\":{},\"segments\":{},\"compressed_bytes\":{},\"blocks\":{},\"prepare_s\":{},\"prepare_threads\":{},\"stages\":[{}],\"failed\":\"{:?}\",\"compared\":{},\"differing\":{},\"max_diff\":{}}}",
        r.streams,
        r.tiles,
        r.segments,
        r.compressed_bytes,
        r.blocks,
        r.prepare_s,
        r.prepare_threads,
        stages.join(","),
        r.failed,
        r.compared,
        r.differing,
        r.max_diff
    );
    Ok(())
}
