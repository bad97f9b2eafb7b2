//! The clusterqos MPI attribute interface (Gulati's thesis §3.4, §4.4.2): where
//! the PMPI library (`libclusterqos_mpi.so`, from `c/clusterqos_mpi.c`) and the MPI-level
//! bandwidth program (`cq_mpi_bw`, thesis §5.5) are for each MPI implementation, and
//! where the header and the mpi4py module are. The build script compiles them for every
//! MPI found when the crate is built ([`builds`]); [`find`] also compiles them, once,
//! into a cache directory for an MPI installed after that, so installing MPI needs no
//! rebuild. `docs/kernel-backend.md` describes the interface and the MPI-level to wire
//! rate mapping.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

mod probe;

/// One MPI implementation the library and the program are built for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    /// "openmpi", "mpich", or "mpi" (a plain `mpicc`).
    pub implementation: &'static str,
    /// Where its outputs are.
    pub dir: PathBuf,
}

impl Build {
    /// The PMPI library.
    pub fn library(&self) -> PathBuf {
        self.dir.join("libclusterqos_mpi.so")
    }
    /// The MPI-level bandwidth program (linked with the library).
    pub fn bench(&self) -> PathBuf {
        self.dir.join("cq_mpi_bw")
    }
    /// The implementation's launcher.
    pub fn mpirun(&self) -> &'static str {
        match self.implementation {
            "openmpi" => "mpirun.openmpi",
            "mpich" => "mpirun.mpich",
            _ => "mpirun",
        }
    }
    fn complete(&self) -> bool {
        self.library().is_file() && self.bench().is_file()
    }
}

/// Why no build for an MPI implementation could be had.
#[derive(Debug, thiserror::Error)]
pub enum MpiError {
    /// Not one of "openmpi", "mpich", "mpi".
    #[error("unknown MPI implementation '{0}' (known: openmpi, mpich, mpi)")]
    Unknown(String),
    /// Its compiler wrapper is not on this machine.
    #[error(
        "{implementation}: no working {wrapper} on PATH; install it (apt-get install {packages})"
    )]
    NotInstalled {
        /// As asked for.
        implementation: String,
        /// The wrapper looked for.
        wrapper: &'static str,
        /// The Debian packages that provide it.
        packages: &'static str,
    },
    /// The wrapper failed on the sources.
    #[error("{wrapper} could not build {output}: {why}")]
    Compile {
        /// The wrapper.
        wrapper: &'static str,
        /// What it was building.
        output: String,
        /// Its last line of diagnostics.
        why: String,
    },
    /// The cache directory could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// The MPI implementations found when the crate was built whose outputs are still there
/// (empty: none was installed).
pub fn builds() -> Vec<Build> {
    env!("CLUSTERQOS_MPI_BUILDS")
        .split(';')
        .filter_map(|e| e.split_once('='))
        .filter_map(|(implementation, dir)| {
            let implementation = probe::WRAPPERS.iter().find(|w| w.0 == implementation)?.0;
            Some(Build {
                implementation,
                dir: PathBuf::from(dir),
            })
        })
        .filter(Build::complete)
        .collect()
}

/// The build-time build for `implementation`, if there is one.
pub fn build(implementation: &str) -> Option<Build> {
    builds()
        .into_iter()
        .find(|b| b.implementation == implementation)
}

/// A build for `implementation`: the one made with the crate, else one made now (once,
/// kept in [`cache_dir`]) when its compiler wrapper is on this machine today.
pub fn find(implementation: &str) -> Result<Build, MpiError> {
    if let Some(b) = build(implementation) {
        return Ok(b);
    }
    build_into(implementation, &cache_dir())
}

/// Where [`find`] keeps what it builds: `$XDG_CACHE_HOME/clusterqos/mpi`, else
/// `~/.cache/clusterqos/mpi`, else a directory of this user's under the system's
/// temporary directory.
pub fn cache_dir() -> PathBuf {
    let env = |k| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("XDG_CACHE_HOME")
        .or_else(|| env("HOME").map(|h| h.join(".cache")))
        .map(|c| c.join("clusterqos").join("mpi"))
        .unwrap_or_else(|| {
            let user = std::env::var("USER").unwrap_or_else(|_| "user".into());
            std::env::temp_dir().join(format!("clusterqos-mpi-{user}"))
        })
}

const SHIM: &str = include_str!("../c/clusterqos_mpi.c");
const BENCH: &str = include_str!("../c/cq_mpi_bw.c");
const HEADER: &str = include_str!("../include/clusterqos_mpi.h");

/// Builds the library and the program for `implementation` under `cache` with the
/// wrapper on `PATH` now, as the build script does, unless a build of the same sources
/// with the same wrapper is already there. The directory is named by a hash of both, so
/// a changed source or MPI gets a fresh build; it is assembled beside its final name and
/// renamed into place, so concurrent callers never see half a build.
pub fn build_into(implementation: &str, cache: &Path) -> Result<Build, MpiError> {
    let &(implementation, wrapper, packages) = probe::WRAPPERS
        .iter()
        .find(|w| w.0 == implementation)
        .ok_or_else(|| MpiError::Unknown(implementation.to_string()))?;
    let not_installed = || MpiError::NotInstalled {
        implementation: implementation.to_string(),
        wrapper,
        packages,
    };
    let resolved = probe::on_path(wrapper).ok_or_else(not_installed)?;
    if !probe::works(wrapper) {
        return Err(not_installed());
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (SHIM, BENCH, HEADER, &resolved).hash(&mut h);
    if let Ok(m) = std::fs::metadata(&resolved).and_then(|m| m.modified()) {
        m.hash(&mut h);
    }
    let dir = cache.join(format!("{implementation}-{:016x}", h.finish()));
    let done = Build {
        implementation,
        dir: dir.clone(),
    };
    if done.complete() {
        return Ok(done);
    }
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| MpiError::Io { path, source }
    };
    let work = cache.join(format!(".{implementation}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("include")).map_err(io(&work))?;
    for (name, text) in [
        ("clusterqos_mpi.c", SHIM),
        ("cq_mpi_bw.c", BENCH),
        ("include/clusterqos_mpi.h", HEADER),
    ] {
        let p = work.join(name);
        std::fs::write(&p, text).map_err(io(&p))?;
    }
    let compile = |args: &[&str], output: &str| -> Result<(), MpiError> {
        let o = Command::new(wrapper)
            .current_dir(&work)
            .args(["-O2", "-Iinclude"])
            .args(args)
            .output()
            .map_err(io(&resolved))?;
        if o.status.success() {
            return Ok(());
        }
        let err = String::from_utf8_lossy(&o.stderr);
        Err(MpiError::Compile {
            wrapper,
            output: output.to_string(),
            why: err.lines().last().unwrap_or("failed").to_string(),
        })
    };
    let lib = "libclusterqos_mpi.so";
    compile(
        &[
            "-shared",
            "-fPIC",
            "-Wall",
            "-Wextra",
            "clusterqos_mpi.c",
            "-o",
            lib,
            "-ldl",
        ],
        lib,
    )?;
    // The program finds the library beside itself, wherever the directory ends up.
    compile(
        &[
            "-Wall",
            "cq_mpi_bw.c",
            "-o",
            "cq_mpi_bw",
            "-L.",
            "-lclusterqos_mpi",
            "-Wl,-rpath,$ORIGIN",
        ],
        "cq_mpi_bw",
    )?;
    match std::fs::rename(&work, &dir) {
        Ok(()) => Ok(done),
        // Another caller finished first: use its build.
        Err(_) if done.complete() => {
            let _ = std::fs::remove_dir_all(&work);
            Ok(done)
        }
        Err(e) => Err(io(&dir)(e)),
    }
}

/// The directory of `clusterqos_mpi.h`.
pub fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// The directory of the `clusterqos_mpi` Python module (for `PYTHONPATH`).
pub fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python")
}
