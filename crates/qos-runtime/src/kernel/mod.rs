//! The agent's second enforcement backend: the manager's premium grants and
//! best-effort shares (thesis §3.3, §4.3) become Linux traffic-control state on the
//! node's interface, so unmodified TCP/UDP programs and MPI libraries are regulated as
//! the agent's own data plane regulates its ports.
//!
//! Layout on the interface (`docs/kernel-backend.md`):
//!
//! ```text
//! htb qdisc c05:  (at the root, or under a tbf link shaper's class)
//! ├── class c05:1   rate = ceil = the link
//! │   ├── class c05:2    unclassified packets: rate 1 % of the link, ceil the link
//! │   ├── class c05:10   flow A: rate = ceil = its grant (on the wire)
//! │   └── class c05:11   flow B: rate = ceil = its best-effort share
//! └── u32 filters, preference 10: each flow's packet patterns → its class
//! ```
//!
//! - [`netlink`]: the rtnetlink socket; [`tc`]: the messages; [`plan`]: the wanted
//!   state and the reconciliation rules (pure); [`enforcer`]: the backend behind the agent's `Enforcer` seam.
//! - Everything under the qdisc is this backend's. A restarted agent (also after
//!   `kill -9`) adopts the qdisc it finds, leaves its classes enforcing what they did
//!   until the manager's snapshot arrives, then [`KernelBackend::reconcile`]s: live
//!   flows keep their classes, stale classes and filters go.
//! - Errors name what is missing, and an install that fails half-way is undone.

pub mod bpf;
pub mod enforcer;
pub mod jobs;
pub mod netlink;
pub mod plan;
pub mod tc;

use std::collections::BTreeMap;

use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage};
use netlink_packet_route::RouteNetlinkMessage as M;

use self::netlink::{Link, NlError, Rtnl};
use self::plan::{
    Addrs, Class, Filter, Installed, Key, Match, Op, RateBasis, DEFAULT_MINOR, PREF, ROOT_MINOR,
};
use self::tc::HtbRates;
use crate::agent::table::IdtTable;

/// The default major number of the backend's qdisc handle (`c05:`).
pub const DEFAULT_MAJOR: u16 = 0xc05;

/// Why the kernel backend cannot run. Each message is one line naming what is missing.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("the kernel backend needs CAP_NET_ADMIN to change traffic control on {0} (run the agent as root)")]
    NotPermitted(String),
    #[error("no interface '{0}' in this network namespace")]
    NoInterface(String),
    #[error("interface '{0}' vanished")]
    Vanished(String),
    #[error("the kernel has no `{0}` qdisc (module sch_{0}); the kernel backend needs it")]
    MissingQdisc(String),
    #[error("the kernel has no `{0}` classifier (module cls_{0}); the kernel backend needs it")]
    MissingClassifier(String),
    #[error("{iface} already has a {what} `{kind} {major:x}:` that clusterqos did not install; remove it or give the agent another interface")]
    Occupied {
        iface: String,
        what: &'static str,
        kind: String,
        major: u16,
    },
    #[error("cannot tell the rate of {0} (no tbf shaper at its root, no speed in /sys/class/net/{0}/speed): give --link-rate")]
    NoLinkRate(String),
    #[error("{what} on {iface}: {source}")]
    Netlink {
        iface: String,
        what: String,
        #[source]
        source: NlError,
    },
}

/// How the backend runs.
#[derive(Debug, Clone)]
pub struct KernelConfig {
    /// The interface the node's traffic leaves by.
    pub interface: String,
    /// Node addresses and this node's name.
    pub addrs: Addrs,
    /// What grants count (payload of TCP, of UDP, or frames).
    pub basis: RateBasis,
    /// The link's rate in frame bytes/s (`None`: a tbf shaper's rate at the root, or the
    /// interface's speed).
    pub link_rate: Option<u64>,
    /// Major number of the qdisc handle.
    pub major: u16,
}

impl KernelConfig {
    /// The backend for `interface` with the defaults: TCP payload grants, link rate
    /// found on the interface, qdisc `c05:`.
    pub fn new(interface: &str, addrs: Addrs) -> KernelConfig {
        KernelConfig {
            interface: interface.to_string(),
            addrs,
            basis: RateBasis::TcpPayload,
            link_rate: None,
            major: DEFAULT_MAJOR,
        }
    }
}

/// Where the qdisc hangs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// At the root (the kernel's default qdisc comes back when it goes).
    Root,
    /// Under a tbf link shaper: a bfifo of `limit` bytes (tbf's default) is put back
    /// when it goes.
    UnderTbf { tbf: TcHandle, limit: u32 },
}

/// What one reconciliation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Flows added, rates changed, classes removed, filters added or removed.
    pub added: usize,
    pub changed: usize,
    pub removed: usize,
    pub filters: usize,
    /// Rows that cannot be enforced, with why.
    pub skipped: Vec<String>,
    /// The class of every enforced flow and job part.
    pub placed: BTreeMap<Key, u16>,
}

/// The installed backend on one interface.
pub struct KernelBackend {
    cfg: KernelConfig,
    nl: Rtnl,
    link: Link,
    attach: Attach,
    link_rate: u64,
    /// Whether the qdisc was there already (a restarted agent).
    pub adopted: bool,
    /// The hash table of this backend's u32 filters, once the kernel has made it (the
    /// kernel numbers the tables of all u32 filters of a qdisc together).
    htid: Option<u32>,
    /// Jobs' flows without ports, told by the job's cgroup.
    jobs: jobs::CgroupJobs,
    /// The class of every flow and job part at the last reconciliation.
    last_placed: BTreeMap<Key, u16>,
}

fn is_perm(e: &NlError) -> bool {
    matches!(e.errno(), Some(libc::EPERM) | Some(libc::EACCES))
}

impl KernelBackend {
    fn nl_err(&self, what: impl Into<String>) -> impl FnOnce(NlError) -> KernelError + '_ {
        let what = what.into();
        move |source| {
            if is_perm(&source) {
                KernelError::NotPermitted(self.cfg.interface.clone())
            } else if source.errno() == Some(libc::ENODEV) {
                KernelError::Vanished(self.cfg.interface.clone())
            } else {
                KernelError::Netlink {
                    iface: self.cfg.interface.clone(),
                    what,
                    source,
                }
            }
        }
    }

    fn qhandle(&self, minor: u16) -> TcHandle {
        tc::handle(self.cfg.major, minor)
    }

    /// Installs the qdisc with its root and default classes on the interface — or
    /// adopts the one a previous agent left — and checks that the u32 classifier is
    /// there. On failure nothing this call created is left behind.
    pub fn install(cfg: KernelConfig) -> Result<KernelBackend, KernelError> {
        let iface = cfg.interface.clone();
        let nl_fail = |what: &str| {
            let iface = iface.clone();
            let what = what.to_string();
            move |source: NlError| {
                if is_perm(&source) {
                    KernelError::NotPermitted(iface)
                } else {
                    KernelError::Netlink {
                        iface,
                        what,
                        source,
                    }
                }
            }
        };
        let mut nl = Rtnl::open().map_err(nl_fail("opening rtnetlink"))?;
        let link = nl
            .link(&iface)
            .map_err(nl_fail("looking up the interface"))?
            .ok_or_else(|| KernelError::NoInterface(iface.clone()))?;
        let qdiscs: Vec<tc::QdiscInfo> = nl
            .dump(M::GetQueueDiscipline(dump_invisible(tc::dump_ref(
                link.index,
                TcHandle::UNSPEC,
            ))))
            .map_err(nl_fail("listing qdiscs"))?
            .into_iter()
            .filter_map(|m| match m {
                M::NewQueueDiscipline(q) if q.header.index == link.index as i32 => {
                    Some(tc::parse_qdisc(&q))
                }
                _ => None,
            })
            .collect();
        let root = qdiscs.iter().find(|q| q.parent == TcHandle::ROOT);
        let ours = |q: &&tc::QdiscInfo| q.kind == "htb" && q.handle.major == cfg.major;
        let occupied = |what, q: &tc::QdiscInfo| KernelError::Occupied {
            iface: iface.clone(),
            what,
            kind: q.kind.clone(),
            major: q.handle.major,
        };
        let (attach, adopted, tbf_rate) = match root {
            Some(r) if ours(&r) => (Attach::Root, true, None),
            Some(r) if r.kind == "tbf" => {
                let (rate, limit) = r.tbf.unwrap_or((0, 0));
                let slot = tc::handle(r.handle.major, 1);
                let child = qdiscs.iter().find(|q| q.parent == slot);
                let attach = Attach::UnderTbf {
                    tbf: r.handle,
                    limit,
                };
                match child {
                    Some(c) if ours(&c) => (attach, true, Some(rate)),
                    None => (attach, false, Some(rate)),
                    Some(c) if c.kind == "bfifo" || c.kind == "pfifo" => {
                        (attach, false, Some(rate))
                    }
                    Some(c) => return Err(occupied("qdisc under its tbf shaper", c)),
                }
            }
            Some(r) if r.handle.major == 0 => (Attach::Root, false, None),
            None => (Attach::Root, false, None),
            Some(r) => return Err(occupied("root qdisc", r)),
        };
        let link_rate = match cfg.link_rate.or(tbf_rate.filter(|r| *r > 0)) {
            Some(r) => r,
            None => sysfs_speed(&iface).ok_or_else(|| KernelError::NoLinkRate(iface.clone()))?,
        };
        let mut kb = KernelBackend {
            cfg,
            nl,
            link,
            attach,
            link_rate,
            adopted,
            htid: None,
            jobs: jobs::CgroupJobs::none(),
            last_placed: BTreeMap::new(),
        };
        if let Err(e) = kb.set_up() {
            if !adopted {
                let _ = kb.remove_qdisc();
            }
            return Err(e);
        }
        kb.jobs = jobs::CgroupJobs::start(&kb.cfg.interface, kb.cfg.major);
        Ok(kb)
    }

    /// The jobs' cgroups, if this backend's classifier tells jobs' traffic by them.
    pub fn job_cgroups(&self) -> Option<crate::agent::cgroup::JobCgroups> {
        self.jobs.cgroups()
    }

    fn parent(&self) -> TcHandle {
        match self.attach {
            Attach::Root => TcHandle::ROOT,
            Attach::UnderTbf { tbf, .. } => tc::handle(tbf.major, 1),
        }
    }

    fn set_up(&mut self) -> Result<(), KernelError> {
        let (idx, q) = (self.link.index, self.qhandle(0));
        if !self.adopted {
            let msg = tc::htb_qdisc(idx, q, self.parent(), DEFAULT_MINOR);
            match self
                .nl
                .request(M::NewQueueDiscipline(msg), NLM_F_CREATE | NLM_F_REPLACE)
            {
                Err(NlError::Kernel(libc::ENOENT)) => {
                    return Err(KernelError::MissingQdisc("htb".into()))
                }
                r => r.map_err(self.nl_err("adding the htb qdisc"))?,
            }
        }
        let link = self.link_rate;
        let root = self.rates(link, link);
        let msg = tc::htb_class(idx, self.qhandle(ROOT_MINOR), q, root);
        self.nl
            .request(M::NewTrafficClass(msg), NLM_F_CREATE)
            .map_err(self.nl_err("setting the root class"))?;
        let floor = (link / 100).max(12_000).min(link);
        let dflt = self.rates(floor, link);
        let msg = tc::htb_class(
            idx,
            self.qhandle(DEFAULT_MINOR),
            self.qhandle(ROOT_MINOR),
            dflt,
        );
        self.nl
            .request(M::NewTrafficClass(msg), NLM_F_CREATE)
            .map_err(self.nl_err("setting the default class"))?;
        self.probe_classifier()
    }

    /// Adds and removes a u32 filter at a preference of its own, to learn now (not at
    /// the first grant) whether the kernel has the classifier.
    fn probe_classifier(&mut self) -> Result<(), KernelError> {
        const PROBE_PREF: u16 = 1;
        let m = Match {
            proto: None,
            src: None,
            dst: std::net::Ipv4Addr::BROADCAST,
            sport: 0,
            dport: 0,
            dscp: None,
        };
        let (idx, q) = (self.link.index, self.qhandle(0));
        let msg = tc::u32_filter(
            idx,
            q,
            PROBE_PREF,
            0,
            m.selector(),
            self.qhandle(DEFAULT_MINOR),
        );
        match self
            .nl
            .request(M::NewTrafficFilter(msg), NLM_F_CREATE | NLM_F_EXCL)
        {
            Err(NlError::Kernel(libc::ENOENT)) => {
                return Err(KernelError::MissingClassifier("u32".into()))
            }
            r => r.map_err(self.nl_err("adding a probe filter"))?,
        }
        self.nl
            .request(
                M::DelTrafficFilter(tc::filter_ref(idx, q, PROBE_PREF, 0, "u32")),
                0,
            )
            .map_err(self.nl_err("removing the probe filter"))
    }

    /// htb parameters for `rate` and `ceil`: a burst of 10 ms at the rate but at least
    /// two full frames — what a flow that fell idle for a moment (its sender late, as
    /// MPI's progress engine is) may make up, as rate control's NDT += IDT makes up for
    /// lateness (thesis §4.2.2); a quantum of one full frame (classes borrow frame by
    /// frame).
    fn rates(&self, rate: u64, ceil: u64) -> HtbRates {
        let frame = self.link.mtu + 14;
        let burst = ((rate / 100).min(u64::from(u32::MAX)) as u32).max(2 * frame);
        HtbRates {
            rate,
            ceil,
            burst,
            quantum: frame,
        }
    }

    /// The interface.
    pub fn link(&self) -> &Link {
        &self.link
    }

    /// Where the qdisc hangs.
    pub fn attach(&self) -> Attach {
        self.attach
    }

    /// The link rate the root class holds, frame bytes/s.
    pub fn link_rate(&self) -> u64 {
        self.link_rate
    }

    /// Fails with [`KernelError::Vanished`] if the interface is gone (or is another one
    /// now under the same name).
    pub fn check_link(&mut self) -> Result<(), KernelError> {
        let name = self.cfg.interface.clone();
        match self.nl.link(&name) {
            Ok(Some(l)) if l.index == self.link.index => {
                self.link.mtu = l.mtu;
                Ok(())
            }
            Ok(_) => Err(KernelError::Vanished(name)),
            Err(e) => Err(self.nl_err("looking up the interface")(e)),
        }
    }

    /// Reads the flow classes and filters under the qdisc.
    pub fn installed(&mut self) -> Result<Installed, KernelError> {
        let (idx, q) = (self.link.index, self.qhandle(0));
        let classes = self
            .nl
            .dump(M::GetTrafficClass(tc::dump_ref(idx, TcHandle::UNSPEC)))
            .map_err(self.nl_err("listing classes"))?;
        let filters = self
            .nl
            .dump(M::GetTrafficFilter(tc::dump_ref(idx, q)))
            .map_err(self.nl_err("listing filters"))?;
        let mut have = Installed::default();
        for m in classes {
            if let M::NewTrafficClass(c) = m {
                let c = tc::parse_class(&c);
                let minor = c.classid.minor;
                if c.classid.major != self.cfg.major
                    || minor == ROOT_MINOR
                    || minor == DEFAULT_MINOR
                {
                    continue;
                }
                have.classes.insert(
                    minor,
                    Class {
                        minor,
                        rate: c.rate.unwrap_or(0),
                        ceil: c.ceil.unwrap_or(0),
                    },
                );
            }
        }
        for m in filters {
            if let M::NewTrafficFilter(f) = m {
                let f = tc::parse_filter(&f);
                if f.kind == "bpf" && f.pref == jobs::BPF_PREF {
                    continue; // the jobs' classifier: not the plan's to remove
                }
                let node = f.handle & 0xfff;
                let ours = f.kind == "u32" && f.pref == PREF && f.protocol == tc::ETH_P_IP;
                if f.kind == "u32" && node == 0 {
                    // A hash table (its nodes go with it); ours holds this backend's
                    // filters.
                    if ours && f.handle & 0x000f_ffff == 0 {
                        self.htid = Some(f.handle);
                    }
                    continue;
                }
                have.filters.push(Filter {
                    handle: f.handle,
                    node,
                    pref: f.pref,
                    m: if ours {
                        f.selector.as_ref().and_then(Match::from_selector)
                    } else {
                        None
                    },
                    class: f
                        .classid
                        .filter(|c| c.major == self.cfg.major)
                        .map(|c| c.minor),
                    kind: f.kind,
                });
            }
        }
        Ok(have)
    }

    /// Makes the kernel hold `table`'s flows sourced at this node and the parts of its
    /// jobs that leave it (`docs/jobs.md`, by ports and by cgroup): adds, changes and
    /// removes classes and filters as [`plan::diff`] lists, then the classifier's map
    /// entries. A new flow whose filters cannot all be added is removed again whole.
    pub fn reconcile(&mut self, table: &IdtTable) -> Result<Applied, KernelError> {
        self.check_link()?;
        let (mut want, skipped) = plan::wanted_with_jobs(
            table,
            &self.cfg.addrs,
            self.cfg.basis,
            self.link.mtu,
            self.jobs.unavailable(),
        );
        for (k, w) in want.iter_mut() {
            w.keep = self.last_placed.get(k).copied();
        }
        let have = self.installed()?;
        let (ops, placed) = plan::diff(&want, &have).map_err(|e| KernelError::Netlink {
            iface: self.cfg.interface.clone(),
            what: "planning".into(),
            source: NlError::Decode(e),
        })?;
        let mut done = Applied {
            skipped,
            placed,
            ..Applied::default()
        };
        for op in ops {
            self.apply(&op, &mut done)?;
        }
        let failed = self.jobs.sync(&want, &done.placed);
        done.skipped.extend(failed);
        self.last_placed = done.placed.clone();
        Ok(done)
    }

    /// The handle to add node `node` under: in this backend's hash table if the kernel
    /// has made it, else the node alone (the kernel puts it in the table it makes).
    fn filter_handle(&self, node: u32) -> u32 {
        self.htid.map_or(node, |h| h | node)
    }

    fn add_filter(&mut self, node: u32, m: &Match, minor: u16) -> Result<(), KernelError> {
        let msg = tc::u32_filter(
            self.link.index,
            self.qhandle(0),
            PREF,
            self.filter_handle(node),
            m.selector(),
            self.qhandle(minor),
        );
        self.nl
            .request(M::NewTrafficFilter(msg), NLM_F_CREATE | NLM_F_EXCL)
            .map_err(self.nl_err("adding a filter"))
    }

    fn del_filter(&mut self, handle: u32, pref: u16, kind: &str) -> Result<(), KernelError> {
        let msg = tc::filter_ref(self.link.index, self.qhandle(0), pref, handle, kind);
        match self.nl.request(M::DelTrafficFilter(msg), 0) {
            Err(NlError::Kernel(libc::ENOENT)) => Ok(()),
            r => r.map_err(self.nl_err("removing a filter")),
        }
    }

    fn set_class(&mut self, minor: u16, rate: u64, create: bool) -> Result<(), KernelError> {
        let r = self.rates(rate, rate);
        let msg = tc::htb_class(
            self.link.index,
            self.qhandle(minor),
            self.qhandle(ROOT_MINOR),
            r,
        );
        let flags = if create { NLM_F_CREATE | NLM_F_EXCL } else { 0 };
        self.nl
            .request(M::NewTrafficClass(msg), flags)
            .map_err(self.nl_err(if create {
                "adding a class"
            } else {
                "changing a class"
            }))
    }

    fn del_class(&mut self, minor: u16) -> Result<(), KernelError> {
        let msg = tc::class_ref(self.link.index, self.qhandle(minor));
        match self.nl.request(M::DelTrafficClass(msg), 0) {
            Err(NlError::Kernel(libc::ENOENT)) => Ok(()),
            r => r.map_err(self.nl_err("removing a class")),
        }
    }

    fn apply(&mut self, op: &Op<Key>, done: &mut Applied) -> Result<(), KernelError> {
        match op {
            Op::DelFilter { handle, pref, kind } => {
                self.del_filter(*handle, *pref, kind)?;
                done.filters += 1;
            }
            Op::DelClass { minor } => {
                self.del_class(*minor)?;
                done.removed += 1;
            }
            Op::SetRate { minor, rate } => {
                self.set_class(*minor, *rate, false)?;
                done.changed += 1;
            }
            Op::AddFilter { node, m, minor } => {
                self.add_filter(*node, m, *minor)?;
                done.filters += 1;
            }
            Op::AddFlow {
                minor,
                rate,
                filters,
                ..
            } => {
                self.set_class(*minor, *rate, true)?;
                for (i, (node, m)) in filters.iter().enumerate() {
                    if let Err(e) = self.add_filter(*node, m, *minor) {
                        for (n, _) in &filters[..i] {
                            let h = self.filter_handle(*n);
                            let _ = self.del_filter(h, PREF, "u32");
                        }
                        let _ = self.del_class(*minor);
                        return Err(e);
                    }
                }
                done.added += 1;
                done.filters += filters.len();
            }
        }
        Ok(())
    }

    /// Bytes and packets each flow class has sent, by minor number.
    pub fn class_counters(&mut self) -> Result<BTreeMap<u16, (u64, u64)>, KernelError> {
        let dump = self
            .nl
            .dump(M::GetTrafficClass(tc::dump_ref(
                self.link.index,
                TcHandle::UNSPEC,
            )))
            .map_err(self.nl_err("listing classes"))?;
        Ok(dump
            .into_iter()
            .filter_map(|m| match m {
                M::NewTrafficClass(c) => {
                    let c = tc::parse_class(&c);
                    (c.classid.major == self.cfg.major)
                        .then_some((c.classid.minor, (c.bytes, c.packets)))
                }
                _ => None,
            })
            .collect())
    }

    fn remove_qdisc(&mut self) -> Result<(), KernelError> {
        let idx = self.link.index;
        match self.attach {
            Attach::Root => {
                let msg = tc::qdisc_ref(idx, self.qhandle(0), TcHandle::ROOT);
                match self.nl.request(M::DelQueueDiscipline(msg), 0) {
                    Err(NlError::Kernel(libc::ENOENT)) | Err(NlError::Kernel(libc::EINVAL)) => {
                        Ok(())
                    }
                    r => r.map_err(self.nl_err("removing the htb qdisc")),
                }
            }
            Attach::UnderTbf { limit, .. } => {
                // Deleting a tbf's child leaves it a qdisc that drops everything: put
                // back the bfifo tbf makes for itself.
                let msg = tc::bfifo_qdisc(idx, self.parent(), limit.max(2 * (self.link.mtu + 14)));
                self.nl
                    .request(M::NewQueueDiscipline(msg), NLM_F_CREATE | NLM_F_REPLACE)
                    .map_err(self.nl_err("putting the tbf shaper's bfifo back"))
            }
        }
    }

    /// Removes everything the backend installed (the interface keeps its shaper, or
    /// gets the kernel's default qdisc back). A vanished interface took it all along.
    pub fn uninstall(mut self) -> Result<(), KernelError> {
        match self.check_link() {
            Err(KernelError::Vanished(_)) => return Ok(()),
            Err(e) => return Err(e),
            Ok(()) => {}
        }
        self.remove_qdisc()
    }
}

/// A qdisc dump request that also lists the default qdiscs the kernel hides (a tbf's
/// own bfifo).
fn dump_invisible(mut m: TcMessage) -> TcMessage {
    m.attributes.push(TcAttribute::DumpInvisible(true));
    m
}

/// The interface's speed from sysfs, bytes/s.
fn sysfs_speed(iface: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{iface}/speed")).ok()?;
    let mbit: i64 = s.trim().parse().ok()?;
    (mbit > 0).then(|| mbit as u64 * 1_000_000 / 8)
}
