//! Tests of the workload: connections fill each node's real-time load; streams
//! (synthetic, regulated, replayed from traces, ON/OFF) and background traffic.

use super::*;
use crate::iba::config::IbaConfig;

fn cfg(real_time: &str, extra: &str) -> IbaConfig {
    let text = format!(
        "[network]\ntopology = {{ kind = \"crossbar\", ports = 8 }}\n{extra}\n[workload]\nloads = [0.8]\nreal_time = {real_time}\n[run]\nwarmup = \"1ms\"\nmeasure = \"10ms\"\n"
    );
    let c: IbaConfig = toml::from_str(&text).unwrap();
    c.validate().unwrap();
    c
}

#[test]
fn mpeg_connections_fill_each_nodes_real_time_load_on_real_time_lanes() {
    let c = cfg("{ kind = \"mpeg\" }", "");
    let w = Workload::new(&c, 0.8, 1);
    // 80 % of 200 MB/s, 80 % of it real time: 128 MB/s per node.
    for n in 0..8 {
        let mine: Vec<&Connection> = w.connections().iter().filter(|x| x.src == n).collect();
        let sum: u64 = mine.iter().map(|x| x.mean.bytes_per_sec()).sum();
        assert!((sum as f64 / 128e6 - 1.0).abs() < 0.01, "node {n}: {sum}");
        assert!(mine.iter().all(|x| x.dst != n && x.lane <= 10));
        assert!(mine
            .iter()
            .all(|x| x.request_at < Time::ZERO + Duration::from_ms(1)));
        assert!(mine.iter().all(|x| x.solicit == x.mean && x.peak > x.mean));
    }
    // The same seed gives the same workload.
    let again = Workload::new(&c, 0.8, 1);
    assert_eq!(again.connections(), w.connections());
}

#[test]
fn a_regulated_stream_spreads_each_frame_at_its_peak_rate() {
    let c = cfg(
        "{ kind = \"mpeg\", classes = [3], regulator = { kind = \"token_bucket\" } }",
        "",
    );
    let w = Workload::new(&c, 0.5, 2);
    let start = Time::ZERO + Duration::from_ms(2);
    let msgs: Vec<Message> = w.stream(0, start, 0).take(2000).collect();
    assert!(msgs.windows(2).all(|p| p[0].at <= p[1].at));
    assert!(msgs
        .iter()
        .all(|m| m.at >= start && m.flits <= 40 && m.conn == Some(0)));
    // The stream joins within one frame time of its start.
    assert!(msgs[0].at < start + Workload::frame_period());
    // Every frame is whole: its packets numbered 0..n, in order.
    let mut i = 0;
    while i < msgs.len() {
        let f = msgs[i].frame.unwrap();
        if i + f.packets as usize > msgs.len() {
            break;
        }
        for k in 0..f.packets as usize {
            let g = msgs[i + k].frame.unwrap();
            assert_eq!((g.index, g.packet), (f.index, k as u32));
        }
        i += f.packets as usize;
    }
    // Packets of a large frame leave one packet time at the peak rate apart (640
    // bytes at the TM5 class's peak) once the one-packet bucket is empty.
    let peak = CLASSES[3].peak_rate().bytes_per_sec() as f64;
    let big = msgs
        .windows(3)
        .find(|w| {
            w.iter().all(|m| {
                m.frame.unwrap().index == w[0].frame.unwrap().index
                    && m.frame.unwrap().packet > 0
                    && m.flits == 40
            })
        })
        .unwrap();
    let gap = (big[2].at - big[1].at).as_ps() as f64 / 1e12;
    assert!((gap - 640.0 / peak).abs() < 1e-9, "{gap}");
    // Unregulated, a frame's packets all go at the frame time.
    let c = cfg("{ kind = \"mpeg\", classes = [3] }", "");
    let w = Workload::new(&c, 0.5, 2);
    let burst: Vec<Message> = w.stream(0, start, 0).take(3).collect();
    assert!(burst.iter().all(|m| m.at == burst[0].at));
    // Smoothed, every frame's last packet goes nine tenths of a frame time after
    // its first.
    let c = cfg(
        "{ kind = \"mpeg\", classes = [3], regulator = { kind = \"smooth\" } }",
        "",
    );
    let w = Workload::new(&c, 0.5, 2);
    let v: Vec<Message> = w.stream(0, start, 0).take(500).collect();
    let f0 = v[0].frame.unwrap();
    let last = &v[f0.packets as usize - 1];
    let span = Workload::frame_period().as_ps() / 10 * 9;
    assert!((last.at - v[0].at).as_ps().abs_diff(span) < f0.packets as u64);
}

#[test]
fn on_off_connections_make_the_load_at_their_mean_rate() {
    let c = cfg(
        "{ kind = \"on_off\", mean_on = \"2ms\", mean_off = \"6ms\", rate = \"400Mbit/s\" }",
        "",
    );
    let w = Workload::new(&c, 0.5, 3);
    // 80 MB/s real time per node at 12.5 MB/s mean each: 6.4, so 6 connections.
    assert_eq!(w.connections().iter().filter(|x| x.src == 0).count(), 6);
    let m: Vec<Message> = w.stream(0, Time::ZERO, 0).take(3).collect();
    // 640-byte packets at 50 MB/s: 12.8 us apart while ON.
    assert_eq!((m[1].at - m[0].at).as_ps(), 12_800_000);
}

#[test]
fn background_traffic_is_best_effort_at_its_share_plus_control_on_vl15() {
    let c = cfg("{ kind = \"mpeg\" }", "");
    let w = Workload::new(&c, 0.5, 4);
    let horizon = Time::ZERO + Duration::from_ms(100);
    let v: Vec<Message> = w.background().take_while(|m| m.at < horizon).collect();
    assert!(v.windows(2).all(|p| p[0].at <= p[1].at));
    let be = v.iter().filter(|m| m.class == TrafficClass::BestEffort);
    // 20 % of 100 MB/s per node for 0.1 s = 2 MB per node = 3,125 packets each.
    let n = be.clone().count() as f64;
    assert!((n / (8.0 * 3125.0) - 1.0).abs() < 0.05, "{n}");
    assert!(be
        .clone()
        .all(|m| (11..=14).contains(&m.lane) && m.dst != m.src));
    let ctl: Vec<&Message> = v
        .iter()
        .filter(|m| m.class == TrafficClass::Control)
        .collect();
    // Ten per 33.3 ms per node: 30 per node in 100 ms.
    assert!((ctl.len() as i64 - 240).abs() <= 8, "{}", ctl.len());
    assert!(ctl.iter().all(|m| m.lane == 15 && m.flits == 10));
}

/// A config replaying traces `texts` (bytes, 30 frames/s).
fn traced(texts: &[&str], regulator: &str) -> IbaConfig {
    let files: Vec<String> = (0..texts.len())
        .map(|i| format!("{{ file = \"t{i}.txt\", unit = \"bytes\" }}"))
        .collect();
    let text = format!(
        "[network]\ntopology = {{ kind = \"crossbar\", ports = 4 }}\n[workload]\nloads = [0.5]\nreal_time = {{ kind = \"mpeg\", traces = [{}]{regulator} }}\n[run]\nwarmup = \"1ms\"\nmeasure = \"10ms\"\n",
        files.join(", ")
    );
    let mut c: IbaConfig = toml::from_str(&text).unwrap();
    // Not read yet: a run cannot start.
    assert_eq!(
        c.validate().unwrap_err().path,
        "workload.real_time.traces[0].file"
    );
    if let RealTimeSpec::Mpeg { traces, .. } = &mut c.workload.real_time {
        for (t, body) in traces.iter_mut().zip(texts) {
            let name = t.file.clone();
            t.load(&name, body).unwrap();
        }
    }
    c.validate().unwrap();
    c
}

#[test]
fn trace_streams_fill_the_load_at_the_traces_mean_rates_and_replay_their_frames() {
    // Trace 0: 100 kB per frame on average (3 MB/s at 30 frames/s); trace 1: 1 MB
    // per frame (30 MB/s).
    let t0 = "# I B B P\nI 160000\nB 40000\nB 40000\nP 160000\n";
    let t1 = "1000000\n1000000\n";
    let c = traced(&[t0, t1], "");
    let w = Workload::new(&c, 0.5, 1);
    // 50 % of 200 MB/s, 80 % of it real time: 80 MB/s per node.
    for n in 0..4 {
        let mine: Vec<&Connection> = w.connections().iter().filter(|x| x.src == n).collect();
        let sum: u64 = mine.iter().map(|x| x.mean.bytes_per_sec()).sum();
        assert!(sum.abs_diff(80_000_000) <= 15_000_000, "node {n}: {sum}");
        for x in &mine {
            match x.source {
                Source::Trace { trace: 0 } => {
                    assert_eq!(x.mean.bytes_per_sec(), 3_000_000);
                    assert_eq!(x.peak.bytes_per_sec(), 4_800_000);
                }
                Source::Trace { trace: 1 } => {
                    assert_eq!(x.mean.bytes_per_sec(), 30_000_000);
                }
                other => panic!("{other:?}"),
            }
        }
    }
    // A stream of trace 0 replays its frames in order from some frame, wrapping
    // around, one every 33.3 ms, each cut into packets of at most 40 16-byte flits.
    let c0 = w
        .connections()
        .iter()
        .find(|x| x.source == Source::Trace { trace: 0 })
        .unwrap();
    let msgs: Vec<Message> = w.stream(c0.id, Time::ZERO, 0).take(2000).collect();
    let mut frames: Vec<(u64, u64, Time)> = Vec::new();
    for m in &msgs {
        let f = m.frame.unwrap();
        assert_eq!(f.period, Duration::from_ps(33_333_333_333));
        let bytes = m.flits as u64 * 16;
        match frames.last_mut() {
            Some(l) if l.0 == f.index => l.1 += bytes,
            _ => frames.push((f.index, bytes, f.produced)),
        }
    }
    frames.pop(); // may be cut by take()
    let sizes = [160_000u64, 40_000, 40_000, 160_000];
    let first = sizes.iter().position(|&s| s == frames[0].1).unwrap();
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.0, i as u64);
        assert_eq!(f.1, sizes[(first + i) % 4], "frame {i}");
        if i > 0 {
            assert_eq!((f.2 - frames[i - 1].2).as_ps(), 33_333_333_333);
        }
    }
    // Traces and classes are exclusive.
    let mut both = c.clone();
    if let RealTimeSpec::Mpeg { classes, .. } = &mut both.workload.real_time {
        classes.push(1);
    }
    assert_eq!(
        both.validate().unwrap_err().path,
        "workload.real_time.traces"
    );
}
