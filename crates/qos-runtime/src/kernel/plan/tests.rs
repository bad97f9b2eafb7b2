//! The kernel backend's plan without a kernel: packet patterns and their u32 form, the
//! rate on the wire, and the reconciliation rules (keep live classes, remove stale ones,
//! filters before classes).

use super::*;
use crate::protocol::{EndpointSpec, IdtEntry, Owner};

fn flow(src_port: u16, dst: &str, dst_port: u16, priority: u8) -> FlowSpec {
    FlowSpec {
        src: EndpointSpec {
            node: "h1".into(),
            port: src_port,
        },
        dst: EndpointSpec {
            node: dst.into(),
            port: dst_port,
        },
        priority,
    }
}

fn addrs() -> Addrs {
    Addrs {
        nodes: [
            ("h0".to_string(), Ipv4Addr::new(10, 77, 0, 1)),
            ("h1".to_string(), Ipv4Addr::new(10, 77, 0, 2)),
            ("h2".to_string(), Ipv4Addr::new(10, 77, 0, 3)),
        ]
        .into_iter()
        .collect(),
        me: "h1".into(),
    }
}

fn entry(f: FlowSpec, rate: u64, idt: Option<u64>) -> IdtEntry {
    IdtEntry {
        flow: f.clone(),
        name: f.to_string(),
        class: "premium".into(),
        rate,
        idt_ps: idt,
        weight: 0,
        owner: Owner { uid: 0, pid: 1 },
    }
}

fn table(rows: Vec<IdtEntry>) -> IdtTable {
    IdtTable {
        synced: true,
        snapshots: 1,
        flows: rows.into_iter().map(|e| (e.flow.clone(), e)).collect(),
        ..IdtTable::default()
    }
}

#[test]
fn every_pattern_survives_the_u32_form_and_foreign_selectors_are_not_read_as_ours() {
    let a = addrs();
    let mut all = Vec::new();
    for f in [
        flow(0, "h0", 0, 0),
        flow(0, "h0", 5201, 0),
        flow(4000, "h2", 0, 7),
        flow(4000, "h2", 5000, 63),
    ] {
        all.extend(matches_of(&f, &a).unwrap());
    }
    assert_eq!(all.len(), 1 + 2 + 2 + 4);
    for m in &all {
        assert_eq!(Match::from_selector(&m.selector()), Some(*m), "{m:?}");
    }
    // A selector someone else wrote (tc's "match ip dst 10.77.0.1/24") is not ours.
    let mut sel = all[0].selector();
    sel.keys.last_mut().unwrap().mask = 0xffff_ff00;
    assert_eq!(Match::from_selector(&sel), None);
    let mut sel = all[1].selector();
    sel.nkeys -= 1;
    sel.keys.pop();
    assert_eq!(Match::from_selector(&sel), None);
}

#[test]
fn a_flow_matches_either_named_port_and_priority_is_carried_in_dscp() {
    let a = addrs();
    let dst = Ipv4Addr::new(10, 77, 0, 1);
    let me = Some(Ipv4Addr::new(10, 77, 0, 2));
    // Both ports 0: every packet from h1 to h0.
    let m = matches_of(&flow(0, "h0", 0, 0), &a).unwrap();
    assert_eq!(
        m,
        vec![Match {
            proto: None,
            src: me,
            dst,
            sport: 0,
            dport: 0,
            dscp: None
        }]
    );
    // exec --to h0:5201: TCP and UDP to port 5201.
    let m = matches_of(&flow(0, "h0", 5201, 0), &a).unwrap();
    assert_eq!(m.len(), 2);
    assert!(m.iter().all(|m| m.dport == 5201 && m.sport == 0));
    assert_eq!(m[0].proto, Some(TCP));
    assert_eq!(m[1].proto, Some(UDP));
    // An MPI pair: leaving from the rank's port, or going to the peer's.
    let m = matches_of(&flow(41000, "h0", 42000, 5), &a).unwrap();
    assert_eq!(m.len(), 4);
    assert!(m.iter().any(|m| m.sport == 41000 && m.dport == 0));
    assert!(m.iter().any(|m| m.sport == 0 && m.dport == 42000));
    assert!(m.iter().all(|m| m.dscp == Some(5)));
    // Unknown nodes and priorities beyond DSCP are refused, naming the flow.
    let e = matches_of(&flow(0, "h9", 1, 0), &a).unwrap_err();
    assert!(e.to_string().contains("no address for node 'h9'"), "{e}");
    let e = matches_of(&flow(0, "h0", 1, 64), &a).unwrap_err();
    assert!(e.to_string().contains("priority 64"), "{e}");
}

#[test]
fn grants_become_frame_rates_and_a_zero_share_holds_the_flow() {
    // MTU 1500: a TCP frame of 1514 bytes carries 1448 bytes of payload.
    assert_eq!(RateBasis::TcpPayload.wire_rate(1448, 1500), 1514);
    assert_eq!(RateBasis::UdpPayload.wire_rate(1472, 1500), 1514);
    assert_eq!(RateBasis::Wire.wire_rate(1000, 1500), 1000);
    let t = table(vec![
        entry(flow(0, "h0", 1, 0), 1_448_000, Some(1)),
        entry(flow(0, "h0", 2, 0), 0, None),
        entry(flow(0, "h9", 3, 0), 5, Some(1)),
    ]);
    let (w, skipped) = wanted(&t, &addrs(), RateBasis::TcpPayload, 1500);
    assert_eq!(w[&flow(0, "h0", 1, 0)].rate, 1_514_000);
    assert_eq!(w[&flow(0, "h0", 2, 0)].rate, HELD_RATE);
    assert_eq!(w.len(), 2);
    assert_eq!(skipped.len(), 1);
    // Rows of other nodes are not this node's business.
    let mut other = entry(flow(0, "h0", 4, 0), 1, Some(1));
    other.flow.src.node = "h2".into();
    let (w, _) = wanted(&table(vec![other]), &addrs(), RateBasis::Wire, 1500);
    assert!(w.is_empty());
}

/// The kernel state after applying `ops` to `have` (what the backend's apply does).
fn apply(have: &Installed, ops: &[Op]) -> Installed {
    let mut h = have.clone();
    for op in ops {
        match op {
            Op::DelFilter { handle, .. } => h.filters.retain(|f| f.handle != *handle),
            Op::DelClass { minor } => {
                assert!(
                    !h.filters.iter().any(|f| f.class == Some(*minor)),
                    "class {minor} deleted while a filter points to it"
                );
                h.classes.remove(minor);
            }
            Op::SetRate { minor, rate } => {
                let c = h.classes.get_mut(minor).unwrap();
                c.rate = *rate;
                c.ceil = *rate;
            }
            Op::AddFlow {
                minor,
                rate,
                filters,
                ..
            } => {
                assert!(h
                    .classes
                    .insert(
                        *minor,
                        Class {
                            minor: *minor,
                            rate: *rate,
                            ceil: *rate
                        }
                    )
                    .is_none());
                for (node, m) in filters {
                    h.filters.push(Filter {
                        handle: (0x800 << 20) | *node,
                        node: *node,
                        pref: PREF,
                        m: Some(*m),
                        class: Some(*minor),
                        kind: "u32".into(),
                    });
                }
            }
            Op::AddFilter { node, m, minor } => h.filters.push(Filter {
                handle: (0x800 << 20) | *node,
                node: *node,
                pref: PREF,
                m: Some(*m),
                class: Some(*minor),
                kind: "u32".into(),
            }),
        }
    }
    let mut nodes: Vec<u32> = h.filters.iter().map(|f| f.node).collect();
    nodes.sort();
    let n = nodes.len();
    nodes.dedup();
    assert_eq!(n, nodes.len(), "two filters share a node number");
    h
}

#[test]
fn a_restarted_agent_keeps_live_classes_and_removes_stale_ones() {
    let a = addrs();
    let t1 = table(vec![
        entry(flow(0, "h0", 5201, 0), 1_000_000, Some(1)),
        entry(flow(0, "h0", 5202, 0), 2_000_000, Some(1)),
        entry(flow(0, "h2", 5203, 0), 3_000_000, Some(1)),
    ]);
    let (w1, _) = wanted(&t1, &a, RateBasis::Wire, 1500);
    let (ops, placed1) = diff(&w1, &Installed::default()).unwrap();
    assert_eq!(
        ops.iter()
            .filter(|o| matches!(o, Op::AddFlow { .. }))
            .count(),
        3
    );
    let k1 = apply(&Installed::default(), &ops);
    // Same table again (a restart with nothing changed): nothing to do.
    let (ops, placed) = diff(&w1, &k1).unwrap();
    assert!(ops.is_empty(), "{ops:?}");
    assert_eq!(placed, placed1);
    // While the agent was down: 5202 released, 5201's rate changed, a new flow granted.
    let t2 = table(vec![
        entry(flow(0, "h0", 5201, 0), 1_500_000, Some(1)),
        entry(flow(0, "h2", 5203, 0), 3_000_000, Some(1)),
        entry(flow(0, "h2", 5204, 0), 4_000_000, Some(1)),
    ]);
    let (w2, _) = wanted(&t2, &a, RateBasis::Wire, 1500);
    let (ops, placed2) = diff(&w2, &k1).unwrap();
    // Live flows keep their classes: no delete or re-add of 5201 or 5203.
    assert_eq!(
        placed2[&flow(0, "h0", 5201, 0)],
        placed1[&flow(0, "h0", 5201, 0)]
    );
    assert_eq!(
        placed2[&flow(0, "h2", 5203, 0)],
        placed1[&flow(0, "h2", 5203, 0)]
    );
    let stale = placed1[&flow(0, "h0", 5202, 0)];
    let deleted: Vec<u16> = ops
        .iter()
        .filter_map(|o| match o {
            Op::DelClass { minor } => Some(*minor),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, vec![stale]);
    assert!(ops.contains(&Op::SetRate {
        minor: placed1[&flow(0, "h0", 5201, 0)],
        rate: 1_500_000
    }));
    let k2 = apply(&k1, &ops);
    assert_eq!(k2.classes.len(), 3);
    assert_eq!(k2.filters.len(), 6);
    assert!(diff(&w2, &k2).unwrap().0.is_empty());
    // Everything released: everything goes, filters first (checked by `apply`).
    let (ops, _) = diff(&BTreeMap::new(), &k2).unwrap();
    let k3 = apply(&k2, &ops);
    assert_eq!(k3, Installed::default());
}

#[test]
fn missing_filters_are_put_back_and_foreign_ones_removed() {
    let a = addrs();
    let t = table(vec![entry(flow(0, "h0", 5201, 0), 1_000_000, Some(1))]);
    let (w, _) = wanted(&t, &a, RateBasis::Wire, 1500);
    let k = apply(
        &Installed::default(),
        &diff(&w, &Installed::default()).unwrap().0,
    );
    // Someone deleted the UDP filter and added a filter of their own under our qdisc.
    let mut tampered = k.clone();
    tampered.filters.retain(|f| f.m.unwrap().proto != Some(UDP));
    tampered.filters.push(Filter {
        handle: 0x8000_0123,
        node: 0x123,
        pref: 1,
        m: None,
        class: Some(0x10),
        kind: "bpf".into(),
    });
    let (ops, _) = diff(&w, &tampered).unwrap();
    assert!(matches!(&ops[0], Op::DelFilter { kind, .. } if kind == "bpf"));
    assert!(matches!(&ops[1], Op::AddFilter { m, .. } if m.proto == Some(UDP)));
    assert_eq!(ops.len(), 2);
    // A class no filter points to (half of an interrupted install) is stale.
    let mut half = k.clone();
    half.filters.clear();
    let (ops, placed) = diff(&w, &half).unwrap();
    assert!(ops.contains(&Op::DelClass { minor: 0x10 }));
    assert_eq!(placed.len(), 1);
    let fixed = apply(&half, &ops);
    assert_eq!(fixed.classes.len(), 1);
    assert_eq!(fixed.filters.len(), 2);
}

#[test]
fn node_lists_parse_with_or_without_ports_and_must_name_this_node() {
    let a = Addrs::parse("h1", "h0=10.77.0.1:7500, h1=10.77.0.2").unwrap();
    assert_eq!(a.nodes["h0"], Ipv4Addr::new(10, 77, 0, 1));
    assert_eq!(a.nodes["h1"], Ipv4Addr::new(10, 77, 0, 2));
    let e = Addrs::parse("h2", "h0=10.77.0.1").unwrap_err();
    assert!(e.contains("this node 'h2'"), "{e}");
    let e = Addrs::parse("h0", "h0=somewhere").unwrap_err();
    assert!(e.contains("`somewhere` is not an IPv4 address"), "{e}");
    let e = Addrs::parse("h0", "h0=10.0.0.1,h0=10.0.0.2").unwrap_err();
    assert!(e.contains("listed twice"), "{e}");
    let e = Addrs::parse("h0", "h0").unwrap_err();
    assert!(e.contains("name=address"), "{e}");
}

#[test]
fn a_job_s_part_here_becomes_one_class_per_destination_told_by_its_ports() {
    use crate::protocol::job::{JobBody, JobFlow, JobInfo};
    let f = |src: &str, dst: &str, rate, sp, dp| JobFlow {
        src: src.into(),
        dst: dst.into(),
        rate,
        src_port: sp,
        dst_port: dp,
        class: "premium".into(),
    };
    let mut t = table(vec![entry(flow(5000, "h0", 6000, 0), 1_000_000, Some(1))]);
    let info = JobInfo {
        id: "mpi-1".into(),
        owner: "uid:0@h1".into(),
        body: JobBody::Flows {
            flows: vec![
                f("h1", "h2", 3_000_000, 7001, 7002),
                f("h1", "h2", 4_000_000, 7003, 7002),
                f("h1", "h0", 1_000_000, 0, 0),
                f("h2", "h1", 9_000_000, 7002, 7001),
                f("h1", "zz", 1_000_000, 1, 2),
            ],
        },
        flow_count: 5,
        lease_ms: 30_000,
        process: None,
    };
    t.jobs.insert(info.id.clone(), std::sync::Arc::new(info));
    let no = Some("no classifier here");
    let (w, skipped) = wanted_with_jobs(&t, &addrs(), RateBasis::Wire, 1500, no);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w.contains_key(&Key::Flow(flow(5000, "h0", 6000, 0))));
    let job = &w[&Key::Job {
        id: "mpi-1".into(),
        dst: "h2".into(),
    }];
    // Both flows to h2 in one class at their summed rate; packets from either source
    // port or to the destination port (listed once), over TCP and UDP.
    assert_eq!(job.rate, 7_000_000);
    assert_eq!(job.matches.len(), 6, "{:?}", job.matches);
    for m in &job.matches {
        assert_eq!(m.dst, Ipv4Addr::new(10, 77, 0, 3));
        assert_eq!(m.src, Some(Ipv4Addr::new(10, 77, 0, 2)));
        assert!(
            matches!((m.sport, m.dport), (7001 | 7003, 0) | (0, 7002)),
            "{m:?}"
        );
    }
    // The flow without ports (told by the job's cgroup) and the unknown node: skipped,
    // saying why; h2's flow back to h1 is h2's to enforce.
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped
        .iter()
        .any(|s| s.contains("to h0") && s.contains("cgroup, but no classifier here")));
    assert!(skipped
        .iter()
        .any(|s| s.contains("no address for node 'zz'")));
    // The classes a diff installs for them, and none left to do afterwards.
    let (ops, placed) = diff(&w, &Installed::default()).unwrap();
    assert_eq!(placed.len(), 2);
    let adds = ops
        .iter()
        .filter(|o| matches!(o, Op::AddFlow { flow: Key::Job { .. }, filters, rate, .. } if filters.len() == 6 && *rate == 7_000_000))
        .count();
    assert_eq!(adds, 1, "{ops:?}");
}

#[test]
fn with_the_classifier_a_job_s_flows_without_ports_get_a_class_told_by_cgroup_and_keep_it() {
    use crate::protocol::job::{JobBody, JobFlow, JobInfo};
    let f = |dst: &str, rate, sp, dp| JobFlow {
        src: "h1".into(),
        dst: dst.into(),
        rate,
        src_port: sp,
        dst_port: dp,
        class: "premium".into(),
    };
    let mut t = table(vec![]);
    let info = JobInfo {
        id: "slurm-7".into(),
        owner: "slurm".into(),
        body: JobBody::Flows {
            flows: vec![
                f("h0", 1_000_000, 0, 0),
                f("h2", 2_000_000, 0, 0),
                f("h2", 3_000_000, 7001, 7002),
            ],
        },
        flow_count: 3,
        lease_ms: 30_000,
        process: None,
    };
    t.jobs.insert(info.id.clone(), std::sync::Arc::new(info));
    let (mut w, skipped) = wanted_with_jobs(&t, &addrs(), RateBasis::Wire, 1500, None);
    assert!(skipped.is_empty(), "{skipped:?}");
    let key = |dst: &str| Key::Job {
        id: "slurm-7".into(),
        dst: dst.into(),
    };
    // To h0: by cgroup only (no u32 filter); to h2: by cgroup and by ports, one class.
    assert_eq!(w[&key("h0")].by_cgroup, Some(Ipv4Addr::new(10, 77, 0, 1)));
    assert!(w[&key("h0")].matches.is_empty());
    assert_eq!(w[&key("h2")].by_cgroup, Some(Ipv4Addr::new(10, 77, 0, 3)));
    assert_eq!(w[&key("h2")].matches.len(), 4);
    assert_eq!(w[&key("h2")].rate, 5_000_000);
    let (ops, placed) = diff(&w, &Installed::default()).unwrap();
    assert_eq!(placed.len(), 2, "{ops:?}");
    // Installed as planned, a class with no filter is kept when the backend says which
    // it was, and removed when it does not.
    let mut have = Installed::default();
    for op in &ops {
        if let Op::AddFlow { minor, rate, .. } = op {
            have.classes.insert(
                *minor,
                Class {
                    minor: *minor,
                    rate: *rate,
                    ceil: *rate,
                },
            );
        }
    }
    let h0 = placed[&key("h0")];
    w.get_mut(&key("h0")).unwrap().keep = Some(h0);
    let (ops, again) = diff(&w, &have).unwrap();
    assert_eq!(again[&key("h0")], h0);
    assert!(
        !ops.iter()
            .any(|o| matches!(o, Op::DelClass { minor } if *minor == h0)),
        "{ops:?}"
    );
    w.get_mut(&key("h0")).unwrap().keep = None;
    let (ops, _) = diff(&w, &have).unwrap();
    assert!(
        ops.iter()
            .any(|o| matches!(o, Op::DelClass { minor } if *minor == h0)),
        "{ops:?}"
    );
}
