//! The cgroups by which a node tells a job's traffic (`docs/jobs.md`): one cgroup v2
//! directory per job, `<cgroup2>/clusterqos/<job id>`. A job's processes are put in it
//! (the Slurm plugin does it for each task before the task runs, through the agent:
//! `join_job` on its socket); every socket they open is then marked with it, and the
//! kernel backend sends the packets of sockets in it to the job's classes (a BPF
//! classifier reading the socket's cgroup, `kernel::bpf`).
//!
//! The cgroup2 hierarchy is the one mounted on the machine, found in
//! `/proc/self/mountinfo`; where none is visible (`ip netns exec` mounts a fresh `/sys`)
//! the agent mounts it itself under `/run/clusterqos/cgroup2` — the same hierarchy,
//! so agents and tasks in other mount namespaces name the same cgroups.

use std::io;
use std::path::{Path, PathBuf};

/// The directory, under the cgroup2 root, that holds the jobs' cgroups.
pub const JOBS_DIR: &str = "clusterqos";

/// Where a cgroup2 hierarchy is mounted when none is.
pub const FALLBACK_MOUNT: &str = "/run/clusterqos/cgroup2";

/// Why a job's cgroup could not be had.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No cgroup2 hierarchy, and none could be mounted.
    #[error("no cgroup2 hierarchy is mounted and mounting one at {FALLBACK_MOUNT} failed: {0}")]
    NoHierarchy(io::Error),
    /// A file of the hierarchy.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The jobs' cgroups on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobCgroups {
    /// `<cgroup2 mount>/clusterqos`.
    base: PathBuf,
    /// Depth in the hierarchy of a job's cgroup (the hierarchy's root is 0).
    level: u32,
}

/// A job's cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobCgroup {
    /// Its id (the kernel's cgroup id: the directory's inode number).
    pub id: u64,
    /// Its depth in the hierarchy.
    pub level: u32,
}

impl JobCgroups {
    /// The jobs' cgroups under the cgroup2 hierarchy mounted here (mounting it if it
    /// is not visible).
    pub fn find() -> Result<JobCgroups, CgroupError> {
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        if let Some((mount, root)) = cgroup2_mount(&info) {
            return Ok(JobCgroups::at(&mount, &root));
        }
        std::fs::create_dir_all(FALLBACK_MOUNT).map_err(CgroupError::NoHierarchy)?;
        let path = std::ffi::CString::new(FALLBACK_MOUNT).expect("no NUL");
        let fs = c"cgroup2";
        // SAFETY: valid NUL-terminated strings; no data argument.
        let rc =
            unsafe { libc::mount(fs.as_ptr(), path.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
        if rc != 0 {
            return Err(CgroupError::NoHierarchy(io::Error::last_os_error()));
        }
        Ok(JobCgroups::at(Path::new(FALLBACK_MOUNT), "/"))
    }

    /// The jobs' cgroups under a cgroup2 hierarchy mounted at `mount`, whose root is
    /// `root` within the hierarchy (mountinfo's fourth field).
    pub fn at(mount: &Path, root: &str) -> JobCgroups {
        let depth = root.split('/').filter(|c| !c.is_empty()).count() as u32;
        JobCgroups {
            base: mount.join(JOBS_DIR),
            level: depth + 2,
        }
    }

    /// The directory of job `id`'s cgroup.
    pub fn path(&self, id: &str) -> PathBuf {
        self.base.join(id)
    }

    /// Job `id`'s cgroup, made if it is not there.
    pub fn ensure(&self, id: &str) -> Result<JobCgroup, CgroupError> {
        let p = self.path(id);
        match std::fs::create_dir_all(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err(&p)(e)),
        }
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(&p).map_err(io_err(&p))?;
        Ok(JobCgroup {
            id: meta.ino(),
            level: self.level,
        })
    }

    /// Moves process `pid` into job `id`'s cgroup (made if need be); returns the
    /// cgroup's path in the hierarchy ("/clusterqos/<id>").
    pub fn join(&self, id: &str, pid: u32) -> Result<String, CgroupError> {
        self.ensure(id)?;
        let procs = self.path(id).join("cgroup.procs");
        std::fs::write(&procs, format!("{pid}\n")).map_err(io_err(&procs))?;
        Ok(format!("/{JOBS_DIR}/{id}"))
    }

    /// Removes job `id`'s cgroup if no process is left in it (a busy one stays; it
    /// goes when the job's id comes again and it is empty then).
    pub fn remove(&self, id: &str) {
        let _ = std::fs::remove_dir(self.path(id));
    }
}

/// The mount point and root of the first cgroup2 mount in `mountinfo`'s text.
fn cgroup2_mount(mountinfo: &str) -> Option<(PathBuf, String)> {
    mountinfo.lines().find_map(|l| {
        // "36 25 0:31 / /sys/fs/cgroup/unified rw,... shared:9 - cgroup2 cgroup2 rw"
        let (left, right) = l.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let f: Vec<&str> = left.split_whitespace().collect();
        let root = unescape(f.get(3)?);
        let mount = unescape(f.get(4)?);
        Some((PathBuf::from(mount), root))
    })
}

/// mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_is_read_from_mountinfo() {
        let info = "\
24 30 0:22 / /sys rw,nosuid - sysfs sysfs rw
30 24 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
36 25 0:31 /a/b /sys/fs/cgroup/my\\040hier rw,relatime shared:9 - cgroup2 cgroup2 rw
";
        let (mount, root) = cgroup2_mount(info).unwrap();
        assert_eq!(mount, PathBuf::from("/sys/fs/cgroup/my hier"));
        assert_eq!(root, "/a/b");
        let j = JobCgroups::at(&mount, &root);
        assert_eq!(j.level, 4);
        assert_eq!(
            j.path("slurm-7"),
            PathBuf::from("/sys/fs/cgroup/my hier/clusterqos/slurm-7")
        );
        assert_eq!(JobCgroups::at(Path::new("/x"), "/").level, 2);
        assert!(cgroup2_mount("30 24 0:26 / /x rw - cgroup cgroup rw\n").is_none());
    }
}
