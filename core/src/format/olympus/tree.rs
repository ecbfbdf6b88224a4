//! The VSI record tree: the metadata cellSens writes into a `.vsi` file behind its 8-byte TIFF
//! header, parsed into [`Field`]s.
//!
//! Layout (public sources, no code taken: Bio-Formats' `CellSensReader` (`readTags`, its
//! field-type and tag constants) and slideio's VSI driver (`vsistruct.hpp`: `VolumeHeader`,
//! `TagHeader`, the extended types; `vsifile.cpp`: how nested volumes are entered), checked
//! against the public test files of `../shared/formats3`). All numbers are little-endian.
//! * a *volume* starts with a 24-byte header: header size (u16, always 24), magic (u16,
//!   21321 = `"IS"`), version (u32), offset of its first field from the header's start (i64),
//!   flags (u32; the low 28 bits are the field count), 4 unused bytes. The tree's root volume
//!   is at file offset 8;
//! * a *field* is a 16-byte header: field type (u32), tag (i32), offset of the next field
//!   from the start of the volume's header (u32; 0 for the last field), data size (u32); then,
//!   when bit 27 of the type is set, a second tag (i32); then its data. Bit 28: an extended
//!   field, whose low 24 bits are 0 (a new volume header: a volume in the data), 1 (a property
//!   set: a volume right after the field header), 2 (a multidimensional volume header: the
//!   same), 10 (an embedded TIFF directory), 11 (vector data); bit 30: the value is the data
//!   size itself (inline); bit 29: an array of the base type. A negative tag ends the volume.
//!   Base types: 1/2 (i8/u8), 3/4 (i16/u16), 5/6/14/271-273 (i32/u32), 7/8/17 (i64/u64,
//!   timestamp), 9 (f32), 10/18 (f64, date), 12 (bool), 13 and 8192 (UTF-16LE text), 11 and
//!   260-268/279/280 (f64 vectors), 256-259/267/274-277/8195/8199/8200/8470 (i32 vectors),
//!   269/270 (RGB/BGR bytes).
//!
//! slidestream's rules (bad input): every structure must lie inside the file (`Format`
//! naming the offset), a field or volume reached twice is a loop (`Format`), nesting deeper
//! than [`MAX_DEPTH`] or more than [`MAX_FIELDS`] fields is `Limits`, and values over
//! [`MAX_VALUE_BYTES`] are not read (kept as [`Value::Large`]). Bio-Formats and slideio stop
//! silently at such damage instead.

use std::collections::HashSet;

use crate::error::{Error, Location, Result};
use crate::io::ByteSource;
use crate::tiff::read_at;

/// Magic of a volume header (`"IS"` little-endian).
pub(crate) const VOLUME_MAGIC: u16 = 21321;
/// Size of a volume header in bytes.
const VOLUME_HEADER: u64 = 24;
/// Most fields read from one tree (real files hold a few thousand).
pub const MAX_FIELDS: usize = crate::limits::LIMITS.vsi_fields;
/// Deepest volume nesting entered (real files nest about 10 deep).
pub const MAX_DEPTH: usize = crate::limits::LIMITS.vsi_depth;
/// Largest field value read, in bytes (longer values are skipped).
pub const MAX_VALUE_BYTES: u32 = crate::limits::LIMITS.vsi_value_bytes;

/// A field's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// No data (a volume, or an empty value).
    None,
    /// The data size field itself is the value (bit 30 of the type).
    Inline(u32),
    /// The stored bytes.
    Bytes(Vec<u8>),
    /// A value of more than [`MAX_VALUE_BYTES`] bytes, not read.
    Large,
}

/// One field of the tree: its tag, second tag, base or extended type, value and, for a
/// volume, the fields inside it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    /// The tag (e.g. 2001, a multidimensional image volume).
    pub tag: i32,
    /// The second tag, when bit 27 of the type is set (e.g. a stack's number).
    pub second: Option<i32>,
    /// The low 24 bits of the field type.
    pub kind: u32,
    /// Bit 29 of the field type: an array of `kind`.
    pub array: bool,
    /// The value (`Value::None` for volumes).
    pub value: Value,
    /// The fields of the volume this field holds (extended types 0, 1, 2).
    pub children: Vec<Field>,
}

impl Field {
    /// The first child with tag `tag`.
    pub fn child(&self, tag: i32) -> Option<&Field> {
        self.children.iter().find(|f| f.tag == tag)
    }

    /// The children with tag `tag`, in file order.
    pub fn children_with(&self, tag: i32) -> impl Iterator<Item = &Field> {
        self.children.iter().filter(move |f| f.tag == tag)
    }

    /// The first field with tag `tag` in this field's subtree (depth first, file order).
    pub fn find(&self, tag: i32) -> Option<&Field> {
        self.children.iter().find_map(|c| if c.tag == tag { Some(c) } else { c.find(tag) })
    }

    fn bytes(&self) -> Option<&[u8]> {
        match &self.value {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// Integer values (integer base types and vectors; an inline value is one integer).
    pub fn ints(&self) -> Option<Vec<i64>> {
        if let Value::Inline(v) = self.value {
            return Some(vec![v as i64]);
        }
        let b = self.bytes()?;
        let (size, f): (usize, fn(&[u8]) -> i64) = match self.kind {
            1 => (1, |c| c[0] as i8 as i64),
            2 | 12 => (1, |c| c[0] as i64),
            3 => (2, |c| i16::from_le_bytes([c[0], c[1]]) as i64),
            4 => (2, |c| u16::from_le_bytes([c[0], c[1]]) as i64),
            5 | 256..=259 | 267 | 274..=277 | 8195 | 8199 | 8200 | 8470 => (4, |c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64),
            6 | 14 | 271..=273 => (4, |c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64),
            7 | 8 | 17 => (8, |c| i64::from_le_bytes(c.try_into().expect("8 bytes"))),
            _ => return None,
        };
        Some(b.chunks_exact(size).map(f).collect())
    }

    /// Floating-point values (f32, f64 and their vectors; integers converted).
    pub fn doubles(&self) -> Option<Vec<f64>> {
        let b = self.bytes();
        match (self.kind, b) {
            (9, Some(b)) => Some(b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect()),
            (10 | 11 | 18 | 260..=266 | 268 | 279 | 280, Some(b)) => {
                Some(b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
            }
            _ => self.ints().map(|v| v.into_iter().map(|i| i as f64).collect()),
        }
    }

    /// The value as text: UTF-16LE strings (trailing NULs removed), numbers (several as
    /// `(a, b, ...)`), `red = R, green = G, blue = B` colours; `None` for volumes, large and
    /// unknown values.
    pub fn text(&self) -> Option<String> {
        if matches!(self.kind, 13 | 8192) {
            let b = self.bytes()?;
            let units: Vec<u16> = b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
            return Some(String::from_utf16_lossy(&units).trim_end_matches('\0').to_string());
        }
        if matches!(self.kind, 269 | 270) {
            let b = self.bytes().filter(|b| b.len() >= 3)?;
            let (r, bl) = if self.kind == 269 { (b[0], b[2]) } else { (b[2], b[0]) };
            return Some(format!("red = {r}, green = {}, blue = {bl}", b[1]));
        }
        let list: Vec<String> = match self.kind {
            9 | 10 | 11 | 18 | 260..=266 | 268 | 279 | 280 => self.doubles()?.iter().map(|v| v.to_string()).collect(),
            _ => self.ints()?.iter().map(|v| v.to_string()).collect(),
        };
        Some(if list.len() == 1 { list[0].clone() } else { format!("({})", list.join(", ")) })
    }
}

/// Parse the tree whose root volume is at `offset` of `src` (file `at`); returns the root
/// volume's fields.
///
/// # Errors
/// `Format` naming the offset for a structure past the end of the file, a bad volume header
/// or a loop; `Limits` past [`MAX_DEPTH`] or [`MAX_FIELDS`]; `Io` from reads.
pub(crate) fn parse(src: &dyn ByteSource, at: &Location, offset: u64) -> Result<Vec<Field>> {
    let mut p = Parser { src, at, seen: HashSet::new(), fields: 0 };
    p.volume(offset, 0)
}

struct Parser<'a> {
    src: &'a dyn ByteSource,
    at: &'a Location,
    /// Offsets of every volume header and field read (a second visit is a loop).
    seen: HashSet<u64>,
    fields: usize,
}

fn le_u32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

impl Parser<'_> {
    fn visit(&mut self, pos: u64, what: &str) -> Result<()> {
        if !self.seen.insert(pos) {
            return Err(Error::format(self.at, format!("loop in the VSI record tree: the {what} at offset {pos} is reached twice")));
        }
        Ok(())
    }

    fn volume(&mut self, pos: u64, depth: usize) -> Result<Vec<Field>> {
        if depth > MAX_DEPTH {
            return Err(Error::limits(self.at, format!("VSI record tree nested deeper than {MAX_DEPTH} volumes (at offset {pos})")));
        }
        self.visit(pos, "volume")?;
        let h = read_at(self.src, self.at, pos, VOLUME_HEADER)?;
        let (size, magic) = (u16::from_le_bytes([h[0], h[1]]), u16::from_le_bytes([h[2], h[3]]));
        if size != VOLUME_HEADER as u16 || magic != VOLUME_MAGIC {
            return Err(Error::format(self.at, format!("VSI record volume at offset {pos}: header size {size}, magic {magic} (24 and {VOLUME_MAGIC} expected)")));
        }
        let first = i64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
        let count = (le_u32(&h, 16) & 0x0FFF_FFFF) as usize;
        if count == 0 {
            return Ok(Vec::new()); // empty volumes store 0 as their first field's offset
        }
        let mut field_pos = u64::try_from(first)
            .ok()
            .filter(|&f| f >= VOLUME_HEADER)
            .and_then(|f| pos.checked_add(f))
            .filter(|&p| p < self.src.len())
            .ok_or_else(|| Error::format(self.at, format!("VSI record volume at offset {pos}: first field at {first} lies outside the file")))?;
        let mut out = Vec::new();
        for _ in 0..count {
            self.fields += 1;
            if self.fields > MAX_FIELDS {
                return Err(Error::limits(self.at, format!("VSI record tree of more than {MAX_FIELDS} fields")));
            }
            self.visit(field_pos, "field")?;
            let fh = read_at(self.src, self.at, field_pos, 16)?;
            let kind_bits = le_u32(&fh, 0);
            let tag = le_u32(&fh, 4) as i32;
            let next = le_u32(&fh, 8) as u64;
            let data_size = le_u32(&fh, 12);
            let mut data = field_pos + 16;
            let second = if kind_bits & (1 << 27) != 0 {
                let s = read_at(self.src, self.at, data, 4)?;
                data += 4;
                Some(le_u32(&s, 0) as i32)
            } else {
                None
            };
            if tag < 0 {
                break; // an end marker (Bio-Formats and slideio stop here too)
            }
            let kind = kind_bits & 0x00FF_FFFF;
            let extended = kind_bits & (1 << 28) != 0;
            let inline = kind_bits & (1 << 30) != 0;
            let mut field = Field { tag, second, kind, array: !inline && !extended && kind_bits & (1 << 29) != 0, value: Value::None, children: Vec::new() };
            if extended {
                if matches!(kind, 0..=2) {
                    field.children = self.volume(data, depth + 1)?;
                }
            } else if inline {
                field.value = Value::Inline(data_size);
            } else if data_size > MAX_VALUE_BYTES {
                field.value = Value::Large;
            } else if data_size > 0 {
                field.value = Value::Bytes(read_at(self.src, self.at, data, data_size as u64)?);
            }
            out.push(field);
            if next == 0 {
                break;
            }
            field_pos = pos
                .checked_add(next)
                .filter(|&p| p < self.src.len())
                .ok_or_else(|| Error::format(self.at, format!("VSI record field of tag {tag} at offset {field_pos}: next field at {pos} + {next} lies past the end of the file")))?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemSource;

    fn volume(fields: &[(u32, i32, Vec<u8>)]) -> Vec<u8> {
        // A volume at offset 0 of its own buffer: header, then the fields back to back.
        let mut b = Vec::new();
        b.extend(24u16.to_le_bytes());
        b.extend(VOLUME_MAGIC.to_le_bytes());
        b.extend(1u32.to_le_bytes());
        b.extend(24i64.to_le_bytes());
        b.extend((fields.len() as u32).to_le_bytes());
        b.extend(0u32.to_le_bytes());
        for (i, (kind, tag, data)) in fields.iter().enumerate() {
            let next = if i + 1 == fields.len() { 0 } else { (b.len() + 16 + data.len()) as u32 };
            b.extend(kind.to_le_bytes());
            b.extend(tag.to_le_bytes());
            b.extend(next.to_le_bytes());
            b.extend((data.len() as u32).to_le_bytes());
            b.extend(data);
        }
        b
    }

    #[test]
    fn values_and_nested_volumes_parse() {
        let text: Vec<u8> = "40x".encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
        let mut data = volume(&[(8192, 2030, text), (5 | (1 << 30), 2031, vec![]), (260, 2019, [0.25f64, 0.5].iter().flat_map(|v| v.to_le_bytes()).collect())]);
        // An inline value's data size is the value.
        data[24 + 16 + 6 + 12..24 + 16 + 6 + 16].copy_from_slice(&7u32.to_le_bytes());
        let src = MemSource::new(data);
        let f = parse(&src, &Location::file("t.vsi"), 0).unwrap();
        assert_eq!(f[0].text().as_deref(), Some("40x"));
        assert_eq!(f[1].ints(), Some(vec![7]));
        assert_eq!(f[2].doubles(), Some(vec![0.25, 0.5]));
        assert_eq!(f[2].text().as_deref(), Some("(0.25, 0.5)"));
    }

    #[test]
    fn loops_truncation_and_bad_headers_are_typed_errors() {
        let at = Location::file("t.vsi");
        let mut v = volume(&[(5, 1, vec![0; 4]), (5, 2, vec![0; 4])]);
        // A third field announced, and the second field's "next" points back at the first.
        v[16..20].copy_from_slice(&3u32.to_le_bytes());
        let second = 24 + 20;
        v[second + 8..second + 12].copy_from_slice(&24u32.to_le_bytes());
        let e = parse(&MemSource::new(v.clone()), &at, 0).unwrap_err();
        assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("loop"), "{e}");
        let e = parse(&MemSource::new(v[..30].to_vec()), &at, 0).unwrap_err();
        assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("past the end"), "{e}");
        let mut bad = v;
        bad[2] = 0;
        assert!(matches!(parse(&MemSource::new(bad), &at, 0), Err(Error::Format { .. })));
        // Property sets nested deeper than MAX_DEPTH: Limits, not a stack overflow.
        let mut deep = Vec::new();
        for _ in 0..=MAX_DEPTH + 1 {
            deep.extend(volume(&[(1 | (1 << 28), 5, vec![])]));
        }
        deep.extend(volume(&[]));
        assert!(matches!(parse(&MemSource::new(deep), &at, 0), Err(Error::Limits { .. })));
    }
}
