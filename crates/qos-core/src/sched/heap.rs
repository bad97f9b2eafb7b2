//! An indexed binary min-heap: the priority queue behind [`super::rate::RateControl`]
//! (flows keyed by NDT, thesis §4.2.2 "find the minimum NDT from all valid flows") and
//! [`super::virtual_clock::VirtualClock`] (flows keyed by their head packet's stamp,
//! Nagar §3.3).
//!
//! Items are dense indices (a [`super::FlowId`]'s number). Besides push and pop it can
//! change or remove any item's key in O(log n), which the schedulers need when a flow's
//! IDT changes or a flow is removed while backlogged. Only items currently in the heap
//! cost heap work, so a decision is O(log n) in the number of *valid* (backlogged) flows.

/// Marks an index that is not in the heap.
const ABSENT: u32 = u32::MAX;

/// A binary min-heap of `(key, index)` with O(1) lookup of an index's position.
#[derive(Debug, Clone)]
pub(crate) struct IndexedHeap<K> {
    /// Heap-ordered entries.
    heap: Vec<(K, u32)>,
    /// `pos[index]` is the entry's place in `heap`, or [`ABSENT`].
    pos: Vec<u32>,
}

impl<K> Default for IndexedHeap<K> {
    fn default() -> Self {
        IndexedHeap {
            heap: Vec::new(),
            pos: Vec::new(),
        }
    }
}

impl<K: Ord + Copy> IndexedHeap<K> {
    /// Number of items in the heap.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether `index` is in the heap.
    #[cfg(test)]
    pub(crate) fn contains(&self, index: u32) -> bool {
        self.pos.get(index as usize).is_some_and(|&p| p != ABSENT)
    }

    /// The smallest key and its index.
    pub(crate) fn peek(&self) -> Option<(K, u32)> {
        self.heap.first().copied()
    }

    /// Inserts `index` with `key`, or changes its key if it is already in.
    pub(crate) fn set(&mut self, index: u32, key: K) {
        let i = index as usize;
        if i >= self.pos.len() {
            self.pos.resize(i + 1, ABSENT);
        }
        let p = self.pos[i];
        if p == ABSENT {
            self.heap.push((key, index));
            let at = self.heap.len() - 1;
            self.pos[i] = at as u32;
            self.sift_up(at);
        } else {
            let p = p as usize;
            let old = self.heap[p].0;
            self.heap[p].0 = key;
            if key < old {
                self.sift_up(p);
            } else {
                self.sift_down(p);
            }
        }
    }

    /// Removes `index` if present and returns its key.
    pub(crate) fn remove(&mut self, index: u32) -> Option<K> {
        let p = *self.pos.get(index as usize)?;
        if p == ABSENT {
            return None;
        }
        let p = p as usize;
        let last = self.heap.len() - 1;
        self.swap(p, last);
        let (key, idx) = self.heap.pop().expect("heap holds the entry being removed");
        self.pos[idx as usize] = ABSENT;
        if p < self.heap.len() {
            // The moved entry may need to go either way.
            self.sift_up(p);
            self.sift_down(p);
        }
        Some(key)
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a].1 as usize] = a as u32;
        self.pos[self.heap[b].1 as usize] = b as u32;
    }

    /// Moves the entry at `at` up to its place, shifting parents down into the hole.
    fn sift_up(&mut self, mut at: usize) {
        let entry = self.heap[at];
        while at > 0 {
            let parent = (at - 1) / 2;
            if entry.0 < self.heap[parent].0 {
                self.heap[at] = self.heap[parent];
                self.pos[self.heap[at].1 as usize] = at as u32;
                at = parent;
            } else {
                break;
            }
        }
        self.heap[at] = entry;
        self.pos[entry.1 as usize] = at as u32;
    }

    /// Moves the entry at `at` down to its place, shifting children up into the hole.
    fn sift_down(&mut self, mut at: usize) {
        let n = self.heap.len();
        let entry = self.heap[at];
        loop {
            let l = 2 * at + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let child = if r < n && self.heap[r].0 < self.heap[l].0 {
                r
            } else {
                l
            };
            if self.heap[child].0 < entry.0 {
                self.heap[at] = self.heap[child];
                self.pos[self.heap[at].1 as usize] = at as u32;
                at = child;
            } else {
                break;
            }
        }
        self.heap[at] = entry;
        self.pos[entry.1 as usize] = at as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any sequence of sets and removals leaves the heap yielding the same minimum
        /// as a plain map of the live keys.
        #[test]
        fn heap_agrees_with_a_plain_map(ops in proptest::collection::vec((0u32..40, 0u64..100, any::<bool>()), 0..300)) {
            let mut h = IndexedHeap::default();
            let mut model = std::collections::BTreeMap::new();
            for (idx, key, remove) in ops {
                if remove {
                    prop_assert_eq!(h.remove(idx), model.remove(&idx));
                } else {
                    h.set(idx, (key, idx));
                    model.insert(idx, (key, idx));
                }
                prop_assert_eq!(h.len(), model.len());
                let min = model.values().min().copied();
                prop_assert_eq!(h.peek().map(|(k, _)| k), min);
                for i in 0..40 {
                    prop_assert_eq!(h.contains(i), model.contains_key(&i));
                }
            }
        }
    }
}
