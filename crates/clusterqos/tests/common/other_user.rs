//! Running something as another local user from any checkout location.
//!
//! A checkout often sits under a directory only its owner may traverse (`mktemp -d` makes
//! 0700 directories, root's home is 0700), so uid 65534 can reach neither the freshly
//! built binary nor a socket in the test's temporary directory. Instead of touching the
//! user's directories, a test that switches uid works in a directory of its own under a
//! base every user can traverse, with a copy of the binary in it.
#![allow(dead_code)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The uid and gid other-user tests switch to (`nobody` on Debian).
pub const NOBODY: u32 = 65534;

/// Whether every directory from `/` down to `dir` lets any user through (o+x).
pub fn world_traversable(dir: &Path) -> bool {
    let Ok(dir) = dir.canonicalize() else {
        return false;
    };
    dir.ancestors().all(|d| {
        std::fs::metadata(d)
            .map(|m| m.is_dir() && m.mode() & 0o001 != 0)
            .unwrap_or(false)
    })
}

/// A temporary directory another user can reach, holding a copy of the binary under test.
pub struct SharedDir {
    dir: tempfile::TempDir,
    bin: PathBuf,
}

impl SharedDir {
    /// Makes one under the first world-traversable base of `$TMPDIR`, `/tmp`, `/var/tmp`
    /// and `/dev/shm`; `Err` says why none could be made (the test then skips and says so).
    pub fn new() -> Result<SharedDir, String> {
        let bases = [
            std::env::temp_dir(),
            PathBuf::from("/tmp"),
            PathBuf::from("/var/tmp"),
            PathBuf::from("/dev/shm"),
        ];
        let base = bases
            .iter()
            .find(|b| world_traversable(b))
            .ok_or("no temporary directory that every user can traverse")?;
        let dir = tempfile::Builder::new()
            .prefix("clusterqos-shared-")
            .tempdir_in(base)
            .map_err(|e| format!("{}: {e}", base.display()))?;
        // Our own directory: open it for traversal and reading, nothing else.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        let bin = dir.path().join("clusterqos");
        std::fs::copy(super::BIN, &bin).map_err(|e| format!("copying the binary: {e}"))?;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        Ok(SharedDir { dir, bin })
    }

    /// The directory (world-traversable).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The copy of the binary another user can execute.
    pub fn bin(&self) -> &Path {
        &self.bin
    }
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    std::fs::metadata(format!("/proc/{}", std::process::id()))
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}
