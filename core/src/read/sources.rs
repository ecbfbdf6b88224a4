//! One grouping of a call's work by source, for every back end: the (slide, level) sources of
//! a batch of patches in order of first use ([`Sources`]; the CPU batch read of several slides
//! and the GPU engine's batch), and items (tiles to read or decode) grouped by the source they
//! belong to ([`group_by_source`]; one read plan, or one decode call, per source).

use std::collections::{BTreeMap, HashMap};

use crate::error::Result;

/// The sources of one call, `T` each (a slide, a level and what the back end keeps of them),
/// keyed by (slide id, level), in order of first use.
pub(crate) struct Sources<T> {
    /// The sources, in order of first use.
    pub items: Vec<T>,
    of: HashMap<(u64, u32), usize>,
}

impl<T> Sources<T> {
    /// No sources.
    pub fn new() -> Self {
        Sources { items: Vec::new(), of: HashMap::new() }
    }

    /// The index of source (`slide`, `level`), made by `make` at its first use.
    ///
    /// # Errors
    /// `make`'s error (nothing is added then).
    pub fn index(&mut self, slide: u64, level: u32, make: impl FnOnce() -> Result<T>) -> Result<usize> {
        if let Some(&i) = self.of.get(&(slide, level)) {
            return Ok(i);
        }
        self.items.push(make()?);
        self.of.insert((slide, level), self.items.len() - 1);
        Ok(self.items.len() - 1)
    }

    /// The index of a source added before.
    ///
    /// # Panics
    /// When (`slide`, `level`) was never added (a caller bug).
    pub fn get(&self, slide: u64, level: u32) -> usize {
        self.of[&(slide, level)]
    }
}

/// The indices of `items` grouped by their source (`source_of` each), sources in ascending
/// order, items in their order within each (the GPU engine's reads and CPU decodes).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn group_by_source<I, K: Ord>(items: impl IntoIterator<Item = I>, source_of: impl Fn(&I) -> K) -> BTreeMap<K, Vec<usize>> {
    let mut by: BTreeMap<K, Vec<usize>> = BTreeMap::new();
    for (i, it) in items.into_iter().enumerate() {
        by.entry(source_of(&it)).or_default().push(i);
    }
    by
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_in_order_of_first_use_and_items_grouped() {
        let mut s: Sources<&str> = Sources::new();
        assert_eq!(s.index(7, 0, || Ok("a")).unwrap(), 0);
        assert_eq!(s.index(3, 1, || Ok("b")).unwrap(), 1);
        assert_eq!(s.index(7, 0, || panic!("made once")).unwrap(), 0);
        assert!(s.index(9, 0, || Err(crate::Error::Usage("no".into()))).is_err());
        assert_eq!((s.items.len(), s.get(3, 1)), (2, 1));
        let g = group_by_source([2u32, 0, 2, 1], |&k| k);
        assert_eq!(g.into_iter().collect::<Vec<_>>(), vec![(0, vec![1]), (1, vec![3]), (2, vec![0, 2])]);
    }
}
