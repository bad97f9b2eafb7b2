// Which MPI compiler wrappers qos-mpi builds with, and whether one works. Shared by the
// build script (`include!`) and the crate (which builds for an MPI installed after it
// was compiled), so both look for the same programs the same way.

/// (implementation, compiler wrapper, Debian packages that provide it), in the order
/// they are tried; the plain `mpicc` only when neither named wrapper works.
pub const WRAPPERS: [(&str, &str, &str); 3] = [
    ("openmpi", "mpicc.openmpi", "openmpi-bin libopenmpi-dev"),
    ("mpich", "mpicc.mpich", "mpich libmpich-dev"),
    ("mpi", "mpicc", "openmpi-bin libopenmpi-dev"),
];

/// Whether `program` runs as an MPI compiler wrapper (asked what it would run).
pub fn works(program: &str) -> bool {
    std::process::Command::new(program)
        .arg(if program.contains("openmpi") {
            "--showme:version"
        } else {
            "-show"
        })
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Where `program` is on `PATH`, if it is.
pub fn on_path(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}
