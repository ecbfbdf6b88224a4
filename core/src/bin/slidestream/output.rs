//! What several commands print or write: one-line text, PNG / JPEG files, GPU statistics.

use std::io::Write;
use std::path::Path;

use image::ImageEncoder;
use slidestream::gpu::GpuStats;
use slidestream::{Error, Location};

/// `s` with line breaks replaced by spaces (error messages and property values stay one line).
pub(crate) fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// An output image's format, from its path's extension (see [`ImageFormat::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImageFormat {
    /// RGBA PNG (`.png`, no extension, or `-` = stdout).
    Png,
    /// RGB JPEG, quality 90, 4:4:4 (`.jpg`, `.jpeg`): the alpha channel is dropped.
    Jpeg,
}

/// What `-o` accepts, in words (quoted in the error for anything else).
const SUPPORTED: &str = "supported: .png, .jpg, .jpeg, no extension (PNG), or - for PNG on stdout";

impl ImageFormat {
    /// The format for output path `path`: `.png` (any case) or no extension → PNG, `.jpg` /
    /// `.jpeg` → JPEG, `-` (stdout) → PNG.
    ///
    /// # Errors
    /// [`Error::Usage`] naming the path and the supported extensions for any other extension.
    pub(crate) fn of(path: &Path) -> Result<ImageFormat, Error> {
        if path.as_os_str() == "-" {
            return Ok(ImageFormat::Png);
        }
        match path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()) {
            None => Ok(ImageFormat::Png),
            Some(e) if e == "png" => Ok(ImageFormat::Png),
            Some(e) if e == "jpg" || e == "jpeg" => Ok(ImageFormat::Jpeg),
            Some(e) => Err(Error::Usage(format!("{}: cannot write '.{e}' images ({SUPPORTED})", path.display()))),
        }
    }
}

/// `data` (RGBA u8, `w × h × 4` bytes, row-major) encoded as `format`.
fn encode(format: ImageFormat, name: &str, w: u32, h: u32, data: &[u8]) -> Result<Vec<u8>, Error> {
    let at = Location::file(name);
    match format {
        ImageFormat::Png => {
            let mut out = Vec::new();
            image::codecs::png::PngEncoder::new(&mut out).write_image(data, w, h, image::ExtendedColorType::Rgba8).map_err(|e| match e {
                image::ImageError::IoError(io) => Error::io(&at, io),
                other => Error::io(&at, std::io::Error::other(other.to_string())),
            })?;
            Ok(out)
        }
        ImageFormat::Jpeg => {
            if w > 65535 || h > 65535 {
                return Err(Error::Usage(format!("{name}: cannot write a {w}x{h} JPEG (at most 65535 pixels a side; write a .png)")));
            }
            let img = turbojpeg::Image { pixels: data, width: w as usize, pitch: w as usize * 4, height: h as usize, format: turbojpeg::PixelFormat::RGBA };
            let jpeg =
                turbojpeg::compress(img, 90, turbojpeg::Subsamp::None).map_err(|e| Error::io(&at, std::io::Error::other(format!("JPEG encoder: {e}"))))?;
            Ok(jpeg.to_vec())
        }
    }
}

/// Write `data` (RGBA u8, `w × h × 4` bytes, row-major) at `path` in the format its extension
/// names ([`ImageFormat::of`]); `-` writes a PNG to stdout.
///
/// # Errors
/// [`Error::Usage`] for an unsupported extension, an empty or oversized image or a buffer of
/// the wrong size; [`Error::Io`] naming `path` (or `stdout`) when creating, writing or
/// flushing fails (a full disk is reported, never lost in a buffered writer's drop).
pub(crate) fn write_image(path: &Path, w: u64, h: u64, data: &[u8]) -> Result<(), Error> {
    let format = ImageFormat::of(path)?;
    let stdout = path.as_os_str() == "-";
    let name = if stdout { "stdout".to_string() } else { path.display().to_string() };
    let (w32, h32) = match (u32::try_from(w), u32::try_from(h)) {
        (Ok(a), Ok(b)) if a > 0 && b > 0 => (a, b),
        _ => return Err(Error::Usage(format!("{name}: cannot write a {w}x{h} image"))),
    };
    if data.len() as u64 != w * h * 4 {
        return Err(Error::Usage(format!("{name}: buffer does not match {w}x{h}")));
    }
    let bytes = encode(format, &name, w32, h32, data)?;
    let at = Location::file(&name);
    if stdout {
        let mut out = std::io::stdout().lock();
        out.write_all(&bytes).and_then(|()| out.flush()).map_err(|e| Error::io(&at, e))
    } else {
        let mut file = std::fs::File::create(path).map_err(|e| Error::io(&at, e))?;
        file.write_all(&bytes).and_then(|()| file.flush()).map_err(|e| Error::io(&at, e))
    }
}

/// The GPU statistics as JSON (keys as the fields of [`GpuStats`]).
pub(crate) fn gpu_stats_json(st: &GpuStats) -> serde_json::Value {
    serde_json::json!({
        "compat_mode": st.compat_mode, "io_path": st.io_path, "io_reason": st.io_reason,
        "posix_bytes": st.posix_bytes, "posix_requests": st.posix_requests,
        "cufile_gds_bytes": st.cufile_gds_bytes, "cufile_gds_requests": st.cufile_gds_requests,
        "cufile_compat_bytes": st.cufile_compat_bytes, "cufile_compat_requests": st.cufile_compat_requests,
        "cufile_handle_failures": st.cufile_handle_failures, "cufile_handle_error": st.cufile_handle_error,
        "cufile_skip_reason": st.cufile_skip_reason,
        "tile_bytes": st.tile_bytes, "read_amplification": st.read_amplification(),
        "decoded_hardware": st.decoded_hardware, "decoded_device_bitstream": st.decoded_device_bitstream,
        "decoded_hybrid": st.decoded_hybrid, "decoded_sm": st.decoded_sm, "decoded_sm_partial": st.decoded_sm_partial, "sm_decoder": st.sm_decoder, "decoded_cpu": st.decoded_cpu,
        "decoded_cpu_partial": st.decoded_cpu_partial,
        "gpu_lanes": st.gpu_lanes, "cpu_workers": st.cpu_workers,
        "gpu_batch_fallbacks": st.gpu_batch_fallbacks, "cpu_fallback_reason": st.cpu_fallback_reason,
        "nvjpeg_backend": st.nvjpeg_backend, "hardware_engines": st.hardware_engines,
        "kernel_cache": st.kernel_cache, "warmup": st.warmup,
        "cache": {"hits": st.cache.hits, "misses": st.cache.misses, "evictions": st.cache.evictions, "entries": st.cache.entries,
                  "resident_bytes": st.cache.resident_bytes, "capacity_bytes": st.cache.capacity_bytes},
        "device_tile_bytes": st.device_tile_bytes,
    })
}

/// The GPU statistics as text: I/O path and counters, decoders, device cache.
pub(crate) fn print_gpu_stats(st: &GpuStats) {
    println!(
        "gpu io: compat mode {}, path {}{}",
        st.compat_mode,
        st.io_path,
        if st.io_reason.is_empty() { String::new() } else { format!(" ({})", st.io_reason) }
    );
    println!(
        "gpu io: posix {} bytes / {} requests, cuFile GDS {} / {}, cuFile compat {} / {}; tile bytes {}, read amplification {:.3}",
        st.posix_bytes,
        st.posix_requests,
        st.cufile_gds_bytes,
        st.cufile_gds_requests,
        st.cufile_compat_bytes,
        st.cufile_compat_requests,
        st.tile_bytes,
        st.read_amplification()
    );
    if st.cufile_handle_failures > 0 {
        println!("gpu io: cuFile refused {} file(s): {}", st.cufile_handle_failures, st.cufile_handle_error);
    }
    if !st.cufile_skip_reason.is_empty() {
        println!("gpu io: not offered to cuFile: {}", st.cufile_skip_reason);
    }
    println!(
        "gpu decode: {} hardware, {} device-bitstream, {} hybrid, {} SM ({} of them partial; decoder {}), {} CPU ({} of them partial; {} failed batches; {} lanes, {} CPU workers); nvJPEG {}, {} engines{}",
        st.decoded_hardware,
        st.decoded_device_bitstream,
        st.decoded_hybrid,
        st.decoded_sm,
        st.decoded_sm_partial,
        st.sm_decoder,
        st.decoded_cpu,
        st.decoded_cpu_partial,
        st.gpu_batch_fallbacks,
        st.gpu_lanes,
        st.cpu_workers,
        st.nvjpeg_backend,
        st.hardware_engines,
        if st.cpu_fallback_reason.is_empty() { String::new() } else { format!("; last CPU fallback: {}", st.cpu_fallback_reason) }
    );
    if !st.kernel_cache.is_empty() {
        println!("gpu start: kernels {}; warm-up {}", st.kernel_cache, st.warmup);
    }
    let c = &st.cache;
    println!(
        "gpu cache: {} hits, {} misses, {} evictions, {} of {} bytes resident; {} bytes of device memory held by tiles",
        c.hits, c.misses, c.evictions, c.resident_bytes, c.capacity_bytes, st.device_tile_bytes
    );
}
