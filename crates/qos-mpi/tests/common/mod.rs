//! What the MPI tests share: `mpirun` of a build with two local ranks and the
//! clusterqos environment (the PMPI library, the client library it loads, the Python
//! module), whichever MPI implementation it is.

use std::path::PathBuf;
use std::process::Command;

/// libqos_client.so, built beside the test as a dependency (the PMPI library loads it).
fn client_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps.to_path_buf(), deps.join("..")]
        .into_iter()
        .map(|d| d.join("libqos_client.so"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no libqos_client.so near {}", deps.display()))
}

/// `mpirun` of `b` with two local ranks and the clusterqos environment; the caller's
/// environment variables `vars` (set on the returned command) reach the ranks too. The
/// caller appends the program.
pub fn mpirun(b: &qos_mpi::Build, vars: &[&str]) -> Command {
    let mut c = Command::new(b.mpirun());
    c.env("CLUSTERQOS_CLIENT_LIB", client_lib())
        .env("CLUSTERQOS_MPI_LIB", b.library())
        .env("PYTHONPATH", qos_mpi::python_dir())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("PMIX_MCA_gds", "hash");
    if b.implementation == "openmpi" {
        c.args(["-np", "2", "--oversubscribe", "--mca", "btl", "self,tcp"]);
        let ours = [
            "CLUSTERQOS_CLIENT_LIB",
            "CLUSTERQOS_MPI_LIB",
            "PYTHONPATH",
            "PMIX_MCA_gds",
        ];
        for v in vars.iter().chain(&ours) {
            c.args(["-x", v]);
        }
    } else {
        // MPICH's launcher passes the whole environment on.
        c.args(["-n", "2"]);
    }
    c
}
