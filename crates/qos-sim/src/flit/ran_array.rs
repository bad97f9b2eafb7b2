//! Knuth's lagged Fibonacci generator `ran_array` (The Art of Computer Programming,
//! vol. 2, 3rd edition, §3.6, with its 2002 initialisation `ran_start`), the generator
//! BookSim2 draws every random number from. Used here for one thing: BookSim2's
//! `randperm` traffic, whose permutation BookSim2 draws from this generator seeded with
//! `perm_seed`, so that a scenario naming the seed gets BookSim2's very permutation.
//!
//! The generator: X(n) = X(n − 100) − X(n − 37) mod 2^30. `ran_array` fills a buffer
//! of at least 100 numbers from the state and leaves the state advanced; BookSim2's
//! `ran_arr_next` reads the first 100 numbers of each buffer of 1,009 (Knuth's
//! recommended quality level) and then fills the next.

/// The long lag.
const KK: usize = 100;
/// The short lag.
const LL: usize = 37;
/// The modulus.
const MM: i64 = 1 << 30;
/// Numbers generated per buffer, of which the first [`KK`] are used.
const QUALITY: usize = 1009;
/// Squarings of the seed polynomial that separate the streams of two seeds.
const TT: u32 = 70;

fn mod_diff(x: i64, y: i64) -> i64 {
    (x - y) & (MM - 1)
}

/// The generator's state and the buffer BookSim2 reads from.
pub struct RanArray {
    state: [i64; KK],
    buf: Vec<i64>,
    /// The next number of `buf` to hand out; [`KK`] when a new buffer is due.
    pos: usize,
}

impl RanArray {
    /// The generator as Knuth's `ran_start(seed)` leaves it.
    pub fn new(seed: i64) -> RanArray {
        let mut x = [0i64; KK + KK - 1];
        // Bootstrap the buffer with the seed shifted cyclically, x[1] alone odd.
        let mut ss = (seed + 2) & (MM - 2);
        for v in x.iter_mut().take(KK) {
            *v = ss;
            ss <<= 1;
            if ss >= MM {
                ss -= MM - 2;
            }
        }
        x[1] += 1;
        // Raise the polynomial to the seed's power: square, and multiply by z at each
        // one bit of the seed, then TT more squarings.
        let mut ss = seed & (MM - 1);
        let mut t = TT - 1;
        while t > 0 {
            for j in (1..KK).rev() {
                x[j + j] = x[j];
                x[j + j - 1] = 0;
            }
            for j in (KK..=KK + KK - 2).rev() {
                x[j - (KK - LL)] = mod_diff(x[j - (KK - LL)], x[j]);
                x[j - KK] = mod_diff(x[j - KK], x[j]);
            }
            if ss & 1 == 1 {
                for j in (1..=KK).rev() {
                    x[j] = x[j - 1];
                }
                x[0] = x[KK];
                x[LL] = mod_diff(x[LL], x[KK]);
            }
            if ss != 0 {
                ss >>= 1;
            } else {
                t -= 1;
            }
        }
        let mut state = [0i64; KK];
        state[KK - LL..].copy_from_slice(&x[..LL]);
        state[..KK - LL].copy_from_slice(&x[LL..KK]);
        let mut g = RanArray {
            state,
            buf: vec![0; QUALITY],
            pos: KK,
        };
        // Warm up.
        for _ in 0..10 {
            g.fill(&mut x);
        }
        g
    }

    /// Knuth's `ran_array(aa, aa.len())`: `aa.len()` (at least [`KK`]) new numbers.
    fn fill(&mut self, aa: &mut [i64]) {
        let n = aa.len();
        debug_assert!(n >= KK);
        aa[..KK].copy_from_slice(&self.state);
        for j in KK..n {
            aa[j] = mod_diff(aa[j - KK], aa[j - LL]);
        }
        let mut j = n;
        for i in 0..LL {
            self.state[i] = mod_diff(aa[j - KK], aa[j - LL]);
            j += 1;
        }
        for i in LL..KK {
            self.state[i] = mod_diff(aa[j - KK], self.state[i - LL]);
            j += 1;
        }
    }

    /// BookSim2's `ran_next`: the next number, 0 to 2^30 − 1.
    pub fn next_long(&mut self) -> i64 {
        if self.pos == KK {
            let mut buf = std::mem::take(&mut self.buf);
            self.fill(&mut buf);
            self.buf = buf;
            self.pos = 0;
        }
        let v = self.buf[self.pos];
        self.pos += 1;
        v
    }

    /// BookSim2's `RandomInt(max)`: a number from 0 to `max` inclusive.
    pub fn int(&mut self, max: i64) -> i64 {
        self.next_long() % (max + 1)
    }
}

/// BookSim2's `RandomPermutationTrafficPattern` of `nodes` nodes for `perm_seed`: entry
/// j is the destination of node j. Node i (in order) takes the free entry of rank
/// `RandomInt(nodes − 1 − i)` among those still free. BookSim2 finds that entry by a
/// scan, O(nodes²) in all; here a Fenwick tree over the free entries finds it in
/// O(log nodes), the same entry.
pub fn booksim2_permutation(nodes: u32, perm_seed: i64) -> Vec<u32> {
    let mut g = RanArray::new(perm_seed);
    let n = nodes as usize;
    let mut free = FreeEntries::new(n);
    let mut dest = vec![u32::MAX; n];
    for i in 0..nodes {
        let rank = g.int((nodes - 1 - i) as i64) as usize;
        let j = free.take_nth(rank);
        dest[j] = i;
    }
    dest
}

/// The free entries of `0..n` as a Fenwick tree of counts (1-based: `tree[i]` counts
/// the free entries of `(i − lowbit(i), i]`), for the free entry of a given rank.
struct FreeEntries {
    tree: Vec<u32>,
    /// The highest power of two not above `n`.
    top: usize,
}

impl FreeEntries {
    /// All of `0..n` free.
    fn new(n: usize) -> FreeEntries {
        let mut tree = vec![0u32; n + 1];
        for i in 1..=n {
            tree[i] += 1;
            let up = i + (i & i.wrapping_neg());
            if up <= n {
                tree[up] += tree[i];
            }
        }
        let top = if n == 0 { 0 } else { 1 << n.ilog2() };
        FreeEntries { tree, top }
    }

    /// The free entry of rank `rank` (0 = the lowest), marked taken.
    fn take_nth(&mut self, rank: usize) -> usize {
        let n = self.tree.len() - 1;
        // Descend: the largest position whose prefix holds at most `rank` free
        // entries; the entry sought is the next one.
        let (mut pos, mut left) = (0usize, rank as u32);
        let mut step = self.top;
        while step > 0 {
            let next = pos + step;
            if next <= n && self.tree[next] <= left {
                pos = next;
                left -= self.tree[next];
            }
            step >>= 1;
        }
        let j = pos + 1;
        assert!(j <= n, "a free entry of every rank below the free count");
        let mut i = j;
        while i <= n {
            self.tree[i] -= 1;
            i += i & i.wrapping_neg();
        }
        j - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Knuth's own check of the generator (the `main` of his rng.c): seeded with
    /// 310952, the first number of the 2,010th buffer of 1,009 is 995235265, and so is that of
    /// the 1,010th buffer of 2,009 (both the 2,027,082nd number).
    #[test]
    fn knuths_check_values() {
        for (buffers, len) in [(2010, 1009), (1010, 2009)] {
            let mut g = RanArray::new(310952);
            let mut a = vec![0; len];
            for _ in 0..buffers {
                g.fill(&mut a);
            }
            assert_eq!(a[0], 995235265, "{buffers} buffers of {len}");
        }
    }

    /// BookSim2's scan for the free entry of each rank, as its `traffic.cpp` writes it.
    fn by_scan(nodes: u32, perm_seed: i64) -> Vec<u32> {
        let mut g = RanArray::new(perm_seed);
        let mut dest = vec![u32::MAX; nodes as usize];
        for i in 0..nodes {
            let rank = g.int((nodes - 1 - i) as i64) as usize;
            let (mut j, mut cnt) = (0, 0);
            while cnt < rank || dest[j] != u32::MAX {
                if dest[j] == u32::MAX {
                    cnt += 1;
                }
                j += 1;
            }
            dest[j] = i;
        }
        dest
    }

    /// The tree finds the entry BookSim2's scan finds, for sizes that are and are not
    /// powers of two.
    #[test]
    fn the_tree_takes_the_entry_booksim2s_scan_takes() {
        for nodes in [1, 2, 3, 5, 16, 63, 64, 65, 100, 1000, 4096] {
            for seed in [0, 1, 5, 123] {
                assert_eq!(
                    booksim2_permutation(nodes, seed),
                    by_scan(nodes, seed),
                    "{nodes} nodes, perm_seed {seed}"
                );
            }
        }
    }

    /// Every node is the destination of exactly one node, and seeds differ.
    #[test]
    fn permutations_are_permutations() {
        for nodes in [1, 2, 16, 64, 100] {
            let mut p = booksim2_permutation(nodes, 3);
            p.sort_unstable();
            assert_eq!(p, (0..nodes).collect::<Vec<_>>());
        }
        assert_ne!(booksim2_permutation(64, 1), booksim2_permutation(64, 2));
    }

    /// BookSim2's own permutations of 64 nodes: the destination of each source in the
    /// packets a traced BookSim2 (28f43299, with the G lines of the shipped traces)
    /// generated on `scenarios/flit/booksim/mesh8.cfg traffic=randperm perm_seed=S
    /// injection_rate=0.01 sample_period=1000 max_samples=2`, every source seen.
    #[test]
    fn booksim2s_permutations_of_64_nodes() {
        let booksim2: [(i64, [u32; 64]); 3] = [
            (
                5,
                [
                    11, 17, 24, 63, 55, 6, 25, 16, 21, 56, 15, 12, 26, 28, 50, 4, 27, 40, 13, 43,
                    31, 36, 5, 30, 7, 54, 3, 1, 9, 29, 8, 59, 14, 34, 52, 0, 58, 62, 38, 45, 41,
                    23, 49, 35, 19, 32, 51, 37, 42, 10, 39, 53, 57, 2, 61, 18, 46, 20, 47, 60, 44,
                    33, 48, 22,
                ],
            ),
            (
                0,
                [
                    54, 30, 25, 6, 57, 53, 17, 9, 40, 49, 22, 24, 19, 35, 20, 61, 12, 7, 5, 46, 44,
                    33, 51, 15, 45, 16, 36, 1, 4, 59, 32, 48, 62, 31, 38, 28, 0, 34, 8, 63, 41, 37,
                    39, 3, 14, 18, 43, 58, 56, 60, 55, 13, 52, 10, 11, 26, 2, 21, 29, 27, 50, 42,
                    47, 23,
                ],
            ),
            (
                123,
                [
                    26, 52, 30, 40, 35, 24, 46, 16, 8, 48, 36, 31, 59, 23, 12, 20, 25, 15, 55, 21,
                    34, 57, 9, 19, 28, 6, 18, 41, 7, 13, 29, 22, 17, 42, 1, 33, 10, 3, 50, 0, 49,
                    63, 51, 2, 14, 11, 27, 45, 62, 47, 56, 54, 53, 32, 4, 44, 43, 38, 58, 5, 60,
                    61, 39, 37,
                ],
            ),
        ];
        for (seed, want) in booksim2 {
            assert_eq!(booksim2_permutation(64, seed), want, "perm_seed {seed}");
        }
    }
}
