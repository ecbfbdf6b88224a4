//! The command-line tool: what `info --io-stats` reports and how a failed PNG write ends.
//! (Error reporting on damaged input is in `bad_input.rs`.)

use std::path::{Path, PathBuf};
use std::process::Command;

use slidestream::Slide;

fn sample() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/CMU-1-Small-Region.svs"))
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_slidestream")).args(args).env("RUST_BACKTRACE", "0").output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Regression: `info --io-stats` printed "0 bytes in 0 requests" because the counters it read
/// are zeroed at the end of the open; it must report what the command read (the open's
/// structure reads, as `Slide::open_io_counters` counts them).
#[test]
fn info_io_stats_reports_the_reads_of_the_open() {
    let p = sample();
    let slide = Slide::open(&p).unwrap();
    let open = slide.open_io_counters();
    assert!(open.bytes > 0 && open.requests > 0, "the open read nothing? {open:?}");
    assert_eq!(slide.io_counters(), Default::default(), "reads since open exclude the open's");
    // Any region read afterwards counts in io_counters, not in open_io_counters.
    slide.read_region((0, 0), 0, (64, 64)).unwrap();
    assert!(slide.io_counters().bytes > 0);
    assert_eq!(slide.open_io_counters(), open);

    let (code, out, err) = cli(&["info", "--io-stats", "--json", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    assert_eq!(v["cpu"]["bytes"], open.bytes, "{out}");
    assert_eq!(v["cpu"]["requests"], open.requests, "{out}");
    assert_eq!(v["cpu"]["open_bytes"], open.bytes, "{out}");
    assert!(v.get("gpu").is_some(), "{out}");

    let (code, out, err) = cli(&["info", "--io-stats", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let want = format!("cpu io: {} bytes in {} requests", open.bytes, open.requests);
    assert!(out.lines().next().is_some_and(|l| l.starts_with(&want)), "expected a line starting {want:?}: {out}");
}

/// A PNG that cannot be written (here: a full device) exits 1 with one line naming the file and
/// the OS error, instead of succeeding with a truncated file.
#[test]
fn a_failed_png_write_exits_1_with_the_os_error() {
    let full = Path::new("/dev/full");
    if !full.exists() {
        eprintln!("SKIP: no /dev/full");
        return;
    }
    let p = sample();
    for args in [
        // 16x16 pixels encode to less than the writer's buffer: only the flush can fail (image's
        // `save` drops its BufWriter unflushed, which lost this error and exited 0).
        vec!["region", p.to_str().unwrap(), "--location", "0,0", "--size", "16,16", "-o", "/dev/full"],
        vec!["region", p.to_str().unwrap(), "--location", "0,0", "--size", "300,200", "-o", "/dev/full"],
        vec!["associated", p.to_str().unwrap(), "thumbnail", "-o", "/dev/full"],
    ] {
        let (code, _, err) = cli(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err:?}");
        assert!(err.starts_with("error: /dev/full: ") && err.contains("os error 28"), "{args:?}: {err}");
    }
    // A directory that does not exist: the open fails, same shape.
    let missing = std::env::temp_dir().join("slidestream-no-such-dir/out.png");
    let (code, _, err) = cli(&["region", p.to_str().unwrap(), "--location", "0,0", "--size", "16,16", "-o", missing.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with(&format!("error: {}: ", missing.display())) && err.contains("os error 2"), "{err}");
}
