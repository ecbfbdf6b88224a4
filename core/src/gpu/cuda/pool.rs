//! A pool of reusable resources (decode lanes, CPU workers' streams and pinned buffers) that
//! makes items on demand up to a limit and hands them out in guards that put them back when
//! dropped, a panic included, so the pool never shrinks.

use std::ops::{Deref, DerefMut};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Free items and the number made (free + handed out).
struct State<T> {
    free: Vec<T>,
    made: usize,
}

/// A pool of `T`. Items are made by the caller's `make` (outside the pool's lock) and never
/// destroyed while the pool lives; dropping the pool drops the free items.
pub(crate) struct Pool<T> {
    state: Mutex<State<T>>,
    returned: Condvar,
}

/// What [`Pool::take`] does when no item is free and `limit` items exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Wait until one is returned.
    Yes,
    /// Return `None`.
    No,
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool { state: Mutex::new(State { free: Vec::new(), made: 0 }), returned: Condvar::new() }
    }
}

impl<T> Pool<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A free item; else a new one from `make` while fewer than `limit` exist; else, with
    /// [`Wait::Yes`], the next one returned. `None` only with [`Wait::No`]. When `make` fails,
    /// the item is not counted, a waiter is woken (it may make it, or report the error itself)
    /// and the error is returned.
    pub(crate) fn take<E>(&self, limit: usize, wait: Wait, make: impl FnOnce() -> Result<T, E>) -> Option<Result<Pooled<'_, T>, E>> {
        let mut g = self.lock();
        loop {
            if let Some(item) = g.free.pop() {
                return Some(Ok(Pooled { pool: self, item: Some(item) }));
            }
            if g.made < limit {
                g.made += 1;
                drop(g);
                return Some(match make() {
                    Ok(item) => Ok(Pooled { pool: self, item: Some(item) }),
                    Err(e) => {
                        self.lock().made -= 1;
                        self.returned.notify_one();
                        Err(e)
                    }
                });
            }
            if wait == Wait::No {
                return None;
            }
            g = self.returned.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Add `item`, made outside the pool (the background warm-up), as a free item when fewer
    /// than `limit` exist; else hand it back (`Err`) for the caller to drop.
    pub(crate) fn offer(&self, limit: usize, item: T) -> Result<(), T> {
        let mut g = self.lock();
        if g.made >= limit {
            return Err(item);
        }
        g.made += 1;
        g.free.push(item);
        drop(g);
        self.returned.notify_one();
        Ok(())
    }

    /// Items made so far (free and handed out).
    /// A free item for which `pred` holds, without waiting or making one (`None`: none free).
    pub(crate) fn take_matching(&self, pred: impl Fn(&T) -> bool) -> Option<Pooled<'_, T>> {
        let mut g = self.lock();
        let k = g.free.iter().position(pred)?;
        let item = g.free.swap_remove(k);
        Some(Pooled { pool: self, item: Some(item) })
    }

    pub(crate) fn made(&self) -> usize {
        self.lock().made
    }

    /// Items free now.
    #[cfg(test)]
    pub(crate) fn free(&self) -> usize {
        self.lock().free.len()
    }

    fn give(&self, item: T) {
        self.lock().free.push(item);
        self.returned.notify_one();
    }
}

/// An item taken from a [`Pool`], put back when dropped (also while unwinding from a panic).
pub(crate) struct Pooled<'a, T> {
    pool: &'a Pool<T>,
    item: Option<T>,
}

impl<T> Deref for Pooled<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.item.as_ref().expect("present until drop")
    }
}

impl<T> DerefMut for Pooled<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.item.as_mut().expect("present until drop")
    }
}

impl<T> Drop for Pooled<'_, T> {
    fn drop(&mut self) {
        if let Some(item) = self.item.take() {
            self.pool.give(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(v: u32) -> impl FnOnce() -> Result<u32, String> {
        move || Ok(v)
    }

    #[test]
    fn items_are_made_up_to_the_limit_and_returned_on_drop() {
        let pool: Pool<u32> = Pool::default();
        let a = pool.take(2, Wait::No, ok(1)).expect("made").expect("ok");
        let b = pool.take(2, Wait::No, ok(2)).expect("made").expect("ok");
        assert_eq!((*a, *b), (1, 2));
        assert!(pool.take(2, Wait::No, ok(3)).is_none(), "limit reached, nothing free");
        drop(a);
        assert_eq!((pool.made(), pool.free()), (2, 1));
        // The returned item is reused, not a new one made.
        let c = pool.take(2, Wait::No, ok(9)).expect("free").expect("ok");
        assert_eq!(*c, 1);
        drop((b, c));
        assert_eq!((pool.made(), pool.free()), (2, 2));
    }

    #[test]
    fn an_item_comes_back_when_its_holder_panics() {
        let pool: Pool<Vec<u8>> = Pool::default();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut v = pool.take(1, Wait::No, || Ok::<_, ()>(vec![7u8])).expect("made").expect("ok");
            v.push(8);
            panic!("holder fails");
        }));
        assert!(r.is_err());
        assert_eq!((pool.made(), pool.free()), (1, 1));
        let v = pool.take(1, Wait::No, || Ok::<_, ()>(Vec::new())).expect("free").expect("ok");
        assert_eq!(*v, vec![7, 8], "the same item, as the holder left it");
    }

    #[test]
    fn a_failed_make_is_not_counted() {
        let pool: Pool<u32> = Pool::default();
        let e = pool.take(1, Wait::No, || Err::<u32, _>("no stream")).expect("tried");
        assert_eq!(e.err(), Some("no stream"));
        assert_eq!(pool.made(), 0);
        assert_eq!(*pool.take(1, Wait::No, ok(5)).expect("made").expect("ok"), 5);
    }

    #[test]
    fn an_offered_item_joins_up_to_the_limit_and_wakes_a_waiter() {
        let pool: Pool<u32> = Pool::default();
        let held = pool.take(2, Wait::No, ok(1)).expect("made").expect("ok");
        assert_eq!(pool.offer(2, 7), Ok(()));
        assert_eq!((pool.made(), pool.free()), (2, 1));
        assert_eq!(pool.offer(2, 8), Err(8), "the limit counts items handed out");
        // Taking with a limit of 0 takes only free items, never makes one.
        assert_eq!(*pool.take(0, Wait::No, ok(9)).expect("free").expect("ok"), 7);
        let a = pool.take(2, Wait::No, ok(9)).expect("free").expect("ok");
        assert!(pool.take(0, Wait::No, ok(9)).is_none());
        drop((held, a));
        let pool: Pool<u32> = Pool::default();
        let held = pool.take(1, Wait::No, ok(1)).expect("made").expect("ok");
        std::thread::scope(|s| {
            let waiter = s.spawn(|| *pool.take(1, Wait::Yes, ok(0)).expect("waits").expect("ok"));
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert_eq!(pool.offer(2, 5), Ok(()));
            assert_eq!(waiter.join().expect("no panic"), 5);
        });
        drop(held);
    }

    #[test]
    fn a_waiter_gets_the_item_another_thread_returns() {
        let pool: Pool<u32> = Pool::default();
        let held = pool.take(1, Wait::No, ok(42)).expect("made").expect("ok");
        std::thread::scope(|s| {
            let waiter = s.spawn(|| *pool.take(1, Wait::Yes, ok(0)).expect("waits").expect("ok"));
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(held);
            assert_eq!(waiter.join().expect("no panic"), 42);
        });
        assert_eq!((pool.made(), pool.free()), (1, 1));
    }

    #[test]
    fn take_matching_takes_only_a_free_matching_item_and_returns_it() {
        let pool: Pool<u32> = Pool::default();
        for v in [1, 2, 3] {
            pool.offer(3, v).expect("under the limit");
        }
        let two = pool.take_matching(|&v| v == 2).expect("free");
        assert_eq!(*two, 2);
        assert!(pool.take_matching(|&v| v == 2).is_none(), "taken already");
        assert!(pool.take_matching(|&v| v > 5).is_none());
        drop(two);
        assert_eq!(pool.free(), 3);
        assert_eq!(pool.made(), 3, "taking a free item makes none");
    }
}
