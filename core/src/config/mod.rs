//! Settings: one table ([`TABLE`]) of every `SLIDESTREAM_*` variable with its default, unit,
//! accepted values and meaning; typed, checked values ([`Settings`]); and process-wide
//! overrides ([`set`]), in the manner of KvikIO's `defaults` (a value that does not parse is
//! an error naming the variable, never silently replaced by the default).
//!
//! Precedence: an override made with [`set`] > the environment variable > the default. An
//! empty environment variable counts as unset. Values are read at first use: the per-open
//! settings when a slide is opened (so [`crate::Slide::open`] fails with [`Error::Config`] on a
//! bad value), the per-process ones ([`Spec::per_process`]) once, when the shared host cache is
//! made or the GPU engine starts; after that, [`set`] of a different value for those is an
//! error ([`Error::Usage`]) rather than a change that would be ignored.
//!
//! Per-call options ([`crate::SlideOptions::config`]) override the per-open settings for one
//! slide. docs/settings.md lists the table; a test keeps it equal to [`TABLE`].

mod host;
mod table;
mod threads;
mod values;

use std::collections::{HashMap, HashSet};
use std::sync::{LazyLock, Mutex, MutexGuard};

pub use host::Config;
pub use table::{Settings, Spec, TABLE};
pub use threads::{check_threads, rayon_num_threads, MAX_THREADS};
pub use values::{CompatMode, GpuSmDecoder, GpuSplit, GpuStreamPriority, GpuSync, GpuWait, GpuWarmup, IndexCache, KernelCache, NvjpegOutput};

use crate::error::{Error, Result};

#[derive(Default)]
struct State {
    overrides: HashMap<&'static str, String>,
    /// Per-process settings already consumed, with the text in effect when they were.
    frozen: HashMap<&'static str, Option<String>>,
}

fn state() -> MutexGuard<'static, State> {
    static STATE: LazyLock<Mutex<State>> = LazyLock::new(|| Mutex::new(State::default()));
    // The state stays consistent whatever a panicking holder did (plain inserts and removes).
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

fn spec(name: &str) -> Result<&'static Spec> {
    TABLE.iter().find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<&str> = TABLE.iter().map(|s| s.name).collect();
        Error::Usage(format!("unknown setting '{name}' (known: {})", names.join(", ")))
    })
}

/// The text in effect for `name`: override, else non-empty environment variable.
fn raw_in(st: &State, name: &'static str) -> Option<String> {
    if let Some(v) = st.overrides.get(name) {
        return Some(v.clone());
    }
    std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// Every setting, resolved (override > environment > default) and checked.
///
/// # Errors
/// [`Error::Config`] naming the first variable whose value is not accepted, with the value and
/// the accepted values.
pub fn settings() -> Result<Settings> {
    let st = state();
    Settings::resolve(&|name| raw_in(&st, name))
}

/// The value in effect for setting `name` (e.g. `"SLIDESTREAM_CACHE_BYTES"`), as text: the
/// override, the environment variable or the default.
///
/// # Errors
/// [`Error::Usage`] for a name not in [`TABLE`]; [`Error::Config`] when the text in effect
/// does not parse.
pub fn get(name: &str) -> Result<String> {
    let spec = spec(name)?;
    let st = state();
    let text = raw_in(&st, spec.name).unwrap_or_else(|| spec.default.to_string());
    if !(spec.check)(&text) {
        return Err(Error::Config { variable: spec.name.into(), value: text, expected: spec.accepted.into() });
    }
    Ok(text)
}

/// Override setting `name` for this process (`Some(value)`), or remove the override so the
/// environment or default applies again (`None`). The value is checked first.
///
/// # Errors
/// [`Error::Usage`] for an unknown name, or for a per-process setting ([`Spec::per_process`])
/// that was already consumed with a different value (it cannot change any more);
/// [`Error::Config`] for a value the setting does not accept.
pub fn set(name: &str, value: Option<&str>) -> Result<()> {
    let spec = spec(name)?;
    let value = value.map(|v| v.trim().to_string());
    if let Some(v) = &value {
        if !(spec.check)(v) {
            return Err(Error::Config { variable: spec.name.into(), value: v.clone(), expected: spec.accepted.into() });
        }
    }
    let mut st = state();
    if let Some(used) = st.frozen.get(spec.name) {
        let effective = value.clone().or_else(|| std::env::var(spec.name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty()));
        let same = |a: &Option<String>| a.clone().unwrap_or_else(|| spec.default.into());
        if same(used) != same(&effective) {
            return Err(Error::Usage(format!("{} is read once per process and is already in use with value {}; it cannot change now", spec.name, same(used))));
        }
    }
    match value {
        Some(v) => st.overrides.insert(spec.name, v),
        None => st.overrides.remove(spec.name),
    };
    Ok(())
}

/// Mark per-process settings as consumed (by the shared host cache or the GPU engine) and
/// return the settings they were read with, so that later changes are refused by [`set`].
///
/// # Errors
/// As [`settings`].
pub(crate) fn consume(names: &[&'static str]) -> Result<Settings> {
    let mut st = state();
    let resolved = Settings::resolve(&|name| raw_in(&st, name))?;
    let wanted: HashSet<&str> = names.iter().copied().collect();
    for spec in TABLE.iter().filter(|s| wanted.contains(s.name)) {
        let text = raw_in(&st, spec.name);
        st.frozen.entry(spec.name).or_insert(text);
    }
    Ok(resolved)
}

/// `SLIDESTREAM_DECODE_THREADS`, marked as consumed (a later [`set`] to another value is
/// refused): `None` for auto. Called by the Python bindings when they build their decode pool.
///
/// # Errors
/// As [`settings`].
pub fn consume_decode_threads() -> Result<Option<usize>> {
    Ok(consume(&["SLIDESTREAM_DECODE_THREADS"])?.decode_threads)
}

/// Names of the per-process settings the GPU engine reads at start.
pub const GPU_ENGINE_SETTINGS: &[&str] = &[
    "SLIDESTREAM_COMPAT_MODE",
    "SLIDESTREAM_DEVICE_CACHE_BYTES",
    "SLIDESTREAM_GPU_WORKERS",
    "SLIDESTREAM_GPU_CPU_WORKERS",
    "SLIDESTREAM_GPU_SPLIT",
    "SLIDESTREAM_GPU_SM_DECODER",
    "SLIDESTREAM_GPU_SYNC",
    "SLIDESTREAM_GPU_STREAM_PRIORITY",
    "SLIDESTREAM_GPU_WAIT",
    "SLIDESTREAM_THREAD_NICE",
    "SLIDESTREAM_NVJPEG_OUTPUT",
    "SLIDESTREAM_GPU_MIN_CHUNK",
    "SLIDESTREAM_GPU_TRACE",
    "SLIDESTREAM_KERNEL_CACHE",
    "SLIDESTREAM_GPU_WARMUP",
];

#[cfg(test)]
mod tests;
