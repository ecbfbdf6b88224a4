//! Channels stored as separate images (OME-TIFF multichannel fluorescence: one IFD per channel
//! plane, each with its own reduced levels): what `Slide::read_region_channels` reads.

use super::ImageIndex;

/// The channel planes of a slide whose channels are separate images.
///
/// `levels[k][c]` is channel `c` at pyramid level `k`: an image of one sample per pixel with
/// the geometry of level `k` (checked by `format::finish`). Slides without this read their
/// channels from the samples of each level's image.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelPlanes {
    /// Channel names in channel order (from the format's metadata, e.g. OME-XML `Channel/@Name`;
    /// `"C<i>"` when unnamed).
    pub names: Vec<String>,
    /// Per level, per channel: the channel's image.
    pub levels: Vec<Vec<ImageIndex>>,
    /// Per channel, the sample of its image's pixels that holds it (Zeiss CZI: each of R, G, B
    /// of a BGR24 channel image); empty: sample 0 of every channel's image, which then has one
    /// sample per pixel.
    pub samples: Vec<usize>,
    /// Per channel, its display colour (R, G, B) from the format's metadata (QPTIFF `Color`,
    /// OME-XML `Channel/@Color`, CZI `Channel/Color`), `None` where the file gives none or a
    /// malformed one; empty: none known for any channel.
    pub colors: Vec<Option<[u8; 3]>>,
}

impl ChannelPlanes {
    /// The sample of channel `c`'s image that holds it (0 unless [`samples`](Self::samples)
    /// says otherwise).
    pub fn sample(&self, c: usize) -> usize {
        self.samples.get(c).copied().unwrap_or(0)
    }

    /// The display colour of channel `c` ([`colors`](Self::colors)), `None` when unknown.
    pub fn color(&self, c: usize) -> Option<[u8; 3]> {
        self.colors.get(c).copied().flatten()
    }
}
