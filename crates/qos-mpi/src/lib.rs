//! The clusterqos MPI attribute interface (Gulati's thesis §3.4, §4.4.2): where
//! this crate's build put the PMPI library (`libclusterqos_mpi.so`, from
//! `c/clusterqos_mpi.c`) and the MPI-level bandwidth program (`cq_mpi_bw`, thesis §5.5)
//! for each MPI implementation it found, and where the header and the mpi4py module are.
//! `docs/kernel-backend.md` describes the interface and the MPI-level to wire rate mapping.

use std::path::{Path, PathBuf};

/// One MPI implementation the crate was built for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    /// "openmpi", "mpich", or "mpi" (a plain `mpicc`).
    pub implementation: &'static str,
    /// Where its outputs are.
    pub dir: &'static Path,
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
}

/// The MPI implementations found when the crate was built (empty: none was installed).
pub fn builds() -> Vec<Build> {
    env!("CLUSTERQOS_MPI_BUILDS")
        .split(';')
        .filter_map(|e| e.split_once('='))
        .map(|(implementation, dir)| Build {
            implementation,
            dir: Path::new(dir),
        })
        .collect()
}

/// The build for `implementation`, if there is one.
pub fn build(implementation: &str) -> Option<Build> {
    builds()
        .into_iter()
        .find(|b| b.implementation == implementation)
}

/// The directory of `clusterqos_mpi.h`.
pub fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// The directory of the `clusterqos_mpi` Python module (for `PYTHONPATH`).
pub fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python")
}
