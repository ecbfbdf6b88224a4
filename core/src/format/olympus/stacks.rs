//! The stacks (images) a VSI record tree describes, as the driver uses them.
//!
//! Tags (public sources, no code taken: Bio-Formats' `CellSensReader` tag constants and
//! slideio's `vsifile.cpp` `extractVolumesFromMetadata`; checked against the public test
//! files of `../shared/formats3`):
//! * the root volume holds document properties (tag 2: product name 34, product version 35,
//!   document name 11) and the collection volume (2000), whose multidimensional image volumes
//!   (2001) are the stacks. A stack's second tag is its number: its ETS file lies in the folder
//!   `stack<number>` (the public test files: stack 1 in `stack1`, stacks 10000+ in
//!   `stack10000`...);
//! * in a stack: default background colour (2034), image frame volumes (2002) whose external
//!   file properties (2018) hold the image size (2053: x, y, width, height), the origin of the
//!   tile coordinate system (2410), external file present (20005, 1 when the pixels are in an
//!   ETS file); stack properties (2005): stack name (2030), stack type (2074: 0 image, 1
//!   overview, 2 sample mask, 4 focus image, 256 macro ...; absent: 0), RWC frame scale (2019:
//!   pixel size x, y) in the unit of RWC frame unit (2020, e.g. `10^-6m^1`), and the optical
//!   path (2043) whose devices carry the objective magnification (120060); dimension
//!   description volumes (2007, second tag `d`: coordinate `d + 2` of an ETS tile) whose
//!   dimension meaning (2023) is 1 (Z), 2 (T), 3 (lambda), 4 (channel) or 9 (phase), and whose
//!   channel property volumes (2008, second tag = channel) carry the channel name (2419, or
//!   the dimension name 2021).

use super::tree::Field;

/// Tag of the collection volume.
const COLLECTION: i32 = 2000;
/// Tag of a multidimensional image volume (a stack).
const STACK: i32 = 2001;
/// Dimension meaning of a channel dimension (2023's value).
pub(crate) const MEANING_CHANNEL: i64 = 4;

/// One stack of the collection.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Stack {
    /// The stack's number (the 2001 volume's second tag; `stack<id>` folder).
    pub id: i64,
    /// Stack name (2030), e.g. `40x`, `Overview`.
    pub name: Option<String>,
    /// Stack type (2074); 0 (an image) when absent.
    pub kind: i64,
    /// An image frame's external file present flag (20005) is 1.
    pub external: bool,
    /// Width and height from the image size (2053).
    pub size: Option<(i64, i64)>,
    /// The origin of the tile coordinate system (2410) as stored.
    pub tile_origin: Vec<i64>,
    /// µm per pixel (x, y) from the RWC frame scale and unit.
    pub mpp: Option<(f64, f64)>,
    /// The first objective magnification (120060) in the stack's optical path.
    pub magnification: Option<f64>,
    /// (ETS coordinate index, dimension meaning) of each described dimension.
    pub dims: Vec<(usize, i64)>,
    /// Channel names by channel index (from the channel dimension's channel properties).
    pub channel_names: Vec<(i64, String)>,
    /// Default background colour (2034).
    pub background: Option<i64>,
}

impl Stack {
    /// The ETS coordinate index of the channel dimension, if the stack has one.
    pub fn channel_index(&self) -> Option<usize> {
        self.dims.iter().find(|(_, m)| *m == MEANING_CHANNEL).map(|(i, _)| *i)
    }

    /// The name of the stack type (slideio's names for the known values).
    pub fn kind_name(&self) -> String {
        match self.kind {
            0 => "image".into(),
            1 => "overview".into(),
            2 => "sample-mask".into(),
            4 => "focus-image".into(),
            8 => "efi-sharpness-map".into(),
            16 => "efi-height-map".into(),
            32 => "efi-texture-map".into(),
            64 => "efi-stack".into(),
            256 => "macro".into(),
            1024 => "focus-points".into(),
            k => k.to_string(),
        }
    }
}

/// The document's own properties: (property suffix, text) of product name, product version
/// and document name, when present.
pub(crate) fn document(root: &[Field]) -> Vec<(&'static str, String)> {
    let Some(doc) = root.iter().find(|f| f.tag == 2) else { return Vec::new() };
    [(34, "product-name"), (35, "product-version"), (11, "document-name")]
        .into_iter()
        .filter_map(|(tag, key)| Some((key, doc.child(tag)?.text()?.trim().to_string())))
        .filter(|(_, v)| !v.is_empty())
        .collect()
}

/// Every stack of the collection volume, in file order.
pub(crate) fn stacks(root: &[Field]) -> Vec<Stack> {
    let Some(collection) = root.iter().find(|f| f.tag == COLLECTION) else { return Vec::new() };
    collection.children_with(STACK).map(stack).collect()
}

fn int(f: Option<&Field>) -> Option<i64> {
    f?.ints()?.first().copied()
}

fn stack(v: &Field) -> Stack {
    let mut s = Stack { id: v.second.unwrap_or(0) as i64, background: int(v.child(2034)), ..Stack::default() };
    for frame in v.children_with(2002) {
        if let Some(ext) = frame.child(2018) {
            if int(ext.child(20005)) == Some(1) {
                s.external = true;
            }
            if s.size.is_none() {
                s.size = ext.child(2053).and_then(Field::ints).filter(|b| b.len() == 4).map(|b| (b[2], b[3]));
            }
            if s.tile_origin.is_empty() {
                s.tile_origin = ext.child(2410).and_then(Field::ints).unwrap_or_default();
            }
        }
    }
    if let Some(p) = v.child(2005) {
        s.name = p.child(2030).and_then(Field::text);
        s.kind = int(p.child(2074)).unwrap_or(0);
        let scale = p.child(2019).and_then(Field::doubles).filter(|d| d.len() == 2);
        let unit = p.child(2020).and_then(Field::text);
        if let (Some(d), Some(f)) = (scale, unit.as_deref().map_or(Some(1.0), micrometres)) {
            let (x, y) = (d[0] * f, d[1] * f);
            if x.is_finite() && y.is_finite() && x > 0.0 && y > 0.0 {
                s.mpp = Some((x, y));
            }
        }
        s.magnification = p.child(2043).and_then(|o| o.find(120060)).and_then(Field::doubles).and_then(|d| d.first().copied()).filter(|m| m.is_finite() && *m > 0.0);
    }
    for d in v.children_with(2007) {
        let Some(n) = d.second.filter(|&n| (0..14).contains(&n)) else { continue };
        // The meaning: in the description volume, else a 2023 of the same second tag beside it.
        let meaning = int(d.child(2023))
            .or_else(|| d.children_with(2008).find_map(|c| int(c.child(2023))))
            .or_else(|| int(v.children_with(2023).find(|f| f.second == Some(n))));
        let Some(meaning) = meaning else { continue };
        s.dims.push((n as usize + 2, meaning));
        if meaning == MEANING_CHANNEL {
            for c in d.children_with(2008) {
                let name = c.child(2419).or_else(|| c.child(2021)).and_then(Field::text);
                if let (Some(i), Some(name)) = (c.second, name) {
                    s.channel_names.push((i as i64, name));
                }
            }
        }
    }
    s
}

/// The factor from a RWC unit (`10^Em^1`) to micrometres; `None` for other units.
fn micrometres(unit: &str) -> Option<f64> {
    let e: i32 = unit.trim().strip_prefix("10^")?.strip_suffix("m^1")?.parse().ok()?;
    (-12..=3).contains(&e).then(|| 10f64.powi(e + 6))
}

#[cfg(test)]
mod tests {
    use super::micrometres;

    #[test]
    fn rwc_units_convert_to_micrometres() {
        assert_eq!(micrometres("10^-6m^1"), Some(1.0));
        assert_eq!(micrometres("10^-9m^1"), Some(0.001));
        assert_eq!(micrometres("10^-3m^1"), Some(1000.0));
        assert_eq!(micrometres("10^-3s^1"), None);
    }
}
