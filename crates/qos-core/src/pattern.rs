//! Communication patterns of a parallel job over an ordered node list (all-to-all,
//! ring, nearest-neighbour, one-to-many): their flows as (source, destination) index
//! pairs. One definition for the manager's job reservations (`/v1/jobs`), the agents'
//! per-node enforcement and `clusterqos admit`'s what-if replay of job mixes.

use serde::{Deserialize, Serialize};

/// How a pattern connects its node list (nodes in the order listed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Every node to every other node: n·(n−1) flows.
    AllToAll,
    /// Each node to the next, the last to the first: n flows (2 → 2, one each way).
    Ring,
    /// Each node to the one before and the one after it in the list, no wrap:
    /// 2·(n−1) flows.
    NearestNeighbour,
    /// The first node to each of the others: n−1 flows.
    OneToMany,
}

impl Pattern {
    /// The pattern's name on the wire and the command line.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::AllToAll => "all-to-all",
            Pattern::Ring => "ring",
            Pattern::NearestNeighbour => "nearest-neighbour",
            Pattern::OneToMany => "one-to-many",
        }
    }

    /// Every pattern.
    pub const ALL: [Pattern; 4] = [
        Pattern::AllToAll,
        Pattern::Ring,
        Pattern::NearestNeighbour,
        Pattern::OneToMany,
    ];

    /// Its number of flows over `n` distinct nodes.
    pub fn flows(self, n: usize) -> u64 {
        let n = n as u64;
        match self {
            Pattern::AllToAll => n * n.saturating_sub(1),
            Pattern::Ring => {
                if n < 2 {
                    0
                } else {
                    n
                }
            }
            Pattern::NearestNeighbour => 2 * n.saturating_sub(1),
            Pattern::OneToMany => n.saturating_sub(1),
        }
    }

    /// The (source, destination) index pairs of the flows over `n` nodes, in a fixed
    /// order (source-major for all-to-all).
    pub fn pairs(self, n: usize) -> Box<dyn Iterator<Item = (usize, usize)>> {
        match self {
            Pattern::AllToAll => Box::new(
                (0..n).flat_map(move |a| (0..n).filter(move |&b| b != a).map(move |b| (a, b))),
            ),
            Pattern::Ring => {
                Box::new((0..if n < 2 { 0 } else { n }).map(move |a| (a, (a + 1) % n)))
            }
            Pattern::NearestNeighbour => {
                Box::new((0..n.saturating_sub(1)).flat_map(|a| [(a, a + 1), (a + 1, a)]))
            }
            Pattern::OneToMany => Box::new((1..n).map(|b| (0, b))),
        }
    }
}

impl Pattern {
    /// The destinations (indices) of node `i`'s flows over `n` nodes: the pairs of
    /// [`Pattern::pairs`] whose source is `i`, in the same order.
    pub fn from(self, i: usize, n: usize) -> Vec<usize> {
        if i >= n {
            return Vec::new();
        }
        match self {
            Pattern::AllToAll => (0..n).filter(|&b| b != i).collect(),
            Pattern::Ring if n >= 2 => vec![(i + 1) % n],
            Pattern::Ring => Vec::new(),
            Pattern::NearestNeighbour => [i.checked_sub(1), (i + 1 < n).then_some(i + 1)]
                .into_iter()
                .flatten()
                .collect(),
            Pattern::OneToMany if i == 0 => (1..n).collect(),
            Pattern::OneToMany => Vec::new(),
        }
    }
}

impl std::str::FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Pattern, String> {
        Pattern::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown pattern '{s}' (all-to-all, ring, nearest-neighbour or one-to-many)"
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_s_destinations_are_the_pairs_it_sources() {
        for p in Pattern::ALL {
            for n in 0..7 {
                for i in 0..n + 1 {
                    let want: Vec<usize> = p
                        .pairs(n)
                        .filter(|&(a, _)| a == i)
                        .map(|(_, b)| b)
                        .collect();
                    assert_eq!(p.from(i, n), want, "{} i={i} n={n}", p.name());
                }
                let total: usize = (0..n).map(|i| p.from(i, n).len()).sum();
                assert_eq!(total as u64, p.flows(n), "{} n={n}", p.name());
            }
        }
    }
}
