//! Read regions and associated images of a fuzzed file (seeded with real slides): every read
//! returns pixels of the requested size or a typed error.
#![no_main]
use libfuzzer_sys::fuzz_target;
use slidestream::io::MemSource;
use slidestream::{Config, Slide, SlideOptions, TileCache};

fuzz_target!(|data: &[u8]| {
    let config = Config { max_region_bytes: 64 << 20, ..Config::default() };
    let opts = SlideOptions { cache: Some(std::sync::Arc::new(TileCache::new(4 << 20))), config: Some(config), ..Default::default() };
    let Ok(s) = Slide::from_source("fuzz.tif", Box::new(MemSource::new(data.to_vec())), opts) else { return };
    for level in 0..s.level_count() {
        let (w, h) = s.level_dimensions()[level];
        for (x, y, rw, rh) in [(0i64, 0i64, 64u64, 64u64), (w as i64 / 2, h as i64 / 2, 300, 200), (-10, -10, 20, 20)] {
            if let Ok(r) = s.read_region((x, y), level, (rw, rh)) {
                assert_eq!(r.data.len() as u64, rw * rh * 4);
            }
        }
    }
    for name in s.associated_images().keys() {
        let _ = s.read_associated(name);
    }
});
