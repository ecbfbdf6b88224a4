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
    if let Err(e) = plan.check(&wants, &opts) {
        panic!("planner contract broken: {e}");
    }
});
