use super::*;

fn resolve(pairs: &[(&str, &str)]) -> Result<Settings> {
    Settings::resolve(&|name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string()))
}

#[test]
fn defaults_parse_and_match_the_documented_values() {
    let s = resolve(&[]).unwrap();
    assert_eq!(s.cache_bytes, 256 << 20);
    assert_eq!(s.plan_max_gap_bytes, 8192);
    assert_eq!(s.plan_max_request_bytes, 8 << 20);
    assert_eq!(s.io_depth, 32);
    assert_eq!(s.io_depth, crate::io::pool::DEFAULT_DEPTH);
    assert_eq!(s.max_region_bytes, 4 << 30);
    assert_eq!(s.partial_decode_max_fraction, 0.5);
    assert_eq!(s.compat_mode, CompatMode::Auto);
    assert_eq!(s.device_cache_bytes, 2 << 30);
    assert_eq!(s.gpu_workers, 2);
    assert_eq!(s.gpu_cpu_workers, None);
    assert_eq!(s.gpu_split, GpuSplit::Cost);
    assert_eq!(s.gpu_sm_decoder, GpuSmDecoder::Off);
    assert_eq!(s.gpu_sync, GpuSync::Auto);
    assert_eq!(s.gpu_stream_priority, GpuStreamPriority::High);
    assert_eq!(s.gpu_wait, GpuWait::Block);
    assert_eq!(s.thread_nice, 0);
    assert_eq!(s.nvjpeg_output, NvjpegOutput::Unchanged);
    assert_eq!(s.gpu_min_chunk, 64);
    assert!(!s.gpu_trace);
    assert_eq!(s.kernel_cache, KernelCache::Auto);
    assert_eq!(s.gpu_warmup, GpuWarmup::First);
    assert_eq!(Config::from_settings(&s), Config::default());
}

#[test]
fn values_parse() {
    let s = resolve(&[
        ("SLIDESTREAM_CACHE_BYTES", "0"),
        ("SLIDESTREAM_COMPAT_MODE", "OFF"),
        ("SLIDESTREAM_GPU_CPU_WORKERS", "12"),
        ("SLIDESTREAM_GPU_SPLIT", "offset"),
        ("SLIDESTREAM_GPU_SM_DECODER", "Auto"),
        ("SLIDESTREAM_GPU_SYNC", "blocking"),
        ("SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION", "0"),
        ("SLIDESTREAM_GPU_TRACE", "yes"),
        ("SLIDESTREAM_KERNEL_CACHE", "/var/cache/ss-kernels"),
        ("SLIDESTREAM_GPU_WARMUP", "Background"),
        ("SLIDESTREAM_IO_DEPTH", "1"),
    ])
    .unwrap();
    assert_eq!(s.kernel_cache, KernelCache::Dir("/var/cache/ss-kernels".into()));
    assert_eq!(s.gpu_warmup, GpuWarmup::Background);
    assert_eq!(resolve(&[("SLIDESTREAM_KERNEL_CACHE", "OFF")]).unwrap().kernel_cache, KernelCache::Off);
    assert_eq!(s.cache_bytes, 0);
    assert_eq!(s.compat_mode, CompatMode::Off);
    assert_eq!(s.gpu_cpu_workers, Some(12));
    assert_eq!(s.gpu_split, GpuSplit::Offset);
    assert_eq!(s.gpu_sm_decoder, GpuSmDecoder::Auto);
    assert_eq!(resolve(&[("SLIDESTREAM_GPU_SM_DECODER", "on")]).unwrap().gpu_sm_decoder, GpuSmDecoder::On);
    assert_eq!(s.gpu_sync, GpuSync::Blocking);
    assert_eq!(s.partial_decode_max_fraction, 0.0);
    assert!(s.gpu_trace);
    assert_eq!(s.io_depth, 1);
    assert_eq!(resolve(&[("SLIDESTREAM_COMPAT_MODE", "no")]).unwrap().compat_mode, CompatMode::Off);
    assert_eq!(resolve(&[("SLIDESTREAM_GPU_STREAM_PRIORITY", "Normal")]).unwrap().gpu_stream_priority, GpuStreamPriority::Normal);
    assert_eq!(resolve(&[("SLIDESTREAM_GPU_STREAM_PRIORITY", "high")]).unwrap().gpu_stream_priority, GpuStreamPriority::High);
    assert_eq!(resolve(&[("SLIDESTREAM_COMPAT_MODE", "1")]).unwrap().compat_mode, CompatMode::On);
}

#[test]
fn bad_values_are_errors_naming_the_variable() {
    for (name, bad) in [
        ("SLIDESTREAM_COMPAT_MODE", "of"),
        ("SLIDESTREAM_CACHE_BYTES", "lots"),
        ("SLIDESTREAM_CACHE_BYTES", "-1"),
        ("SLIDESTREAM_PLAN_MAX_REQUEST_BYTES", "0"),
        ("SLIDESTREAM_IO_DEPTH", "0"),
        ("SLIDESTREAM_IO_DEPTH", "1025"),
        ("SLIDESTREAM_IO_DEPTH", "deep"),
        ("SLIDESTREAM_MAX_REGION_BYTES", "1e9"),
        ("SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION", "1.5"),
        ("SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION", "NaN"),
        ("SLIDESTREAM_GPU_WORKERS", "0"),
        ("SLIDESTREAM_GPU_WORKERS", "9"),
        ("SLIDESTREAM_GPU_CPU_WORKERS", "257"),
        ("SLIDESTREAM_GPU_SPLIT", "random"),
        ("SLIDESTREAM_GPU_SM_DECODER", "yes"),
        ("SLIDESTREAM_GPU_SM_DECODER", ""),
        ("SLIDESTREAM_GPU_SYNC", "sleep"),
        ("SLIDESTREAM_GPU_STREAM_PRIORITY", "low"),
        ("SLIDESTREAM_GPU_STREAM_PRIORITY", "-5"),
        ("SLIDESTREAM_GPU_STREAM_PRIORITY", ""),
        ("SLIDESTREAM_GPU_WAIT", "sleep"),
        ("SLIDESTREAM_GPU_WAIT", ""),
        ("SLIDESTREAM_THREAD_NICE", "20"),
        ("SLIDESTREAM_THREAD_NICE", "-1"),
        ("SLIDESTREAM_THREAD_NICE", "low"),
        ("SLIDESTREAM_NVJPEG_OUTPUT", "rgb"),
        ("SLIDESTREAM_GPU_MIN_CHUNK", "1000"),
        ("SLIDESTREAM_GPU_TRACE", "maybe"),
        ("SLIDESTREAM_KERNEL_CACHE", "relative/dir"),
        ("SLIDESTREAM_GPU_WARMUP", "some"),
    ] {
        let e = resolve(&[(name, bad)]).unwrap_err();
        match &e {
            Error::Config { variable, value, expected } => {
                assert_eq!(variable, name);
                assert_eq!(value, bad);
                assert_eq!(expected, spec(name).unwrap().accepted);
            }
            other => panic!("{name}={bad}: expected a config error, got {other:?}"),
        }
        assert_eq!(e.kind_name(), "config");
        let line = e.to_string();
        assert!(line.contains(name) && !line.contains('\n'), "{line}");
    }
}

#[test]
fn set_checks_and_get_reports_the_override() {
    // A GPU-only setting that no other unit test reads.
    let name = "SLIDESTREAM_NVJPEG_OUTPUT";
    assert!(matches!(set(name, Some("rgb")), Err(Error::Config { .. })));
    set(name, Some("yuv")).unwrap();
    assert_eq!(get(name).unwrap(), "yuv");
    assert_eq!(settings().unwrap().nvjpeg_output, NvjpegOutput::Yuv);
    set(name, None).unwrap();
    assert_eq!(get(name).unwrap(), std::env::var(name).unwrap_or_else(|_| "unchanged".into()));
    assert!(matches!(set("SLIDESTREAM_NO_SUCH", Some("1")), Err(Error::Usage(_))));
    assert!(matches!(get("SLIDESTREAM_NO_SUCH"), Err(Error::Usage(_))));
}

#[test]
fn consumed_per_process_settings_refuse_changes() {
    let name = "SLIDESTREAM_GPU_MIN_CHUNK";
    set(name, Some("32")).unwrap();
    let s = consume(&[name]).unwrap();
    assert_eq!(s.gpu_min_chunk, 32);
    set(name, Some("32")).unwrap();
    let e = set(name, Some("48")).unwrap_err();
    assert!(matches!(e, Error::Usage(ref m) if m.contains(name)), "{e}");
    assert_eq!(get(name).unwrap(), "32");
}

#[test]
fn every_setting_is_in_the_table_once_and_names_are_prefixed() {
    let mut names: Vec<&str> = TABLE.iter().map(|s| s.name).collect();
    names.sort();
    let n = names.len();
    names.dedup();
    assert_eq!(names.len(), n, "duplicate setting names");
    for s in TABLE {
        assert!(s.name.starts_with("SLIDESTREAM_"), "{}", s.name);
        assert!((s.check)(s.default), "default of {} does not parse", s.name);
    }
    for g in GPU_ENGINE_SETTINGS {
        assert!(spec(g).unwrap().per_process, "{g}");
    }
}

/// docs/settings.md has one table row per setting: name, default, unit, accepted, meaning —
/// the same text as [`TABLE`].
#[test]
fn docs_match_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/settings.md");
    let doc = std::fs::read_to_string(path).expect("docs/settings.md");
    let rows: Vec<Vec<String>> =
        doc.lines().filter(|l| l.starts_with("| `SLIDESTREAM_")).map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect()).collect();
    let expected: Vec<Vec<String>> = TABLE
        .iter()
        .map(|s| {
            vec![
                format!("`{}`", s.name),
                format!("`{}`", s.default),
                s.unit.to_string(),
                s.accepted.to_string(),
                format!("{}{}", s.doc, if s.per_process { " (per process)" } else { "" }),
            ]
        })
        .collect();
    if rows != expected {
        let text: String = expected.iter().map(|r| format!("| {} |\n", r.join(" | "))).collect();
        panic!("docs/settings.md is out of date with core/src/config/table.rs; its rows should be:\n{text}");
    }
}
