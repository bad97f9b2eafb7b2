//! What the kernel backend wants installed, and how to get there from what is installed:
//! the manager's rows become one htb class per flow and u32 filters that
//! send the flow's packets to it; [`diff`] compares that with the classes and filters
//! the kernel reports and lists the changes — keeping every class whose flow is still
//! granted (so a restarted agent does not drop live reservations), removing the rest.
//! Pure: no kernel here, so every rule is tested without root.
//!
//! **Which packets are a flow's.** A flow `a:p → b:q` (thesis §4.2.1: source port,
//! target port, priority) classifies a's IPv4 packets to b's address that leave from
//! TCP/UDP port `p` or go to port `q` — either end of a connection may have opened it,
//! and its listening end has the known port; a port of 0 matches any, both 0 match all
//! of a's packets to b. Priority `P` > 0 matches packets whose DSCP is `P` (the
//! application sets `IP_TOS` to `P << 2`); priority 0 matches any DSCP. Packets with IP
//! options or non-first fragments carry no ports where the filter looks, so they go to
//! the default class.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use netlink_packet_route::tc::{TcU32Key, TcU32Selector, TcU32SelectorFlags};

use crate::agent::table::IdtTable;
use crate::protocol::FlowSpec;

/// IP protocol numbers filtered on.
pub const TCP: u8 = 6;
/// UDP.
pub const UDP: u8 = 17;

/// Minor number of the class every flow class hangs under (rate: the link).
pub const ROOT_MINOR: u16 = 1;
/// Minor number of the class unclassified packets go to.
pub const DEFAULT_MINOR: u16 = 2;
/// First minor number given to a flow's class.
pub const FIRST_FLOW_MINOR: u16 = 0x10;
/// u32 node numbers are 12 bits: at most this many filters per interface.
pub const MAX_FILTERS: u32 = 0xffe;

/// One packet pattern of a flow: IPv4 packets from `src` to `dst` with these ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Match {
    /// IP protocol (`None`: any; then no ports are matched).
    pub proto: Option<u8>,
    /// Source address (`None`: any).
    pub src: Option<Ipv4Addr>,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Source port (0: any).
    pub sport: u16,
    /// Destination port (0: any).
    pub dport: u16,
    /// DSCP the packet must carry (`None`: any).
    pub dscp: Option<u8>,
}

fn key(off: i32, mask: u32, val: u32) -> TcU32Key {
    let mut k = TcU32Key::default();
    k.off = off;
    k.mask = mask;
    k.val = val & mask;
    k
}

impl Match {
    /// The u32 selector for this pattern (IPv4 header without options assumed: the
    /// header-length nibble is matched to be 5, so the ports are at offset 20).
    pub fn selector(&self) -> TcU32Selector {
        let mut keys = Vec::new();
        let (mut m0, mut v0) = (0x0f00_0000u32, 0x0500_0000u32);
        if let Some(d) = self.dscp {
            m0 |= 0x00fc_0000;
            v0 |= u32::from(d & 0x3f) << 18;
        }
        keys.push(key(0, m0, v0));
        let ports = self.sport != 0 || self.dport != 0;
        if ports {
            keys.push(key(4, 0x0000_1fff, 0)); // first fragment only
        }
        if let Some(p) = self.proto {
            keys.push(key(8, 0x00ff_0000, u32::from(p) << 16));
        }
        if let Some(s) = self.src {
            keys.push(key(12, u32::MAX, u32::from(s)));
        }
        keys.push(key(16, u32::MAX, u32::from(self.dst)));
        if ports {
            let (mut m, mut v) = (0u32, 0u32);
            if self.sport != 0 {
                m |= 0xffff_0000;
                v |= u32::from(self.sport) << 16;
            }
            if self.dport != 0 {
                m |= 0x0000_ffff;
                v |= u32::from(self.dport);
            }
            keys.push(key(20, m, v));
        }
        let mut sel = TcU32Selector::default();
        sel.flags = TcU32SelectorFlags::Terminal;
        sel.nkeys = keys.len() as u8;
        sel.keys = keys;
        sel
    }

    /// Reads a selector this backend wrote; `None` for any other.
    pub fn from_selector(sel: &TcU32Selector) -> Option<Match> {
        if sel.keys.len() != usize::from(sel.nkeys) || sel.offmask != 0 || sel.hmask != 0 {
            return None;
        }
        let mut m = Match {
            proto: None,
            src: None,
            dst: Ipv4Addr::UNSPECIFIED,
            sport: 0,
            dport: 0,
            dscp: None,
        };
        let (mut head, mut dst, mut frag, mut ports) = (false, false, false, false);
        for k in &sel.keys {
            if k.offmask != 0 || k.val & !k.mask != 0 {
                return None;
            }
            match (k.off, k.mask) {
                (0, 0x0f00_0000) if k.val == 0x0500_0000 => head = true,
                (0, 0x0ffc_0000) if k.val & 0x0f00_0000 == 0x0500_0000 => {
                    head = true;
                    m.dscp = Some(((k.val >> 18) & 0x3f) as u8);
                }
                (4, 0x0000_1fff) if k.val == 0 => frag = true,
                (8, 0x00ff_0000) => m.proto = Some((k.val >> 16) as u8),
                (12, u32::MAX) => m.src = Some(Ipv4Addr::from(k.val)),
                (16, u32::MAX) => {
                    dst = true;
                    m.dst = Ipv4Addr::from(k.val);
                }
                (20, 0xffff_0000 | 0x0000_ffff | u32::MAX) => {
                    ports = true;
                    m.sport = (k.val >> 16) as u16;
                    m.dport = k.val as u16;
                }
                _ => return None,
            }
        }
        (head && dst && frag == ports && (m.selector() == *sel)).then_some(m)
    }
}

/// How a granted rate (the manager's bytes/s, as applications count them) becomes the
/// rate of frames on the interface (what htb counts: IP packet plus Ethernet header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateBasis {
    /// Grants are TCP payload: a full frame of MTU + 14 bytes carries MTU − 52 bytes
    /// (IP 20, TCP 20, timestamps 12).
    TcpPayload,
    /// Grants are UDP payload: MTU + 14 carries MTU − 28.
    UdpPayload,
    /// Grants are frame bytes already.
    Wire,
}

impl RateBasis {
    /// Parses `tcp`, `udp` or `wire`.
    pub fn parse(s: &str) -> Option<RateBasis> {
        match s {
            "tcp" => Some(RateBasis::TcpPayload),
            "udp" => Some(RateBasis::UdpPayload),
            "wire" => Some(RateBasis::Wire),
            _ => None,
        }
    }

    /// The frame rate carrying `rate` bytes/s of payload over an interface of `mtu`.
    pub fn wire_rate(self, rate: u64, mtu: u32) -> u64 {
        let frame = u128::from(mtu) + 14;
        let payload = match self {
            RateBasis::TcpPayload => u128::from(mtu.saturating_sub(52).max(1)),
            RateBasis::UdpPayload => u128::from(mtu.saturating_sub(28).max(1)),
            RateBasis::Wire => return rate,
        };
        (u128::from(rate) * frame)
            .div_ceil(payload)
            .min(u64::MAX as u128) as u64
    }
}

/// The rate given to a flow the manager says must not send (a best-effort flow whose
/// share is zero): htb needs a rate above zero; this one lets one full frame through
/// every 15 s, keeping TCP connections alive without carrying traffic.
pub const HELD_RATE: u64 = 100;

/// Where node names point, and this node's own address.
#[derive(Debug, Clone, Default)]
pub struct Addrs {
    /// Every node's IPv4 address.
    pub nodes: BTreeMap<String, Ipv4Addr>,
    /// This node's name.
    pub me: String,
}

impl Addrs {
    /// Parses `--nodes` as the kernel backend reads it: "h0=10.77.0.1,h1=10.77.0.2"
    /// (a `:port` after an address, as the data plane's list has, is allowed and
    /// ignored). `me` must be one of them.
    pub fn parse(me: &str, list: &str) -> Result<Addrs, String> {
        let mut nodes = BTreeMap::new();
        for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, addr) = part
                .split_once('=')
                .ok_or_else(|| format!("--nodes: `{part}` is not name=address"))?;
            let addr = addr.trim();
            let ip = addr
                .parse::<Ipv4Addr>()
                .or_else(|_| addr.parse::<std::net::SocketAddrV4>().map(|s| *s.ip()))
                .map_err(|_| format!("--nodes: `{addr}` is not an IPv4 address"))?;
            if nodes.insert(name.trim().to_string(), ip).is_some() {
                return Err(format!("--nodes: node '{}' is listed twice", name.trim()));
            }
        }
        if !nodes.contains_key(me) {
            return Err(format!("--nodes does not list this node '{me}'"));
        }
        Ok(Addrs {
            nodes,
            me: me.to_string(),
        })
    }
}

/// One flow as the kernel should hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// htb rate (= ceil) in frame bytes/s.
    pub rate: u64,
    /// The packet patterns sent to its class.
    pub matches: Vec<Match>,
    /// For a job's part with flows that name no ports: their destination's address. The
    /// job's cgroup's packets to it go to the class by the BPF classifier
    /// (`kernel::bpf`), not by a u32 filter.
    pub by_cgroup: Option<Ipv4Addr>,
    /// The class it had at the previous reconciliation: kept while it is installed (a
    /// class no u32 filter points to is recognised this way).
    pub keep: Option<u16>,
}

/// Why a row of the table cannot be enforced (the rest still are).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Skip {
    #[error("flow {0}: no address for node '{1}' (give it in --nodes)")]
    NoAddress(String, String),
    #[error("flow {0}: priority {1} cannot be carried in DSCP (0..=63)")]
    Priority(String, u8),
}

/// The patterns of `flow` (see the module documentation).
pub fn matches_of(flow: &FlowSpec, addrs: &Addrs) -> Result<Vec<Match>, Skip> {
    let dst = *addrs
        .nodes
        .get(&flow.dst.node)
        .ok_or_else(|| Skip::NoAddress(flow.to_string(), flow.dst.node.clone()))?;
    if flow.priority > 63 {
        return Err(Skip::Priority(flow.to_string(), flow.priority));
    }
    let base = Match {
        proto: None,
        src: addrs.nodes.get(&addrs.me).copied(),
        dst,
        sport: 0,
        dport: 0,
        dscp: (flow.priority > 0).then_some(flow.priority),
    };
    let (p, q) = (flow.src.port, flow.dst.port);
    if p == 0 && q == 0 {
        return Ok(vec![base]);
    }
    let mut out = Vec::new();
    for proto in [TCP, UDP] {
        if p != 0 {
            out.push(Match {
                proto: Some(proto),
                sport: p,
                ..base
            });
        }
        if q != 0 {
            out.push(Match {
                proto: Some(proto),
                dport: q,
                ..base
            });
        }
    }
    Ok(out)
}

/// The flows of `table` sourced at this node, as the kernel should hold them, and the
/// rows that cannot be enforced.
pub fn wanted(
    table: &IdtTable,
    addrs: &Addrs,
    basis: RateBasis,
    mtu: u32,
) -> (BTreeMap<FlowSpec, Wanted>, Vec<Skip>) {
    let mut out = BTreeMap::new();
    let mut skipped = Vec::new();
    for e in table.flows.values().filter(|e| e.flow.src.node == addrs.me) {
        match matches_of(&e.flow, addrs) {
            Ok(matches) => {
                let rate = match e.idt_ps {
                    Some(_) if e.rate > 0 => basis.wire_rate(e.rate, mtu).max(HELD_RATE),
                    _ => HELD_RATE,
                };
                out.insert(
                    e.flow.clone(),
                    Wanted {
                        rate,
                        matches,
                        by_cgroup: None,
                        keep: None,
                    },
                );
            }
            Err(s) => skipped.push(s),
        }
    }
    (out, skipped)
}

/// What one class of the backend enforces: a flow of the node's table, or the part of
/// a job (`docs/jobs.md`) that leaves this node for one destination node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    /// A flow.
    Flow(FlowSpec),
    /// Job `id`'s traffic to node `dst` told by ports.
    Job { id: String, dst: String },
}

/// Why a job's part cannot be enforced (the rest still is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobSkip {
    #[error("job {0} to {1}: no address for node '{1}' (give it in --nodes)")]
    NoAddress(String, String),
    #[error("job {0} to {1}: flows without ports are told by the job's cgroup, but {2}")]
    ByCgroup(String, String, String),
}

/// [`wanted`]'s flows, and the parts of the jobs in `table` that leave this node: one
/// class per (job, destination node) at the rate summed over the job's flows there,
/// whose packets are those from each flow's source port or to its destination port
/// (as a flow's, [`matches_of`]); a job's flows without ports go to the same class by
/// the job's cgroup ([`Wanted::by_cgroup`]) — unless `no_classifier` says why the
/// backend cannot tell cgroups, and then they are listed as skipped.
pub fn wanted_with_jobs(
    table: &IdtTable,
    addrs: &Addrs,
    basis: RateBasis,
    mtu: u32,
    no_classifier: Option<&str>,
) -> (BTreeMap<Key, Wanted>, Vec<String>) {
    let (flows, skipped) = wanted(table, addrs, basis, mtu);
    let mut skipped: Vec<String> = skipped.iter().map(|s| s.to_string()).collect();
    let mut out: BTreeMap<Key, Wanted> =
        flows.into_iter().map(|(f, w)| (Key::Flow(f), w)).collect();
    let mut parts: BTreeMap<Key, (u64, Vec<Match>, Option<Ipv4Addr>)> = BTreeMap::new();
    for (id, job) in &table.jobs {
        for row in job.body.part(&addrs.me) {
            let Some(&dst) = addrs.nodes.get(&row.dst) else {
                skipped.push(JobSkip::NoAddress(id.clone(), row.dst.clone()).to_string());
                continue;
            };
            let by_cgroup = match (row.by_cgroup, no_classifier) {
                (false, _) => None,
                (true, None) => Some(dst),
                (true, Some(why)) => {
                    let skip = JobSkip::ByCgroup(id.clone(), row.dst.clone(), why.to_string());
                    skipped.push(skip.to_string());
                    if row.ports.is_empty() {
                        continue;
                    }
                    None
                }
            };
            let mut matches = Vec::new();
            for &(p, q) in &row.ports {
                for proto in [TCP, UDP] {
                    for (sport, dport) in [(p, 0), (0, q)] {
                        let m = Match {
                            proto: Some(proto),
                            src: addrs.nodes.get(&addrs.me).copied(),
                            dst,
                            sport,
                            dport,
                            dscp: None,
                        };
                        if !matches.contains(&m) {
                            matches.push(m);
                        }
                    }
                }
            }
            // A destination's rows by ports and by cgroup share one class.
            let key = Key::Job {
                id: id.clone(),
                dst: row.dst,
            };
            let part = parts.entry(key).or_insert((0, Vec::new(), None));
            part.0 = part.0.saturating_add(row.rate);
            for m in matches {
                if !part.1.contains(&m) {
                    part.1.push(m);
                }
            }
            part.2 = part.2.or(by_cgroup);
        }
    }
    for (key, (payload, matches, by_cgroup)) in parts {
        let rate = basis.wire_rate(payload, mtu).max(HELD_RATE);
        out.insert(
            key,
            Wanted {
                rate,
                matches,
                by_cgroup,
                keep: None,
            },
        );
    }
    (out, skipped)
}

/// A flow class as installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    /// Minor number (the major is the qdisc's).
    pub minor: u16,
    /// Its rate and ceil, frame bytes/s.
    pub rate: u64,
    pub ceil: u64,
}

/// A filter as installed under the qdisc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// Its handle as the kernel reports it (a u32 filter's: hash table, bucket, node).
    pub handle: u32,
    /// A u32 filter's node number (the handle's low 12 bits).
    pub node: u32,
    /// Preference.
    pub pref: u16,
    /// The pattern, if this backend wrote it.
    pub m: Option<Match>,
    /// The class it sends to (a minor of the qdisc), if any.
    pub class: Option<u16>,
    /// Its kind ("u32", or another classifier someone attached).
    pub kind: String,
}

/// What is installed under the qdisc (besides the root and default classes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Installed {
    pub classes: BTreeMap<u16, Class>,
    pub filters: Vec<Filter>,
}

/// One change to the kernel, in the order [`diff`] lists them; `K` names what a class
/// enforces (a flow, or a [`Key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op<K = FlowSpec> {
    /// Remove a filter (before its class can go).
    DelFilter {
        handle: u32,
        pref: u16,
        kind: String,
    },
    /// Remove a class no flow uses.
    DelClass { minor: u16 },
    /// Set the rate of a kept class.
    SetRate { minor: u16, rate: u64 },
    /// Install a new flow: its class, then its filters (undone together on failure).
    AddFlow {
        flow: K,
        minor: u16,
        rate: u64,
        filters: Vec<(u32, Match)>,
    },
    /// Add a missing filter to a kept class.
    AddFilter { node: u32, m: Match, minor: u16 },
}

/// What [`diff`] plans: the changes, and the class each wanted key ends up in.
pub type Plan<K> = (Vec<Op<K>>, BTreeMap<K, u16>);

/// The preference every filter of this backend is added at.
pub const PREF: u16 = 10;

/// Lists the changes that turn `have` into `want`, keeping the class of every flow
/// whose filters are in place (its counters and queue go on), and the class each
/// wanted flow ends up in. Fails only when minor or node numbers run out.
pub fn diff<K: Ord + Clone>(
    want: &BTreeMap<K, Wanted>,
    have: &Installed,
) -> Result<Plan<K>, String> {
    // Filters of ours, by pattern.
    let mut by_match: BTreeMap<Match, &Filter> = BTreeMap::new();
    for f in &have.filters {
        if let (Some(m), Some(_), PREF, "u32") = (f.m, f.class, f.pref, f.kind.as_str()) {
            by_match.entry(m).or_insert(f);
        }
    }
    let mut keep_filters: BTreeSet<u32> = BTreeSet::new();
    let mut keep_classes: BTreeSet<u16> = BTreeSet::new();
    let mut placed: BTreeMap<K, u16> = BTreeMap::new();
    // A flow keeps the class its installed filters point to (the first of its patterns
    // found), if that class exists and no other flow kept it.
    for (flow, w) in want {
        let free = |c: &u16| have.classes.contains_key(c) && !keep_classes.contains(c);
        let class = w.keep.filter(free).or_else(|| {
            w.matches
                .iter()
                .filter_map(|m| by_match.get(m).and_then(|f| f.class))
                .find(free)
        });
        if let Some(c) = class {
            keep_classes.insert(c);
            placed.insert(flow.clone(), c);
            for m in &w.matches {
                if let Some(f) = by_match.get(m) {
                    if f.class == Some(c) {
                        keep_filters.insert(f.node);
                    }
                }
            }
        }
    }
    let mut ops = Vec::new();
    for f in &have.filters {
        if !(f.kind == "u32" && f.pref == PREF && keep_filters.contains(&f.node)) {
            ops.push(Op::DelFilter {
                handle: f.handle,
                pref: f.pref,
                kind: f.kind.clone(),
            });
        }
    }
    for c in have.classes.keys() {
        if !keep_classes.contains(c) {
            ops.push(Op::DelClass { minor: *c });
        }
    }
    let mut used_nodes: BTreeSet<u32> = keep_filters.clone();
    let mut next_node = 1u32;
    let mut fresh_node = |used: &mut BTreeSet<u32>| -> Result<u32, String> {
        while used.contains(&next_node) {
            next_node += 1;
        }
        if next_node > MAX_FILTERS {
            return Err(format!("more than {MAX_FILTERS} filters on one interface"));
        }
        used.insert(next_node);
        Ok(next_node)
    };
    let mut used_minors: BTreeSet<u16> = keep_classes.clone();
    let mut next_minor = FIRST_FLOW_MINOR;
    for (flow, w) in want {
        if let Some(&c) = placed.get(flow) {
            let cls = have.classes[&c];
            if cls.rate != w.rate || cls.ceil != w.rate {
                ops.push(Op::SetRate {
                    minor: c,
                    rate: w.rate,
                });
            }
            for m in &w.matches {
                let present = by_match
                    .get(m)
                    .is_some_and(|f| f.class == Some(c) && keep_filters.contains(&f.node));
                if !present {
                    let node = fresh_node(&mut used_nodes)?;
                    ops.push(Op::AddFilter {
                        node,
                        m: *m,
                        minor: c,
                    });
                }
            }
            continue;
        }
        while used_minors.contains(&next_minor) {
            next_minor = next_minor
                .checked_add(1)
                .ok_or("more than 65,000 flow classes on one interface")?;
        }
        let minor = next_minor;
        used_minors.insert(minor);
        let mut filters = Vec::new();
        for m in &w.matches {
            filters.push((fresh_node(&mut used_nodes)?, *m));
        }
        placed.insert(flow.clone(), minor);
        ops.push(Op::AddFlow {
            flow: flow.clone(),
            minor,
            rate: w.rate,
            filters,
        });
    }
    Ok((ops, placed))
}

#[cfg(test)]
mod tests;
