//! Builds the clusterqos PMPI library (`c/clusterqos_mpi.c`) and the MPI-level bandwidth
//! program (`c/cq_mpi_bw.c`) once per MPI implementation whose compiler wrapper is on
//! this machine (Open MPI's `mpicc.openmpi`, MPICH's `mpicc.mpich`, else a plain
//! `mpicc`), through the `cc` crate's compiler set-up. Without any, nothing is built and
//! the crate says so at run time (`qos_mpi::builds()` is empty), and `qos_mpi::find`
//! builds for an MPI installed since, into a cache directory. The outputs go to
//! `$OUT_DIR/<implementation>/`; their list reaches the crate as
//! `CLUSTERQOS_MPI_BUILDS` ("openmpi=DIR;mpich=DIR").

use std::path::{Path, PathBuf};

include!("src/probe.rs");

fn compile(wrapper: &str, args: &[&str], out: &Path, extra: &[&str]) {
    let tool = cc::Build::new()
        .compiler(wrapper)
        .cargo_metadata(false)
        .opt_level(2)
        .warnings(true)
        .get_compiler();
    let mut cmd = tool.to_command();
    cmd.args(args).arg("-o").arg(out).args(extra);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running {wrapper}: {e}"));
    assert!(
        status.success(),
        "{wrapper} failed to build {}",
        out.display()
    );
}

fn main() {
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    for f in [
        "c/clusterqos_mpi.c",
        "c/cq_mpi_bw.c",
        "include/clusterqos_mpi.h",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    println!("cargo:rerun-if-env-changed=PATH");
    // A wrapper that is there now is watched (an MPI upgraded or removed rebuilds); one
    // installed after this build is found at run time instead (`qos_mpi::find`): cargo
    // cannot watch for a file to appear without rerunning this script on every build.
    for (_, wrapper, _) in WRAPPERS {
        if let Some(p) = on_path(wrapper) {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    let include = here.join("include");
    let inc = format!("-I{}", include.display());
    let shim = here.join("c/clusterqos_mpi.c");
    let bench = here.join("c/cq_mpi_bw.c");
    let mut wrappers: Vec<(&str, &str)> = WRAPPERS[..2]
        .iter()
        .filter(|(_, w, _)| works(w))
        .map(|&(name, w, _)| (name, w))
        .collect();
    if wrappers.is_empty() && works(WRAPPERS[2].1) {
        wrappers.push((WRAPPERS[2].0, WRAPPERS[2].1));
    }
    let mut built = Vec::new();
    for (name, wrapper) in wrappers {
        let dir = out.join(name);
        std::fs::create_dir_all(&dir).expect("creating the output directory");
        let lib = dir.join("libclusterqos_mpi.so");
        compile(
            wrapper,
            &[
                "-shared",
                "-fPIC",
                "-Wall",
                "-Wextra",
                &inc,
                shim.to_str().expect("UTF-8 path"),
            ],
            &lib,
            &["-ldl"],
        );
        compile(
            wrapper,
            &["-Wall", &inc, bench.to_str().expect("UTF-8 path")],
            &dir.join("cq_mpi_bw"),
            &[
                &format!("-L{}", dir.display()),
                "-lclusterqos_mpi",
                &format!("-Wl,-rpath,{}", dir.display()),
            ],
        );
        built.push(format!("{name}={}", dir.display()));
    }
    println!("cargo:rustc-env=CLUSTERQOS_MPI_BUILDS={}", built.join(";"));
}
