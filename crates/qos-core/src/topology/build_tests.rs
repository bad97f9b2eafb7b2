//! Tests of the builders and route computation.
use super::*;

fn node(t: &Topology, name: &str) -> NodeId {
    t.node_id(name).unwrap()
}

#[test]
fn crossbar_route_is_the_destination_port() {
    let t = crossbar(4, &HostDefaults::thesis())
        .unwrap()
        .build()
        .unwrap();
    let r = t.route(node(&t, "n0"), node(&t, "n3")).unwrap();
    assert_eq!(
        r.hops,
        vec![PortRef {
            switch: SwitchId(0),
            port: 3
        }]
    );
    assert_eq!(t.switches()[0].ports.len(), 16);
}

#[test]
fn cascade_routes_cross_the_trunk_in_both_directions() {
    let d = HostDefaults::thesis();
    let t = cascade(2, 2, &d, d.link).unwrap().build().unwrap();
    // n0, n1 on s0 ports 0, 1; trunk s0:2 <-> s1:3; n2, n3 on s1 ports 0, 1.
    let r = t.route(node(&t, "n0"), node(&t, "n3")).unwrap();
    assert_eq!(
        r.hops,
        vec![
            PortRef {
                switch: SwitchId(0),
                port: 2
            },
            PortRef {
                switch: SwitchId(1),
                port: 1
            }
        ]
    );
    let back = t.route(node(&t, "n2"), node(&t, "n1")).unwrap();
    assert_eq!(
        back.hops,
        vec![
            PortRef {
                switch: SwitchId(1),
                port: 3
            },
            PortRef {
                switch: SwitchId(0),
                port: 1
            }
        ]
    );
}

#[test]
fn mesh_routes_x_first_then_y() {
    let t = mesh(3, &HostDefaults::thesis()).unwrap().build().unwrap();
    let r = t.route(node(&t, "n0_0"), node(&t, "n2_1")).unwrap();
    let names: Vec<String> = r.hops.iter().map(|&h| t.port_label(h)).collect();
    assert_eq!(
        names,
        [
            "switch s0_0 port 1",
            "switch s1_0 port 1",
            "switch s2_0 port 3",
            "switch s2_1 port 0"
        ]
    );
}

#[test]
fn shortest_path_on_a_mesh_matches_dimension_order() {
    let mut b = mesh(4, &HostDefaults::thesis()).unwrap();
    b.routing = Some(RoutingKind::ShortestPath);
    let sp = b.build().unwrap();
    let xy = mesh(4, &HostDefaults::thesis()).unwrap().build().unwrap();
    for a in 0..16 {
        for z in 0..16 {
            if a != z {
                assert_eq!(
                    sp.route(NodeId(a), NodeId(z)).unwrap(),
                    xy.route(NodeId(a), NodeId(z)).unwrap()
                );
            }
        }
    }
}

#[test]
fn a_port_cannot_be_cabled_twice_or_past_its_count() {
    let d = HostDefaults::thesis();
    let mut b = TopologyBuilder::new();
    let s = b.add_switch("s", 2).unwrap();
    b.add_host(
        "a",
        d.rate,
        d.capacity,
        PortRef { switch: s, port: 0 },
        d.link,
        d.link,
    )
    .unwrap();
    let e = b
        .add_host(
            "b",
            d.rate,
            d.capacity,
            PortRef { switch: s, port: 0 },
            d.link,
            d.link,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "switch s port 0 is used twice (already cabled to node a)"
    );
    let e = b
        .add_host(
            "b",
            d.rate,
            d.capacity,
            PortRef { switch: s, port: 2 },
            d.link,
            d.link,
        )
        .unwrap_err();
    assert_eq!(e.to_string(), "switch s has no port 2 (it has ports 0..2)");
}

#[test]
fn explicit_routes_must_follow_the_cables() {
    let d = HostDefaults::thesis();
    let mut b = cascade(2, 2, &d, d.link).unwrap();
    let (n0, n3) = (b.node_id("n0").unwrap(), b.node_id("n3").unwrap());
    let s0 = b.switch_id("s0").unwrap();
    let s1 = b.switch_id("s1").unwrap();
    let e = b
        .add_route(
            n0,
            n3,
            vec![PortRef {
                switch: s0,
                port: 1,
            }],
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("leads to node n1, not to node n3"),
        "{e}"
    );
    b.add_route(
        n0,
        n3,
        vec![
            PortRef {
                switch: s0,
                port: 2,
            },
            PortRef {
                switch: s1,
                port: 1,
            },
        ],
    )
    .unwrap();
    assert!(b.build().is_ok());
}

#[test]
fn zero_capacity_is_rejected() {
    let mut d = HostDefaults::thesis();
    d.link = Bandwidth::ZERO;
    let e = crossbar(2, &d).unwrap_err();
    assert!(e.to_string().contains("greater than zero"), "{e}");
}

#[test]
fn oversized_topologies_are_refused_not_allocated() {
    let d = HostDefaults::thesis();
    let e = mesh(2000, &d).unwrap_err();
    assert!(e.to_string().contains("too large"), "{e}");
    let e = cascade(5000, 1, &d, d.link).unwrap().build().unwrap_err();
    assert!(
        e.to_string()
            .contains("shortest-path routing handles at most"),
        "{e}"
    );
}
