//! The read planner: every wanted range is served exactly once by a request that contains it;
//! requests are sorted, disjoint and within the size limit unless a single range is larger or
//! ranges overlap.
#![no_main]
use libfuzzer_sys::fuzz_target;
use slidestream::io::plan::{decode_fuzz_input, plan_reads};

fuzz_target!(|data: &[u8]| {
    let Some((opts, wants)) = decode_fuzz_input(data) else { return };
    let plan = plan_reads(&wants, &opts);
    if let Err(e) = plan.check(&wants, &opts) {
        panic!("planner contract broken: {e}");
    }
});
