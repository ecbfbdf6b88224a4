//! `slidestream`: command-line front end (info, region, associated, thumbnail, tiles, bench,
//! GPU probes).
//!
//! Exit status 0 on success (and for `--help`, `--version`), 1 for every error: a bad
//! argument, a bad setting, an unreadable or damaged slide, a failed write. Every error is one
//! line `error: …` on stderr naming what is wrong (the flag, the file and the level and tile
//! where relevant, or the setting and its accepted values). README.md "Command line" states
//! the convention.
//!
//! `args.rs` holds the argument parsers and the one-line rendering of clap's errors. One file
//! per group of commands: `info.rs` (info, `--io-stats`), `region.rs` (region,
//! associated, thumbnail), `tiles.rs` (tiles, CPU and device), `bench.rs` (random patches), `gpu.rs`
//! (gpu-probe, gpu-region); `output.rs` holds what several print (PNG writing, GPU stats).

mod args;
mod bench;
mod gpu;
mod info;
mod output;
mod region;
mod serve;
mod sigint;
mod tiles;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use slidestream::Error;

use args::{parse_bound, parse_count, parse_pair_i64, parse_positive, parse_positive_usize, parse_size};

#[derive(Parser)]
#[command(name = "slidestream", version, about = "Whole-slide image loader: slide info, regions, tile throughput")]
struct Cli {
    /// Worker threads for decoding, 1 to 1024 (default: all cores, or RAYON_NUM_THREADS).
    #[arg(long, global = true, value_parser = parse_count::<usize>, allow_hyphen_values = true)]
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
        #[arg(long, value_name = "X,Y", value_parser = parse_pair_i64, allow_hyphen_values = true)]
        location: (i64, i64),
        /// Pyramid level.
        #[arg(long, default_value_t = 0, value_parser = parse_count::<usize>, allow_hyphen_values = true)]
        level: usize,
        /// Size in pixels of that level, "W,H".
        #[arg(long, value_name = "W,H", value_parser = parse_size, allow_hyphen_values = true)]
        size: (u64, u64),
        /// Output file: .png (or no extension) = RGBA PNG, .jpg / .jpeg = RGB JPEG, - = PNG on
        /// stdout.
        #[arg(long, short, allow_hyphen_values = true)]
        output: PathBuf,
    },
    /// Write an associated image (thumbnail, label, macro) as an RGBA PNG.
    Associated {
        /// Slide file.
        path: PathBuf,
        /// Associated image name.
        name: String,
        /// Output file: .png (or no extension) = RGBA PNG, .jpg / .jpeg = RGB JPEG, - = PNG on
        /// stdout.
        #[arg(long, short, allow_hyphen_values = true)]
        output: PathBuf,
    },
    /// Write a thumbnail of the whole slide (fitting in --size, aspect ratio kept, over white).
    Thumbnail {
        /// Slide file.
        path: PathBuf,
        /// Largest width and height, "W,H", or one number for both.
        #[arg(long, value_name = "W,H", default_value = "1024", value_parser = parse_bound, allow_hyphen_values = true)]
        size: (u64, u64),
        /// Output file: .png (or no extension) = PNG, .jpg / .jpeg = JPEG, - = PNG on stdout.
        #[arg(long, short, allow_hyphen_values = true)]
        output: PathBuf,
    },
    /// Read and decode every tile of a level through the pipeline; print throughput, bytes,
    /// requests and cache statistics.
    Tiles {
        /// Slide file.
        path: PathBuf,
        /// Pyramid level.
        #[arg(long, default_value_t = 0, value_parser = parse_count::<usize>, allow_hyphen_values = true)]
        level: usize,
        /// Tiles per batch handed to the pipeline.
        #[arg(long, default_value_t = 512, value_parser = parse_positive_usize, allow_hyphen_values = true)]
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
        #[arg(long, default_value_t = 0, value_parser = parse_count::<usize>, allow_hyphen_values = true)]
        level: usize,
        /// Tiles per nvJPEG batch.
        #[arg(long, default_value_t = 256, value_parser = parse_positive_usize, allow_hyphen_values = true)]
        batch: usize,
        /// Most tiles to decode (repeating the level's tiles if it has fewer).
        #[arg(long, default_value_t = 4096, value_parser = parse_count::<usize>, allow_hyphen_values = true)]
        tiles: usize,
    },
    /// Read regions on the GPU (nvJPEG + assembly kernel) and compare them with the CPU path;
    /// with --patches, time random level-0 patches read file → device.
    GpuRegion {
        /// Slide file.
        path: PathBuf,
        /// Patch edge in pixels for the timing run.
        #[arg(long, default_value_t = 256, value_parser = parse_positive, allow_hyphen_values = true)]
        size: u64,
        /// Random patches to time (0 = correctness only).
        #[arg(long, default_value_t = 0, value_parser = parse_count::<usize>, allow_hyphen_values = true)]
        patches: usize,
        /// Patches per batched call in the timing run.
        #[arg(long, default_value_t = 4096, value_parser = parse_positive_usize, allow_hyphen_values = true)]
        batch: usize,
    },
    /// Random-patch benchmark: read N patches at random level-0 locations (one caller thread)
    /// and print patches/s. Locations come from --locations (a file of "x,y" lines, level-0
    /// pixels) or from a seeded generator.
    Bench {
        /// Slide file.
        path: PathBuf,
        /// Pyramid level.
        #[arg(long, default_value_t = 0, value_parser = parse_count::<usize>, allow_hyphen_values = true)]
        level: usize,
        /// Patch edge in pixels of the level (1 or more).
        #[arg(long, default_value_t = 256, value_parser = parse_count::<u64>, allow_hyphen_values = true)]
        size: u64,
        /// Number of patches (1 or more).
        #[arg(long, default_value_t = 2000, value_parser = parse_count::<usize>, allow_hyphen_values = true)]
        patches: usize,
        /// Seed of the location generator.
        #[arg(long, default_value_t = 0, value_parser = parse_count::<u64>, allow_hyphen_values = true)]
        seed: u64,
        /// File of "x,y" level-0 locations, one per line (overrides --patches/--seed).
        #[arg(long)]
        locations: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Serve a slide, or every slide under a directory, over HTTP: IIIF Image API 3.0, Deep
    /// Zoom, /slides.json and a viewer page at / (docs/serve.md). Binds to localhost by default;
    /// runs until Ctrl-C.
    Serve {
        /// A slide file, or a directory searched recursively for slides.
        path: PathBuf,
        /// Address to bind (0.0.0.0 exposes the slides to the network).
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// TCP port; 0 picks a free one (printed on the first line).
        #[arg(long, default_value_t = 8000, value_parser = parse_bound_u64::<0, 65535>, allow_hyphen_values = true)]
        port: u64,
        /// Deep Zoom tile edge, pixels without overlap (1 to 4096).
        #[arg(long, default_value_t = 254, value_parser = parse_bound_u64::<1, 4096>, allow_hyphen_values = true)]
        tile_size: u64,
        /// Deep Zoom overlap, pixels (0 to 64).
        #[arg(long, default_value_t = 1, value_parser = parse_bound_u64::<0, 64>, allow_hyphen_values = true)]
        overlap: u64,
        /// Deep Zoom renders the whole slide, not only the openslide.bounds-* region.
        #[arg(long)]
        no_limit_bounds: bool,
        /// Quality of JPEG answers (1 to 100).
        #[arg(long, default_value_t = 75, value_parser = parse_bound_u64::<1, 100>, allow_hyphen_values = true)]
        jpeg_quality: u64,
        /// Requests rendered at once (1 to 1024; default: 2 x cores); more wait in a queue.
        #[arg(long, value_parser = parse_bound_u64::<1, 1024>, allow_hyphen_values = true)]
        max_requests: Option<u64>,
        /// Largest output image, pixels (IIIF maxArea; 1024 to 268435456).
        #[arg(long, default_value_t = 1 << 24, value_parser = parse_bound_u64::<1024, 268435456>, allow_hyphen_values = true)]
        max_area: u64,
        /// Let IIIF `^` sizes exceed the region (sizeUpscaling).
        #[arg(long)]
        allow_upscale: bool,
    },
}

/// An integer from `LO` to `HI` inclusive.
fn parse_bound_u64<const LO: u64, const HI: u64>(s: &str) -> Result<u64, String> {
    match parse_count::<u64>(s)? {
        n if (LO..=HI).contains(&n) => Ok(n),
        n => Err(format!("{n} is out of range: expected an integer from {LO} to {HI}")),
    }
}

fn main() -> ExitCode {
    // Before any thread or CUDA context exists (see the function's documentation).
    slidestream::gpu::raise_cuda_connections();
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        eprintln!("error: internal error (please report): {msg}");
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let names: Vec<String> = <Cli as clap::CommandFactory>::command().get_subcommands().map(|c| c.get_name().to_string()).collect();
            eprintln!("error: a command is required: {} (see --help)", names.join(", "));
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("error: {}", output::one_line(&args::clap_one_line(&e)));
            return ExitCode::from(1);
        }
    };
    sigint::install();
    let r = std::panic::catch_unwind(|| threads(cli.threads).and_then(|()| run(cli.cmd)));
    if sigint::was_interrupted() || matches!(r, Ok(Err(Error::Interrupted))) {
        // Whatever the command made of it (an interrupted read, or a result after Ctrl-C).
        eprintln!("error: interrupted");
        return ExitCode::from(sigint::EXIT_STATUS);
    }
    match r {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            // Every error kind, `config` (a bad SLIDESTREAM_* value) included, is one line.
            eprintln!("error: {}", output::one_line(&e.to_string()));
            ExitCode::from(1)
        }
        Err(_) => ExitCode::from(1),
    }
}

/// Size rayon's global pool from `--threads`, capped ([`slidestream::config::MAX_THREADS`]);
/// without the flag, check `RAYON_NUM_THREADS` (rayon builds the pool from it at the first
/// parallel read).
fn threads(flag: Option<usize>) -> Result<(), Error> {
    match flag {
        Some(n) => {
            let n = slidestream::config::check_threads("--threads", n)?;
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build_global()
                .map_err(|e| Error::Usage(format!("--threads {n}: cannot start the decode threads: {e}")))
        }
        None => slidestream::config::rayon_num_threads().map(|_| ()),
    }
}

fn run(cmd: Cmd) -> Result<(), Error> {
    match cmd {
        Cmd::Serve { path, host, port, tile_size, overlap, no_limit_bounds, jpeg_quality, max_requests, max_area, allow_upscale } => {
            let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
            serve::serve(serve::ServeOptions {
                path,
                host,
                port: port as u16,
                tile_size: tile_size as u32,
                overlap: overlap as u32,
                limit_bounds: !no_limit_bounds,
                jpeg_quality: jpeg_quality as u8,
                max_requests: max_requests.map_or(2 * cores, |n| n as usize),
                allow_upscale,
                max_area,
            })
        }
        Cmd::Info { path, json, why, io_stats } => info::info(&path, json, why, io_stats),
        Cmd::Region { path, location, level, size, output } => region::region(&path, location, level, size, &output),
        Cmd::Associated { path, name, output } => region::associated(&path, &name, &output),
        Cmd::Thumbnail { path, size, output } => region::thumbnail(&path, size, &output),
        Cmd::Tiles { path, level, batch, json, device } => match tiles::parse_device(&device)? {
            None => tiles::tiles(&path, level, batch.max(1), json),
            Some(d) => tiles::tiles_device(&path, level, batch.max(1), json, d),
        },
        Cmd::GpuRegion { path, size, patches, batch } => gpu::gpu_region(&path, size, patches, batch),
        Cmd::GpuProbe { path, level, batch, tiles } => gpu::gpu_probe(path.as_deref(), level, batch.max(1), tiles),
        Cmd::Bench { path, level, size, patches, seed, locations, json } => {
            bench::bench(&path, bench::BenchArgs { level, size, patches, seed, locations, json })
        }
    }
}
