//! The reads of `Slide`: `read_region`, `read_regions` (CPU into numpy, or on a GPU into a
//! `DeviceArray`) and `read_associated`. Arguments are parsed with [`crate::args`]; the core
//! call runs with the GIL released; the numpy array takes over the core's buffer (no copy).

use numpy::{PyArray3, PyArray4};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use slidestream::error::Location;
use slidestream::gpu::DeviceOptions;
use slidestream::{Error, Rgba};

use crate::args;
use crate::device_array::PyDeviceArray;
use crate::errors::to_py;
use crate::slide::PySlide;

/// An RGBA result as a numpy uint8 array (height, width, 4) owning the buffer.
fn rgba_array(py: Python<'_>, r: Rgba) -> PyResult<Bound<'_, PyArray3<u8>>> {
    let arr = ndarray::Array3::from_shape_vec((r.height as usize, r.width as usize, 4), r.data)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyArray3::from_owned_array(py, arr))
}

impl PySlide {
    /// `Slide.read_region`: see its docs in [`crate::slide`].
    pub(crate) fn read_region_impl<'py>(
        &self,
        py: Python<'py>,
        location: (i64, i64),
        level: &Bound<'py, PyAny>,
        size: (i64, i64),
        device: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let size = args::size(size)?;
        let device = args::device(device)?;
        let level = self.level(py, level)?;
        match device {
            None => {
                let r = self.run(py, move |s| s.read_region(location, level, size))?;
                Ok(rgba_array(py, r)?.into_any())
            }
            Some(dev) => {
                let opts = DeviceOptions { device: dev, channels: 4, background: [255; 3] };
                let a = self.run_device(py, dev, move |s| s.read_region_device(location, level, size, &opts))?;
                Ok(Bound::new(py, PyDeviceArray::new(a))?.into_any())
            }
        }
    }

    /// `Slide.read_regions`: see its docs in [`crate::slide`]. The output size is checked
    /// against `max_region_bytes` before anything is allocated (LimitsExceededError).
    pub(crate) fn read_regions_impl<'py>(
        &self,
        py: Python<'py>,
        locations: &Bound<'py, PyAny>,
        level: &Bound<'py, PyAny>,
        size: (i64, i64),
        background: Option<&Bound<'py, PyAny>>,
        device: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let size = args::size(size)?;
        let bg = args::background_rgb(background)?;
        let dev = args::device(device)?;
        let locs = args::locations(locations)?;
        let level = self.level(py, level)?;
        let n = locs.len();
        let (w, h) = (size.0 as usize, size.1 as usize);
        let bytes = n
            .checked_mul(w)
            .and_then(|v| v.checked_mul(h))
            .and_then(|v| v.checked_mul(3))
            .ok_or_else(|| to_py(py, Error::Usage("read_regions output size overflows".into())))?;
        let limit = self.slide(py)?.config().max_region_bytes;
        if bytes as u64 > limit {
            let msg = format!("read_regions output of {bytes} bytes exceeds max_region_bytes ({limit})");
            return Err(to_py(py, Error::limits(&Location::file(&self.path), msg)));
        }
        if let Some(dev) = dev {
            let opts = DeviceOptions { device: dev, channels: 3, background: bg };
            let a = self.run_device(py, dev, move |s| s.read_regions_device(&locs, level, size, &opts)?.into_result())?;
            return Ok(Bound::new(py, PyDeviceArray::new(a))?.into_any());
        }
        let out = self.run(py, move |s| {
            let mut out = slidestream::alloc_pixels(bytes);
            s.read_regions_rgb_into(&locs, level, size, bg, &mut out)?;
            Ok(out)
        })?;
        let arr = ndarray::Array4::from_shape_vec((n, h, w, 3), out).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyArray4::from_owned_array(py, arr).into_any())
    }

    /// `Slide.read_associated`: a whole associated image as RGBA (height, width, 4).
    pub(crate) fn read_associated_impl<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyAny>> {
        let r = self.run(py, move |s| s.read_associated(&name))?;
        Ok(rgba_array(py, r)?.into_any())
    }
}
