//! Host cost of the SM JPEG decoder's per-tile parsing (`codec::jpeg_sm::prepare`): every
//! level-0 tile of a slide, framed as the decoders get them, prepared on one thread, rounds
//! alternating with a fresh table memo per round and one kept across rounds. Prints µs a tile
//! (median of the rounds) and tiles/s.
//!
//! ```text
//! cargo run --release --features unstable --example sm_prepare_rate -- SLIDE [--tiles N] [--rounds R]
//! ```

use std::time::Instant;

use slidestream::codec::jpeg_sm::{level_streams, prepare_with, TableMemo};
use slidestream::Slide;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut rounds, mut tiles, mut path) = (5usize, 20_000usize, None);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Result<usize, String> { args.next().and_then(|v| v.parse().ok()).ok_or(format!("{name} needs a number")) };
        match a.as_str() {
            "--rounds" => rounds = num("--rounds")?,
            "--tiles" => tiles = num("--tiles")?,
            _ => path = Some(a),
        }
    }
    let path = path.ok_or("usage: sm_prepare_rate SLIDE [--tiles N] [--rounds R]")?;
    let slide = Slide::open(&path)?;
    let streams = level_streams(&slide, 0, 1, tiles)?;
    let bytes: usize = streams.iter().map(Vec::len).sum();
    println!("{path}: {} tiles of level 0, {:.1} KB a tile", streams.len(), bytes as f64 / streams.len().max(1) as f64 / 1e3);
    let (mut fresh, mut kept) = (Vec::new(), Vec::new());
    let mut memo = TableMemo::default();
    for _ in 0..rounds {
        let t = Instant::now();
        let mut m = TableMemo::default();
        let ok = streams.iter().filter(|s| prepare_with(s, &mut m).is_ok()).count();
        fresh.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let ok2 = streams.iter().filter(|s| prepare_with(s, &mut memo).is_ok()).count();
        kept.push(t.elapsed().as_secs_f64());
        assert_eq!(ok, ok2);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let n = streams.len().max(1) as f64;
    for (label, v) in [("fresh memo", &mut fresh), ("memo kept", &mut kept)] {
        let s = med(v);
        println!("prepare, one thread, {label}: {:.2} µs a tile, {:.0} tiles/s", s / n * 1e6, n / s);
    }
    Ok(())
}
