//! The fixed ring a rank's flight-recorder history lives in: [`FLIGHT_DEPTH`] records,
//! allocated once, the oldest overwritten in place by the newest (no allocation, no shifting
//! of entries); reading the history walks it oldest first.

use super::FLIGHT_DEPTH;

/// Up to [`FLIGHT_DEPTH`] records, oldest first from `head` once full.
#[derive(Debug)]
pub(super) struct Ring<T> {
    recs: Vec<T>,
    /// Where the oldest record is once the ring is full (0 until then): the next one written.
    head: usize,
}

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Ring { recs: Vec::new(), head: 0 }
    }
}

impl<T> Ring<T> {
    /// Records one more: appended while the ring fills (the first [`FLIGHT_DEPTH`] records),
    /// written over the oldest after that.
    #[inline]
    pub(super) fn push(&mut self, rec: T) {
        if self.recs.len() < FLIGHT_DEPTH {
            if self.recs.capacity() == 0 {
                self.recs.reserve_exact(FLIGHT_DEPTH);
            }
            self.recs.push(rec);
            return;
        }
        let i = self.head;
        self.head = if i + 1 == FLIGHT_DEPTH { 0 } else { i + 1 };
        if let Some(r) = self.recs.get_mut(i) {
            *r = rec;
        }
    }

    /// How many records it holds.
    pub(super) fn len(&self) -> usize {
        self.recs.len()
    }

    /// The newest record, to update.
    #[inline]
    pub(super) fn back_mut(&mut self) -> Option<&mut T> {
        let i = self.newest()?;
        self.recs.get_mut(i)
    }

    fn newest(&self) -> Option<usize> {
        match self.head {
            _ if self.recs.is_empty() => None,
            0 => Some(self.recs.len() - 1),
            h => Some(h - 1),
        }
    }

    /// The newest record for which `hit` holds, among the newest `depth`, to update.
    pub(super) fn newest_where(&mut self, depth: usize, hit: impl Fn(&T) -> bool) -> Option<&mut T> {
        let (new, old) = self.recs.split_at_mut(self.head);
        new.iter_mut().rev().chain(old.iter_mut().rev()).take(depth).find(|r| hit(r))
    }

    /// The records, oldest first.
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        let (new, old) = self.recs.split_at(self.head);
        old.iter().chain(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_in_order() {
        let mut r = Ring::default();
        assert!(r.back_mut().is_none() && r.len() == 0);
        for i in 0..FLIGHT_DEPTH + 5 {
            r.push(i);
            assert_eq!(r.back_mut().copied(), Some(i));
            let all: Vec<usize> = r.iter().copied().collect();
            let first = (i + 1).saturating_sub(FLIGHT_DEPTH);
            assert_eq!(all, (first..=i).collect::<Vec<_>>());
            assert_eq!(r.iter().next_back(), Some(&i));
        }
        if let Some(x) = r.back_mut() {
            *x = 99;
        }
        assert_eq!(r.iter().last(), Some(&99));
        assert_eq!(r.len(), FLIGHT_DEPTH);
    }
}
