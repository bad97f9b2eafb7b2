//! Tests of the TOML topology format and its file:line errors.
use super::*;
use crate::topology::NodeId;

const CASCADE: &str = r#"
tick = "0.5us"

[defaults]
t = "96ticks"
bmax = "81.8MB/s"
link = "160MB/s"

[[switch]]
name = "s0"
ports = 16

[[switch]]
name = "s1"
ports = 16

[[host]]
name = "a"
port = "s0:0"

[[host]]
name = "b"
port = "s1:0"
receive_cost = 0.5

[[link]]
a = "s0:15"
b = "s1:15"
capacity = "100MB/s"

[[route]]
from = "a"
to = "b"
ports = ["s0:15", "s1:0"]
"#;

#[test]
fn a_written_out_cascade_loads_with_ticks_and_costs() {
    let t = load("c.toml", CASCADE).unwrap();
    let a = t.node(NodeId(0));
    assert_eq!(a.rate.t, Duration::from_us(48));
    assert_eq!(t.node(NodeId(1)).capacity.receive_cost_permille, 500);
    let trunk = t.port(PortRef {
        switch: t.switch_id("s0").unwrap(),
        port: 15,
    });
    assert_eq!(trunk.unwrap().capacity, Bandwidth::from_mb_per_sec(100.0));
    assert_eq!(t.route(NodeId(0), NodeId(1)).unwrap().hops.len(), 2);
}

fn err(text: &str) -> String {
    load("t.toml", text).unwrap_err().to_string()
}

#[test]
fn a_route_through_a_missing_port_names_its_line() {
    let bad = CASCADE.replace(
        "ports = [\"s0:15\", \"s1:0\"]",
        "ports = [\n  \"s0:15\",\n  \"s1:17\",\n]",
    );
    let e = err(&bad);
    let line = bad.lines().position(|l| l.contains("s1:17")).unwrap() + 1;
    assert!(e.starts_with(&format!("t.toml:{line}:")), "{e}");
    assert!(e.contains("switch s1 has no port 17"), "{e}");
}

#[test]
fn semantic_errors_point_at_their_line() {
    let cases = [
        (
            CASCADE.replace("port = \"s1:0\"", "port = \"s0:0\""),
            "s0:0\"\nreceive",
            "used twice",
        ),
        (
            CASCADE.replace("to = \"b\"", "to = \"zz\""),
            "to = \"zz\"",
            "unknown node 'zz'",
        ),
        (
            CASCADE.replace("capacity = \"100MB/s\"", "capacity = \"0MB/s\""),
            "capacity = \"0MB/s",
            "greater than zero",
        ),
        (
            CASCADE.replace("ports = 16\n\n[[switch]]", "ports = 0\n\n[[switch]]"),
            "ports = 0",
            "at least one port",
        ),
        (
            CASCADE.replace("bmax = \"81.8MB/s\"", "bmax = 0"),
            "bmax = 0",
            "Bmax",
        ),
        // Each direction of a link points at its own key.
        (
            CASCADE.replace(
                "capacity = \"100MB/s\"",
                "a_to_b = \"0MB/s\"\nb_to_a = \"100MB/s\"",
            ),
            "a_to_b",
            "link from switch s0 port 15",
        ),
        (
            CASCADE.replace(
                "capacity = \"100MB/s\"",
                "a_to_b = \"100MB/s\"\nb_to_a = \"0MB/s\"",
            ),
            "b_to_a",
            "link from switch s1 port 15",
        ),
        // A host's own value, not the default it overrides.
        (
            CASCADE.replace("receive_cost = 0.5", "receive_cost = 0.5\nsend = \"0MB/s\""),
            "send = ",
            "send capacity of node b",
        ),
    ];
    for (text, needle, msg) in cases {
        let e = err(&text);
        let line = text[..text.find(needle).unwrap()].matches('\n').count() + 1;
        assert!(e.starts_with(&format!("t.toml:{line}:")), "{needle}: {e}");
        assert!(e.contains(msg), "{e}");
    }
}

#[test]
fn unknown_keys_and_negative_bandwidth_are_parse_errors() {
    assert!(err("[defaults]\nbmaxx = 1\n").starts_with("t.toml:2:"));
    let e = err("[defaults]\nlink = \"-5MB/s\"\n");
    assert!(e.starts_with("t.toml:2:") && e.contains("negative"), "{e}");
}

#[test]
fn shapes_build_from_the_build_table() {
    let t = load("m.toml", "[build]\nshape = \"mesh\"\nk = 3\n").unwrap();
    assert_eq!(t.nodes().len(), 9);
    assert_eq!(t.routing_kind(), RoutingKind::DimensionOrder);
    let t = load(
        "c.toml",
        "[build]\nshape = \"cascade\"\nswitches = 2\nhosts_per_switch = 3\ntrunk = \"80MB/s\"\n",
    )
    .unwrap();
    assert_eq!(t.nodes().len(), 6);
    let e = err("routing = \"dimension-order\"\n[build]\nshape = \"crossbar\"\nhosts = 4\n");
    assert!(e.starts_with("t.toml:1:"), "{e}");
}

#[test]
fn the_examples_in_docs_topology_md_load() {
    let doc = include_str!("../../../../docs/topology.md");
    let blocks: Vec<&str> = doc
        .split("```toml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .collect();
    assert_eq!(blocks.len(), 2);
    let t = load("docs.toml", blocks[0]).unwrap();
    let c = t.node(t.node_id("c").unwrap());
    assert_eq!(c.capacity.receive_cost_permille, 500);
    assert_eq!(c.capacity.combined, Some(Bandwidth::from_mb_per_sec(100.0)));
    let s1 = t.switch_id("s1").unwrap();
    let back = t
        .port(PortRef {
            switch: s1,
            port: 15,
        })
        .unwrap();
    assert_eq!(back.capacity, Bandwidth::from_mb_per_sec(80.0));
    let (a, d) = (t.node_id("a").unwrap(), t.node_id("d").unwrap());
    assert_eq!(t.route(a, d).unwrap().hops.len(), 2);
    let g = load("docs.toml", blocks[1]).unwrap();
    assert_eq!(g.nodes().len(), 4);
}

#[test]
fn a_route_error_points_at_the_port_at_fault_even_with_equal_port_numbers() {
    // s0:15 is fine; s1:15 leads back to s0, not to node b.
    let bad = CASCADE.replace(
        "ports = [\"s0:15\", \"s1:0\"]",
        "ports = [\n  \"s0:15\",\n  \"s1:15\",\n]",
    );
    let e = err(&bad);
    let line = bad.lines().position(|l| l.trim() == "\"s1:15\",").unwrap() + 1;
    assert!(e.starts_with(&format!("t.toml:{line}:")), "{e}");
    assert!(
        e.contains("the last port, switch s1 port 15, leads to switch s0 port 15"),
        "{e}"
    );
}

#[test]
fn a_receive_cost_with_more_decimals_than_kept_is_refused_at_its_line() {
    // Regression: 0.0004 was rounded to 0 thousandths, so received traffic
    // cost nothing and a combined limit of 10 B/s admitted 30,000 B/s.
    for (cost, hint) in [
        ("0.0004", "write 0 or 0.001"),
        ("0.3333", "write 0.333 or 0.334"),
    ] {
        let text = CASCADE.replace("receive_cost = 0.5", &format!("receive_cost = {cost}"));
        let e = err(&text);
        let line = text[..text.find("receive_cost").unwrap()]
            .matches('\n')
            .count()
            + 1;
        assert!(e.starts_with(&format!("t.toml:{line}:")), "{e}");
        assert!(
            e.contains("more than 3 decimals") && e.contains(hint),
            "{e}"
        );
    }
    // Thousandths are kept exactly.
    let text = CASCADE.replace("receive_cost = 0.5", "receive_cost = 0.333");
    let t = load("t.toml", &text).unwrap();
    assert_eq!(t.node(NodeId(1)).capacity.receive_cost_permille, 333);
}

#[test]
fn a_second_route_for_the_same_pair_is_refused_naming_both_lines() {
    // Regression: the last of two routes for one pair used to win silently.
    let text =
        format!("{CASCADE}\n[[route]]\nfrom = \"a\"\nto = \"b\"\nports = [\"s0:15\", \"s1:0\"]\n");
    let e = err(&text);
    let first = text.find("from = \"a\"").unwrap();
    let second = text.rfind("from = \"a\"").unwrap();
    let line = |at: usize| text[..at].matches('\n').count() + 1;
    assert!(e.starts_with(&format!("t.toml:{}:", line(second))), "{e}");
    assert!(
        e.contains(&format!(
            "route a -> b is given twice (first at line {})",
            line(first)
        )),
        "{e}"
    );
    // The builder refuses it too.
    let mut b = crate::topology::build::crossbar(2, &HostDefaults::thesis()).unwrap();
    let (n0, n1) = (b.node_id("n0").unwrap(), b.node_id("n1").unwrap());
    let to_n1 = vec![PortRef {
        switch: crate::topology::SwitchId(0),
        port: 1,
    }];
    b.add_route(n0, n1, to_n1.clone()).unwrap();
    let e = b.add_route(n0, n1, to_n1).unwrap_err();
    assert!(e.to_string().contains("given twice"), "{e}");
}

#[test]
fn the_example_thesis_cluster_is_the_simulators_thesis_cluster() {
    // One best-effort capacity for the simulator, `clusterqos admit` and the manager:
    // the example file describes exactly the hosts of HostDefaults::thesis_cluster.
    let text = include_str!("../../../../examples/topologies/thesis-crossbar.toml");
    let t = load("thesis-crossbar.toml", text).unwrap();
    let d = HostDefaults::thesis_cluster();
    for n in t.nodes() {
        assert_eq!(n.rate, d.rate, "{}", n.name);
        assert_eq!(n.capacity, d.capacity, "{}", n.name);
        assert_eq!(n.uplink, d.link, "{}", n.name);
    }
    assert_eq!(
        d.capacity.best_effort,
        Some(Bandwidth::from_mb_per_sec(78.0))
    );
}
