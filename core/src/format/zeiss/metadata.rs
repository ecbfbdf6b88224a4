//! The CZI metadata XML: `zeiss.*` properties, image size, scene count, mpp, objective power
//! and channel names.
//!
//! Property naming follows OpenSlide's zeiss driver (`add_xml_props`) and its format page
//! (openslide.org/formats/zeiss): the subtrees `AttachmentInfos`, `DisplaySetting`,
//! `Information` and `Scaling` of `/ImageDocument/Metadata` become properties named by their
//! element path joined with `.` under `zeiss.` (attributes add their name as a last
//! component); a non-blank text node gives the value. An element whose parent's name is its
//! own name plus `s` (`Channels/Channel`), or a `Distance` under `Items`, is named by its `Id`
//! attribute, else its `Name`, and skipped with its subtree when it has neither; element
//! children that would get the same name as a sibling are skipped. `openslide.mpp-x/-y` are
//! 10⁶ × `zeiss.Scaling.Items.X/Y.Value` (metres per pixel); the objective power is the
//! `NominalMagnification` of the objective that `ObjectiveSettings.ObjectiveRef.Id` names.

use std::collections::{BTreeMap, HashSet};

use roxmltree::Node;

use super::super::{parse_double, xml};
use crate::error::{Location, Result};

/// What the metadata XML says.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    /// `zeiss.*` properties.
    pub properties: BTreeMap<String, String>,
    /// `Information.Image.SizeX/SizeY` (pixels), when both parse as integers.
    pub size: Option<(i64, i64)>,
    /// `Information.Image.SizeS` (default 1: "some CZI files may not have SizeS").
    pub scenes: Option<i64>,
    /// Microns per pixel (x, y), when both scaling values parse.
    pub mpp: Option<(f64, f64)>,
    /// Objective power.
    pub objective_power: Option<f64>,
    /// The first `AttachmentInfos.*.Label.Barcodes.*.Content` in document order
    /// (`openslide.barcode`, as OpenSlide 4.0.1 reports it).
    pub barcode: Option<String>,
    /// Channel names from `Information.Image.Dimensions.Channels.Channel` (`Name`, else
    /// `Id`), in document order.
    pub channel_names: Vec<String>,
    /// The display colour of each of those channels (its `Color` element, else the same
    /// channel's in `DisplaySetting.Channels`; see [`czi_color`]), in the same order.
    pub channel_colors: Vec<Option<[u8; 3]>>,
}

/// A CZI `Color` (`#AARRGGBB`, or `#RRGGBB`, hexadecimal, as ZEN writes channel colours) as
/// (R, G, B); `None` for anything else. Alpha is dropped.
pub fn czi_color(text: &str) -> Option<[u8; 3]> {
    let hex = text.trim().strip_prefix('#')?;
    if !(hex.len() == 6 || hex.len() == 8) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let v = u32::from_str_radix(hex, 16).ok()?;
    Some([(v >> 16) as u8, (v >> 8) as u8, v as u8])
}

const SECTIONS: [&str; 4] = ["AttachmentInfos", "DisplaySetting", "Information", "Scaling"];

/// The name of element `n` under a parent named `parent`, `None` when it is a list member
/// without an `Id` or `Name` attribute.
fn element_name(parent: &str, n: Node<'_, '_>) -> Option<String> {
    let name = n.tag_name().name();
    let list = parent.strip_suffix('s') == Some(name) || (parent == "Items" && name == "Distance");
    if list {
        n.attribute("Id").or_else(|| n.attribute("Name")).map(str::to_string)
    } else {
        Some(name.to_string())
    }
}

fn blank(s: &str) -> bool {
    s.chars().all(|c| matches!(c, ' ' | '\t' | '\n' | '\r'))
}

fn add(props: &mut BTreeMap<String, String>, path: &mut Vec<String>, n: Node<'_, '_>, name: String) {
    path.push(name);
    for a in n.attributes() {
        if !blank(a.value()) {
            props.insert(format!("{}.{}", path.join("."), a.name()), a.value().to_string());
        }
    }
    let parent = path.last().cloned().unwrap_or_default();
    let names: Vec<Option<String>> = n.children().map(|c| if c.is_element() { element_name(&parent, c) } else { None }).collect();
    let mut seen = HashSet::new();
    let mut dup = HashSet::new();
    for nm in names.iter().flatten() {
        if !seen.insert(nm.clone()) {
            dup.insert(nm.clone());
        }
    }
    for (c, nm) in n.children().zip(names) {
        if c.is_text() {
            if let Some(t) = c.text().filter(|t| !blank(t)) {
                props.insert(path.join("."), t.to_string());
            }
        } else if c.is_element() {
            if let Some(nm) = nm.filter(|nm| !dup.contains(nm)) {
                add(props, path, c, nm);
            }
        }
    }
    path.pop();
}

/// Parse the metadata XML.
///
/// # Errors
/// `Format` when the XML does not parse.
pub fn parse(text: &str, at: &Location) -> Result<Metadata> {
    let doc = xml::parse(text, at, "CZI metadata")?;
    let mut m = Metadata::default();
    let root = doc.root_element();
    let meta = (root.tag_name().name() == "ImageDocument").then(|| xml::child(root, "Metadata")).flatten();
    if let Some(meta) = meta {
        let mut path = vec!["zeiss".to_string()];
        for s in SECTIONS {
            if let Some(n) = xml::child(meta, s) {
                add(&mut m.properties, &mut path, n, s.to_string());
            }
        }
        m.barcode = xml::child(meta, "AttachmentInfos").and_then(|a| {
            a.children()
                .filter(|n| n.is_element())
                .filter_map(|n| xml::child(n, "Label"))
                .filter_map(|n| xml::child(n, "Barcodes"))
                .flat_map(|n| n.children().filter(|c| c.is_element()))
                .filter_map(|n| xml::child(n, "Content"))
                .map(xml::content)
                .find(|t| !blank(t))
        });
        let image = xml::child(meta, "Information").and_then(|n| xml::child(n, "Image"));
        if let Some(ch) = image.and_then(|n| xml::child(n, "Dimensions")).and_then(|n| xml::child(n, "Channels")) {
            m.channel_names = xml::children(ch, "Channel").map(|c| c.attribute("Name").or_else(|| c.attribute("Id")).unwrap_or("").to_string()).collect();
            let display: Vec<Node<'_, '_>> =
                xml::child(meta, "DisplaySetting").and_then(|d| xml::child(d, "Channels")).map(|d| xml::children(d, "Channel").collect()).unwrap_or_default();
            m.channel_colors = xml::children(ch, "Channel")
                .enumerate()
                .map(|(i, c)| {
                    let own = xml::child(c, "Color").and_then(|n| czi_color(&xml::content(n)));
                    // The display setting of the same channel: the same Id, else the same position.
                    let id = c.attribute("Id");
                    let shown = display.iter().find(|d| id.is_some() && d.attribute("Id") == id).or_else(|| display.get(i));
                    own.or_else(|| shown.and_then(|d| xml::child(*d, "Color")).and_then(|n| czi_color(&xml::content(n))))
                })
                .collect();
        }
    }
    let p = &m.properties;
    let int = |k: &str| p.get(k).and_then(|v| v.trim().parse::<i64>().ok());
    m.size = int("zeiss.Information.Image.SizeX").zip(int("zeiss.Information.Image.SizeY"));
    m.scenes = int("zeiss.Information.Image.SizeS");
    let um = |k: &str| p.get(k).and_then(|v| parse_double(v)).map(|d| d * 1_000_000.0);
    m.mpp = um("zeiss.Scaling.Items.X.Value").zip(um("zeiss.Scaling.Items.Y.Value"));
    m.objective_power = p
        .get("zeiss.Information.Image.ObjectiveSettings.ObjectiveRef.Id")
        .and_then(|id| p.get(&format!("zeiss.Information.Instrument.Objectives.{id}.NominalMagnification")))
        .and_then(|v| parse_double(v));
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn czi_colors_are_hex_argb_or_rgb() {
        assert_eq!(czi_color("#FF00FF33"), Some([0, 255, 0x33]));
        assert_eq!(czi_color(" #0000ff "), Some([0, 0, 255]));
        for bad in ["", "FF0000", "#FFF", "#GG000000", "#FF00FF00FF", "red"] {
            assert_eq!(czi_color(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn properties_follow_openslides_naming() {
        let x = r#"<ImageDocument><Metadata>
          <Information><Image><SizeX>100</SizeX><SizeY>50</SizeY><SizeS>2</SizeS>
            <ObjectiveSettings><ObjectiveRef Id="Objective:1"/></ObjectiveSettings>
            <Dimensions><Channels><Channel Id="Channel:0" Name="TL Brightfield"><Gain>2</Gain></Channel><Channel><Gain>1</Gain></Channel></Channels></Dimensions>
            <Dup>1</Dup><Dup>2</Dup></Image>
            <Instrument><Objectives><Objective Id="Objective:1"><NominalMagnification>20</NominalMagnification></Objective></Objectives></Instrument>
          </Information>
          <AttachmentInfos><AttachmentInfo Id="Label"><Label><Barcodes><Barcode Id="B:1"><Content>AB-12</Content></Barcode></Barcodes></Label></AttachmentInfo></AttachmentInfos>
          <Scaling><Items><Distance Id="X"><Value>2.5E-07</Value></Distance><Distance Id="Y"><Value>2.5E-07</Value></Distance></Items></Scaling>
          <Experiment><Secret>no</Secret></Experiment>
        </Metadata></ImageDocument>"#;
        let m = parse(x, &Location::file("t.czi")).unwrap();
        let p = &m.properties;
        assert_eq!(p["zeiss.Information.Image.SizeX"], "100");
        assert_eq!(p["zeiss.Information.Image.Dimensions.Channels.Channel:0.Gain"], "2");
        assert_eq!(p["zeiss.Information.Image.Dimensions.Channels.Channel:0.Name"], "TL Brightfield");
        assert_eq!(p["zeiss.Information.Image.ObjectiveSettings.ObjectiveRef.Id"], "Objective:1");
        assert_eq!(p["zeiss.Scaling.Items.X.Value"], "2.5E-07");
        assert!(!p.keys().any(|k| k.contains("Dup") || k.contains("Experiment")), "{p:?}");
        assert!(!p.values().any(|v| v == "1"), "the unnamed channel is skipped");
        assert_eq!(m.size, Some((100, 50)));
        assert_eq!(m.scenes, Some(2));
        assert_eq!(m.objective_power, Some(20.0));
        assert_eq!(m.barcode.as_deref(), Some("AB-12"));
        let (x, y) = m.mpp.unwrap();
        assert!((x - 0.25).abs() < 1e-12 && (y - 0.25).abs() < 1e-12);
        assert_eq!(m.channel_names, vec!["TL Brightfield".to_string(), String::new()]);
        assert_eq!(m.channel_colors, vec![None, None]);
    }

    /// A channel's colour is its own `Color`, else its display setting's (by Id, else position).
    #[test]
    fn channel_colors_come_from_the_channel_or_its_display_setting() {
        let x = r##"<ImageDocument><Metadata>
          <Information><Image><Dimensions><Channels>
            <Channel Id="Channel:0" Name="DAPI"><Color>#FF0000FF</Color></Channel>
            <Channel Id="Channel:1" Name="FITC"/>
            <Channel Name="Cy5"/>
            <Channel Id="Channel:3" Name="bad"><Color>blue</Color></Channel>
          </Channels></Dimensions></Image></Information>
          <DisplaySetting><Channels>
            <Channel Id="Channel:1"><Color>#FF00FF00</Color></Channel>
            <Channel Id="Channel:0"><Color>#FFFFFFFF</Color></Channel>
            <Channel Id="Channel:9"><Color>#FFFF0000</Color></Channel>
          </Channels></DisplaySetting>
        </Metadata></ImageDocument>"##;
        let m = parse(x, &Location::file("t.czi")).unwrap();
        assert_eq!(m.channel_colors, vec![Some([0, 0, 255]), Some([0, 255, 0]), Some([255, 0, 0]), None]);
    }
}
