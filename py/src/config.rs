//! Access to the core's settings table (`slidestream::config`) for the Python module
//! `slidestream.config`: read a resolved value, set or remove a process-wide override, list
//! the table. A value that does not parse or is out of range raises `ConfigError` (a
//! `ValueError`), naming the variable and the accepted values.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use slidestream::config;

use crate::errors::OrRaise;

/// The value of setting ``name`` (e.g. ``"SLIDESTREAM_CACHE_BYTES"``) in effect
/// (override > environment > default), as text. ConfigError for a bad value in the
/// environment, InvalidArgumentError for an unknown name.
#[pyfunction(name = "_config_get")]
pub(crate) fn config_get(py: Python<'_>, name: &str) -> PyResult<String> {
    config::get(name).or_raise(py)
}

/// Set (a str) or remove (None) the process-wide override of setting ``name``; validated
/// first (ConfigError for a bad value; InvalidArgumentError for an unknown name or a
/// per-process setting already in use; nothing changed).
#[pyfunction(name = "_config_set")]
#[pyo3(signature = (name, value))]
pub(crate) fn config_set(py: Python<'_>, name: &str, value: Option<&str>) -> PyResult<()> {
    config::set(name, value).or_raise(py)
}

/// The settings table, in order: dicts with ``name``, ``default``, ``unit``, ``accepted``,
/// ``doc`` (str) and ``per_process`` (bool).
#[pyfunction(name = "_config_table")]
pub(crate) fn config_table(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    config::TABLE
        .iter()
        .map(|s| {
            let d = PyDict::new(py);
            d.set_item("name", s.name)?;
            d.set_item("default", s.default)?;
            d.set_item("unit", s.unit)?;
            d.set_item("accepted", s.accepted)?;
            d.set_item("doc", s.doc)?;
            d.set_item("per_process", s.per_process)?;
            Ok(d)
        })
        .collect()
}
