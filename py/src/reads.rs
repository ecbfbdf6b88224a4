//! The reads of `Slide`: `read_region`, `read_regions` (CPU into numpy, or on a GPU into a
//! `DeviceArray`) and `read_associated`. Arguments are parsed with [`crate::args`]; the core
//! call runs with the GIL released; the numpy array takes over the core's buffer (no copy).

use numpy::{PyArray3, PyArray4};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use slidestream::gpu::DeviceOptions;
use slidestream::{Rgba, Samples};

use crate::args;
use crate::device_array::PyDeviceArray;
use crate::slide::PySlide;

/// An RGBA result as a numpy uint8 array (height, width, 4) owning the buffer.
fn rgba_array(py: Python<'_>, r: Rgba) -> PyResult<Bound<'_, PyArray3<u8>>> {
    let arr = ndarray::Array3::from_shape_vec((r.height as usize, r.width as usize, 4), r.data).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyArray3::from_owned_array(py, arr))
}

impl PySlide {
    /// `Slide.read_region`: see its docs in [`crate::slide`].
    pub(crate) fn read_region_impl<'py>(
        &self,
        py: Python<'py>,
        location: &Bound<'py, PyAny>,
        level: &Bound<'py, PyAny>,
        size: &Bound<'py, PyAny>,
        device: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let location = args::location(location, "location")?;
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

    /// `Slide.read_regions`: see its docs in [`crate::slide`]. The core checks the output size
    /// against `max_region_bytes` (the one batch rule of every entry point) before anything is
    /// allocated (LimitsExceededError).
    pub(crate) fn read_regions_impl<'py>(
        &self,
        py: Python<'py>,
        locations: &Bound<'py, PyAny>,
        level: &Bound<'py, PyAny>,
        size: &Bound<'py, PyAny>,
        background: Option<&Bound<'py, PyAny>>,
        device: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let size = args::size(size)?;
        let bg = args::background_rgb(background)?;
        let dev = args::device(device)?;
        let locs = crate::locations::locations(locations)?;
        let level = self.level(py, level)?;
        if let Some(dev) = dev {
            let opts = DeviceOptions { device: dev, channels: 3, background: bg };
            let a = self.run_device(py, dev, move |s| s.read_regions_device(&locs, level, size, &opts)?.into_result())?;
            return Ok(Bound::new(py, PyDeviceArray::new(a))?.into_any());
        }
        let (n, w, h) = (locs.len(), size.0 as usize, size.1 as usize);
        let out = self.run(py, move |s| s.read_regions_rgb(&locs, level, size, bg))?;
        let arr = ndarray::Array4::from_shape_vec((n, h, w, 3), out).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyArray4::from_owned_array(py, arr).into_any())
    }

    /// `Slide.read_associated`: a whole associated image as RGBA (height, width, 4).
    pub(crate) fn read_associated_impl<'py>(&self, py: Python<'py>, name: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let name: String = name
            .extract()
            .map_err(|_| pyo3::exceptions::PyTypeError::new_err(format!("associated image name must be a str, got {}", args::type_name(name))))?;
        let r = self.run(py, move |s| s.read_associated(&name))?;
        Ok(rgba_array(py, r)?.into_any())
    }

    /// `Slide.read_level_reduced`: see its docs in [`crate::slide`].
    pub(crate) fn read_level_reduced_impl<'py>(
        &self,
        py: Python<'py>,
        level: &Bound<'py, PyAny>,
        max_factor: i64,
        background: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyArray3<u8>>, u32)> {
        let Ok(max_factor @ 1..) = u32::try_from(max_factor.clamp(0, u32::MAX as i64)) else {
            return Err(crate::errors::invalid_argument(py, format!("max_factor must be at least 1, got {max_factor}")));
        };
        let level = self.level(py, level)?;
        let bg = args::background_rgb(background)?;
        let (img, f) = self.run(py, move |s| s.read_level_reduced(level, max_factor, bg))?;
        let arr = ndarray::Array3::from_shape_vec((img.height as usize, img.width as usize, 3), img.data).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok((PyArray3::from_owned_array(py, arr), f))
    }
}

impl PySlide {
    /// `Slide.read_region_channels`: see its docs in [`crate::slide`]. CPU only.
    pub(crate) fn read_region_channels_impl<'py>(
        &self,
        py: Python<'py>,
        location: &Bound<'py, PyAny>,
        level: &Bound<'py, PyAny>,
        size: &Bound<'py, PyAny>,
        channels: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let location = args::location(location, "location")?;
        let size = args::size(size)?;
        let level = self.level(py, level)?;
        let channels: Option<Vec<usize>> = match channels {
            None => None,
            Some(c) if c.is_none() => None,
            Some(c) => {
                let mut v = Vec::new();
                for item in c.try_iter()? {
                    let i: i64 = item?.extract()?;
                    if i < 0 {
                        return Err(PyValueError::new_err(format!("channel index {i} is negative")));
                    }
                    v.push(i as usize);
                }
                Some(v)
            }
        };
        let r = self.run(py, move |s| s.read_region_channels(location, level, size, channels.as_deref()))?;
        let shape = (r.height as usize, r.width as usize, r.channels());
        let err = |e: ndarray::ShapeError| PyValueError::new_err(e.to_string());
        Ok(match r.data {
            Samples::U8(v) => PyArray3::from_owned_array(py, ndarray::Array3::from_shape_vec(shape, v).map_err(err)?).into_any(),
            Samples::U16(v) => PyArray3::from_owned_array(py, ndarray::Array3::from_shape_vec(shape, v).map_err(err)?).into_any(),
        })
    }
}
