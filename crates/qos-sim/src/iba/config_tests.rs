//! Tests of the run configuration: the paper's parameters as defaults, every bad
//! value named by its key.

use super::*;
use crate::iba::workload_spec::frame_time;
use crate::workload::mix::Mix;

const TABLE2: &str = r#"
[network]
topology = { kind = "crossbar", ports = 8 }

[arbitration]
frame = "large"
pointer = "slow"

[workload]
loads = [0.6, 0.7, 0.8]
real_time = { kind = "mpeg", regulator = { kind = "token_bucket", rate_of_peak = 1.0 } }

[run]
warmup = "5ms"
measure = "100ms"
"#;

fn parse(text: &str) -> IbaConfig {
    toml::from_str(text).unwrap()
}

#[test]
fn the_papers_parameters_are_the_defaults() {
    let c = parse(TABLE2);
    c.validate().unwrap();
    assert_eq!(c.network.link.bytes_per_sec(), 200_000_000);
    assert_eq!(c.network.flit_bytes(), 16);
    assert_eq!(c.network.cycle(), Duration::from_ns(80));
    assert_eq!(c.network.vl_buffer, 10);
    assert_eq!(c.network.lanes, Lanes::yum());
    assert_eq!(c.workload.packet_flits, 40);
    assert_eq!(c.packet_bytes(), Bytes::new(640));
    assert_eq!(c.workload.mix, Mix(0.8));
    assert_eq!(c.arbitration.frame, Frame::Large);
    assert_eq!(c.arbitration.pointer, Pointer::Slow);
    assert!(c.admission.enabled);
    // 33.3 ms is 416,667 cycles of 80 ns.
    assert_eq!(c.network.cycles(frame_time()), 416_667);
}

#[test]
fn a_small_frame_and_a_fixed_real_time_share_parse() {
    let c = parse(&TABLE2.replace(
        "frame = \"large\"",
        "frame = { small = { k = 4 } }\nshare = { fixed = \"1.28Gbit/s\" }",
    ));
    c.validate().unwrap();
    assert_eq!(c.arbitration.frame.flits(11), 44);
    assert_eq!(
        c.arbitration.share,
        RtShare::Fixed(Bandwidth::from_bits_per_sec(1_280_000_000))
    );
}

#[test]
fn bad_values_name_their_key() {
    for (from, to, path) in [
        ("[0.6, 0.7, 0.8]", "[0.6, 1.7]", "workload.loads[1]"),
        ("ports = 8", "ports = 1", "network.topology.ports"),
        (
            "rate_of_peak = 1.0",
            "rate_of_peak = 0.0",
            "workload.real_time.regulator.rate_of_peak",
        ),
        ("measure = \"100ms\"", "measure = \"0ms\"", "run.measure"),
        ("measure = \"100ms\"", "measure = \"300s\"", "run.measure"),
    ] {
        let e = parse(&TABLE2.replace(from, to)).validate().unwrap_err();
        assert_eq!(e.path, path, "{e}");
    }
    let mut c = parse(TABLE2);
    c.network.lanes.best_effort.push(3);
    assert_eq!(c.validate().unwrap_err().path, "network.lanes");
    let c = parse(&TABLE2.replace(
        "[run]",
        "lifetime = { hold = \"0ms\", idle = \"5ms\" }\n[run]",
    ));
    assert_eq!(c.validate().unwrap_err().path, "workload.lifetime.hold");
}

#[test]
fn unknown_keys_are_refused() {
    let e = toml::from_str::<IbaConfig>(&TABLE2.replace("[run]", "[run]\nspeed = 3")).unwrap_err();
    assert!(e.to_string().contains("speed"), "{e}");
}
