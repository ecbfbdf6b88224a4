//! Cold-cache read benchmark (issue 14 item 4): the bytes of one batch of N random patches,
//! planned by the crate's real batch planner and read planner, read after evicting the slide
//! from the page cache, with several ways of issuing the reads. Prints MB/s, requests/s and
//! patches/s per run and the median per variant.
//!
//! Build and run (release; an example so it takes arguments):
//!
//! ```text
//! cargo run --release -p slidestream --example cold_read -- SLIDE [--patches 4096] [--size 256]
//!     [--reps 3] [--level 0] [--variants LIST] [--e2e] [--drop-caches] [--decode-us 100]
//! ```
//!
//! Variants (comma-separated `--variants`; default: all below):
//! * `decode`: reads in a pool of one thread per core (before: `ReadPlan::read_into` ran in the
//!   slide's decode pool; here the pool does nothing else, so this is its best case).
//! * `ioN`: the I/O pool at depth N (`ReadPlan::read_into_in` with a pool of N read threads);
//!   `io1` reads on the calling thread.
//! * `ioN+hint`: `POSIX_FADV_WILLNEED` over every request first (`io::hint`), then `ioN`.
//! * `directN`: the file opened `O_DIRECT`, each request rounded out to 4 KiB and read into an
//!   aligned bounce buffer, then copied; N read threads.
//! * `…+bghint`: the same hint issued from another thread (`io::hint::will_need_in_background`),
//!   the reads starting at once.
//! * `lanesN`: the GPU engine's shape: 4 lanes take ~256-tile chunks in turn, each reads its
//!   chunk at depth N (`lanes1`: serially, as before) and then waits `--decode-us` (100) µs per
//!   tile, as a lane waits on nvJPEG; `lanesN+hint` / `+bghint`: one hint over the whole call
//!   first, as the GPU path would issue for a call's misses before the lanes start.
//! * `warm-…`: the same, without eviction (the page cache holds the batch): the cost of the
//!   hint and of the pool hop when nothing goes to the device.
//! * `--e2e`: also `read_patches` (read + decode + assemble, the library's defaults:
//!   `SLIDESTREAM_IO_DEPTH` and its hint rule) cold and warm, with a tile cache of 0 bytes.
//!
//! Eviction: `posix_fadvise(POSIX_FADV_DONTNEED)` over the whole file (works unprivileged for
//! clean pages no one maps; only this file's pages), plus, with `--drop-caches`,
//! `echo 1 > /proc/sys/vm/drop_caches` (root; drops the whole machine's page cache, so not by
//! default on a shared machine); the share of the file still resident afterwards (`mincore`) is
//! printed. A VM's host may still cache
//! the disk image: cold here means cold in this kernel's page cache.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use slidestream::io::plan::{plan_reads, ReadPlan, Want};
use slidestream::io::posix::FileSource;
use slidestream::io::{hint, pool, ByteSource};
use slidestream::read::{locate_tile, BatchPlan, LevelGeom};
use slidestream::{read_patches, PatchRequest, ReadOptions, Slide, SlideOptions, TileCache};

struct Args {
    slide: PathBuf,
    patches: usize,
    size: u64,
    reps: usize,
    level: usize,
    variants: Vec<String>,
    e2e: bool,
    drop_caches: bool,
    decode_us: u64,
}

const DEFAULT_VARIANTS: &str = "decode,io1,io4,io16,io32,io64,io128,io1+hint,io32+hint,io32+bghint,direct32,direct64,\
     lanes1,lanes32,lanes1+hint,lanes32+hint,lanes32+bghint,warm-io1,warm-io4,warm-io32,warm-io32+hint,warm-lanes32,warm-lanes32+bghint";

fn parse_args() -> Args {
    let mut a =
        Args { slide: PathBuf::new(), patches: 4096, size: 256, reps: 3, level: 0, variants: Vec::new(), e2e: false, drop_caches: false, decode_us: 100 };
    let mut variants = DEFAULT_VARIANTS.to_string();
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut val = |name: &str| it.next().unwrap_or_else(|| panic!("{name} needs a value"));
        match s.as_str() {
            "--patches" => a.patches = val("--patches").parse().expect("--patches N"),
            "--size" => a.size = val("--size").parse().expect("--size PX"),
            "--reps" => a.reps = val("--reps").parse().expect("--reps N"),
            "--level" => a.level = val("--level").parse().expect("--level K"),
            "--variants" => variants = val("--variants"),
            "--e2e" => a.e2e = true,
            "--drop-caches" => a.drop_caches = true,
            "--decode-us" => a.decode_us = val("--decode-us").parse().expect("--decode-us N"),
            "--bench" => {}
            _ if s.starts_with("--") => panic!("unknown flag {s}"),
            _ => a.slide = PathBuf::from(s),
        }
    }
    a.variants = variants.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
    a
}

/// xorshift64*: `n` random level-0 locations of `size`-pixel patches of a `w × h` level.
fn locations(w: u64, h: u64, ds: f64, size: u64, n: usize, seed: u64) -> Vec<(i64, i64)> {
    let mut s = 0x2545_F491_4F6C_DD1Du64 ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut next = |m: u64| {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D) % m.max(1)
    };
    (0..n).map(|_| ((next(w - size) as f64 * ds) as i64, (next(h - size) as f64 * ds) as i64)).collect()
}

/// The read plan of a batch: the batch planner's unique tiles, located, then the read planner.
fn batch_read_plan(slide: &Slide, level: usize, locs: &[(i64, i64)], size: u64) -> ReadPlan {
    let (img, ds, at) = slidestream::read::locate::level(slide.index(), level).expect("level");
    let bp = BatchPlan::build(&LevelGeom { slide: 1, level: level as u32, image: img, downsample: ds }, locs, (size, size));
    let file = slidestream::io::posix::FileSource::open(slide.index().path()).expect("open the slide's file");
    let mut wants = Vec::new();
    for t in &bp.tiles {
        if locate_tile(img, &file, t.key.col, t.key.row, &at).expect("tile").is_none() {
            continue;
        }
        for l in img.tile_locs(t.key.col, t.key.row) {
            wants.push(Want { id: wants.len(), offset: slidestream::io::multi::address(l), len: l.length });
        }
    }
    plan_reads(&wants, &slide.config().plan)
}

/// Evict `path` from the page cache; returns how.
fn evict(src: &FileSource, drop_caches: bool) -> &'static str {
    let dropped = drop_caches && std::fs::write("/proc/sys/vm/drop_caches", "1").is_ok();
    let advised = hint::dont_need(src, 0, 0);
    match (dropped, advised) {
        (true, true) => "drop_caches+DONTNEED",
        (true, false) => "drop_caches",
        (false, true) => "DONTNEED",
        (false, false) => "none (eviction failed)",
    }
}

/// Share of `path`'s pages resident in the page cache (mincore over a read-only mapping).
fn resident(path: &Path) -> f64 {
    let Ok(f) = File::open(path) else { return f64::NAN };
    let len = f.metadata().map(|m| m.len() as usize).unwrap_or(0);
    if len == 0 {
        return 0.0;
    }
    // SAFETY: a private read-only mapping of a file we opened, unmapped below; only mincore
    // looks at it (no page of it is read).
    unsafe {
        let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
        if p == libc::MAP_FAILED {
            return f64::NAN;
        }
        let pages = len.div_ceil(4096);
        let mut vec = vec![0u8; pages];
        let r = libc::mincore(p, len, vec.as_mut_ptr());
        libc::munmap(p, len);
        if r != 0 {
            return f64::NAN;
        }
        vec.iter().filter(|&&b| b & 1 == 1).count() as f64 / pages as f64
    }
}

/// The file opened `O_DIRECT`: each read rounded out to 4 KiB, into an aligned bounce buffer.
#[derive(Debug)]
struct Direct {
    file: File,
    len: u64,
}

const ALIGN: usize = 4096;

impl ByteSource for Direct {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = offset & !(ALIGN as u64 - 1);
        let end = (offset + buf.len() as u64).next_multiple_of(ALIGN as u64);
        let n = (end - start) as usize;
        let layout = std::alloc::Layout::from_size_align(n, ALIGN).map_err(io::Error::other)?;
        // SAFETY: a non-zero size (buf is non-empty for every request), freed below.
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            return Err(io::Error::new(io::ErrorKind::OutOfMemory, "bounce buffer"));
        }
        // SAFETY: `n` bytes just allocated, not aliased.
        let bounce = unsafe { std::slice::from_raw_parts_mut(p, n) };
        let mut got = 0usize;
        let want = (offset - start) as usize + buf.len();
        let r = loop {
            match self.file.read_at(&mut bounce[got..], start + got as u64) {
                Ok(0) => break Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                Ok(k) => {
                    got += k;
                    if got >= want {
                        break Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        if r.is_ok() {
            buf.copy_from_slice(&bounce[(offset - start) as usize..want]);
        }
        // SAFETY: allocated above with this layout.
        unsafe { std::alloc::dealloc(p, layout) };
        r
    }
}

/// How a variant reads.
#[derive(Clone, Copy)]
struct Variant {
    depth: usize,
    hint: Hint,
    direct: bool,
    warm: bool,
    lanes: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Hint {
    None,
    /// `will_need` on the calling thread before reading.
    Sync,
    /// `will_need_in_background`, reads start at once.
    Background,
}

fn parse_variant(v: &str, cores: usize) -> Option<Variant> {
    let (warm, v) = v.strip_prefix("warm-").map_or((false, v), |r| (true, r));
    let (v, hint) = match (v.strip_suffix("+hint"), v.strip_suffix("+bghint")) {
        (Some(r), _) => (r, Hint::Sync),
        (_, Some(r)) => (r, Hint::Background),
        _ => (v, Hint::None),
    };
    let mut x = Variant { depth: cores, hint, direct: false, warm, lanes: false };
    if v == "decode" {
        return Some(x);
    }
    let n = if let Some(n) = v.strip_prefix("io") {
        n
    } else if let Some(n) = v.strip_prefix("direct") {
        x.direct = true;
        n
    } else {
        x.lanes = true;
        v.strip_prefix("lanes")?
    };
    x.depth = n.parse().ok()?;
    Some(x)
}

/// The GPU engine's shape: `LANES` lanes take chunks of about `CHUNK_TILES` tiles in file order,
/// each reads its chunk (the plan's requests, `pool` or serial) and then "decodes" it: sleeps
/// `decode_us` per tile (the lanes wait on nvJPEG; the CPU is free).
fn read_as_lanes(plan: &ReadPlan, src: &dyn ByteSource, pool: Option<&rayon::ThreadPool>, decode_us: u64) -> bool {
    const LANES: usize = 4;
    const CHUNK_TILES: usize = 256;
    let mut chunks: Vec<ReadPlan> = vec![ReadPlan::default()];
    for r in &plan.requests {
        let last = chunks.last_mut().expect("one chunk");
        if last.requests.iter().map(|q| q.members.len()).sum::<usize>() >= CHUNK_TILES {
            chunks.push(ReadPlan::default());
        }
        chunks.last_mut().expect("one chunk").requests.push(r.clone());
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let ok = std::sync::atomic::AtomicBool::new(true);
    std::thread::scope(|s| {
        for _ in 0..LANES {
            s.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(c) = chunks.get(k) else { break };
                let mut buf = vec![0u8; c.read_bytes() as usize];
                let r = match pool {
                    Some(p) => c.read_into_in(src, &mut buf, p),
                    None => c.read_into_serial(src, &mut buf),
                };
                if r.iter().any(|x| x.is_err()) {
                    ok.store(false, std::sync::atomic::Ordering::Relaxed);
                }
                let tiles: usize = c.requests.iter().map(|q| q.members.len()).sum();
                std::thread::sleep(std::time::Duration::from_micros(decode_us * tiles as u64));
            });
        }
    });
    ok.into_inner()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

fn main() {
    let a = parse_args();
    if a.slide.as_os_str().is_empty() {
        eprintln!("usage: cold_read SLIDE [--patches 4096] [--size 256] [--reps 3] [--level 0] [--variants {DEFAULT_VARIANTS}] [--e2e] [--drop-caches]");
        std::process::exit(2);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let slide = Slide::open_with(&a.slide, SlideOptions { cache: Some(std::sync::Arc::new(TileCache::new(0))), ..Default::default() }).expect("open slide");
    let (w, h) = slide.level_dimensions()[a.level];
    let ds = slide.level_downsamples()[a.level];
    let src = FileSource::open(&a.slide).expect("open");
    let direct = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&a.slide).ok().map(|file| Direct { len: src.len(), file });
    let probe = batch_read_plan(&slide, a.level, &locations(w, h, ds, a.size, a.patches, 0), a.size);
    let how = evict(&src, a.drop_caches);
    println!(
        "slide {} ({} bytes, level {} {w}x{h}); {} random {}² patches: {} requests, {:.1} MB read, {:.1} MB needed (amplification {:.3}); \
         {cores} cores; eviction: {how}, resident after: {:.1} %; library default depth {}",
        a.slide.display(),
        src.len(),
        a.level,
        a.patches,
        a.size,
        probe.requests.len(),
        probe.read_bytes() as f64 / 1e6,
        probe.needed_bytes as f64 / 1e6,
        probe.amplification(),
        resident(&a.slide) * 100.0,
        pool::depth(),
    );
    let mut pools: std::collections::HashMap<usize, std::sync::Arc<rayon::ThreadPool>> = std::collections::HashMap::new();
    /// One variant's runs: MB/s, requests/s, patches/s.
    type Runs = (Vec<f64>, Vec<f64>, Vec<f64>);
    let mut results: Vec<(String, Runs)> = a.variants.iter().map(|v| (v.clone(), Runs::default())).collect();
    let mut e2e: Vec<(&str, Vec<f64>)> = vec![("e2e-cold", vec![]), ("e2e-warm", vec![])];
    let mut run = 0u64;
    println!("{:<16} {:>4} {:>9} {:>9} {:>11} {:>10} {:>8}", "variant", "rep", "ms", "MB/s", "requests/s", "patches/s", "resid%");
    for rep in 0..a.reps {
        let mut order: Vec<usize> = (0..a.variants.len()).collect();
        if rep % 2 == 1 {
            order.reverse();
        }
        for &k in &order {
            let name = &a.variants[k];
            let Some(Variant { depth, hint, direct: use_direct, warm, lanes }) = parse_variant(name, cores) else {
                eprintln!("unknown variant {name}");
                continue;
            };
            run += 1;
            // A fresh patch set a run, so no run reads what another left in a cache below ours.
            let plan = batch_read_plan(&slide, a.level, &locations(w, h, ds, a.size, a.patches, run), a.size);
            let mut buf = vec![0u8; plan.read_bytes() as usize];
            if warm {
                plan.read_into_serial(&src, &mut buf);
            } else {
                evict(&src, a.drop_caches);
            }
            let res_before = if warm { f64::NAN } else { resident(&a.slide) * 100.0 };
            let p = (depth > 1).then(|| pools.entry(depth).or_insert_with(|| pool::build(depth).expect("pool")).clone());
            let s: &dyn ByteSource = match (&direct, use_direct) {
                (Some(d), true) => d,
                (None, true) => {
                    eprintln!("{name}: O_DIRECT open failed; skipped");
                    continue;
                }
                _ => &src,
            };
            let t = Instant::now();
            match hint {
                Hint::Sync => {
                    plan.will_need(&src);
                }
                Hint::Background => {
                    hint::will_need_in_background(&src, plan.requests.iter().map(|r| (r.offset, r.len)).collect());
                }
                Hint::None => {}
            }
            let ok = if lanes {
                read_as_lanes(&plan, s, p.as_deref(), a.decode_us)
            } else {
                let r = match &p {
                    Some(p) => plan.read_into_in(s, &mut buf, p),
                    None => plan.read_into_serial(s, &mut buf),
                };
                r.iter().all(|x| x.is_ok())
            };
            let secs = t.elapsed().as_secs_f64();
            assert!(ok, "{name}: a read failed");
            let mbs = plan.read_bytes() as f64 / 1e6 / secs;
            let rps = plan.requests.len() as f64 / secs;
            let pps = a.patches as f64 / secs;
            println!("{name:<16} {rep:>4} {:>9.1} {mbs:>9.1} {rps:>11.0} {pps:>10.0} {res_before:>8.1}", secs * 1e3);
            let runs = &mut results[k].1;
            runs.0.push(mbs);
            runs.1.push(rps);
            runs.2.push(pps);
        }
        if a.e2e {
            for (i, cold) in [true, false].into_iter().enumerate() {
                run += 1;
                let locs = locations(w, h, ds, a.size, a.patches, run);
                let reqs: Vec<PatchRequest<'_>> = locs.iter().map(|&location| PatchRequest { slide: &slide, level: a.level, location }).collect();
                let opts = ReadOptions { size: (a.size, a.size), background: [255; 3] };
                if cold {
                    evict(&src, a.drop_caches);
                } else {
                    read_patches(&reqs, &opts).expect("read_patches");
                }
                let t = Instant::now();
                let out = read_patches(&reqs, &opts).expect("read_patches");
                let secs = t.elapsed().as_secs_f64();
                std::hint::black_box(out);
                let pps = a.patches as f64 / secs;
                println!("{:<16} {rep:>4} {:>9.1} {:>9} {:>11} {pps:>10.0}", e2e[i].0, secs * 1e3, "", "");
                e2e[i].1.push(pps);
            }
        }
    }
    println!("\nmedian of {} reps:\n{:<16} {:>9} {:>11} {:>10}", a.reps, "variant", "MB/s", "requests/s", "patches/s");
    for (name, (mut mbs, mut rps, mut pps)) in results {
        if !mbs.is_empty() {
            println!("{name:<16} {:>9.1} {:>11.0} {:>10.0}", median(&mut mbs), median(&mut rps), median(&mut pps));
        }
    }
    for (name, mut pps) in e2e {
        if !pps.is_empty() {
            println!("{name:<16} {:>9} {:>11} {:>10.0}   (read_patches, SLIDESTREAM_IO_DEPTH = {})", "", "", median(&mut pps), pool::depth());
        }
    }
}
