//! A job's share enforced by the agents' kernel backend on real namespaces
//! (`docs/jobs.md`): a job whose flows name ports (as the MPI job attribute makes them)
//! becomes, on each node it leaves, one htb class per destination at the summed rate,
//! with u32 filters on the flows' ports; the job's stream gets its reservation while
//! an unreserved stream floods the same link, and the class goes with the job.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::testbed::{eventually, sh, text, Testbed};

/// The rate (as tc prints it) of every class but the root and default ones.
fn job_classes(tc: &str) -> Vec<String> {
    tc.lines()
        .filter(|l| l.starts_with("class htb c05:"))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let id = *w.get(2)?;
            let rate = w.get(w.iter().position(|x| *x == "rate")? + 1)?.to_string();
            (id != "c05:1" && id != "c05:2").then_some(rate)
        })
        .collect()
}

/// Bytes sent by every class but the root and default ones (`tc -s class show`).
fn job_class_bytes(tc: &str) -> u64 {
    let mut lines = tc.lines();
    let mut sum = 0;
    while let Some(l) = lines.next() {
        let ours = l.starts_with("class htb c05:")
            && !l.starts_with("class htb c05:1 ")
            && !l.starts_with("class htb c05:2 ");
        if ours {
            let sent = lines.next().unwrap_or_default();
            let w: Vec<&str> = sent.split_whitespace().collect();
            if w.first() == Some(&"Sent") {
                sum += w.get(1).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
            }
        }
    }
    sum
}

/// Received bytes/s of an iperf3 client's JSON report.
fn received(json: &str) -> f64 {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or_else(|| panic!("no sum_received: {json}"))
        / 8.0
}

/// Needs root and network namespaces: run by `scripts/test` as root (`-- --ignored root::`).
mod root {
    use super::*;

    #[test]
    #[ignore = "needs root: network namespaces, veth and tc; and iperf3"]
    fn a_job_told_by_ports_gets_its_reservation_while_an_unreserved_stream_floods_the_link() {
        assert!(
            Command::new("iperf3").arg("--version").output().is_ok(),
            "needs iperf3 (apt-get install iperf3)"
        );
        let tb = Testbed::up(3, "kj", "10.77.36", "kernel");
        let h2 = tb.addr(2);
        // h1 -> h2 at 1 + 3 MB/s (two flows from two ports to one), and h2 -> h1 at 0.5
        // (a node's sends and receives share its 4.78 MB/s in the manager's books). The
        // part to h2 (4 MB/s of the link's 4.78 MB/s of TCP payload) is well above what
        // one stream got unregulated against the flood (0.09 to 3.0 MB/s measured).
        let file = tb.dir.path().join("job.toml");
        std::fs::write(
            &file,
            r#"id = "ports-job"
owner = "test"
[[flow]]
src = "h1"
dst = "h2"
rate = "1MB/s"
src_port = 7001
dst_port = 7002
[[flow]]
src = "h1"
dst = "h2"
rate = "3MB/s"
src_port = 7003
dst_port = 7002
[[flow]]
src = "h2"
dst = "h1"
rate = "0.5MB/s"
src_port = 7002
dst_port = 7001
"#,
        )
        .unwrap();
        let o = tb.job("h1", &["reserve", "--file", file.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o));
        // h1's part: one class at 4 MB/s of TCP payload on the wire (x 1514/1448),
        // as tc prints it; its filters: from 7001 or 7003, or to 7002, TCP and UDP.
        let wire = (4_000_000u64 * 1514).div_ceil(1448);
        let want = format!("{}Kbit", wire * 8 / 1000);
        assert!(
            eventually(Duration::from_secs(10), || job_classes(&sh(
                &tb.ns("h1"),
                "tc class show dev eth0"
            )) == [want.clone()]),
            "h1's classes: {}",
            sh(&tb.ns("h1"), "tc class show dev eth0")
        );
        let filters = sh(&tb.ns("h1"), "tc filter show dev eth0 parent c05:");
        assert_eq!(filters.matches("flowid c05:").count(), 6, "{filters}");
        assert!(eventually(Duration::from_secs(10), || job_classes(&sh(
            &tb.ns("h2"),
            "tc class show dev eth0"
        ))
        .len()
            == 1));
        assert!(job_classes(&sh(&tb.ns("h0"), "tc class show dev eth0")).is_empty());

        // The job's stream (from port 7001 to h2:7002) and an unreserved flood (to
        // h2:7100) share h1's 40 Mbit/s link for 8 s; the first second is left out.
        let _servers: Vec<common::Proc> = [7002, 7100]
            .iter()
            .map(|p| {
                common::Proc(
                    Command::new("ip")
                        .args(["netns", "exec", &tb.ns("h2"), "iperf3", "-s", "-1", "-p"])
                        .arg(p.to_string())
                        .stdout(Stdio::null())
                        .spawn()
                        .unwrap(),
                )
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let client = |args: &[&str]| {
            Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &tb.ns("h1"),
                    "iperf3",
                    "-c",
                    &h2,
                    "-t",
                    "8",
                    "-O",
                    "1",
                    "-J",
                ])
                .args(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let flood = client(&["-p", "7100", "-P", "4"]);
        let job = client(&["-p", "7002", "--cport", "7001"]);
        let started = Instant::now();
        let job = job.wait_with_output().unwrap();
        let flood = flood.wait_with_output().unwrap();
        let (got, other) = (
            received(&String::from_utf8_lossy(&job.stdout)),
            received(&String::from_utf8_lossy(&flood.stdout)),
        );
        let elapsed = started.elapsed().as_secs_f64();
        let in_class = job_class_bytes(&sh(&tb.ns("h1"), "tc -s class show dev eth0"));
        eprintln!(
            "job stream {got:.0} B/s (reserved 4,000,000 for the job to h2), flood {other:.0} \
             B/s; the job's class sent {in_class} B in {elapsed:.1} s"
        );
        // The job's class carried the job's stream (its frames: more than the stream's
        // payload over the 7 s measured) and not the flood (no more than its rate
        // allows over the whole run).
        assert!(
            in_class as f64 >= got * 7.0,
            "class {in_class} B, stream {got:.0} B/s"
        );
        assert!(
            in_class as f64 <= wire as f64 * (elapsed + 1.0),
            "class {in_class} B"
        );
        // The job's stream gets the job's whole part to h2, within 2 %; the flood gets
        // the rest of the link, not nothing.
        assert!(
            (got - 4_000_000.0).abs() <= 0.02 * 4_000_000.0,
            "job stream {got:.0} B/s, flood {other:.0} B/s"
        );
        assert!(other > 300_000.0, "flood {other:.0} B/s");

        // Released: the classes go.
        let o = tb.job("h1", &["release", "--id", "ports-job", "--owner", "test"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(eventually(Duration::from_secs(10), || job_classes(&sh(
            &tb.ns("h1"),
            "tc class show dev eth0"
        ))
        .is_empty()));
    }
}
