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

/// A fresh empty directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!("slidestream-cli-{}-{}-{name}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Exit 1 and exactly one line `error: …` on stderr containing every one of `words`.
fn assert_one_line_error(args: &[&str], code: i32, err: &str, words: &[&str]) {
    assert_eq!(code, 1, "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err:?}");
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    for w in words {
        assert!(err.contains(w), "{args:?}: expected {w:?} in {err}");
    }
}

/// Issue 13 F11: usage errors exited 2 with 3–18 lines of clap output, and negative numbers
/// were "unexpected argument '-1'". Every usage error is now one line, exit 1; negative values
/// reach the parsers and are refused naming the flag.
#[test]
fn usage_errors_are_one_line_exit_1_and_name_the_flag() {
    let p = sample();
    let s = p.to_str().unwrap();
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["region", s, "--location", "0,0", "--size", "-1,10", "-o", "/dev/null"], vec!["--size", "-1 is negative"]),
        (vec!["region", s, "--location", "0,0", "--level", "-1", "--size", "8,8", "-o", "/dev/null"], vec!["--level", "-1 is negative"]),
        (vec!["region", s, "--location", "0,0", "--size", "0,8", "-o", "/dev/null"], vec!["--size", "1 or more"]),
        (vec!["tiles", s, "--batch", "-5"], vec!["--batch", "-5 is negative"]),
        (vec!["bench", s, "--patches", "-3"], vec!["--patches", "-3 is negative"]),
        (vec!["region", s, "--location", "0,0"], vec!["required", "--size", "--output"]),
        (vec!["info", s, "--no-such-flag"], vec!["--no-such-flag"]),
        (vec!["no-such-command"], vec!["no-such-command"]),
        (vec![], vec!["a command is required", "region"]),
    ];
    for (args, words) in cases {
        let (code, out, err) = cli(&args);
        assert_one_line_error(&args, code, &err, &words);
        assert!(out.is_empty(), "{args:?}: {out}");
    }
    // Locations may be negative (outside the image reads transparent).
    let (code, _, err) = cli(&["region", s, "--location", "-5,-7", "--size", "8,8", "-o", "/dev/null"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = cli(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("region"), "{out}");
}

/// Issue 13 F11: `-o x.jpg` wrote PNG bytes and `-o -` a file named `-`. The format now follows
/// the extension (.png / none → PNG, .jpg / .jpeg → JPEG, anything else refused before the
/// slide is read, naming the supported ones) and `-` is stdout.
#[test]
fn the_output_format_follows_the_extension_and_dash_is_stdout() {
    let p = sample();
    let s = p.to_str().unwrap();
    let dir = TempDir::new("formats");
    for (name, magic) in
        [("out.png", &b"\x89PNG"[..]), ("OUT.PNG", b"\x89PNG"), ("noext", b"\x89PNG"), ("out.jpg", b"\xff\xd8\xff"), ("out.JPEG", b"\xff\xd8\xff")]
    {
        let f = dir.0.join(name);
        let (code, _, err) = cli(&["region", s, "--location", "100,200", "--size", "48,32", "-o", f.to_str().unwrap()]);
        assert_eq!(code, 0, "{name}: {err}");
        let bytes = std::fs::read(&f).unwrap();
        assert!(bytes.starts_with(magic), "{name}: starts {:02x?}", &bytes[..8.min(bytes.len())]);
        if magic[0] == 0xff {
            let img = turbojpeg::decompress(&bytes, turbojpeg::PixelFormat::RGB).unwrap();
            assert_eq!((img.width, img.height), (48, 32), "{name}");
        }
    }
    for name in ["out.tif", "out.webp", "out."] {
        let f = dir.0.join(name);
        let args = ["region", s, "--location", "0,0", "--size", "8,8", "-o", f.to_str().unwrap()];
        let (code, _, err) = cli(&args);
        assert_one_line_error(&args, code, &err, &[f.to_str().unwrap(), ".png, .jpg, .jpeg"]);
        assert!(!f.exists(), "{name} was created");
    }
    // `-`: the PNG on stdout, no file named `-` (the command runs in `dir`).
    let out = Command::new(env!("CARGO_BIN_EXE_slidestream"))
        .args(["region", s, "--location", "0,0", "--size", "16,16", "-o", "-"])
        .current_dir(&dir.0)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.starts_with(b"\x89PNG\r\n\x1a\n"), "stdout starts {:02x?}", &out.stdout[..8.min(out.stdout.len())]);
    assert!(!dir.0.join("-").exists(), "a file named '-' was written");
    let (code, out, err) = cli(&["associated", s, "thumbnail", "-o", "-"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("\u{fffd}PNG"), "stdout (read lossily) starts {:?}", &out.chars().take(4).collect::<String>());
}

/// Issue 13 F4: a failed write of any format, to a file or to stdout, exits 1 with the OS
/// error (the PNG case of `/dev/full` is `a_failed_png_write_exits_1_with_the_os_error`).
#[test]
fn a_failed_jpeg_or_stdout_write_exits_1_with_the_os_error() {
    let full = Path::new("/dev/full");
    if !full.exists() {
        eprintln!("SKIP: no /dev/full");
        return;
    }
    let p = sample();
    let s = p.to_str().unwrap();
    let dir = TempDir::new("full");
    let jpg = dir.0.join("full.jpg");
    std::os::unix::fs::symlink(full, &jpg).unwrap();
    let args = ["region", s, "--location", "0,0", "--size", "16,16", "-o", jpg.to_str().unwrap()];
    let (code, _, err) = cli(&args);
    assert_one_line_error(&args, code, &err, &[&format!("error: {}: ", jpg.display()), "os error 28"]);
    let out = Command::new(env!("CARGO_BIN_EXE_slidestream"))
        .args(["region", s, "--location", "0,0", "--size", "16,16", "-o", "-"])
        .stdout(std::fs::File::create(full).unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_one_line_error(&["-o", "-"], out.status.code().unwrap_or(-1), &err, &["error: stdout: ", "os error 28"]);
}

/// Issue 13 F10: `bench --size 100000` aborted (exit 134) allocating a 40 GB patch buffer; the
/// buffer is now checked against max_region_bytes first, like the library's reads.
#[test]
fn bench_refuses_a_patch_over_the_region_limit_before_allocating() {
    let p = sample();
    for size in ["100000", "4294967296"] {
        let args = ["bench", p.to_str().unwrap(), "--size", size, "--patches", "1"];
        let (code, _, err) = cli(&args);
        assert_one_line_error(&args, code, &err, &["limit exceeded", "max_region_bytes", &format!("{size}x{size}"), "level 0"]);
    }
}

/// `bench --locations` with a file of no locations (`/dev/null`, an empty or blank file) read
/// nothing and exited 0 with "0 random patches"; it is a usage error naming the flag.
#[test]
fn bench_with_no_locations_is_a_usage_error() {
    let p = sample();
    let blank = std::env::temp_dir().join(format!("slidestream-cli-blank-{}.txt", std::process::id()));
    std::fs::write(&blank, "\n  \n").unwrap();
    for f in ["/dev/null", blank.to_str().unwrap()] {
        let args = ["bench", p.to_str().unwrap(), "--locations", f];
        let (code, out, err) = cli(&args);
        assert_one_line_error(&args, code, &err, &["--locations", f, "no locations"]);
        assert!(out.is_empty(), "{f}: printed a result: {out}");
    }
    std::fs::write(&blank, "10,20\n").unwrap();
    let (code, out, err) = cli(&["bench", p.to_str().unwrap(), "--locations", blank.to_str().unwrap(), "--size", "16"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("1 random 16x16 patches"), "{out}");
    let _ = std::fs::remove_file(&blank);
}

/// Issue 13 F8: `--threads` and `RAYON_NUM_THREADS` had no upper bound (huge values spawned
/// threads until resources ran out). Both are capped at 1024 with a one-line error naming
/// the flag or the variable. 5000 is enough to show it and small enough that the old code
/// ran to completion (exit 0) instead of exhausting the machine.
#[test]
fn thread_counts_over_the_cap_are_refused_naming_the_flag_or_variable() {
    let p = sample();
    let s = p.to_str().unwrap();
    let args = ["--threads", "5000", "info", s];
    let (code, _, err) = cli(&args);
    assert_one_line_error(&args, code, &err, &["--threads 5000", "1024"]);
    let args = ["--threads", "0", "info", s];
    let (code, _, err) = cli(&args);
    assert_one_line_error(&args, code, &err, &["--threads 0", "1024"]);
    let args = ["--threads", "-2", "info", s];
    let (code, _, err) = cli(&args);
    assert_one_line_error(&args, code, &err, &["--threads", "-2 is negative"]);
    for value in ["5000", "many"] {
        for args in [&["info", s][..], &["region", s, "--location", "0,0", "--size", "8,8", "-o", "/dev/null"][..]] {
            let out = Command::new(env!("CARGO_BIN_EXE_slidestream")).args(args).env("RAYON_NUM_THREADS", value).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_one_line_error(args, out.status.code().unwrap_or(-1), &err, &[&format!("RAYON_NUM_THREADS=\"{value}\""), "1024"]);
        }
    }
    // Within the cap, both work.
    let (code, _, err) = cli(&["--threads", "3", "bench", s, "--patches", "4", "--size", "64"]);
    assert_eq!(code, 0, "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_slidestream")).args(["tiles", s]).env("RAYON_NUM_THREADS", "2").output().unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("with 2 threads"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The library refuses a `RAYON_NUM_THREADS` over the cap at `Slide::open` with a config error
/// (before rayon would build its pool from it at the first parallel read).
#[test]
fn open_refuses_rayon_num_threads_over_the_cap() {
    if std::env::var_os("SLIDESTREAM_RAYON_CHILD").is_some() {
        let e = Slide::open(sample()).unwrap_err();
        assert!(matches!(e, slidestream::Error::Config { ref variable, .. } if variable == "RAYON_NUM_THREADS"), "{e}");
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "open_refuses_rayon_num_threads_over_the_cap", "--nocapture"])
        .env("SLIDESTREAM_RAYON_CHILD", "1")
        .env("RAYON_NUM_THREADS", "100000")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

/// Issue 13 F3: `slidestream info FIFO` blocked forever (deaf to SIGINT). It now fails at once
/// with one line saying the path is not a regular file. If the child is still running after a
/// minute (the old behaviour), the test releases it by opening the FIFO for writing and fails.
#[test]
fn a_fifo_as_the_slide_fails_at_once() {
    use std::os::unix::ffi::OsStrExt;
    let dir = TempDir::new("fifo");
    let fifo = dir.0.join("slide.svs");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo: {}", std::io::Error::last_os_error());
    let mut child = Command::new(env!("CARGO_BIN_EXE_slidestream"))
        .args(["info", fifo.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > std::time::Duration::from_secs(60) {
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
            let _ = child.kill();
            panic!("slidestream info FIFO still running after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_one_line_error(&["info", "FIFO"], out.status.code().unwrap_or(-1), &err, &[&format!("error: {}: not a regular file: a FIFO", fifo.display())]);
    let args = ["info", "/dev/zero"];
    let (code, _, err) = cli(&args);
    assert_one_line_error(&args, code, &err, &["error: /dev/zero: not a regular file: a character device"]);
}
