//! `dicom.*` properties as OpenSlide 4.0.1 names and formats them (`add_properties` in
//! `openslide-vendor-dicom.c`, values printed by libdicom), from the file meta group and the
//! metadata subset of level 0's first file.
//!
//! Rules (each checked against OpenSlide 4.0.1 with generated files, `/work/notes/issue16-plan.md`
//! §1): key `dicom.<Keyword>` (standard dictionary keywords; private and unknown tags, group
//! lengths and binary VRs OB/OD/OF/OL/OV/OW/UN are skipped, except (0009,0010), which
//! libdicom's dictionary names `PrivateCreator`); sequences give
//! `dicom.<Seq>[i].<Keyword>` for every item, nested alike, and nothing when empty; elements of
//! several values give `<Keyword>[i]`. Strings are kept as written minus one trailing pad
//! character; the VRs AE, CS, DS, DT, PN, SH, TM, UC and UI are split on `\` into values, the
//! others (AS, DA, IS, LO, LT, ST, UR, UT) are one value with the backslashes kept. FL/FD print
//! as `%.17g`, integers in decimal, AT as two decimal values (group, element) per tag.

use std::collections::BTreeMap;

use dicom_core::dictionary::{DataDictionary, DataDictionaryEntry};
use dicom_core::value::{PrimitiveValue, Value};
use dicom_core::VR;
use dicom_dictionary_std::StandardDataDictionary;
use dicom_object::InMemDicomObject;

use crate::format::format_double;

/// Nesting deeper than this is not reported (a hostile file cannot recurse without bound; the
/// parser already bounds it by the file's size).
const MAX_DEPTH: usize = crate::limits::LIMITS.dicom_depth;

/// Add `dicom.*` properties of every element of `obj` under `prefix` (`"dicom."`).
pub(crate) fn add(obj: &InMemDicomObject, prefix: &str, out: &mut BTreeMap<String, String>) {
    add_level(obj, prefix, out, 0);
}

fn add_level(obj: &InMemDicomObject, prefix: &str, out: &mut BTreeMap<String, String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    for e in obj.iter() {
        let tag = e.header().tag;
        // libdicom's dictionary names exactly one private tag: (0009,0010) `PrivateCreator`
        // (oracle: (0009,0010) is reported, also inside sequences; (0009,0011), (0011,0010),
        // (0019,0010), (0029,0010) and private data elements are not).
        let private_creator = tag.group() == 0x0009 && tag.element() == 0x0010;
        if !private_creator && (tag.element() == 0 || tag.group() % 2 == 1) {
            continue;
        }
        let kw = if private_creator {
            "PrivateCreator"
        } else {
            let Some(entry) = StandardDataDictionary.by_tag(tag) else { continue };
            entry.alias()
        };
        if kw.is_empty() {
            continue;
        }
        let key = format!("{prefix}{kw}");
        match e.value() {
            Value::Sequence(seq) => {
                for (i, item) in seq.items().iter().enumerate() {
                    add_level(item, &format!("{key}[{i}]."), out, depth + 1);
                }
            }
            Value::PixelSequence(_) => {}
            Value::Primitive(v) => {
                let values = format_values(e.header().vr, v);
                match values.len() {
                    0 => {}
                    1 => {
                        out.insert(key, values.into_iter().next().unwrap_or_default());
                    }
                    _ => {
                        for (i, s) in values.into_iter().enumerate() {
                            out.insert(format!("{key}[{i}]"), s);
                        }
                    }
                }
            }
        }
    }
}

/// VRs whose values libdicom splits on `\`.
fn splits(vr: VR) -> bool {
    matches!(vr, VR::AE | VR::CS | VR::DS | VR::DT | VR::PN | VR::SH | VR::TM | VR::UC | VR::UI)
}

/// The values of one element as libdicom prints them; empty for binary VRs.
fn format_values(vr: VR, v: &PrimitiveValue) -> Vec<String> {
    use PrimitiveValue as P;
    if matches!(vr, VR::OB | VR::OD | VR::OF | VR::OL | VR::OV | VR::OW | VR::UN | VR::SQ) {
        return Vec::new();
    }
    let text = |joined: String| -> Vec<String> {
        let mut s = joined;
        if s.ends_with(' ') || s.ends_with('\0') {
            s.pop();
        }
        if splits(vr) {
            s.split('\\').map(str::to_string).collect()
        } else {
            vec![s]
        }
    };
    match v {
        P::Empty => match vr {
            VR::FL | VR::FD | VR::US | VR::UL | VR::SS | VR::SL | VR::SV | VR::UV | VR::AT => Vec::new(),
            _ => vec![String::new()],
        },
        P::Str(s) => text(s.clone()),
        P::Strs(v) => text(v.join("\\")),
        P::Tags(t) => t.iter().flat_map(|t| [t.group().to_string(), t.element().to_string()]).collect(),
        P::U8(x) => x.iter().map(u8::to_string).collect(),
        P::I16(x) => x.iter().map(i16::to_string).collect(),
        P::U16(x) => x.iter().map(u16::to_string).collect(),
        P::I32(x) => x.iter().map(i32::to_string).collect(),
        P::U32(x) => x.iter().map(u32::to_string).collect(),
        P::I64(x) => x.iter().map(i64::to_string).collect(),
        P::U64(x) => x.iter().map(u64::to_string).collect(),
        P::F32(x) => x.iter().map(|&f| format_double(f as f64)).collect(),
        P::F64(x) => x.iter().map(|&f| format_double(f)).collect(),
        // Dates and times stay strings when read with the preserving strategy (the default);
        // a parsed value prints in its DICOM form.
        other => text(other.to_str().into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_lose_one_pad_and_split_only_for_splitting_vrs() {
        let s = |t: &str| PrimitiveValue::Strs(t.split('\\').map(str::to_string).collect());
        assert_eq!(format_values(VR::LO, &s("serial  ")), vec!["serial "]);
        assert_eq!(format_values(VR::CS, &s("A\\B ")), vec!["A", "B"]);
        assert_eq!(format_values(VR::LO, &s("v1\\v2")), vec!["v1\\v2"]);
        assert_eq!(format_values(VR::DS, &s(".000499\\2e-3 ")), vec![".000499", "2e-3"]);
        assert_eq!(format_values(VR::UI, &s("1.2.3\0")), vec!["1.2.3"]);
        assert_eq!(format_values(VR::LO, &s("")), vec![""]);
        assert!(format_values(VR::OB, &PrimitiveValue::U8([1u8, 2].into_iter().collect())).is_empty());
        assert_eq!(format_values(VR::FL, &PrimitiveValue::F32([1.480_533_f32].into_iter().collect())), vec![format_double(1.480_533_f32 as f64)]);
    }
}
