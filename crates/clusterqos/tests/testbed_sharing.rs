//! Proportional sharing and admission refusals on real traffic: a 3-host testbed with
//! 40 Mbit/s links, a manager and agents with data planes; two premium flows from h0
//! (to h1 and h2) granted 1.2 and 2.8 MB/s (3 : 7, thesis Fig 5.5), a third refused by
//! the source-node criterion. Needs root and namespaces: ignored by default and run
//! by `scripts/test` where they can run.

use std::process::Command;
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use qos_client::{Grant, Port, PortOptions};

const MSG: usize = 8192;

/// Needs root and network namespaces: run by `scripts/test` as root (`-- --ignored root::`).
mod root {
    use super::*;

    #[test]
    #[ignore = "needs root: network namespaces, veth and tc"]
    fn premium_flows_share_a_real_link_in_the_ratio_granted_and_an_over_request_is_refused() {
        if let Some(why) = qos_runtime::testbed::unavailable_reason() {
            panic!("testbed needs {why}");
        }
        let dir = tempfile::tempdir().unwrap();
        let prefix = format!("s{}", std::process::id() % 100_000);
        let up = Command::cargo_bin("clusterqos")
            .unwrap()
            .args([
                "testbed",
                "up",
                "--nodes",
                "3",
                "--link-rate",
                "40Mbit/s",
                "--prefix",
                &prefix,
                "--subnet",
                "10.77.8",
                "--dir",
            ])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            up.status.success(),
            "testbed up: {}",
            String::from_utf8_lossy(&up.stderr)
        );
        let r = std::panic::catch_unwind(|| run(dir.path()));
        let down = Command::cargo_bin("clusterqos")
            .unwrap()
            .args(["testbed", "down", "--dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            down.status.success(),
            "testbed down: {}",
            String::from_utf8_lossy(&down.stderr)
        );
        if let Err(e) = r {
            std::panic::resume_unwind(e);
        }
    }
}

fn run(dir: &std::path::Path) {
    let mgr = dir.join("h0.agent.sock");
    let open = |node: &str, port: u16| {
        Port::open(
            PortOptions::new(dir.join(format!("{node}.dp.sock")))
                .port(port)
                .max_message(MSG)
                .manager_socket(&mgr),
        )
        .unwrap()
    };
    let (tx1, tx2, tx3) = (open("h0", 1), open("h0", 2), open("h0", 3));
    let (rx1, rx2) = (open("h1", 11), open("h2", 12));
    assert_eq!(
        tx1.request_bandwidth("h1", 11, 1_200_000).unwrap(),
        Grant::Granted
    );
    assert_eq!(
        tx2.request_bandwidth("h2", 12, 2_800_000).unwrap(),
        Grant::Granted
    );
    match tx3.request_bandwidth("h1", 13, 3_000_000).unwrap() {
        Grant::Rejected(why) => assert!(why.contains("h0"), "refusal names the resource: {why}"),
        Grant::Granted => panic!("3 MB/s more than h0 can send was granted"),
    }
    // Let the IDT updates reach h0's data plane.
    std::thread::sleep(Duration::from_millis(500));
    let run_for = Duration::from_secs(4);
    let recv = |mut p: Port| {
        std::thread::spawn(move || {
            let mut at = vec![];
            let end = Instant::now() + run_for + Duration::from_secs(1);
            while Instant::now() < end {
                if p.recv(Duration::from_millis(100)).is_ok() {
                    at.push(Instant::now());
                }
            }
            at
        })
    };
    let send = |mut p: Port, node: &'static str, port: u16| {
        std::thread::spawn(move || {
            let data = vec![1u8; MSG];
            let end = Instant::now() + run_for;
            while Instant::now() < end {
                p.send(node, port, 0, &data).unwrap();
            }
        })
    };
    let (r1, r2) = (recv(rx1), recv(rx2));
    let start = Instant::now();
    let (s1, s2) = (send(tx1, "h1", 11), send(tx2, "h2", 12));
    s1.join().unwrap();
    s2.join().unwrap();
    let (a1, a2) = (r1.join().unwrap(), r2.join().unwrap());
    // Steady state: from 0.5 s to the end of sending.
    let (from, to) = (start + Duration::from_millis(500), start + run_for);
    let n = |v: &Vec<Instant>| v.iter().filter(|t| **t >= from && **t < to).count() as f64;
    let (n1, n2) = (n(&a1), n(&a2));
    let secs = (to - from).as_secs_f64();
    let (b1, b2) = (n1 * MSG as f64 / secs, n2 * MSG as f64 / secs);
    let share = n1 / (n1 + n2);
    eprintln!("achieved {b1:.0} and {b2:.0} B/s, share {share:.4} (wanted 0.3)");
    assert!((share - 0.3).abs() / 0.3 < 0.05, "share {share:.4} vs 0.3");
    assert!(
        (b1 / 1.2e6 - 1.0).abs() < 0.1 && (b2 / 2.8e6 - 1.0).abs() < 0.1,
        "rates {b1:.0}, {b2:.0} B/s"
    );
}
