//! Tests of the read planner.

use super::*;

fn w(id: usize, offset: u64, len: u64) -> Want {
    Want { id, offset, len }
}

#[test]
fn contiguous_ranges_merge_into_one_request() {
    let p = plan_reads(&[w(1, 100, 10), w(0, 90, 10), w(2, 110, 5)], &PlanOptions::default());
    assert_eq!(p.requests.len(), 1);
    assert_eq!(p.requests[0].offset, 90);
    assert_eq!(p.requests[0].len, 25);
    assert_eq!(p.requests[0].members, vec![(0, 0, 10), (1, 10, 10), (2, 20, 5)]);
    assert_eq!(p.amplification(), 1.0);
}

#[test]
fn large_gap_splits_and_never_spans_everything() {
    let opts = PlanOptions { max_gap_bytes: 16, max_request_bytes: 1 << 20 };
    let p = plan_reads(&[w(0, 0, 10), w(1, 20, 10), w(2, 1_000_000, 10)], &opts);
    assert_eq!(p.requests.len(), 2);
    assert_eq!((p.requests[0].offset, p.requests[0].len), (0, 30));
    assert_eq!((p.requests[1].offset, p.requests[1].len), (1_000_000, 10));
    assert!((p.amplification() - 40.0 / 30.0).abs() < 1e-12);
}

#[test]
fn max_request_size_is_respected() {
    let opts = PlanOptions { max_gap_bytes: 0, max_request_bytes: 25 };
    let p = plan_reads(&[w(0, 0, 10), w(1, 10, 10), w(2, 20, 10)], &opts);
    assert_eq!(p.requests.len(), 2);
    assert!(p.requests.iter().all(|r| r.len <= 25));
}

#[test]
fn range_inside_an_oversized_request_is_merged() {
    let opts = PlanOptions { max_gap_bytes: 0, max_request_bytes: 10 };
    let p = plan_reads(&[w(0, 0, 100), w(1, 20, 10)], &opts);
    assert_eq!(p.requests.len(), 1);
    assert_eq!(p.requests[0].members, vec![(0, 0, 100), (1, 20, 10)]);
}

#[test]
fn overlapping_range_that_extends_an_oversized_request_is_merged() {
    // Found by the `planner` fuzz target: the second range starts inside the first and ends
    // past it; with a 1-byte request limit it opened a second, overlapping request.
    let opts = PlanOptions { max_gap_bytes: 64, max_request_bytes: 1 };
    let p = plan_reads(&[w(0, 1_048_560, 2295), w(1, 1_048_560, 1956)], &opts);
    assert_eq!(p.requests.len(), 1);
    assert_eq!((p.requests[0].offset, p.requests[0].len), (1_048_560, 2295));
    assert_eq!(p.requests[0].members, vec![(1, 0, 1956), (0, 0, 2295)]);
    // A chain of ranges each one byte past the previous: one request, not one per range.
    let chain: Vec<Want> = (0..100).map(|i| w(i, i as u64, 1000)).collect();
    let p = plan_reads(&chain, &PlanOptions { max_gap_bytes: 0, max_request_bytes: 10 });
    assert_eq!(p.requests.len(), 1);
    assert_eq!(p.read_bytes(), 1099);
    // Touching (not overlapping) ranges still respect the limit.
    let p = plan_reads(&[w(0, 0, 100), w(1, 100, 100)], &PlanOptions { max_gap_bytes: 0, max_request_bytes: 150 });
    assert_eq!(p.requests.len(), 2);
}

#[test]
fn check_accepts_plans_and_rejects_broken_ones() {
    let opts = PlanOptions::default();
    let wants = [w(0, 0, 10), w(1, 10, 10), w(2, 1 << 30, 5), w(3, 7, 0)];
    let mut p = plan_reads(&wants, &opts);
    assert_eq!(p.check(&wants, &opts), Ok(()));
    p.requests[0].members.pop();
    assert!(p.check(&wants, &opts).is_err());
}

#[test]
fn read_into_yields_every_range_in_a_caller_buffer() {
    let data: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    let src = crate::io::MemSource::new(data.clone());
    let wants = [w(0, 10, 5), w(1, 12, 6), w(2, 3000, 7), w(3, 40, 0), w(4, 600, 3)];
    let plan = plan_reads(&wants, &PlanOptions { max_gap_bytes: 16, max_request_bytes: 1 << 20 });
    assert_eq!(plan.requests.len(), 3);
    assert_eq!(plan.request_starts(), vec![0, 8, 11]);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    for mode in 0..3 {
        let mut buf = vec![0u8; plan.read_bytes() as usize + 9]; // longer is fine
        let results = match mode {
            0 => plan.read_into(&src, &mut buf),
            1 => plan.read_into_in(&src, &mut buf, &pool),
            _ => plan.read_into_serial(&src, &mut buf),
        };
        let mut seen: Vec<(usize, Vec<u8>)> = plan.slices(&buf, &results).map(|(id, b)| (id, b.unwrap().to_vec())).collect();
        seen.sort();
        let want: Vec<(usize, Vec<u8>)> =
            wants.iter().filter(|x| x.len > 0).map(|x| (x.id, data[x.offset as usize..(x.offset + x.len) as usize].to_vec())).collect();
        assert_eq!(seen, want);
    }
    // A buffer too short reads nothing.
    let mut small = vec![0u8; 3];
    assert!(plan.read_into(&src, &mut small).iter().all(|r| r.as_ref().is_err_and(|e| e.kind() == io::ErrorKind::InvalidInput)));
    // A request past the end fails its own ranges only.
    let short = crate::io::MemSource::new(data[..2000].to_vec());
    let mut buf = vec![0u8; plan.read_bytes() as usize];
    let results = plan.read_into(&short, &mut buf);
    let failed: Vec<usize> = plan.slices(&buf, &results).filter(|(_, b)| b.is_err()).map(|(id, _)| id).collect();
    assert_eq!(failed, vec![2]);
}

/// Ranges of two source files (addresses 2^44 apart) are never one request.
#[test]
fn sources_are_never_joined() {
    let opts = PlanOptions { max_gap_bytes: u64::MAX, max_request_bytes: u64::MAX };
    let k = 1u64 << super::super::multi::SOURCE_SHIFT;
    let wants = [w(0, k - 10, 10), w(1, k, 10), w(2, k + 10, 10)];
    let p = plan_reads(&wants, &opts);
    assert_eq!(p.requests.len(), 2);
    assert_eq!((p.requests[0].offset, p.requests[0].len), (k - 10, 10));
    assert_eq!((p.requests[1].offset, p.requests[1].len), (k, 20));
}

/// Tile-aware planning: scattered tiles are read near where they lie, never as one span from
/// the smallest offset to the largest; every hole inside a request is at most the gap.
#[test]
fn scattered_tiles_are_read_where_they_lie() {
    let opts = PlanOptions::default();
    // 2000 tiles of 20–50 KB at pseudo-random places in a 2 GB file, some adjacent pairs.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut wants = Vec::new();
    for id in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = 20_000 + x % 30_000;
        let offset = if id % 5 == 1 { wants.last().map_or(0, |w: &Want| w.offset + w.len) } else { x % (2 << 30) };
        wants.push(w(id, offset, len));
    }
    let p = plan_reads(&wants, &opts);
    assert_eq!(p.check(&wants, &opts), Ok(()));
    let span = p.requests.last().unwrap().offset + p.requests.last().unwrap().len - p.requests[0].offset;
    assert!(p.read_bytes() < span / 10, "read {} of a {span}-byte span", p.read_bytes());
    assert!(p.requests.len() > 1000, "{} requests", p.requests.len());
    for r in &p.requests {
        let mut m = r.members.clone();
        m.sort_by_key(|&(_, off, _)| off);
        let mut end = 0;
        for &(_, off, len) in &m {
            assert!(off <= end + opts.max_gap_bytes, "a hole of {} bytes inside a request", off - end);
            end = end.max(off + len);
        }
    }
    // The holes read are what the amplification says: at most one gap per merge.
    let merges = wants.len() as u64 - p.requests.len() as u64;
    assert!(p.read_bytes() <= p.needed_bytes + merges * opts.max_gap_bytes);
}

/// Reads through the I/O pool (after a background readahead hint: [`ReadPlan::prefetch`])
/// give the same bytes and the same per-request errors as serial reads, from a file and
/// from memory.
#[test]
fn io_pool_reads_match_serial_reads() {
    let data: Vec<u8> = (0..(5u32 << 20)).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let dir = std::env::temp_dir().join(format!("slidestream-iopool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("f.bin");
    std::fs::write(&path, &data).unwrap();
    let file = crate::io::posix::FileSource::open(&path).unwrap();
    let mem = crate::io::MemSource::new(data.clone());
    // Separate requests (holes over the gap), more than HINT_MIN_REQUESTS of them; the last
    // few lie past the end of a shorter source.
    let n = crate::io::hint::HINT_MIN_REQUESTS + 40;
    let wants: Vec<Want> = (0..n).map(|i| w(i, i as u64 * 40_000 + (i as u64 % 7) * 3, 1000 + (i as u64 % 13) * 100)).collect();
    let plan = plan_reads(&wants, &PlanOptions { max_gap_bytes: 1000, max_request_bytes: 1 << 20 });
    assert_eq!(plan.requests.len(), n);
    let short = crate::io::MemSource::new(data[..(n - 3) * 40_000].to_vec());
    let depth4 = crate::io::pool::build(4).unwrap();
    let sources: [&dyn ByteSource; 3] = [&file, &mem, &short];
    for src in sources {
        let mut want_buf = vec![0u8; plan.read_bytes() as usize];
        let want_res = plan.read_into_serial(src, &mut want_buf);
        let want_ok: Vec<bool> = want_res.iter().map(|r| r.is_ok()).collect();
        assert_eq!(plan.prefetch(src), src.raw_fd().is_some());
        for mode in 0..2 {
            let mut buf = vec![0u8; plan.read_bytes() as usize];
            let res = if mode == 0 { plan.read_into(src, &mut buf) } else { plan.read_into_in(src, &mut buf, &depth4) };
            let ok: Vec<bool> = res.iter().map(|r| r.is_ok()).collect();
            assert_eq!(ok, want_ok);
            for ((a, b), (c, d)) in plan.slices(&buf, &res).zip(plan.slices(&want_buf, &want_res)) {
                assert_eq!(a, c);
                match (b, d) {
                    (Ok(x), Ok(y)) => assert_eq!(x, y),
                    (Err(x), Err(y)) => assert_eq!((x.kind(), x.to_string()), (y.kind(), y.to_string())),
                    _ => panic!("range {a}: pool and serial reads disagree"),
                }
            }
        }
    }
    assert_eq!(want_failed(&plan, &short), vec![n - 3, n - 2, n - 1]);
    // The process pool has the configured depth.
    let d = crate::io::pool::depth();
    assert_eq!(crate::io::pool::io_pool().map_or(1, |p| p.current_num_threads()), d);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn want_failed(plan: &ReadPlan, src: &dyn ByteSource) -> Vec<usize> {
    let mut buf = vec![0u8; plan.read_bytes() as usize];
    let res = plan.read_into(src, &mut buf);
    plan.slices(&buf, &res).filter(|(_, b)| b.is_err()).map(|(id, _)| id).collect()
}

#[test]
fn duplicates_and_empty_ranges() {
    let p = plan_reads(&[w(0, 50, 10), w(1, 50, 10), w(2, 0, 0)], &PlanOptions::default());
    assert_eq!(p.requests.len(), 1);
    assert_eq!(p.requests[0].len, 10);
    assert_eq!(p.requests[0].members.len(), 2);
}

/// A memory source whose "page cache" holds only bytes below `cached_below`, counting the
/// blocking reads.
#[derive(Debug)]
struct PartlyCached {
    mem: crate::io::MemSource,
    cached_below: u64,
    blocking: std::sync::atomic::AtomicUsize,
}

impl ByteSource for PartlyCached {
    fn len(&self) -> u64 {
        self.mem.len()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.blocking.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.mem.read_exact_at(buf, offset)
    }
    fn read_cached_at(&self, buf: &mut [u8], offset: u64) -> usize {
        let n = self.cached_below.saturating_sub(offset).min(buf.len() as u64) as usize;
        self.mem.read_exact_at(&mut buf[..n], offset).map_or(0, |_| n)
    }
}

/// A small plan copies the cached bytes on the calling thread and reads only the rest, from
/// where the cached bytes end, with the blocking reads (in the pool); the bytes equal a serial
/// read's whatever the split. A file's cached read returns its bytes and nothing past its end.
#[test]
fn cached_bytes_are_read_inline_and_the_rest_blocking() {
    let data: Vec<u8> = (0..200_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    let wants: Vec<Want> = (0..8).map(|i| w(i, i as u64 * 20_000 + 5, 9_000)).collect();
    let plan = plan_reads(&wants, &PlanOptions { max_gap_bytes: 100, max_request_bytes: 1 << 20 });
    assert_eq!(plan.requests.len(), 8);
    let pool = crate::io::pool::build(4).unwrap();
    let mem = crate::io::MemSource::new(data.clone());
    let mut want_buf = vec![0u8; plan.read_bytes() as usize];
    plan.read_into_serial(&mem, &mut want_buf);
    // Everything cached, nothing, and a split inside request 3 (bytes 60_005.. 69_005).
    for (cached_below, blocking) in [(u64::MAX, 0), (0, 8), (64_000, 5)] {
        let src = PartlyCached { mem: mem.clone(), cached_below, blocking: Default::default() };
        let mut buf = vec![0u8; plan.read_bytes() as usize];
        let res = plan.read_into_in(&src, &mut buf, &pool);
        assert!(res.iter().all(|r| r.is_ok()));
        assert_eq!(buf, want_buf, "cached below {cached_below}");
        assert_eq!(src.blocking.load(std::sync::atomic::Ordering::Relaxed), blocking, "cached below {cached_below}");
    }
    let dir = std::env::temp_dir().join(format!("slidestream-cached-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("f.bin");
    std::fs::write(&path, &data).unwrap();
    let file = crate::io::posix::FileSource::open(&path).unwrap();
    let mut b = vec![0u8; 5000];
    let n = file.read_cached_at(&mut b, 1000);
    assert_eq!(&b[..n], &data[1000..1000 + n]);
    assert_eq!(file.read_cached_at(&mut b, data.len() as u64 - 10), 0, "past the end: nothing");
    std::fs::remove_dir_all(&dir).unwrap();
}
