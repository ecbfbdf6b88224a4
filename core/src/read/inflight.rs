//! The process-wide bound on the bytes CPU reads hold at once (`SLIDESTREAM_READ_PROCESS_BYTES`).
//!
//! `SLIDESTREAM_READ_WORKING_BYTES` bounds one call: each call reads and decodes its tiles in
//! waves of at most that many charged bytes ([`super::waves`]). Calls made at once from many
//! threads (a thread pool of `read_region`s, DataLoader threads, Dask threads) each hold up to
//! one wave, so without this bound a process holds up to `threads × working set`. With it set
//! (a number of bytes, 0 = no bound, the default), every wave first takes its charge from one
//! process-wide budget and gives it back when it has been placed: a wave waits while the
//! others hold too much, so the waves of all calls together stay within the bound.
//!
//! Rules that keep it free of deadlock and starvation:
//! * a wave whose charge exceeds the whole budget takes the whole budget (it runs alone);
//! * a wave always proceeds when nothing else is held, so some wave can always run;
//! * waves started on the decode pool's own threads (rayon workers: a read made from inside a
//!   parallel read) are not counted, since they may be what a waiting wave's holder needs;
//! * the wait runs the process's interrupt check every 100 ms ([`crate::interrupt`]), so
//!   Ctrl-C reaches a waiting call.
//!
//! The setting is read once per process, at the first wave ([`crate::config::Spec::per_process`]).

use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use crate::error::Result;

/// The budget: its capacity (0 = unbounded) and the bytes held now.
struct Budget {
    capacity: u64,
    held: Mutex<u64>,
    freed: Condvar,
}

static BUDGET: OnceLock<Budget> = OnceLock::new();

/// How long a waiting wave sleeps between two interrupt checks.
const CHECK_EVERY: Duration = Duration::from_millis(100);

fn budget() -> Result<&'static Budget> {
    if let Some(b) = BUDGET.get() {
        return Ok(b);
    }
    let capacity = crate::config::consume(&["SLIDESTREAM_READ_PROCESS_BYTES"])?.read_process_bytes;
    Ok(BUDGET.get_or_init(|| Budget { capacity, held: Mutex::new(0), freed: Condvar::new() }))
}

/// Bytes of a budget held by one wave; given back on drop.
#[must_use = "the bytes are given back when the guard is dropped"]
pub(crate) struct Held {
    budget: Option<&'static Budget>,
    bytes: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(b) = self.budget {
            let mut held = b.held.lock().unwrap_or_else(|p| p.into_inner());
            *held -= self.bytes;
            b.freed.notify_all();
        }
    }
}

impl Budget {
    /// Take `charge` bytes, waiting while others hold too much (module docs).
    fn hold(&'static self, charge: u64) -> Result<Held> {
        if self.capacity == 0 || charge == 0 || rayon::current_thread_index().is_some() {
            return Ok(Held { budget: None, bytes: 0 });
        }
        let want = charge.min(self.capacity);
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        while *held > 0 && *held + want > self.capacity {
            held = self.freed.wait_timeout(held, CHECK_EVERY).unwrap_or_else(|p| p.into_inner()).0;
            if *held > 0 && *held + want > self.capacity {
                drop(held);
                crate::interrupt::check()?;
                held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            }
        }
        *held += want;
        Ok(Held { budget: Some(self), bytes: want })
    }
}

/// Take `charge` bytes (a wave's [`super::waves::tile_charge`] sum) from the process-wide
/// budget, waiting while other waves hold too much (module docs). Returns at once when the
/// budget is unbounded or the caller is a decode-pool thread.
///
/// # Errors
/// [`crate::Error::Config`] when `SLIDESTREAM_READ_PROCESS_BYTES` does not parse (first call);
/// [`crate::Error::Interrupted`] when the interrupt check fires while waiting.
pub(crate) fn hold(charge: u64) -> Result<Held> {
    budget()?.hold(charge)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    fn leaked(capacity: u64) -> &'static Budget {
        Box::leak(Box::new(Budget { capacity, held: Mutex::new(0), freed: Condvar::new() }))
    }

    #[test]
    fn waves_of_many_threads_never_hold_more_than_the_budget_together() {
        let b = leaked(100);
        let now = Arc::new(AtomicU64::new(0));
        let peak = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (now, peak) = (now.clone(), peak.clone());
                std::thread::spawn(move || {
                    for k in 0..50u64 {
                        let charge = 10 + (t * 7 + k * 13) % 50;
                        let _h = b.hold(charge).unwrap();
                        let n = now.fetch_add(charge, Ordering::SeqCst) + charge;
                        peak.fetch_max(n, Ordering::SeqCst);
                        std::thread::yield_now();
                        now.fetch_sub(charge, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let p = peak.load(Ordering::SeqCst);
        assert!((10..=100).contains(&p), "peak {p} of a budget of 100");
        assert_eq!(*b.held.lock().unwrap(), 0, "everything given back");
    }

    #[test]
    fn an_oversized_wave_runs_alone_and_an_unbounded_budget_never_waits() {
        let b = leaked(100);
        let big = b.hold(1000).unwrap();
        assert_eq!(*b.held.lock().unwrap(), 100, "capped at the whole budget");
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _h = b.hold(1).unwrap();
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "a second wave waits while the budget is held");
        drop(big);
        rx.recv_timeout(Duration::from_secs(30)).expect("the waiting wave runs once the budget is given back");
        waiter.join().unwrap();
        let free = leaked(0);
        let _a = free.hold(u64::MAX).unwrap();
        let _b = free.hold(u64::MAX).unwrap();
        assert_eq!(*free.held.lock().unwrap(), 0, "0 = no bound: nothing counted");
    }

    #[test]
    fn a_waiting_wave_is_interrupted() {
        let b = leaked(10);
        let _all = b.hold(10).unwrap();
        let e = std::thread::spawn(move || {
            crate::interrupt::testing::interrupt_this_thread(true);
            let r = b.hold(5).map(|_| ());
            crate::interrupt::testing::interrupt_this_thread(false);
            r
        })
        .join()
        .unwrap()
        .unwrap_err();
        assert_eq!(e.kind_name(), "interrupted");
        assert_eq!(*b.held.lock().unwrap(), 10, "the interrupted wave took nothing");
    }
}
