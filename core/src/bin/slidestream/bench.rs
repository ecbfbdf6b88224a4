//! `bench`: random-patch benchmark, one caller thread.

use std::path::{Path, PathBuf};
use std::time::Instant;

use slidestream::{Error, ImageRef, Location, Slide};

use crate::args::{parse_pair_i64, within_limit};

/// `bench`'s options (as the command's flags).
pub(crate) struct BenchArgs {
    /// Pyramid level.
    pub level: usize,
    /// Patch edge in pixels of the level.
    pub size: u64,
    /// Number of patches (ignored with `locations`).
    pub patches: usize,
    /// Seed of the location generator.
    pub seed: u64,
    /// File of "x,y" level-0 locations.
    pub locations: Option<PathBuf>,
    /// JSON output.
    pub json: bool,
}

pub(crate) fn bench(path: &Path, args: BenchArgs) -> Result<(), Error> {
    let BenchArgs { level, size, patches, seed, locations, json } = args;
    if size == 0 || patches == 0 {
        return Err(Error::Usage(format!("bench needs --size ≥ 1 and --patches ≥ 1 (got {size} and {patches})")));
    }
    let slide = Slide::open(path)?;
    let dims = slide.level_dimensions();
    let &(lw, lh) =
        dims.get(level).ok_or_else(|| Error::Usage(format!("{}: level {level} does not exist (level count {})", path.display(), slide.level_count())))?;
    let ds = slide.level_downsamples()[level];
    // The patch buffer is sized by --size: checked against the library's limit before it is
    // allocated (a 100000² patch would need 40 GB).
    let at = Location::file(path).with_image(ImageRef::Level(level));
    let bytes =
        within_limit(&at, &format!("region of {size}x{size} pixels"), size.checked_mul(size).and_then(|n| n.checked_mul(4)), slide.config().max_region_bytes)?;
    // Locations from the file, or generated one by one (nothing sized by --patches is allocated).
    let from_file: Option<Vec<(i64, i64)>> = match locations {
        Some(f) => {
            let text = std::fs::read_to_string(&f).map_err(|e| Error::io(&Location::file(&f), e))?;
            let v: Vec<(i64, i64)> = text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| parse_pair_i64(l).map_err(|e| Error::Usage(format!("{}: {e}", f.display()))))
                .collect::<Result<_, _>>()?;
            if v.is_empty() {
                return Err(Error::Usage(format!("--locations {}: no locations (expected lines of x,y in level-0 pixels)", f.display())));
            }
            Some(v)
        }
        None => None,
    };
    // xorshift64*: deterministic, dependency-free.
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = |n: u64| {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    };
    let mut generated = || {
        let x = next(lw.saturating_sub(size).max(1));
        let y = next(lh.saturating_sub(size).max(1));
        ((x as f64 * ds) as i64, (y as f64 * ds) as i64)
    };
    let count = from_file.as_ref().map_or(patches, Vec::len);
    let mut buf = vec![0u8; bytes];
    let t0 = Instant::now();
    let mut checksum = 0u64;
    for k in 0..count {
        let loc = match &from_file {
            Some(v) => v[k],
            None => generated(),
        };
        slide.read_region_into(loc, level, (size, size), &mut buf)?;
        checksum = checksum.wrapping_add(buf[buf.len() / 2] as u64);
    }
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    let n = count as f64;
    let io = slide.io_counters();
    let threads = rayon::current_num_threads();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "patches": count, "size": size, "level": level, "seconds": secs, "patches_per_s": n / secs,
                "megapixels_per_s": n * (size * size) as f64 / 1e6 / secs, "bytes_read": io.bytes, "requests": io.requests,
                "threads": threads, "checksum": checksum,
            })
        );
    } else {
        println!(
            "{} random {size}x{size} patches of level {level} in {secs:.3} s: {:.0} patches/s ({:.1} MP/s), {threads} decode threads",
            count,
            n / secs,
            n * (size * size) as f64 / 1e6 / secs
        );
        println!("io: {} bytes in {} requests", io.bytes, io.requests);
    }
    Ok(())
}
