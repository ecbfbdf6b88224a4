//! One error kind per failure, on every read entry point: the same bad input (an over-large
//! tile, a tile past the end of the file, a corrupt tile, a missing level, a region or batch over
//! `max_region_bytes`) gives the same `Error::kind_name()` through every CPU entry point
//! (`read_region`, `read_region_into`, `read_regions_rgb_into`, `read_tiles`) and, when a CUDA
//! device is present, through the GPU entry points (`read_region_device`, `read_regions_device`,
//! RGB and RGBA). The rules are those of `slidestream::read::locate`.
//!
//! Each entry point is a reader closure taking the slide and the case, so the same cases run on
//! both paths; a reader returns `None` where a case does not apply to it (a tile list has no
//! output size; a single-region reader reads one patch, not a batch).

mod common;

use common::tiffwriter::{cut_tiles, tag, Chunk, Ifd, TempPath, Tiff, Value, Variant};
use slidestream::gpu::DeviceOptions;
use slidestream::{Config, Error, Slide, SlideOptions};

/// Output limit of every case: 4096 bytes (one 32 × 32 tile as RGBA).
const LIMIT: u64 = 4096;

/// A 64 × 32 level 0 of two 32 × 32 tiles, tile (0, 0) valid and tile (1, 0) `bad`, plus a
/// valid 16 × 16 level 1 (read at open for the quickhash). `compression` 1 or 7 (JPEG).
fn two_tiles(compression: u16, bad: Chunk) -> TempPath {
    let raster: Vec<u8> = (0..64 * 32).flat_map(|i| [(i % 64 * 4) as u8, (i / 64 * 8) as u8, 90]).collect();
    let tiles = cut_tiles(&raster, 64, 32, 3, 32, 32, &[0, 0, 0]);
    let good = if compression == 7 { jpeg(&tiles[0]) } else { tiles[0].clone() };
    let mut ifd = Ifd::tiled(64, 32, 32, 32, vec![Chunk::Data(good), bad]).compression(compression);
    if compression == 7 {
        ifd.photometric = 6;
    }
    let l1 = Ifd::tiled(16, 16, 16, 16, vec![Chunk::Data(vec![77; 16 * 16 * 3])]).tag(tag::NEW_SUBFILE_TYPE, Value::Long(vec![1]));
    let f = TempPath::new("kinds.tif");
    Tiff::new(Variant::BigTiff, vec![ifd, l1]).write(f.path());
    f
}

fn jpeg(rgb: &[u8]) -> Vec<u8> {
    let img = turbojpeg::Image { pixels: rgb, width: 32, pitch: 32 * 3, height: 32, format: turbojpeg::PixelFormat::RGB };
    turbojpeg::compress(img, 90, turbojpeg::Subsamp::Sub2x2).unwrap().to_vec()
}

/// One bad input and the outcome every applicable entry point must give.
struct Case {
    name: &'static str,
    file: TempPath,
    level: usize,
    /// Level-0 location of every patch.
    location: (i64, i64),
    /// Patch size (pixels of `level`).
    size: (u64, u64),
    /// Patches in a batch read (single-region readers apply only when 1).
    patches: usize,
    /// The tile a tile-list reader asks for (`None`: not a tile case).
    tile: Option<(u64, u64)>,
    /// `kind_name()` of the error, or `"ok"`.
    want: &'static str,
}

fn cases() -> Vec<Case> {
    let truncated = {
        let full = jpeg(&vec![128; 32 * 32 * 3]);
        full[..full.len() * 2 / 3].to_vec()
    };
    let tile_case = |name, compression, bad, want| Case {
        name,
        file: two_tiles(compression, bad),
        level: 0,
        // The whole bad tile (whole tiles are never decoded partially).
        location: (32, 0),
        size: (32, 32),
        patches: 1,
        tile: Some((1, 0)),
        want,
    };
    vec![
        tile_case("over-large tile", 1, Chunk::Raw { offset: 16, byte_count: 2 << 30 }, "limits"),
        tile_case("tile past the end of the file", 1, Chunk::Raw { offset: 16, byte_count: 1 << 20 }, "format"),
        tile_case("corrupt (truncated JPEG) tile", 7, Chunk::Data(truncated), "format"),
        tile_case("missing tile", 1, Chunk::Missing, "ok"),
        Case { name: "missing level", level: 9, ..tile_case("", 1, Chunk::Missing, "usage") },
        // 64 × 32 is over the limit as RGBA (8192 bytes) and as RGB (6144).
        Case { name: "region over max_region_bytes", location: (0, 0), size: (64, 32), tile: None, ..tile_case("", 1, Chunk::Missing, "limits") },
        // 8 patches of 16 × 16: each within the limit, the batch (6144 bytes RGB) over it.
        Case { name: "batch over max_region_bytes", size: (16, 16), patches: 8, tile: None, ..tile_case("", 1, Chunk::Missing, "limits") },
    ]
}

/// A read through one entry point: `None` when the case does not apply to it.
type Reader = Box<dyn Fn(&Slide, &Case) -> Option<Result<(), Error>>>;

fn cpu_readers() -> Vec<(&'static str, Reader)> {
    vec![
        ("read_region", Box::new(|s: &Slide, c: &Case| (c.patches == 1).then(|| s.read_region(c.location, c.level, c.size).map(drop)))),
        (
            "read_region_into",
            Box::new(|s: &Slide, c: &Case| {
                (c.patches == 1).then(|| {
                    let mut out = vec![0u8; (c.size.0 * c.size.1 * 4).min(1 << 20) as usize];
                    s.read_region_into(c.location, c.level, c.size, &mut out)
                })
            }),
        ),
        (
            "read_regions_rgb_into",
            Box::new(|s: &Slide, c: &Case| {
                let mut out = vec![0u8; (c.patches as u64 * c.size.0 * c.size.1 * 3).min(1 << 20) as usize];
                Some(s.read_regions_rgb_into(&vec![c.location; c.patches], c.level, c.size, [255; 3], &mut out))
            }),
        ),
        ("read_tiles", Box::new(|s: &Slide, c: &Case| c.tile.map(|t| s.read_tiles(c.level, &[t]).map(drop)))),
    ]
}

fn gpu_readers() -> Vec<(&'static str, Reader)> {
    let mut v: Vec<(&'static str, Reader)> = Vec::new();
    for channels in [3u8, 4] {
        let opts = DeviceOptions { channels, ..DeviceOptions::default() };
        v.push((
            if channels == 3 { "read_region_device (RGB)" } else { "read_region_device (RGBA)" },
            Box::new(move |s: &Slide, c: &Case| (c.patches == 1).then(|| s.read_region_device(c.location, c.level, c.size, &opts).map(drop))),
        ));
        v.push((
            if channels == 3 { "read_regions_device (RGB)" } else { "read_regions_device (RGBA)" },
            Box::new(move |s: &Slide, c: &Case| {
                Some(s.read_regions_device(&vec![c.location; c.patches], c.level, c.size, &opts).and_then(|b| b.into_result()).map(drop))
            }),
        ));
    }
    v
}

/// Run every case through every reader; each must give the case's kind (and, for tile errors,
/// name the tile), twice in a row (the slide stays usable).
fn check(readers: &[(&'static str, Reader)]) {
    for case in cases() {
        let config = Config { max_region_bytes: LIMIT, ..Config::default() };
        let opts = SlideOptions { config: Some(config), cache: Some(std::sync::Arc::new(slidestream::TileCache::new(1 << 20))), ..Default::default() };
        let slide = Slide::open_with(case.file.path(), opts).unwrap_or_else(|e| panic!("{}: open: {e}", case.name));
        let mut applied = 0;
        for (entry, read) in readers {
            for attempt in 0..2 {
                let Some(r) = read(&slide, &case) else { continue };
                applied += (attempt == 0) as usize;
                let got = r.as_ref().map_or_else(|e| e.kind_name(), |_| "ok");
                assert_eq!(got, case.want, "{}: {entry} (attempt {attempt}): {r:?}", case.name);
                if let (Err(e), Some((col, row))) = (&r, case.tile) {
                    if case.want != "usage" {
                        assert!(e.to_string().contains(&format!("tile ({col}, {row})")), "{}: {entry}: the error names no tile: {e}", case.name);
                    }
                }
            }
        }
        assert!(applied >= 1, "{}: applies to no entry point", case.name);
    }
}

#[test]
fn cpu_entry_points_give_one_error_kind_per_failure() {
    check(&cpu_readers());
}

#[test]
fn gpu_entry_points_give_the_cpu_error_kinds() {
    if !slidestream::gpu::available() {
        eprintln!("gpu_entry_points_give_the_cpu_error_kinds: skipped: no usable CUDA device (or built without `cuda`)");
        return;
    }
    check(&gpu_readers());
}
