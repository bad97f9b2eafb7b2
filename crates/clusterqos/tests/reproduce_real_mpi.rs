//! `clusterqos reproduce gulati --real --backend kernel --quick`: the thesis's MPI-level
//! experiment (§5.5, Fig 5.9 and 5.10) with a real Open MPI and MPICH job across the testbed's
//! namespaces, rates asked through the PMPI attribute interface and enforced by the
//! agents' kernel backend; the testbed removed afterwards. Needs root, network
//! namespaces and Open MPI or MPICH: ignored by default, run by `scripts/test` where it can run.

mod common;

use common::real::reproduce_real;

/// Needs root, namespaces and MPI: run by `scripts/test` (`-- --ignored root::`).
mod root {
    use super::*;

    #[test]
    #[ignore = "needs root (network namespaces, tc) and MPI (Open MPI: mpirun, mpicc)"]
    fn openmpi_flows_from_one_node_share_in_the_inverse_idt_ratio_under_the_kernel_backend() {
        reproduce("openmpi");
    }

    #[test]
    #[ignore = "needs root (network namespaces, tc) and MPI (MPICH: mpirun, mpicc)"]
    fn mpich_flows_from_one_node_share_in_the_inverse_idt_ratio_under_the_kernel_backend() {
        reproduce("mpich");
    }

    fn reproduce(mpi: &str) {
        // Real MPI on a shared 2-core machine: one retry when a check of the enforcement
        // misses, with the reason logged (busy-polling MPI ranks descheduled under load
        // lose rate).
        if let Err(why) = attempt(mpi) {
            eprintln!("retrying once: {why}");
            attempt(mpi).unwrap_or_else(|why| panic!("{why}"));
        }
    }

    /// Whether a check's miss fails the test: the ratios of Fig 5.10 and each granted
    /// flow's rate against its ask are what the kernel backend and the PMPI library
    /// decide. The MPI-level cap is the host's (CPU) and is reported, not asserted.
    fn asserted(c: &serde_json::Value) -> bool {
        let m = c["id"]["metric"].as_str().unwrap_or("");
        m == "ratio" || m.starts_with("MPI-level B / asked")
    }

    fn attempt(mpi: &str) -> Result<(), String> {
        let run = reproduce_real(
            "gulati",
            'p',
            &["--backend", "kernel", "--quick", "--mpi", mpi],
        );
        let v = &run.json;
        let checks = v["checks"].as_array().unwrap();
        assert!(checks.iter().all(|c| c["id"]["experiment"] == "mpi-level"));
        let ratios: Vec<&serde_json::Value> = checks
            .iter()
            .filter(|c| c["id"]["metric"] == "ratio")
            .collect();
        assert_eq!(ratios.len(), 2, "the two cases of Fig 5.10");
        for r in &ratios {
            assert!(
                r["simulated"].is_f64(),
                "simulated value beside the real one: {r}"
            );
        }
        let k = v["details"]["wire_factor"].as_f64().unwrap();
        assert!(k > 0.5 && k < 2.0, "wire factor {k}");
        assert_eq!(v["details"]["mpi"], mpi);
        let asked = checks.iter().filter(|c| asserted(c)).count();
        assert_eq!(asked, 6, "two ratios and four flows of Fig 5.10");
        let (misses, shown): (Vec<&serde_json::Value>, Vec<&serde_json::Value>) = checks
            .iter()
            .filter(|c| c["ok"] == false)
            .partition(|c| asserted(c));
        for c in shown {
            eprintln!("reported, not asserted: {}: {}", c["label"], c["measured"]);
        }
        let misses: Vec<String> = misses
            .iter()
            .map(|c| format!("{}: {}", c["label"], c["measured"]))
            .collect();
        if misses.is_empty() {
            Ok(())
        } else {
            Err(format!("misses: {}", misses.join("; ")))
        }
    }
}
