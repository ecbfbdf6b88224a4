//! The read planner: every wanted range is served exactly once by a request that contains it;
//! requests are sorted, disjoint and within the size limit unless a single range is larger or
//! ranges overlap.
#![no_main]
use libfuzzer_sys::fuzz_target;
use slidestream::io::plan::{plan_reads, PlanOptions, Want};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let opts = PlanOptions { max_gap_bytes: data[0] as u64 * 64, max_request_bytes: 1 + data[1] as u64 * 256 };
    let wants: Vec<Want> = data[2..]
        .chunks_exact(4)
        .enumerate()
        .map(|(id, c)| Want { id, offset: u16::from_le_bytes([c[0], c[1]]) as u64 * 16, len: c[2] as u64 * 8 + c[3] as u64 })
        .collect();
    let plan = plan_reads(&wants, &opts);
    let mut seen = vec![0u32; wants.len()];
    let mut prev_end = 0u64;
    for (k, r) in plan.requests.iter().enumerate() {
        assert!(k == 0 || r.offset >= prev_end, "requests overlap or are unsorted");
        prev_end = r.offset + r.len;
        // Each range after the first either overlaps the ranges before it (merged whatever
        // the size, so no byte is read twice) or keeps the request within the size limit.
        let mut end = 0u64;
        for (k, &(_, off, len)) in r.members.iter().enumerate() {
            assert!(k == 0 || off < end || (off + len).max(end) <= opts.max_request_bytes, "oversized multi-range request");
            end = end.max(off + len);
        }
        assert_eq!(end, r.len, "request longer than its ranges");
        for &(id, off, len) in &r.members {
            let w = wants[id];
            assert_eq!((r.offset + off, len), (w.offset, w.len));
            assert!(off + len <= r.len);
            seen[id] += 1;
        }
    }
    for (w, n) in wants.iter().zip(seen) {
        assert_eq!(n, (w.len > 0) as u32, "range {w:?} served {n} times");
    }
});
