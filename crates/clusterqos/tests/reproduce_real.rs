//! `clusterqos reproduce gulati --real`, reduced (`--quick --only two-senders-one-node`):
//! the same code path as the full run — testbed up, Bmax measured, the thesis's two
//! cases of Fig 5.5 on real traffic, the table beside the published and simulated
//! values, the report — and the testbed removed afterwards. Needs root and network
//! namespaces: ignored by default and run by `scripts/test` where they can run.

mod common;

use common::real::reproduce_real;

/// Needs root and network namespaces: run by `scripts/test` as root (`-- --ignored root::`).
mod root {
    use super::*;

    #[test]
    #[ignore = "needs root: network namespaces, veth and tc"]
    fn reproduce_real_shares_a_source_node_in_the_idt_ratio_and_removes_its_testbed() {
        // Real traffic on a shared machine: one retry when the shares miss, with the
        // reason logged (a CPU stall of a debug build can starve a flow for a while).
        // The links run at 20 Mbit/s, not the default 80: the debug build's data planes
        // and applications need about 1.1 CPUs at 80 Mbit/s and 0.6 at 20, and a host
        // that cannot give them that many (measured: a CPU quota of 0.6 on this machine)
        // starves the faster flow first, 3:7 falling to 1.86. At 20 Mbit/s the shares
        // hold under a quota of 0.4 CPU. The IDT ratio does not depend on the link rate.
        if let Err(why) = attempt() {
            eprintln!("retrying once: {why}");
            attempt().unwrap_or_else(|why| panic!("{why}"));
        }
    }

    fn attempt() -> Result<(), String> {
        let run = reproduce_real(
            "gulati",
            'q',
            &[
                "--quick",
                "--only",
                "two-senders-one-node",
                "--link-rate",
                "20Mbit/s",
            ],
        );
        let v = &run.json;
        let checks = v["checks"].as_array().unwrap();
        assert_eq!(checks.len(), 6, "two cases x (two flows + one ratio)");
        for c in checks {
            assert_eq!(c["id"]["experiment"], "two-senders-one-node");
            assert!(c["published"]["value"].is_f64(), "{c}");
            assert!(c["published"]["source"].is_object(), "{c}");
            assert!(c["simulated"].is_f64() && c["measured"].is_f64(), "{c}");
        }
        assert_eq!(v["summary"]["checks"], 6);
        let ratio = |case: &str| {
            checks
                .iter()
                .find(|c| c["id"]["case"] == case && c["unit"] == "ratio")
                .map(|c| c["measured"].as_f64().unwrap())
                .unwrap()
        };
        // Rate control holds the ratio of the IDTs on a real shaped link (1 : 1 and 3 : 7).
        let (even, three_seven) = (ratio("(2T, 2T)"), ratio("(10T/3, 10T/7)"));
        eprintln!("ratios {even:.3} (want 1) and {three_seven:.3} (want 2.333)");
        for c in checks {
            eprintln!(
                "  {} {} {}: measured {:.3}, published {:.3}",
                c["id"]["case"], c["id"]["flow"], c["unit"], c["measured"], c["published"]["value"]
            );
        }
        eprintln!(
            "  Bmax {:.0} B/s on {} B/s links",
            v["bmax_bytes_per_sec"], v["link_rate_bytes_per_sec"]
        );
        assert!(run.dir.path().join("report/index.html").exists());
        if (even - 1.0).abs() >= 0.05 {
            return Err(format!("1:1 gave {even}"));
        }
        if (three_seven / (7.0 / 3.0) - 1.0).abs() >= 0.05 {
            return Err(format!("3:7 gave {three_seven}"));
        }
        Ok(())
    }
}
