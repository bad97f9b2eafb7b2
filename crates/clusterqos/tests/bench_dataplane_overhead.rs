//! CLI tests of `clusterqos bench dataplane-overhead` at a tiny size: the same two agents
//! switched between rate control and GM rotation, figures with bootstrap intervals and
//! agent CPU per message in the JSON (the real run is by hand; see docs/dataplane.md).

use assert_cmd::Command;

#[test]
fn bench_dataplane_overhead_prints_intervals_and_agent_cpu_as_json() {
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .args([
            "bench",
            "dataplane-overhead",
            "--quads",
            "2",
            "--sizes",
            "64,8192",
        ])
        .args([
            "--round-trips",
            "4",
            "--pump-bytes",
            "65536",
            "--resamples",
            "50",
        ])
        .args(["--spin-us", "5", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["quads"], 2);
    assert_eq!(v["spin_us"], 5);
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for p in points {
        // Two quads, two blocks per mode each, four round trips per block.
        assert_eq!(p["round_trips_per_mode"], 16);
        for k in ["rtt_on_us", "rtt_off_us", "bw_on_mb_s", "bw_off_mb_s"] {
            assert!(p[k].as_f64().unwrap() > 0.0, "{k}: {p}");
        }
        for k in [
            "cpu_rtt_on_ns",
            "cpu_rtt_off_ns",
            "cpu_bw_on_ns",
            "cpu_bw_off_ns",
        ] {
            assert!(
                p[k].as_f64().unwrap() > 0.0,
                "agent CPU clock read nothing: {k}: {p}"
            );
        }
        for k in [
            "latency_overhead_pct",
            "bandwidth_loss_pct",
            "cpu_rtt_delta_pct",
        ] {
            assert!(p[k]["lo"].as_f64().unwrap() <= p[k]["hi"].as_f64().unwrap());
        }
    }
    for k in [
        "latency_overhead_avg_pct",
        "bandwidth_loss_avg_pct",
        "cpu_rtt_delta_avg_ns",
        "cpu_bw_delta_avg_pct",
    ] {
        assert!(v[k]["value"].as_f64().is_some(), "{k}");
    }
    assert!(v["idle_agent_cpu_pct"].as_f64().unwrap() < 1.0);
    // The headline run is paced: both ping-pong flows got an IDT
    // below the fastest packet time; the unpaced run is reported beside it.
    let pacing = &v["pacing"];
    let (idt, t) = (
        pacing["idt_ns"].as_f64().unwrap(),
        pacing["packet_time_ns"].as_f64().unwrap(),
    );
    assert!(idt > 0.0 && idt < t, "{pacing}");
    assert!(pacing["held_back_rounds"].as_u64().is_some());
    assert_eq!(v["unpaced"]["points"].as_array().unwrap().len(), 2);
    assert_eq!(v["unpaced"]["quads"], 2);
}

#[test]
fn bench_dataplane_overhead_rejects_zero_quads_with_one_line() {
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["bench", "dataplane-overhead", "--quads", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: --quads"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}
