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
}
