//! Base64 text as XML character data holds it ([`crate::index::TileStream::Base64`]):
//! lenient like GLib's `g_base64_decode`, which OpenSlide's Philips driver uses — bytes outside
//! the standard alphabet (whitespace, line breaks) are skipped, and so are XML character
//! references (`&#10;`), whose digits would otherwise be taken for base64; decoding stops at
//! the first `=`.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;

/// The standard alphabet, no padding required, trailing bits tolerated (GLib drops them).
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::RequireNone).with_decode_allow_trailing_bits(true),
);

/// Largest character reference skipped (`&#x10FFFF;` is 10 bytes); a longer `&...` run is an
/// error rather than a scan to the end of the text.
const MAX_REFERENCE: usize = crate::limits::LIMITS.char_reference_bytes;

/// Decode `text` (bytes of base64 text, possibly with whitespace and character references).
///
/// # Errors
/// A message for an unterminated character reference or a length that leaves a single
/// dangling symbol (one base64 character cannot encode a byte).
pub fn decode(text: &[u8]) -> Result<Vec<u8>, String> {
    let mut clean = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'=' => break,
            b'&' => {
                let end = text[i..].iter().take(MAX_REFERENCE).position(|&b| b == b';').ok_or("unterminated character reference")?;
                i += end + 1;
                continue;
            }
            c if c.is_ascii_alphanumeric() || c == b'+' || c == b'/' => clean.push(c),
            _ => {}
        }
        i += 1;
    }
    if clean.len() % 4 == 1 {
        // GLib drops a lone trailing symbol; so do we.
        clean.pop();
    }
    LENIENT.decode(&clean).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn skips_whitespace_references_and_padding() {
        assert_eq!(decode(b"U0xJ\nREUt&#10;MDA0Mg==").unwrap(), b"SLIDE-0042");
        assert_eq!(decode(b"  U0xJREUtMDA0Mg  ").unwrap(), b"SLIDE-0042");
        assert_eq!(decode(b"").unwrap(), b"");
        assert!(decode(b"U0xJ&#1000000000000000;").is_err());
    }
}
