//! Bitstreams for nvJPEG: each tile framed as its image's `TileStream` says (JPEGTables spliced
//! into abbreviated tiles, NDPI restart runs put behind their level's header: the CPU's
//! `codec::stream::frame_jpeg`) and its geometry checked before a chunk is decoded; on the host
//! (POSIX path: framed into the slot's pinned arena, `nvjpegGetImageInfo`) or on the device
//! (cuFile path: the `splice` and `sof_scan` kernels over the staging buffer, with a copy to the
//! host path when no device-bitstream backend works). NDPI tiles read through cuFile go to the
//! CPU workers (the `splice` kernel knows only JPEGTables); NDPI levels OpenSlide synthesises
//! by DCT scaling (1/2 .. 1/8) go to the CPU workers on both paths (nvJPEG does not scale).

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

use super::nvjpeg::{geo_of, sub_of, Geo};
use super::{ChunkOut, NvEnv};
use crate::error::Error;
use crate::gpu::cuda::decode::slot::Slot;
use crate::gpu::cuda::io::cufile::CuFileHandle;
use crate::gpu::cuda::kernels::{arg, launch, SpliceDesc};
use crate::gpu::cuda::memory::{as_bytes, StreamAlloc};
use crate::gpu::cuda::queue::Miss;
use crate::gpu::cuda::queue::Src;
use crate::gpu::cuda::sys::{cu, cuda, nvjpeg, CUdeviceptr, Res};
use crate::gpu::cuda::trace;

/// Largest JPEG tile edge sent to nvJPEG (larger streams are decoded on the CPU).
pub(crate) const MAX_GPU_TILE_EDGE: u32 = crate::limits::LIMITS.gpu_tile_edge;

impl NvEnv<'_> {
    /// POSIX: coalesced preads into the slot's pinned buffer, tables spliced on the host,
    /// host-bitstream nvJPEG.
    pub(crate) fn chunk_posix(&self, slot: &mut Slot, srcs: &[Src<'_>], chunk: &[Miss]) -> Res<ChunkOut> {
        let read = crate::gpu::cuda::io::posix::read_chunk(&mut slot.pinned, self.counters, srcs, chunk)?;
        let t_prep = std::time::Instant::now();
        let (total, place, mut settled) = (read.total, read.place, read.failed);
        let buf = slot.pinned.as_mut_slice(total);
        // Splice tables, check geometry with nvJPEG's own parser.
        let nvj = nvjpeg()?;
        let prefix_len = |m: &Miss| crate::codec::stream::prefix_len(&srcs[m.src as usize].img.codec);
        let bound: usize = chunk.iter().zip(&place).filter_map(|(m, p)| p.map(|(_, len)| len + prefix_len(m) + 32)).sum();
        slot.arena.ensure(bound)?;
        let arena = slot.arena.as_mut_slice(bound);
        let mut cursor = 0usize;
        let mut items: Vec<(Miss, usize, usize, Geo)> = Vec::with_capacity(chunk.len());
        let mut tmp = Vec::new();
        for (i, m) in chunk.iter().enumerate() {
            let Some((off, len)) = place[i] else { continue };
            let Src { img, at, slide, .. } = &srcs[m.src as usize];
            let tile_at = || crate::read::locate::tile_location(at, slide.source(), img, m.col, m.row);
            if img.codec.jpeg_scale() > 1 {
                self.counters.note_cpu(format!("{}: NDPI level decoded at 1/{} (DCT scaling; nvJPEG does not scale)", tile_at(), img.codec.jpeg_scale()));
                settled.push((*m, Err(None)));
                continue;
            }
            if let Err(msg) = crate::codec::stream::frame_jpeg(&img.codec, &buf[off..off + len], &mut tmp) {
                settled.push((*m, Err(Some(Error::format(&tile_at(), format!("JPEG: {msg}"))))));
                continue;
            }
            let (mut nc, mut css) = (0 as c_int, 0 as c_int);
            let (mut w, mut h) = ([0 as c_int; 4], [0 as c_int; 4]);
            // SAFETY: slice pointer/len; out arrays of 4 as nvjpeg.h requires.
            let rc = unsafe { (nvj.nvjpegGetImageInfo)(self.decoders.host.raw(), tmp.as_ptr(), tmp.len(), &mut nc, &mut css, w.as_mut_ptr(), h.as_mut_ptr()) };
            let (vw, vh) = img.valid_tile_size(m.col, m.row);
            let geo = match (rc, sub_of(css)) {
                (0, Some(sub)) if nc == 3 && w[0] as u32 >= vw && h[0] as u32 >= vh && w[0] as u32 <= MAX_GPU_TILE_EDGE && h[0] as u32 <= MAX_GPU_TILE_EDGE => {
                    let g = geo_of(w[0], h[0], sub);
                    (g.pw[1] == w[1] && g.ph[1] == h[1] && g.pw[2] == w[2] && g.ph[2] == h[2]).then_some(g)
                }
                _ => None,
            };
            let Some(geo) = geo else {
                self.counters.note_cpu(format!(
                    "{}: nvjpegGetImageInfo returned {rc}: {nc} components, subsampling {css}, {}x{} for a {vw}x{vh} tile",
                    tile_at(),
                    w[0],
                    h[0]
                ));
                settled.push((*m, Err(None)));
                continue;
            };
            // The splice adds at most the tables and a 16-byte Adobe marker to the tile.
            if cursor + tmp.len() > arena.len() {
                settled.push((*m, Err(None)));
                continue;
            }
            arena[cursor..cursor + tmp.len()].copy_from_slice(&tmp);
            items.push((*m, cursor, tmp.len(), geo));
            cursor += tmp.len();
        }
        let streams: Vec<(*const u8, usize)> = items.iter().map(|&(_, off, len, _)| (arena[off..].as_ptr(), len)).collect();
        self.counters.trace.since(trace::SPLICE, t_prep);
        let todo: Vec<(Miss, Geo)> = items.iter().map(|&(m, _, _, g)| (m, g)).collect();
        let (done, more) = self.decode_convert(slot, false, srcs, &streams, &todo)?;
        settled.extend(more);
        Ok((done, settled))
    }

    /// cuFile: coalesced `cuFileRead`s into the slot's device staging buffer, tables spliced and
    /// SOF geometry read by kernels, device-bitstream nvJPEG (or a copy back to the host path).
    pub(crate) fn chunk_cufile(&self, slot: &mut Slot, handles: &[Option<Arc<CuFileHandle>>], srcs: &[Src<'_>], chunk: &[Miss]) -> Res<ChunkOut> {
        let cuda = cuda()?;
        let placed = self.io.read_chunk_cufile(self.ctx, self.counters, &mut slot.staging, handles, srcs, chunk)?;
        let mut settled = Vec::new();
        // Tables prefix of each source: SOI + the JPEGTables body (tile streams follow after
        // their own SOI); `None` sends the source's tiles to the CPU.
        let prefixes: Vec<Option<Vec<u8>>> = srcs
            .iter()
            .map(|s| match s.img.codec.jpeg_tables() {
                _ if matches!(s.img.codec.stream, crate::index::TileStream::NdpiRestartRun { .. }) => {
                    self.counters.note_cpu(format!("{}: NDPI restart runs are framed on the host (cuFile tiles go to the CPU workers)", s.at));
                    None
                }
                Some(t) if t.len() >= 4 && t[..2] == [0xFF, 0xD8] => {
                    let body = if t.ends_with(&[0xFF, 0xD9]) { &t[..t.len() - 2] } else { t };
                    Some(body.to_vec())
                }
                Some(t) if !t.is_empty() => {
                    self.counters.note_cpu(format!("{}: JPEGTables does not start with SOI", s.at));
                    None
                }
                _ => Some(vec![0xFF, 0xD8]),
            })
            .collect();
        // Splice descriptors grouped by source (one `splice` launch per tables prefix).
        let mut by_src: BTreeMap<u32, Vec<(Miss, CUdeviceptr, u64)>> = BTreeMap::new();
        for (id, res, len) in placed {
            let m = chunk[id];
            let s = &srcs[m.src as usize];
            match res {
                Err(msg) => settled.push((
                    m,
                    Err(Some(Error::io(&crate::read::locate::tile_location(&s.at, s.slide.source(), s.img, m.col, m.row), std::io::Error::other(msg)))),
                )),
                Ok(_) if len < 4 || prefixes[m.src as usize].is_none() => settled.push((m, Err(None))),
                Ok(src) => by_src.entry(m.src).or_default().push((m, src, len)),
            }
        }
        let mut descs = Vec::new();
        let mut groups = Vec::new();
        let mut accepted = Vec::new();
        let mut spliced_total = 0usize;
        for (si, tiles) in &by_src {
            let prefix = prefixes[*si as usize].as_deref().unwrap_or_default();
            groups.push((*si, descs.len(), tiles.len()));
            for &(m, src, len) in tiles {
                let dst_len = prefix.len() + len as usize - 2;
                descs.push(SpliceDesc { src, dst: spliced_total as u64, len: len as c_int, pad: 0 });
                accepted.push((m, spliced_total, dst_len));
                spliced_total += dst_len;
            }
        }
        if accepted.is_empty() {
            return Ok((Vec::new(), settled));
        }
        slot.spliced.ensure(spliced_total, None)?;
        for d in &mut descs {
            d.dst += slot.spliced.ptr();
        }
        let stream = slot.stream.raw();
        let d_descs = StreamAlloc::upload(as_bytes(&descs), stream)?;
        let n = descs.len();
        let info_dev = StreamAlloc::new(n * 8 * 4, stream)?;
        let mut d_prefixes = Vec::with_capacity(groups.len());
        for &(si, first, count) in &groups {
            let prefix = prefixes[si as usize].as_deref().unwrap_or_default();
            let d_prefix = StreamAlloc::upload(prefix, stream)?;
            let (mut a_d, mut a_p, mut a_pl) = (d_descs.ptr() + (first * size_of::<SpliceDesc>()) as u64, d_prefix.ptr(), prefix.len() as c_int);
            launch(
                self.kernels.splice,
                (count as u32, 1, 1),
                (256, 1, 1),
                stream,
                &mut [arg(&mut a_d), arg(&mut a_p), arg(&mut a_pl)],
                "cuLaunchKernel(splice)",
            )?;
            d_prefixes.push(d_prefix);
        }
        let (mut a_d, mut a_n, mut a_i) = (d_descs.ptr(), n as c_int, info_dev.ptr());
        launch(
            self.kernels.sof_scan,
            ((n as u32).div_ceil(64), 1, 1),
            (64, 1, 1),
            stream,
            &mut [arg(&mut a_d), arg(&mut a_n), arg(&mut a_i)],
            "cuLaunchKernel(sof_scan)",
        )?;
        let mut info = vec![0 as c_int; n * 8];
        // SAFETY: n*8 ints on both sides; synchronised below before `info` is read.
        cu(unsafe { cuda.cuMemcpyDtoHAsync(info.as_mut_ptr() as *mut c_void, info_dev.ptr(), n * 32, stream) }, "cuMemcpyDtoHAsync")?;
        // Freed stream-ordered after their last use.
        drop((d_descs, d_prefixes, info_dev));
        slot.stream.sync()?;
        let mut todo = Vec::new();
        let mut streams = Vec::new();
        for (k, &(m, off, len)) in accepted.iter().enumerate() {
            let o = &info[k * 8..k * 8 + 8];
            let at = &srcs[m.src as usize].at;
            let (vw, vh) = srcs[m.src as usize].img.valid_tile_size(m.col, m.row);
            let (hgt, wid, nc) = (o[1], o[2], o[3]);
            let hv0 = o[4];
            let sub = (hv0 >> 4, hv0 & 15);
            let ok = o[0] == 1
                && nc == 3
                && o[5] == 0x11
                && o[6] == 0x11
                && matches!(sub, (1, 1) | (2, 1) | (2, 2) | (1, 2))
                && wid as u32 >= vw
                && hgt as u32 >= vh
                && wid as u32 <= MAX_GPU_TILE_EDGE
                && hgt as u32 <= MAX_GPU_TILE_EDGE;
            if o[0] == 3 {
                settled.push((m, Err(Some(Error::format(&at.clone().with_tile(m.col, m.row), "JPEG: not a JPEG stream (no SOI marker)")))));
            } else if !ok {
                self.counters.note_cpu(format!(
                    "{}: SOF status {}, {nc} components, {wid}x{hgt}, sampling {:#x}/{:#x}/{:#x}",
                    at.clone().with_tile(m.col, m.row),
                    o[0],
                    o[4],
                    o[5],
                    o[6]
                ));
                settled.push((m, Err(None)));
            } else {
                todo.push((m, geo_of(wid, hgt, sub)));
                streams.push(((slot.spliced.ptr() + off as u64) as usize as *const u8, len));
            }
        }
        if self.decoders.device.is_some() {
            match self.decode_convert(slot, true, srcs, &streams, &todo) {
                Ok((done, more)) => {
                    settled.extend(more);
                    return Ok((done, settled));
                }
                Err(e) => self.counters.note_cpu(format!("device-bitstream decode failed ({e}): streams copied to the host")),
            }
        } else {
            self.counters.note_cpu(format!("no device-bitstream nvJPEG backend ({}): cuFile-read streams copied to the host", self.decoders.device_reason));
        }
        // No device-bitstream decoder: copy the spliced streams to pinned memory, decode as POSIX.
        slot.pinned.ensure(spliced_total)?;
        // SAFETY: spliced_total bytes on both sides; on the slot's own stream (a synchronous
        // copy would run on the legacy default stream and wait for a model's work there), which
        // is synchronised before the pinned copy is read.
        cu(unsafe { cuda.cuMemcpyDtoHAsync(slot.pinned.ptr() as *mut c_void, slot.spliced.ptr(), spliced_total, slot.stream.raw()) }, "cuMemcpyDtoHAsync")?;
        slot.stream.sync()?;
        let host: Vec<(*const u8, usize)> = streams
            .iter()
            .map(|&(p, len)| {
                let off = p as usize - slot.spliced.ptr() as usize;
                // SAFETY: inside the pinned buffer of spliced_total bytes.
                (unsafe { slot.pinned.ptr().add(off) } as *const u8, len)
            })
            .collect();
        let (done, more) = self.decode_convert(slot, false, srcs, &host, &todo)?;
        settled.extend(more);
        Ok((done, settled))
    }
}
