//! BookSim2's `anynet`: any graph of routers and nodes from its listing format (the file
//! its `network_file` key names), routed by `min_anynet` — one shortest path per pair,
//! by channel latency, from a table each router holds.
//!
//! The listing is one line per router: `router R`, then what it is linked to, each
//! `router S` or `node N`, a number after a router being that channel's latency (R → S
//! only; S → R stays 1 unless written). A router named anywhere exists; a link is both
//! ways. This module reads it as BookSim2's `AnyNet::readFile` does, builds the routers
//! as its `_BuildNet` numbers their channels and routes as its `route` computes the
//! table (Dijkstra over latencies, ties to the lowest router number), and refuses what
//! BookSim2 would stop on or read other than its README says (module docs of each
//! refusal below).

use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use super::topology::{Fabric, Link};

/// Most ports a router may have (the router core keeps port sets in 64-bit masks).
const MAX_PORTS: usize = 64;

/// Most routers of a listing (its routing table has routers × nodes entries).
const MAX_ROUTERS: usize = 4096;

/// Longest channel (its credits must come back within the router's 64-cycle history).
pub const MAX_LATENCY: u32 = 64;

/// A listing as read: each router's nodes and its links with their latencies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnyNet {
    /// Each router's nodes, in ascending number (its first ports).
    pub nodes_of: Vec<Vec<u32>>,
    /// Each router's neighbours with the latency of the channel to each, in ascending
    /// neighbour number (its ports after its nodes').
    pub links: Vec<Vec<(u32, u32)>>,
    /// Number of nodes (numbered 0 up).
    pub nodes: u32,
}

impl AnyNet {
    /// Reads the listing's `lines`; on a fault, why, naming the line (1-based).
    pub fn parse(lines: &[String]) -> Result<AnyNet, String> {
        // Routers named; node → router; (router, neighbour) → channel latency.
        let mut routers: BTreeSet<u32> = BTreeSet::new();
        let mut node_router: BTreeMap<u32, u32> = BTreeMap::new();
        let mut link: BTreeMap<(u32, u32), u32> = BTreeMap::new();
        for (i, line) in lines.iter().enumerate() {
            let at = i + 1;
            let mut words = line.split_whitespace().peekable();
            let Some(head) = words.next() else { continue };
            let id = |w: Option<&str>, what: &str| -> Result<u32, String> {
                let w = w.ok_or(format!("line {at}: `{what}` without its number"))?;
                w.parse::<u32>()
                    .map_err(|_| format!("line {at}: `{what} {w}`: a number from 0 up"))
            };
            match head {
                "router" => {}
                "node" => {
                    return Err(format!(
                        "line {at}: a line starting with `node`: BookSim2 also makes a router \
                         of that number (its parser registers every line's head as one); \
                         start the line with the node's router (`router R node N`)"
                    ))
                }
                w => {
                    return Err(format!(
                        "line {at}: `{w}`: a line starts with `router` (BookSim2 stops on anything else)"
                    ))
                }
            }
            let r = id(words.next(), "router")?;
            routers.insert(r);
            while let Some(kind) = words.next() {
                match kind {
                    "router" => {
                        let s = id(words.next(), "router")?;
                        if s == r {
                            return Err(format!("line {at}: router {r} linked to itself"));
                        }
                        routers.insert(s);
                        // As BookSim2: this channel 1 cycle unless a latency follows (a
                        // later mention resets it), the way back 1 unless it exists.
                        link.insert((r, s), 1);
                        link.entry((s, r)).or_insert(1);
                        if let Some(w) = words.peek().and_then(|w| w.parse::<i64>().ok()) {
                            words.next();
                            if !(1..=MAX_LATENCY as i64).contains(&w) {
                                return Err(format!(
                                    "line {at}: router {r} to router {s} of latency {w}: 1-{MAX_LATENCY} cycles (BookSim2 refuses 0 and less; the credits' trip here is at most 64)"
                                ));
                            }
                            link.insert((r, s), w as u32);
                        }
                    }
                    "node" => {
                        let n = id(words.next(), "node")?;
                        if let Some(&other) = node_router.get(&n) {
                            if other != r {
                                return Err(format!(
                                    "line {at}: node {n} linked to routers {other} and {r}: a node has one router"
                                ));
                            }
                        }
                        node_router.insert(n, r);
                        if let Some(w) = words.peek().filter(|w| w.parse::<i64>().is_ok()) {
                            return Err(format!(
                                "line {at}: `node {n} {w}`: BookSim2's parser gives a latency after a node to the channel from router {r} to router {n}, not to the node's channels, so its README's node latencies are not what it simulates; not modelled (a node's channels take one cycle)"
                            ));
                        }
                    }
                    w => {
                        return Err(format!(
                            "line {at}: `{w}`: expected `router S`, `node N` or a latency after a router"
                        ))
                    }
                }
            }
        }
        let count = routers.len();
        if count == 0 {
            return Err("no router: the listing needs `router R ...` lines".into());
        }
        if count > MAX_ROUTERS {
            return Err(format!("{count} routers, at most {MAX_ROUTERS}"));
        }
        gapless(routers.iter(), "router", "BookSim2 indexes them by number")?;
        if node_router.is_empty() {
            return Err("no node: the listing links no `node N` to a router".into());
        }
        gapless(node_router.keys(), "node", "BookSim2's traffic assumes so")?;
        let mut nodes_of = vec![Vec::new(); count];
        for (&n, &r) in &node_router {
            nodes_of[r as usize].push(n);
        }
        let mut links = vec![Vec::new(); count];
        for (&(r, s), &w) in &link {
            links[r as usize].push((s, w));
        }
        for r in 0..count {
            let p = nodes_of[r].len() + links[r].len();
            if p > MAX_PORTS {
                return Err(format!("router {r} has {p} ports; at most {MAX_PORTS}"));
            }
        }
        // Connected (links are both ways): BookSim2's routing never ends otherwise.
        let mut seen = vec![false; count];
        let mut stack = vec![0usize];
        seen[0] = true;
        while let Some(r) = stack.pop() {
            for &(s, _) in &links[r] {
                if !std::mem::replace(&mut seen[s as usize], true) {
                    stack.push(s as usize);
                }
            }
        }
        if let Some(r) = seen.iter().position(|&s| !s) {
            return Err(format!(
                "router {r} cannot be reached from router 0: the routers must be connected (BookSim2's routing never ends otherwise)"
            ));
        }
        Ok(AnyNet {
            nodes_of,
            links,
            nodes: node_router.len() as u32,
        })
    }

    /// Number of routers.
    pub fn routers(&self) -> u32 {
        self.links.len() as u32
    }

    /// Ports of all routers.
    pub fn total_ports(&self) -> u64 {
        (0..self.links.len())
            .map(|r| (self.nodes_of[r].len() + self.links[r].len()) as u64)
            .sum()
    }

    /// The longest channel's latency.
    pub fn longest(&self) -> u32 {
        self.links
            .iter()
            .flatten()
            .map(|&(_, w)| w)
            .max()
            .unwrap_or(1)
    }

    /// Local port of router `r` towards neighbour `s`.
    fn port_to(&self, r: usize, s: u32) -> usize {
        let rank = self.links[r]
            .binary_search_by_key(&s, |&(n, _)| n)
            .expect("a neighbour");
        self.nodes_of[r].len() + rank
    }

    /// The first router on `min_anynet`'s path from every router to every other
    /// (`first[start][to]`; `start` itself at `to = start`): BookSim2's `route`, a
    /// Dijkstra over channel latencies settling the nearest router first, ties to the
    /// lowest number, each router's distance lowered only strictly, neighbours relaxed
    /// in ascending number. A heap ordered by (distance, number) settles the routers in
    /// the order of BookSim2's linear scan.
    pub fn first_hops(&self) -> Vec<Vec<u32>> {
        let n = self.links.len();
        let mut out = Vec::with_capacity(n);
        let mut dist = vec![u64::MAX; n];
        let mut prev = vec![u32::MAX; n];
        let mut done = vec![false; n];
        for start in 0..n {
            dist.fill(u64::MAX);
            prev.fill(u32::MAX);
            done.fill(false);
            dist[start] = 0;
            let mut heap = BinaryHeap::new();
            heap.push(std::cmp::Reverse((0u64, start as u32)));
            while let Some(std::cmp::Reverse((d, r))) = heap.pop() {
                let r = r as usize;
                if done[r] || d != dist[r] {
                    continue;
                }
                done[r] = true;
                for &(s, w) in &self.links[r] {
                    let nd = d + w as u64;
                    if !done[s as usize] && nd < dist[s as usize] {
                        dist[s as usize] = nd;
                        prev[s as usize] = r as u32;
                        heap.push(std::cmp::Reverse((nd, s)));
                    }
                }
            }
            let mut first = vec![start as u32; n];
            for (to, f) in first.iter_mut().enumerate() {
                if to == start {
                    continue;
                }
                let mut hop = to as u32;
                while prev[hop as usize] != start as u32 {
                    hop = prev[hop as usize];
                }
                *f = hop;
            }
            out.push(first);
        }
        out
    }

    /// The fabric: router r's ports its nodes' (ascending), then one per neighbour
    /// (ascending), for input and output alike — BookSim2's `_BuildNet` adds the
    /// injection and ejection channels first, then each router's output channels by
    /// neighbour number, and the input channels as its loop over the routers in
    /// ascending number reaches them. Each output port's latency is its channel's (1
    /// into a node), the route table `min_anynet`'s.
    pub fn fabric(&self) -> Fabric {
        let n = self.links.len();
        let ports: Vec<u32> = (0..n)
            .map(|r| (self.nodes_of[r].len() + self.links[r].len()) as u32)
            .collect();
        let mut port_base = Vec::with_capacity(n);
        let mut total = 0u32;
        for &p in &ports {
            port_base.push(total);
            total += p;
        }
        let mut link = vec![Link::None; total as usize];
        let mut latency = vec![1u8; total as usize];
        let mut hca_port = vec![0u32; self.nodes as usize];
        let mut node_at = vec![(0u32, 0u32); self.nodes as usize];
        for r in 0..n {
            for (i, &a) in self.nodes_of[r].iter().enumerate() {
                let g = port_base[r] + i as u32;
                link[g as usize] = Link::Hca(a);
                hca_port[a as usize] = g;
                node_at[a as usize] = (r as u32, i as u32);
            }
            for &(s, w) in &self.links[r] {
                let g = port_base[r] as usize + self.port_to(r, s);
                let back = port_base[s as usize] as usize + self.port_to(s as usize, r as u32);
                link[g] = Link::Router(back as u32);
                latency[g] = w as u8;
            }
        }
        let first = self.first_hops();
        let nodes = self.nodes as usize;
        let mut route = vec![0u8; n * nodes];
        for r in 0..n {
            for (d, &(to, port)) in node_at.iter().enumerate() {
                route[r * nodes + d] = if to as usize == r {
                    port
                } else {
                    self.port_to(r, first[r][to as usize]) as u32
                } as u8;
            }
        }
        let mut f = Fabric::computed(self.nodes, port_base, ports, link, hca_port);
        f.route = route;
        f.latency = latency;
        f
    }
}

/// Whether the ascending `numbers` of `what`s run 0, 1, 2, ... without a gap; if not,
/// why (`because`).
fn gapless<'a>(
    numbers: impl Iterator<Item = &'a u32>,
    what: &str,
    because: &str,
) -> Result<(), String> {
    match numbers.enumerate().find(|&(i, &n)| n as usize != i) {
        Some((i, n)) => Err(format!(
            "{what} {n} with {i} {what}s numbered below it: {what}s are numbered 0 up without gaps ({because})"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn booksim2s_example_reads_as_its_readme_says() {
        let a = AnyNet::parse(&lines(
            "router 0 node 0 node 1 node 2 router 1\nrouter 1 node 3 node 4 node 5\n\
             router 2 node 6 node 7 node 8 router 1 router 0",
        ))
        .unwrap();
        assert_eq!(a.nodes, 9);
        assert_eq!(
            a.nodes_of,
            vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]]
        );
        assert_eq!(
            a.links,
            vec![
                vec![(1, 1), (2, 1)],
                vec![(0, 1), (2, 1)],
                vec![(0, 1), (1, 1)]
            ]
        );
        let f = a.fabric();
        // Router 1's port 3 leads to router 0, into router 0's port 3 (from router 1).
        assert_eq!(f.link[3 + 5], Link::Router(3));
        assert_eq!(f.link[4 + 5], Link::Router(10 + 4));
        // Node 4 from router 2: through router 2's port 4 (to router 1).
        assert_eq!(f.route[2 * 9 + 4], 4);
        assert_eq!(f.route[9 + 4], 1);
    }

    #[test]
    fn latencies_are_one_way_and_reset_as_booksim2_resets_them() {
        let a = AnyNet::parse(&lines(
            "router 0 router 1 10 router 2 5 node 0\nrouter 1 node 1\nrouter 2 node 2 router 1 3",
        ))
        .unwrap();
        assert_eq!(a.links[0], vec![(1, 10), (2, 5)]);
        assert_eq!(a.links[1], vec![(0, 1), (2, 1)]);
        assert_eq!(a.links[2], vec![(0, 1), (1, 3)]);
        // 0 → 1 is shorter through 2 (5 + 3 < 10); 1 → 0 direct.
        let first = a.first_hops();
        assert_eq!(first[0][1], 2);
        assert_eq!(first[1][0], 0);
        // A later mention without a latency resets the channel to 1 cycle.
        let b = AnyNet::parse(&lines(
            "router 0 router 1 9 node 0\nrouter 0 router 1 node 1",
        ))
        .unwrap();
        assert_eq!(b.links[0], vec![(1, 1)]);
    }

    #[test]
    fn shortest_path_ties_go_to_the_lowest_router() {
        // A ring of four: 0 → 2 is two hops either way, through 1 or through 3.
        let ring = "router 0 node 0 router 1 router 3\nrouter 1 node 1 router 2\nrouter 2 node 2 router 3\nrouter 3 node 3";
        let a = AnyNet::parse(&lines(ring)).unwrap();
        let first = a.first_hops();
        assert_eq!(first[0][2], 1);
        assert_eq!(first[2][0], 1);
        assert_eq!(first[1][3], 0);
        assert_eq!(first[3][1], 0);
    }

    #[test]
    fn faults_are_refused_with_their_line() {
        for (text, want) in [
            (
                "router 0 node 0\nnode 1 router 0",
                "line 2: a line starting with `node`",
            ),
            ("router 0 node 0 node 1 5", "line 1: `node 1 5`"),
            (
                "router 0 node 0 router 0",
                "line 1: router 0 linked to itself",
            ),
            ("router 0 node 0 router 1 0\nrouter 1 node 1", "latency 0"),
            (
                "router 0 node 0\nrouter 1 node 0",
                "node 0 linked to routers 0 and 1",
            ),
            (
                "router 0 node 0 router 2\nrouter 2 node 1",
                "router 2 with 1 routers",
            ),
            ("router 0 node 0 node 2 router 1", "node 2 with 1 nodes"),
            (
                "router 0 node 0\nrouter 1 node 1",
                "router 1 cannot be reached",
            ),
            ("router 0 nod 0", "line 1: `nod`"),
            ("router x", "line 1: `router x`"),
        ] {
            let e = AnyNet::parse(&lines(text)).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }
}
