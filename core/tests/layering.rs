//! The GPU engine's layers (`core/src/gpu/cuda/`, CONTRIBUTING.md "The GPU engine's layers"):
//! a file may name modules of its own layer or below, never above. The engine grew as one
//! import circle around `Engine` (21 upward imports); they were removed by passing plain
//! arguments down (issue 32, step 1), and [`KNOWN_UPWARD`] is now empty. The test fails on any
//! upward import not in that list, and on any listed one that no longer exists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Layer of a module of `gpu/cuda/`, lowest first; names that are not modules (items of
/// `cuda/mod.rs`) belong to the top.
fn layer(module: &str) -> u8 {
    match module {
        "sys" | "context" | "settings" | "trace" | "counters" => 1,
        "memory" | "pool" | "queue" | "kernels" => 2,
        "io" => 3,
        "decode" => 4,
        "scheduler" => 5,
        _ => 6,
    }
}

const LAYER_NAMES: [&str; 7] = ["", "bindings and context", "memory and queues", "I/O", "decoders", "routing", "engine"];

/// `from` (a file under gpu/cuda, `/`-separated) → `to` (a top module of gpu/cuda): upward
/// imports tolerated for now. Empty: keep it so.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("read gpu/cuda").filter_map(|e| e.ok()).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The top modules of gpu/cuda a file's code names through `super::`, `self::` or
/// `crate::gpu::cuda::` paths. `module` is the file's module path below gpu/cuda.
fn referenced(code: &str, module: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        // Inside a multi-byte character (a comment's `²`): no path starts there.
        if !code.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let starts = i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != b':';
        let rest = &code[i..];
        let (mut base, mut j): (Option<Vec<&str>>, usize) = if !starts {
            (None, 0)
        } else if rest.starts_with("crate::gpu::cuda::") {
            (Some(vec![]), "crate::gpu::cuda::".len())
        } else if rest.starts_with("self::") {
            (Some(module.to_vec()), "self::".len())
        } else if rest.starts_with("super::") {
            let mut m = module.to_vec();
            let mut j = 0;
            let mut above = false;
            while code[i + j..].starts_with("super::") {
                if m.pop().is_none() {
                    above = true;
                }
                j += "super::".len();
            }
            (if above { None } else { Some(m) }, j)
        } else {
            (None, 0)
        };
        if let Some(b) = base.take() {
            // The names after the prefix: one identifier, or a `{a, b::c}` group.
            let tail = &code[i + j..];
            let names: Vec<&str> = if let Some(group) = tail.strip_prefix('{') {
                group.split('}').next().unwrap_or("").split(',').map(|s| s.trim()).collect()
            } else {
                vec![tail]
            };
            for name in names {
                let ident: String = name.bytes().take_while(|&c| is_ident(c)).map(char::from).collect();
                if ident.is_empty() || ident == "self" {
                    continue;
                }
                let top = if b.is_empty() { ident } else { b[0].to_string() };
                out.insert(top);
            }
            j += 1;
        } else {
            j = 1;
        }
        i += j.max(1);
    }
    out
}

/// Code without `//` comments (doc links name modules without importing them) and without its
/// unit-test module (tests may reach any layer, and their `super::` is one level deeper).
fn strip_comments(src: &str) -> String {
    let code = src.find("#[cfg(test)]\nmod tests").map_or(src, |k| &src[..k]);
    code.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

#[test]
fn no_lower_layer_of_the_gpu_engine_imports_a_higher_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/gpu/cuda");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 20, "gpu/cuda has its files ({} found)", files.len());
    let mut found = BTreeSet::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        let stem = rel.trim_end_matches(".rs");
        let mut module: Vec<&str> = stem.split('/').collect();
        if module.last() == Some(&"mod") {
            module.pop();
        }
        let own = module.first().copied().unwrap_or("cuda-root");
        let own_layer = if module.is_empty() { 6 } else { layer(own) };
        let src = std::fs::read_to_string(f).unwrap();
        for target in referenced(&strip_comments(&src), &module) {
            if target != own && layer(&target) > own_layer {
                found.insert((rel.clone(), target));
            }
        }
    }
    let known: BTreeSet<(String, String)> = KNOWN_UPWARD.iter().map(|&(a, b)| (a.to_string(), b.to_string())).collect();
    let new: Vec<String> = found
        .difference(&known)
        .map(|(f, t)| {
            format!(
                "{f} (layer {}: {}) names {t} (layer {}: {})",
                layer(f.split('/').next().unwrap().trim_end_matches(".rs")),
                LAYER_NAMES[layer(f.split('/').next().unwrap().trim_end_matches(".rs")) as usize],
                layer(t),
                LAYER_NAMES[layer(t) as usize]
            )
        })
        .collect();
    assert!(new.is_empty(), "upward imports in the GPU engine (pass what the lower layer needs as arguments instead):\n{}", new.join("\n"));
    let gone: Vec<String> = known.difference(&found).map(|(f, t)| format!("({f:?}, {t:?})")).collect();
    assert!(gone.is_empty(), "these upward imports are gone: remove them from KNOWN_UPWARD in core/tests/layering.rs:\n{}", gone.join("\n"));
}

#[test]
fn the_reference_scanner_resolves_paths() {
    let r = referenced(
        "use super::engine::Engine;\nuse crate::gpu::cuda::{batch::Src, sys};\nlet x = super::super::lanes::Slot;\nuse self::inner::X;",
        &["io", "posix"],
    );
    // From io/posix.rs: super:: is io, super::super:: is cuda.
    assert_eq!(r, ["batch", "io", "lanes", "sys"].iter().map(|s| s.to_string()).collect());
    let r = referenced("use super::queue::Miss; foo_super::bar", &["scheduler"]);
    assert_eq!(r, ["queue"].iter().map(|s| s.to_string()).collect());
}
