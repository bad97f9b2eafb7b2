//! Any cluster graph of qos-core's topology files (docs/topology.md) as a flit fabric:
//! each switch is a router with its own port numbers,
//! each host an HCA on the port it is cabled to, and packets follow the topology's
//! deterministic source routes (explicit `[[route]]`s, shortest-path or
//! dimension-order), carried hop by hop in the packet as InfiniBand's directed routes
//! are. Wormhole routing on an arbitrary graph can deadlock, so the routes used are
//! checked when the fabric is built: their channel dependency graph (output port →
//! next output port on some route) must be acyclic (Dally & Seitz), in which case no
//! set of packets can wait on each other in a cycle whatever lanes they hold.

use std::sync::Arc;

use qos_core::topology::{NodeId, Peer, Topology};

use super::config::TopologySpec;
use super::error::FlitError;
use super::topology::{Fabric, Link, SourceRoutes, NO_PORT};

/// Most ports a router may have (the router core keeps port sets in 64-bit masks).
pub const MAX_PORTS: usize = 64;

/// A graph topology from an already loaded qos-core topology (`file` names it in
/// results and messages).
pub fn spec(file: &str, t: &Topology) -> Result<TopologySpec, FlitError> {
    Ok(TopologySpec::Graph {
        file: file.to_string(),
        graph: Some(Arc::new(fabric(t)?)),
    })
}

/// The fabric of `t` with its source routes, or why it cannot be simulated.
pub fn fabric(t: &Topology) -> Result<Fabric, FlitError> {
    let bad = |m: String| Err(FlitError::config("topology.file", m));
    let switches = t.switches();
    let nodes = t.nodes();
    if switches.is_empty() || nodes.is_empty() {
        return bad("topology: at least one switch and one host are needed".into());
    }
    let mut port_base = Vec::with_capacity(switches.len());
    let mut ports = Vec::with_capacity(switches.len());
    let mut total = 0u32;
    for s in switches {
        if s.ports.len() > MAX_PORTS {
            return bad(format!(
                "topology: switch {} has {} ports; at most {MAX_PORTS} are supported",
                s.name,
                s.ports.len()
            ));
        }
        port_base.push(total);
        ports.push(s.ports.len() as u32);
        total += s.ports.len() as u32;
    }
    let mut link = vec![Link::None; total as usize];
    let mut port_router = vec![0u32; total as usize];
    for (si, s) in switches.iter().enumerate() {
        for (p, pl) in s.ports.iter().enumerate() {
            let g = (port_base[si] + p as u32) as usize;
            port_router[g] = si as u32;
            link[g] = match pl.map(|l| l.peer) {
                None => Link::None,
                Some(Peer::Node(n)) => Link::Hca(n.0),
                Some(Peer::Switch(pr)) => {
                    Link::Router(port_base[pr.switch.0 as usize] + pr.port as u32)
                }
            };
        }
    }
    let hca_port: Vec<u32> = nodes
        .iter()
        .map(|n| port_base[n.attach.switch.0 as usize] + n.attach.port as u32)
        .collect();
    let n = nodes.len();
    let mut start = Vec::with_capacity(n * n + 1);
    let mut hops = Vec::new();
    // Channel dependencies: an edge from each output port to the next on a route.
    let mut next: Vec<Vec<u32>> = vec![Vec::new(); total as usize];
    for s in 0..n {
        for (d, dn) in nodes.iter().enumerate() {
            start.push(hops.len() as u32);
            let route = if s == d {
                vec![dn.attach]
            } else {
                t.route(NodeId(s as u32), NodeId(d as u32))
                    .map_err(|e| FlitError::config("topology.file", format!("topology: {e}")))?
                    .hops
            };
            if route.len() > u16::MAX as usize {
                return bad("topology: a route is longer than 65535 hops".into());
            }
            let mut prev: Option<u32> = None;
            for h in &route {
                hops.push(h.port as u8);
                let g = port_base[h.switch.0 as usize] + h.port as u32;
                if let Some(p) = prev {
                    if !next[p as usize].contains(&g) {
                        next[p as usize].push(g);
                    }
                }
                prev = Some(g);
            }
        }
    }
    start.push(hops.len() as u32);
    if let Some(cycle) = dependency_cycle(&next) {
        let names: Vec<String> = cycle
            .iter()
            .map(|&g| {
                let r = port_router[g as usize] as usize;
                format!("{}:{}", switches[r].name, g - port_base[r])
            })
            .collect();
        return bad(format!(
            "topology: the routes may deadlock: channel dependency cycle {}",
            names.join(" -> ")
        ));
    }
    Ok(Fabric {
        routers: switches.len() as u32,
        nodes: n as u32,
        port_base,
        ports,
        port_router,
        from: super::topology::feeders(&link, &hca_port),
        link,
        hca_port,
        route: Vec::new(),
        route_yx: Vec::new(),
        grid: None,
        source: Some(SourceRoutes { start, hops }),
        fly: None,
        fat_tree: None,
        cmesh: None,
        dim: vec![NO_PORT; total as usize],
        wrap: vec![false; total as usize],
        dateline: false,
        latency: Vec::new(),
    })
}

/// A cycle in the dependency graph `next` (as a list of channels), if any.
fn dependency_cycle(next: &[Vec<u32>]) -> Option<Vec<u32>> {
    // Iterative depth-first search with colours: 0 new, 1 on the stack, 2 done.
    let mut colour = vec![0u8; next.len()];
    let mut parent = vec![u32::MAX; next.len()];
    for root in 0..next.len() {
        if colour[root] != 0 {
            continue;
        }
        let mut stack = vec![(root as u32, 0usize)];
        colour[root] = 1;
        while let Some(&mut (v, ref mut i)) = stack.last_mut() {
            if let Some(&w) = next[v as usize].get(*i) {
                *i += 1;
                match colour[w as usize] {
                    0 => {
                        colour[w as usize] = 1;
                        parent[w as usize] = v;
                        stack.push((w, 0));
                    }
                    1 => {
                        // w -> ... -> v -> w, read back from v along the parents.
                        let mut back = Vec::new();
                        let mut u = v;
                        while u != w {
                            back.push(u);
                            u = parent[u as usize];
                        }
                        back.reverse();
                        let mut cycle = vec![w];
                        cycle.extend(back);
                        cycle.push(w);
                        return Some(cycle);
                    }
                    _ => {}
                }
            } else {
                colour[v as usize] = 2;
                stack.pop();
            }
        }
    }
    None
}
