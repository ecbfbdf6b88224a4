//! A lane's chunk (engine layer): its tiles read (POSIX into pinned memory, or cuFile into
//! device memory), framed as every decoder gets them (JPEGTables spliced into abbreviated
//! tiles, NDPI restart runs put behind their level's header: the CPU's
//! `codec::stream::frame_jpeg`), each routed by `scheduler::lane_route` (a decoder's
//! [`TileDecoder::accepts`], the CPU, or a failed tile), and decoded through
//! [`TileDecoder::decode`]. On the host (POSIX path: framed into the slot's pinned arena) or on
//! the device (cuFile path: the `splice` and `sof_scan` kernels over the staging buffer, with a
//! copy to the host path when no device-bitstream backend works). NDPI tiles read through cuFile
//! go to the CPU workers (the `splice` kernel knows only JPEGTables); NDPI levels OpenSlide
//! synthesises by DCT scaling (1/2 .. 1/8) go to the CPU workers on both paths (no GPU decoder
//! scales).

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

use super::decode::nvjpeg::{geo_of, NvJpeg, MAX_GPU_TILE_EDGE};
use super::decode::slot::Slot;
use super::decode::{Bits, ChunkOut, NvEnv, TileDecoder};
use super::io::cufile::CuFileHandle;
use super::kernels::{arg, launch, SpliceDesc};
use super::memory::{as_bytes, StreamAlloc};
use super::queue::Miss;
use super::queue::Src;
use super::scheduler::{lane_route, Route};
use super::sys::{cu, cuda, CUdeviceptr, Res};
use super::trace;
use crate::error::Error;

/// Frame tile `m` of `src` from its stored bytes `raw` into `tmp`, as every decoder takes it
/// (`codec::stream::frame_jpeg`); the error names the tile. A tile of a DCT-scaled level is
/// left unframed (`Ok`): it goes to the CPU whatever its framing (`scheduler::lane_route`).
pub(crate) fn frame_tile(src: &Src<'_>, m: &Miss, raw: &[u8], tmp: &mut Vec<u8>) -> Result<(), Error> {
    if src.img.codec.jpeg_scale() > 1 {
        return Ok(());
    }
    crate::codec::stream::frame_jpeg(&src.img.codec, raw, tmp)
        .map_err(|msg| Error::format(&crate::read::locate::tile_location(&src.at, src.slide.source(), src.img, m.col, m.row), format!("JPEG: {msg}")))
}

/// POSIX: coalesced preads into the slot's pinned buffer, tables spliced on the host,
/// host-bitstream nvJPEG.
pub(crate) fn chunk_posix(env: &NvEnv<'_>, slot: &mut Slot, srcs: &[Src<'_>], chunk: &[Miss]) -> Res<ChunkOut> {
    let read = super::io::posix::read_chunk(&mut slot.pinned, env.counters, srcs, chunk)?;
    let t_prep = std::time::Instant::now();
    let (total, place, mut settled) = (read.total, read.place, read.failed);
    let buf = slot.pinned.as_mut_slice(total);
    let nv = NvJpeg { env, device: false };
    let prefix_len = |m: &Miss| crate::codec::stream::prefix_len(&srcs[m.src as usize].img.codec);
    let bound: usize = chunk.iter().zip(&place).filter_map(|(m, p)| p.map(|(_, len)| len + prefix_len(m) + 32)).sum();
    slot.arena.ensure(bound)?;
    let arena = slot.arena.as_mut_slice(bound);
    let mut cursor = 0usize;
    let mut items = Vec::with_capacity(chunk.len());
    let mut tmp = Vec::new();
    for (i, m) in chunk.iter().enumerate() {
        let Some((off, len)) = place[i] else { continue };
        let src = &srcs[m.src as usize];
        let tile_at = || crate::read::locate::tile_location(&src.at, src.slide.source(), src.img, m.col, m.row);
        let scale = src.img.codec.jpeg_scale();
        let framed = frame_tile(src, m, &buf[off..off + len], &mut tmp);
        let geo = match lane_route(scale, framed, || nv.accepts(src, m, &tmp)) {
            Route::Decoder(geo) => geo,
            Route::Cpu(reason) => {
                env.counters.note_cpu(if scale > 1 { format!("{}: {reason}", tile_at()) } else { reason });
                settled.push((*m, Err(None)));
                continue;
            }
            Route::Failed(e) => {
                settled.push((*m, Err(Some(e))));
                continue;
            }
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
    let tiles: Vec<(Miss, Bits, _)> = items.into_iter().map(|(m, off, len, g)| (m, Bits { ptr: arena[off..].as_ptr(), len }, g)).collect();
    env.counters.trace.since(trace::SPLICE, t_prep);
    let (done, more) = nv.decode(slot, srcs, tiles)?;
    settled.extend(more);
    Ok((done, settled))
}

/// cuFile: coalesced `cuFileRead`s into the slot's device staging buffer, tables spliced and
/// SOF geometry read by kernels, device-bitstream nvJPEG (or a copy back to the host path).
pub(crate) fn chunk_cufile(env: &NvEnv<'_>, slot: &mut Slot, handles: &[Option<Arc<CuFileHandle>>], srcs: &[Src<'_>], chunk: &[Miss]) -> Res<ChunkOut> {
    let cuda = cuda()?;
    let placed = env.io.read_chunk_cufile(env.ctx, env.counters, &mut slot.staging, handles, srcs, chunk)?;
    let mut settled = Vec::new();
    // Tables prefix of each source: SOI + the JPEGTables body (tile streams follow after
    // their own SOI); `None` sends the source's tiles to the CPU.
    let prefixes: Vec<Option<Vec<u8>>> = srcs
        .iter()
        .map(|s| match s.img.codec.jpeg_tables() {
            _ if matches!(s.img.codec.stream, crate::index::TileStream::NdpiRestartRun { .. }) => {
                env.counters.note_cpu(format!("{}: NDPI restart runs are framed on the host (cuFile tiles go to the CPU workers)", s.at));
                None
            }
            Some(t) if t.len() >= 4 && t[..2] == [0xFF, 0xD8] => {
                let body = if t.ends_with(&[0xFF, 0xD9]) { &t[..t.len() - 2] } else { t };
                Some(body.to_vec())
            }
            Some(t) if !t.is_empty() => {
                env.counters.note_cpu(format!("{}: JPEGTables does not start with SOI", s.at));
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
            Err(msg) => settled
                .push((m, Err(Some(Error::io(&crate::read::locate::tile_location(&s.at, s.slide.source(), s.img, m.col, m.row), std::io::Error::other(msg)))))),
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
        launch(env.kernels.splice, (count as u32, 1, 1), (256, 1, 1), stream, &mut [arg(&mut a_d), arg(&mut a_p), arg(&mut a_pl)], "cuLaunchKernel(splice)")?;
        d_prefixes.push(d_prefix);
    }
    let (mut a_d, mut a_n, mut a_i) = (d_descs.ptr(), n as c_int, info_dev.ptr());
    launch(
        env.kernels.sof_scan,
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
            env.counters.note_cpu(format!(
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
    let tiles = |streams: &[(*const u8, usize)]| -> Vec<_> { todo.iter().zip(streams).map(|(&(m, g), &(ptr, len))| (m, Bits { ptr, len }, g)).collect() };
    if env.decoders.device.is_some() {
        match (NvJpeg { env, device: true }).decode(slot, srcs, tiles(&streams)) {
            Ok((done, more)) => {
                settled.extend(more);
                return Ok((done, settled));
            }
            Err(e) => env.counters.note_cpu(format!("device-bitstream decode failed ({e}): streams copied to the host")),
        }
    } else {
        env.counters.note_cpu(format!("no device-bitstream nvJPEG backend ({}): cuFile-read streams copied to the host", env.decoders.device_reason));
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
    let (done, more) = (NvJpeg { env, device: false }).decode(slot, srcs, tiles(&host))?;
    settled.extend(more);
    Ok((done, settled))
}
