//! Settings from the environment: a bad `SLIDESTREAM_*` value is an error naming the variable
//! at first use (CLI: one line, exit 1), never silently replaced by the default.

use std::process::Command;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/CMU-1-Small-Region.svs");

fn cli(env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_slidestream"));
    c.args(args).env("RUST_BACKTRACE", "0");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn bad_values_exit_1_with_one_line_naming_the_variable() {
    for (name, value) in [("SLIDESTREAM_COMPAT_MODE", "of"), ("SLIDESTREAM_CACHE_BYTES", "lots"), ("SLIDESTREAM_GPU_WORKERS", "0")] {
        for args in [
            &["tiles", SAMPLE][..],
            &["info", SAMPLE][..],
            &["region", SAMPLE, "--location", "0,0", "--level", "0", "--size", "8,8", "--output", "/dev/null"][..],
        ] {
            let out = cli(&[(name, value)], args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{name}={value} {args:?}: {err}");
            let lines: Vec<&str> = err.lines().collect();
            assert_eq!(lines.len(), 1, "{name}={value} {args:?}: {err}");
            assert!(lines[0].starts_with("error: ") && lines[0].contains(name) && lines[0].contains(value), "{err}");
        }
    }
}

#[test]
fn good_values_are_used() {
    // The host cache capacity is the variable's (surrounding blanks and case are accepted).
    let out = cli(&[("SLIDESTREAM_CACHE_BYTES", "0"), ("SLIDESTREAM_COMPAT_MODE", " OFF ")], &["tiles", SAMPLE, "--level", "0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 of 0 bytes resident"), "{}", String::from_utf8_lossy(&out.stdout));
    let out = cli(&[("SLIDESTREAM_CACHE_BYTES", "12345678")], &["tiles", SAMPLE, "--level", "0"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("of 12345678 bytes resident"), "{}", String::from_utf8_lossy(&out.stdout));
    // An empty variable counts as unset.
    let out = cli(&[("SLIDESTREAM_MAX_REGION_BYTES", "")], &["info", SAMPLE]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A region larger than SLIDESTREAM_MAX_REGION_BYTES is refused with a limits error.
    let out =
        cli(&[("SLIDESTREAM_MAX_REGION_BYTES", "1024")], &["region", SAMPLE, "--location", "0,0", "--level", "0", "--size", "64,64", "--output", "/dev/null"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("max_region_bytes"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn open_reports_bad_values_through_the_library() {
    // In a child process, so the variable does not leak into other tests of this binary.
    if std::env::var_os("SLIDESTREAM_SETTINGS_CHILD").is_some() {
        let e = slidestream::Slide::open(SAMPLE).unwrap_err();
        assert_eq!(e.kind_name(), "config");
        assert!(matches!(e, slidestream::Error::Config { ref variable, .. } if variable == "SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION"), "{e}");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", "open_reports_bad_values_through_the_library", "--nocapture"])
        .env("SLIDESTREAM_SETTINGS_CHILD", "1")
        .env("SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION", "2")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}
