//! Sakura tile IDs: the `id` of a tile's blob in the slide's unique table,
//! `T;<x>|<y>;<downsample>;<colour>;<focal plane>` (OpenSlide's Sakura format page, "Unique
//! table"; the parsing rules below are those of OpenSlide 4.0.1's `openslide-vendor-sakura.c`).
//!
//! * an id that does not start with `T;`, or ends with `#` (the MD5 of a tile), is not a tile;
//! * a tile id has six fields separated by `;` or `|` (the first is `T`); each of the five
//!   numbers is a non-negative decimal that fits in 64 bits, written without sign, leading
//!   zeros or spaces (the id must equal its own re-formatting); the downsample is at least 1,
//!   the colour 0 (red), 1 (green) or 2 (blue), the focal plane fits in 32 bits. Any other
//!   tile id makes the slide fail to open.
//! * `x` and `y` are the level-0 coordinates of the tile's top-left corner.

/// One parsed tile ID. Units: `x`, `y` in level-0 pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct TileId {
    /// Level-0 x of the tile's top-left corner.
    pub x: i64,
    /// Level-0 y of the tile's top-left corner.
    pub y: i64,
    /// The level's downsample (≥ 1).
    pub downsample: i64,
    /// 0 red, 1 green, 2 blue.
    pub color: u8,
    /// Focal plane index.
    pub plane: i32,
}

impl TileId {
    /// The id text of this tile (`T;x|y;downsample;color;plane`).
    pub fn format(&self) -> String {
        format!("T;{}|{};{};{};{}", self.x, self.y, self.downsample, self.color, self.plane)
    }
}

/// Parse `id`: `Ok(None)` when it is not a tile id (wrong prefix, or an MD5 entry ending in
/// `#`), `Ok(Some)` for a tile id, `Err` (a message naming the id) for a malformed tile id.
pub(crate) fn parse(id: &[u8]) -> Result<Option<TileId>, String> {
    if !id.starts_with(b"T;") || id.ends_with(b"#") {
        return Ok(None);
    }
    let text = String::from_utf8_lossy(id);
    let bad = |what: &str| format!("{what} in tile ID {text:?}");
    let fields: Vec<&str> = text.split([';', '|']).collect();
    if fields.len() != 6 {
        return Err(bad("bad field count"));
    }
    let mut v = [0i64; 5];
    for (slot, f) in v.iter_mut().zip(&fields[1..]) {
        *slot = parse_field(f).ok_or_else(|| bad("bad field value"))?;
    }
    let [x, y, downsample, color, plane] = v;
    if downsample < 1 || color >= 3 {
        return Err(bad("bad field value"));
    }
    let plane = i32::try_from(plane).map_err(|_| bad("a focal plane that does not round-trip"))?;
    let t = TileId { x, y, downsample, color: color as u8, plane };
    if t.format() != text {
        return Err(bad("a field that does not round-trip (leading zeros, signs or spaces)"));
    }
    Ok(Some(t))
}

/// A field as GLib's `g_ascii_strtoll` (base 10) reads it when the whole field must be
/// consumed: optional leading whitespace and sign, then digits; `None` when empty, not a
/// number to its end, out of `i64` or negative.
fn parse_field(f: &str) -> Option<i64> {
    let v = super::super::parse_int64(f)?;
    (v >= 0).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::{parse, TileId};

    #[test]
    fn tile_ids_parse_as_openslide() {
        let t = parse(b"T;2048|4096;4;2;0").unwrap().unwrap();
        assert_eq!(t, TileId { x: 2048, y: 4096, downsample: 4, color: 2, plane: 0 });
        assert_eq!(t.format(), "T;2048|4096;4;2;0");
        assert_eq!(parse(b"Header").unwrap(), None);
        assert_eq!(parse(b"T;2048|4096;4;2;0#").unwrap(), None);
        assert_eq!(parse(b"++MagicBytes").unwrap(), None);
        for bad in ["T;1|2;3;4", "T;1|2;0;0;0", "T;1|2;1;3;0", "T;01|2;1;0;0", "T;+1|2;1;0;0", "T;1|2;1;0;-1", "T; 1|2;1;0;0", "T;1|2;1;0;4294967296", "T;x|2;1;0;0", "T;1|2;1;0;"] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
