//! Open + index an arbitrary file: must return Ok or a typed error, never panic, hang or
//! allocate without bound.
#![no_main]
use libfuzzer_sys::fuzz_target;
use slidestream::io::MemSource;
use slidestream::{Slide, SlideOptions, TileCache};

fuzz_target!(|data: &[u8]| {
    let opts = SlideOptions { cache: Some(std::sync::Arc::new(TileCache::new(1 << 20))), config: None, ..Default::default() };
    if let Ok(s) = Slide::from_source("fuzz.tif", Box::new(MemSource::new(data.to_vec())), opts) {
        let _ = s.properties().len();
        let _ = s.level_dimensions();
    }
});
