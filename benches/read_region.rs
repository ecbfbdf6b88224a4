//! Criterion benches: open + index, random region reads on levels 0 and 2 (aligned and
//! unaligned, 256² and 1024², whole-tile and partial decode), a tile scan, and the read planner.
//!
//! Slide: `SLIDESTREAM_BENCH_SLIDE` (e.g. a 48000² slide from `../shared/tools/make_big_svs.py`),
//! else the bundled `assets/CMU-1-Small-Region.svs`.
//! Run: `cargo bench -p slidestream --bench read_region`.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use slidestream::io::plan::{plan_reads, PlanOptions, Want};
use slidestream::{Config, Slide, SlideOptions, TileCache};

fn slide_path() -> PathBuf {
    std::env::var_os("SLIDESTREAM_BENCH_SLIDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../assets/CMU-1-Small-Region.svs"))
}

fn locations(w: u64, h: u64, size: u64, n: usize, aligned: Option<u64>) -> Vec<(i64, i64)> {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |m: u64| {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D) % m.max(1)
    };
    (0..n)
        .map(|_| {
            let (mut x, mut y) = (next(w - size), next(h - size));
            if let Some(a) = aligned {
                x -= x % a;
                y -= y % a;
            }
            (x as i64, y as i64)
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let path = slide_path();
    c.bench_function("open_and_index", |b| b.iter(|| black_box(Slide::open(&path).unwrap())));

    for (name, frac) in [("partial_decode", 0.5), ("whole_tiles", 0.0)] {
        let mut g = c.benchmark_group(format!("read_region_random_{name}"));
        let cfg = Config { partial_decode_max_fraction: frac, ..Config::from_env().expect("SLIDESTREAM_* settings") };
        // No caching between iterations: a fresh, tiny cache keeps every read cold.
        let slide =
            Slide::open_with(&path, SlideOptions { cache: Some(std::sync::Arc::new(TileCache::new(0))), config: Some(cfg), ..Default::default() }).unwrap();
        for level in [0usize, 2] {
            if level >= slide.level_count() {
                continue;
            }
            let (w, h) = slide.level_dimensions()[level];
            let ds = slide.level_downsamples()[level];
            let tile = slide.level_tile_sizes()[level].0 as u64;
            for size in [256u64, 1024] {
                if w <= size || h <= size {
                    continue;
                }
                for (label, aligned) in [("unaligned", None), ("aligned", Some(tile))] {
                    // Level-k locations, converted to the level-0 frame read_region expects.
                    let locs: Vec<(i64, i64)> =
                        locations(w, h, size, 64, aligned).into_iter().map(|(x, y)| ((x as f64 * ds).ceil() as i64, (y as f64 * ds).ceil() as i64)).collect();
                    let mut buf = vec![0u8; (size * size * 4) as usize];
                    let mut i = 0;
                    g.throughput(Throughput::Bytes(size * size * 4));
                    g.bench_function(format!("level{level}_{size}px_{label}"), |b| {
                        b.iter(|| {
                            slide.read_region_into(locs[i % locs.len()], level, (size, size), &mut buf).unwrap();
                            i += 1;
                        })
                    });
                }
            }
        }
        g.finish();
    }

    let mut g = c.benchmark_group("tile_scan");
    let slide = Slide::open_with(&path, SlideOptions { cache: Some(std::sync::Arc::new(TileCache::new(0))), config: None, ..Default::default() }).unwrap();
    let img = &slide.index().levels[0].image;
    let coords: Vec<(u64, u64)> = (0..img.tiles_down().min(8)).flat_map(|r| (0..img.tiles_across()).map(move |c| (c, r))).collect();
    g.throughput(Throughput::Elements(coords.len() as u64));
    g.sample_size(10);
    g.bench_function("level0_rows", |b| b.iter(|| slide.read_tiles(0, &coords).unwrap()));
    g.finish();

    let mut g = c.benchmark_group("planner");
    let wants: Vec<Want> = (0..4096u64).map(|i| Want { id: i as usize, offset: (i * 7919 % 4096) * 12_000, len: 10_000 + i % 3000 }).collect();
    g.throughput(Throughput::Elements(wants.len() as u64));
    g.bench_function("plan_4096_tiles", |b| b.iter(|| black_box(plan_reads(&wants, &PlanOptions::default()))));
    g.finish();
}

criterion_group!(all, benches);
criterion_main!(all);
