//! Jobs told by their cgroup on one interface (`docs/jobs.md`, "Enforcement"): the
//! kernel backend's BPF classifier (`kernel::bpf`), attached in front of the flows' u32
//! filters, and its map kept equal to what the plan wants — for every job part whose
//! flows name no ports, (the job's cgroup, the destination's address) → the part's
//! class. The job's cgroup is made here if need be (`agent::cgroup`), so a task may
//! join it before or after the job's class exists.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use super::bpf::CgroupClassifier;
use super::plan::{Key, Wanted};
use crate::agent::cgroup::JobCgroups;

/// Preference of the classifier's filter: before the u32 filters' (`plan::PREF`).
pub const BPF_PREF: u16 = 5;

/// The classifier of one interface, or why there is none.
pub struct CgroupJobs {
    inner: Result<Live, String>,
}

struct Live {
    classifier: CgroupClassifier,
    cgroups: JobCgroups,
    /// What the map holds: (cgroup id, destination) → class minor.
    entries: BTreeMap<(u64, Ipv4Addr), u16>,
}

impl CgroupJobs {
    /// None yet (before the qdisc it attaches to exists).
    pub fn none() -> CgroupJobs {
        CgroupJobs {
            inner: Err("the classifier is not started".into()),
        }
    }

    /// Loads the classifier and attaches it to `iface` (of this thread's network
    /// namespace) under the qdisc of major `major`, replacing one a previous agent
    /// left. On failure the backend still runs; jobs' flows without ports are then
    /// listed as not enforced, saying why.
    pub fn start(iface: &str, major: u16) -> CgroupJobs {
        let inner = (|| {
            let cgroups = JobCgroups::find().map_err(|e| e.to_string())?;
            let classifier =
                CgroupClassifier::load().map_err(|e| format!("no BPF classifier: {e}"))?;
            super::bpf::detach(iface, major, BPF_PREF)
                .map_err(|e| format!("removing an old classifier: {e}"))?;
            classifier
                .attach(iface, major, BPF_PREF)
                .map_err(|e| format!("attaching the BPF classifier: {e}"))?;
            Ok(Live {
                classifier,
                cgroups,
                entries: BTreeMap::new(),
            })
        })();
        if let Err(why) = &inner {
            tracing::warn!(iface, %why, "jobs' flows without ports will not be enforced");
        }
        CgroupJobs { inner }
    }

    /// The jobs' cgroups, when the classifier runs.
    pub fn cgroups(&self) -> Option<JobCgroups> {
        self.inner.as_ref().ok().map(|l| l.cgroups.clone())
    }

    /// Why jobs cannot be told by cgroup here, if they cannot.
    pub fn unavailable(&self) -> Option<&str> {
        self.inner.as_ref().err().map(String::as_str)
    }

    /// Makes the map hold exactly the cgroup entries of `want` (placed in the classes of
    /// `placed`). Returns the parts it could not enforce, with why.
    pub fn sync(
        &mut self,
        want: &BTreeMap<Key, Wanted>,
        placed: &BTreeMap<Key, u16>,
    ) -> Vec<String> {
        let Ok(live) = &mut self.inner else {
            return Vec::new();
        };
        let mut failed = Vec::new();
        let mut wanted: BTreeMap<(u64, Ipv4Addr), u16> = BTreeMap::new();
        for (key, w) in want {
            let (Key::Job { id, dst }, Some(addr)) = (key, w.by_cgroup) else {
                continue;
            };
            let Some(&minor) = placed.get(key) else {
                continue;
            };
            match live.cgroups.ensure(id) {
                Ok(cg) => {
                    wanted.insert((cg.id, addr), minor);
                }
                Err(e) => failed.push(format!("job {id} to {dst}: its cgroup: {e}")),
            }
        }
        let stale: Vec<(u64, Ipv4Addr)> = live
            .entries
            .keys()
            .filter(|k| !wanted.contains_key(k))
            .copied()
            .collect();
        for k in stale {
            match live.classifier.remove(k.0, k.1) {
                Ok(()) => {
                    live.entries.remove(&k);
                }
                Err(e) => failed.push(format!("cgroup {} to {}: removing: {e}", k.0, k.1)),
            }
        }
        for (k, minor) in wanted {
            if live.entries.get(&k) == Some(&minor) {
                continue;
            }
            match live.classifier.set(k.0, k.1, minor) {
                Ok(()) => {
                    live.entries.insert(k, minor);
                }
                Err(e) => failed.push(format!("cgroup {} to {}: {e}", k.0, k.1)),
            }
        }
        failed
    }
}
