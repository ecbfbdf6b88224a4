//! XML ImageDescriptions (Philips, Leica): the description of IFD 0 as text and its byte
//! range in the file, parsed with `roxmltree`, and the few tree queries the drivers need
//! (OpenSlide's drivers use libxml2 XPath; these helpers answer the same questions).

use roxmltree::{Document, Node};

use crate::error::{Error, Location, Result};
use crate::io::ByteSource;
use crate::tiff::{tags, TiffFile, ValueRange};

/// The ImageDescription of an IFD as stored: text up to the first NUL and the file offset of
/// its first byte (`None` when the value is inline or not valid UTF-8, so that byte positions
/// in the text are not file positions).
pub(crate) struct Description {
    /// The text (lossy UTF-8 when the bytes are not UTF-8).
    pub text: String,
    /// File offset of `text`'s first byte, when text positions map to file positions.
    pub offset: Option<u64>,
}

/// The ImageDescription of IFD `i`, `None` when absent.
///
/// # Errors
/// `Format`/`Limits` when the value lies outside the file or is too large (as reading any tag).
pub(crate) fn description(tf: &TiffFile, src: &dyn ByteSource, at: &Location, i: usize) -> Result<Option<Description>> {
    let Some(e) = tf.ifds[i].get(tags::IMAGE_DESCRIPTION) else { return Ok(None) };
    let raw = tf.raw(src, at, e)?;
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let offset = match tf.value_range(at, e)? {
        ValueRange::At { offset, .. } => Some(offset),
        ValueRange::Inline(_) => None,
    };
    Ok(Some(match std::str::from_utf8(&raw[..end]) {
        Ok(t) => Description { text: t.to_string(), offset },
        Err(_) => Description { text: String::from_utf8_lossy(&raw[..end]).into_owned(), offset: None },
    }))
}

/// Parse `text` as XML.
///
/// # Errors
/// `Format` naming what is wrong (OpenSlide: "Couldn't parse XML").
pub(crate) fn parse<'a>(text: &'a str, at: &Location, what: &str) -> Result<Document<'a>> {
    Document::parse(text).map_err(|e| Error::format(at, format!("{what}: XML does not parse: {e}")))
}

/// Element children of `n` named `name` (local name; any namespace).
pub(crate) fn children<'a, 'i>(n: Node<'a, 'i>, name: &'a str) -> impl Iterator<Item = Node<'a, 'i>> + 'a {
    n.children().filter(move |c| c.is_element() && c.tag_name().name() == name)
}

/// The first element child of `n` named `name`.
pub(crate) fn child<'a, 'i>(n: Node<'a, 'i>, name: &'a str) -> Option<Node<'a, 'i>> {
    children(n, name).next()
}

/// The text content of `n`: every descendant text node, concatenated (libxml2's
/// `xmlNodeGetContent`).
pub(crate) fn content(n: Node<'_, '_>) -> String {
    n.descendants().filter(|d| d.is_text()).filter_map(|d| d.text()).collect()
}

/// The text of `n`'s first text child (XPath `text()[1]`).
pub(crate) fn first_text<'a, 'i>(n: Node<'a, 'i>) -> Option<Node<'a, 'i>> {
    n.children().find(|c| c.is_text())
}
