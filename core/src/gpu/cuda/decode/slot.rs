//! One half of a decode lane's double buffer ([`Slot`]): a stream, nvJPEG states and the
//! buffers one chunk passes through. A decoder-layer type, so the decoders take a slot without
//! naming the lanes (`lanes.rs` pairs two of them).

use crate::gpu::cuda::context::Stream;
use crate::gpu::cuda::decode::nvjpeg::{Decoders, State};
use crate::gpu::cuda::memory::{DeviceBuffer, PinnedBuffer};
use crate::gpu::cuda::sys::Res;

/// One half of a lane's double buffer. Every resource is freed when the slot drops.
pub(crate) struct Slot {
    /// Planar nvJPEG outputs of the chunk.
    pub(crate) scratch: DeviceBuffer,
    /// cuFile read staging (device).
    pub(crate) staging: DeviceBuffer,
    /// Spliced device bitstreams (cuFile path).
    pub(crate) spliced: DeviceBuffer,
    /// POSIX read staging / device-to-host copies (pinned host).
    pub(crate) pinned: PinnedBuffer,
    /// Spliced host bitstreams of the chunk in flight (pinned: nvJPEG copies them to the
    /// device; measured faster than pageable memory).
    pub(crate) arena: PinnedBuffer,
    /// nvJPEG state of the host-bitstream decoder, made at the slot's first decode
    /// ([`Slot::host_state`]; ~0.2 s each on the H200, so a lane made for its streams alone,
    /// as the first reads of warm-up `first` need it, is cheap).
    pub(crate) state: Option<State>,
    /// nvJPEG state of the device-bitstream decoder (cuFile path), made at its first use.
    pub(crate) dev_state: Option<State>,
    pub(crate) stream: Stream,
}

impl Slot {
    /// The slot's nvJPEG state for `d`'s host-bitstream decoder, made on first use.
    pub(crate) fn host_state(&mut self, d: &Decoders) -> Res<&mut State> {
        if self.state.is_none() {
            self.state = Some(State::new(&d.host, "nvjpegJpegStateCreate")?);
        }
        Ok(self.state.as_mut().expect("made above"))
    }

    /// The slot's nvJPEG state for `d`'s device-bitstream decoder (made on first use), or
    /// `None` without one.
    pub(crate) fn device_state(&mut self, d: &Decoders) -> Res<Option<&mut State>> {
        let Some(h) = &d.device else { return Ok(None) };
        if self.dev_state.is_none() {
            self.dev_state = Some(State::new(h, "nvjpegJpegStateCreate(device)")?);
        }
        Ok(self.dev_state.as_mut())
    }
}
