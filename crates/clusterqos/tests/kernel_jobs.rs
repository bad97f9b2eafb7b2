//! A job's share enforced by the agents' kernel backend on real namespaces
//! (`docs/jobs.md`): a job whose flows name ports (as the MPI job attribute makes them)
//! becomes, on each node it leaves, one htb class per destination at the summed rate,
//! with u32 filters on the flows' ports; the job's stream gets its reservation while
//! an unreserved stream floods the same link, and the class goes with the job.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::testbed::{eventually, run, sh, text, u32_filters, Testbed};

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
        assert_eq!(u32_filters(&filters), 6, "{filters}");
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
        // 1 MB socket buffers (a quarter second of the stream): a busy machine that
        // leaves iperf3 unscheduled for a while does not starve the stream.
        let job = client(&["-p", "7002", "--cport", "7001", "-w", "1M"]);
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

    /// Two iperf3 runs from h1 to h2 for 8 s (the first second left out): the job's
    /// stream, started inside cgroup directory `cgroup`, and a flood of 4 unreserved
    /// streams. Returns (job stream B/s, flood B/s, seconds).
    fn stream_in_cgroup_against_flood(tb: &Testbed, cgroup: &std::path::Path) -> (f64, f64, f64) {
        let h2 = tb.addr(2);
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
        let iperf = format!("iperf3 -c {h2} -t 8 -O 1 -J");
        let spawn = |script: String| {
            Command::new("sh")
                .args(["-c", &script])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let ns = tb.ns("h1");
        let flood = spawn(format!("exec ip netns exec {ns} {iperf} -p 7100 -P 4"));
        // The shell moves itself into the job's cgroup, then becomes the client: every
        // socket the client opens carries the cgroup. 1 MB socket buffers (a quarter
        // second of the stream): a busy machine that leaves iperf3 unscheduled for a
        // while does not starve the stream.
        let job = spawn(format!(
            "echo $$ > {}/cgroup.procs && exec ip netns exec {ns} {iperf} -p 7002 -w 1M",
            cgroup.display()
        ));
        let started = Instant::now();
        let job = job.wait_with_output().unwrap();
        let flood = flood.wait_with_output().unwrap();
        (
            received(&String::from_utf8_lossy(&job.stdout)),
            received(&String::from_utf8_lossy(&flood.stdout)),
            started.elapsed().as_secs_f64(),
        )
    }

    #[test]
    #[ignore = "needs root: network namespaces, tc, cgroup v2 and bpf; and iperf3"]
    fn a_job_told_by_its_cgroup_gets_its_reservation_while_an_unreserved_stream_floods_the_link() {
        use qos_runtime::agent::cgroup::JobCgroups;
        use qos_runtime::kernel::bpf::CgroupClassifier;
        use std::os::fd::AsRawFd;

        assert!(
            Command::new("iperf3").arg("--version").output().is_ok(),
            "needs iperf3 (apt-get install iperf3)"
        );
        let tb = Testbed::network(3, "kc", "10.77.37");
        let h1 = tb.ns("h1");
        // On h1's link (under its 40 Mbit/s shaper) the kernel backend's shape: htb with
        // a job class at 4 MB/s of TCP payload on the wire (rate = ceil) and a default
        // class that may take the whole link.
        let tbf = sh(&h1, "tc qdisc show dev eth0");
        let tbf = tbf
            .split_whitespace()
            .nth(2)
            .expect("the link's tbf")
            .to_string();
        let wire = (4_000_000u64 * 1514).div_ceil(1448);
        let o = run(Command::new("ip")
            .args(["netns", "exec", &h1, "sh", "-ec"])
            .arg(format!(
                "tc qdisc add dev eth0 parent {tbf}1 handle c06: htb default 2
             tc class add dev eth0 parent c06: classid c06:1 htb rate 40mbit
             tc class add dev eth0 parent c06:1 classid c06:2 htb rate 1mbit ceil 40mbit
             tc class add dev eth0 parent c06:1 classid c06:10 htb rate {0}bps ceil {0}bps",
                wire
            )));
        assert!(o.status.success(), "{}", text(&o));

        // The classifier, attached from a thread that entered h1's network namespace.
        let cls = CgroupClassifier::load().expect("loading the classifier");
        let netns = std::fs::File::open(format!("/run/netns/{h1}")).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: switches this thread's network namespace only.
                assert_eq!(
                    unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) },
                    0
                );
                cls.attach("eth0", 0xc06, 1)
                    .expect("attaching the classifier");
            })
            .join()
            .unwrap()
        });
        let cgroups = JobCgroups::find().expect("a cgroup2 hierarchy");
        let job = format!("kc-test-{}", std::process::id());
        let cg = cgroups.ensure(&job).expect("the job's cgroup");
        let h2: std::net::Ipv4Addr = tb.addr(2).parse().unwrap();
        let class_bytes = || {
            let t = sh(&h1, "tc -s class show dev eth0 classid c06:10");
            t.lines()
                .find_map(|l| l.trim().strip_prefix("Sent "))
                .and_then(|l| l.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0)
        };

        // Mechanism off first: no entry for the job's cgroup, so its stream is
        // unclassified; the job's class carries nothing.
        let (off, off_flood, _) = stream_in_cgroup_against_flood(&tb, &cgroups.path(&job));
        let off_bytes = class_bytes();
        // On: (job's cgroup, h2) -> class 0x10 of the qdisc (c06:10).
        cls.set(cg.id, h2, 0x10).unwrap();
        let mut before = off_bytes;
        let (mut got, mut other, mut elapsed) =
            stream_in_cgroup_against_flood(&tb, &cgroups.path(&job));
        if (got - 4_000_000.0).abs() > 0.02 * 4_000_000.0 {
            // Real traffic on a shared 2-core machine: one more measurement when the
            // rate misses, the miss logged (a fresh-clone CI run measured -2.57 % once).
            eprintln!("measuring again: job stream {got:.0} B/s, flood {other:.0} B/s");
            before = class_bytes();
            (got, other, elapsed) = stream_in_cgroup_against_flood(&tb, &cgroups.path(&job));
        }
        let in_class = class_bytes() - before;
        eprintln!(
            "by cgroup: job stream {got:.0} B/s (reserved 4,000,000), flood {other:.0} B/s, \
             the job's class sent {in_class} B in {elapsed:.1} s; without the map entry: job \
             stream {off:.0} B/s, flood {off_flood:.0} B/s, class {off_bytes} B"
        );
        cls.remove(cg.id, h2).unwrap();
        cgroups.remove(&job);

        assert_eq!(
            off_bytes, 0,
            "unclassified, the job's class carries nothing"
        );
        assert!(
            in_class as f64 >= got * 7.0,
            "class {in_class} B, stream {got:.0} B/s"
        );
        assert!(
            in_class as f64 <= wire as f64 * (elapsed + 1.0),
            "class {in_class} B"
        );
        assert!(
            (got - 4_000_000.0).abs() <= 0.02 * 4_000_000.0,
            "job stream {got:.0} B/s, flood {other:.0} B/s"
        );
        assert!(other > 300_000.0, "flood {other:.0} B/s");
    }

    #[test]
    #[ignore = "needs root: network namespaces, tc, cgroup v2 and bpf; and iperf3"]
    fn a_pattern_job_s_flows_are_enforced_by_the_agents_for_the_processes_in_its_cgroup() {
        use qos_runtime::agent::cgroup::JobCgroups;

        assert!(
            Command::new("iperf3").arg("--version").output().is_ok(),
            "needs iperf3 (apt-get install iperf3)"
        );
        let tb = Testbed::up(3, "kp", "10.77.39", "kernel");
        let job = format!("kp-job-{}", std::process::id());
        // h1 -> h2 at 4 MB/s: a pattern, so its flows name no ports. Its lease outlasts
        // the test (nothing renews it).
        let o = tb.job(
            "h1",
            &[
                "reserve",
                "--id",
                &job,
                "--owner",
                "test",
                "--pattern",
                "one-to-many",
                "--nodes",
                "h1,h2",
                "--rate",
                "4MB/s",
                "--lease",
                "300s",
            ],
        );
        assert!(o.status.success(), "{}", text(&o));
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
        // The classifier is there; no u32 filter is (the flows name no ports).
        let filters = sh(&tb.ns("h1"), "tc filter show dev eth0 parent c05:");
        assert!(
            filters.contains("bpf") && filters.contains("cq_jobs"),
            "{filters}"
        );
        assert!(
            !filters
                .lines()
                .any(|l| l.contains(" u32 ") && l.contains("flowid c05:")),
            "{filters}"
        );
        let cgroups = JobCgroups::find().expect("a cgroup2 hierarchy");
        let other = format!("{job}-not-the-job");
        cgroups.ensure(&other).unwrap();
        let class_bytes = || job_class_bytes(&sh(&tb.ns("h1"), "tc -s class show dev eth0"));

        // A stream from a process in the job's cgroup gets the job's rate under the flood.
        let (got, flood, elapsed) = stream_in_cgroup_against_flood(&tb, &cgroups.path(&job));
        let in_class = class_bytes();
        // Mechanism off: the same stream from a cgroup that is not the job's.
        let (off, off_flood, _) = stream_in_cgroup_against_flood(&tb, &cgroups.path(&other));
        let off_bytes = class_bytes() - in_class;
        cgroups.remove(&other);

        eprintln!(
            "pattern job through the agents: job stream {got:.0} B/s (reserved 4,000,000), \
             flood {flood:.0} B/s, the job's class sent {in_class} B in {elapsed:.1} s; the \
             same stream outside the job's cgroup: {off:.0} B/s, flood {off_flood:.0} B/s, \
             class {off_bytes} B"
        );
        assert!(
            in_class as f64 >= got * 7.0,
            "class {in_class} B, stream {got:.0} B/s"
        );
        assert!(
            (got - 4_000_000.0).abs() <= 0.02 * 4_000_000.0,
            "job stream {got:.0} B/s, flood {flood:.0} B/s"
        );
        assert!(flood > 300_000.0, "flood {flood:.0} B/s");
        assert!(
            off_bytes < 10_000,
            "outside the cgroup, class {off_bytes} B"
        );

        // Released: the class goes.
        let o = tb.job("h1", &["release", "--id", &job, "--owner", "test"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(eventually(Duration::from_secs(10), || job_classes(&sh(
            &tb.ns("h1"),
            "tc class show dev eth0"
        ))
        .is_empty()));
    }
}
