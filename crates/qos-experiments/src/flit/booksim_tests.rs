//! BookSim2 configuration files read as their BookSim2-equivalent scenarios: every
//! shipped configuration gives its shipped twin, BookSim2's defaults apply to what a
//! file leaves out, and everything the equivalent does not model is refused at its line.

use super::booksim::scenario;
use super::scenario::FlitScenario;
use crate::experiment::no_files;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/flit");
const MESH8: &str = include_str!("../../../../scenarios/flit/booksim/mesh8.cfg");

fn parse(text: &str) -> FlitScenario {
    FlitScenario::parse("x.toml", text, no_files).unwrap()
}

/// The refusal of `cfg` with `args`, as printed.
fn refused(cfg: &str, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    match scenario("net.cfg", cfg, &args, None) {
        Ok(t) => panic!("accepted:\n{t}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_shipped_booksim2_configuration_gives_its_shipped_twin() {
    let mut checked = 0;
    for entry in std::fs::read_dir(format!("{DIR}/booksim")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let twin = parse(&std::fs::read_to_string(format!("{DIR}/{name}-booksim2.toml")).unwrap());
        let rates = twin.sweep.as_ref().unwrap().rates.clone();
        let cfg = std::fs::read_to_string(&path).unwrap();
        let file = path.display().to_string();
        let got = parse(&scenario(&file, &cfg, &[], Some(&rates)).unwrap());
        // The twin's class rate is its own first choice; the sweep sets it per point.
        let mut want = twin.network.clone();
        want.classes[0].rate = got.network.classes[0].rate;
        assert_eq!(got.network, want, "{name}");
        assert_eq!(got.sweep, twin.sweep, "{name}");
        checked += 1;
    }
    assert!(checked >= 15, "{checked}");
}

#[test]
fn arguments_override_the_file_as_on_booksim2s_command_line() {
    let args = ["injection_rate=0.004", "seed=7", "num_vcs=2", "k=4"];
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let s = parse(&scenario("mesh8.cfg", MESH8, &args, None).unwrap());
    assert_eq!(s.network.seed, 7);
    assert_eq!(s.network.classes[0].rate, 0.004);
    assert_eq!(s.network.classes[0].vls, vec![0, 1]);
    assert_eq!(s.sweep.unwrap().rates, vec![0.004]);
    assert_eq!(s.network.topology, qos_sim::flit::TopologySpec::mesh(4));
    // A rate in flits is divided by the packet size.
    let args = [
        "injection_rate=0.32".to_string(),
        "injection_rate_uses_flits=1".into(),
    ];
    let s = parse(&scenario("mesh8.cfg", MESH8, &args, None).unwrap());
    assert!((s.network.classes[0].rate - 0.008).abs() < 1e-12);
}

/// `n` is BookSim2's dimension count: a k-ary n-cube, its digit permutations over n
/// digits and its bit permutations where the node count allows them.
#[test]
fn n_gives_meshes_and_tori_of_that_many_dimensions() {
    use qos_sim::flit::TopologySpec;
    let with = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        parse(&scenario("mesh8.cfg", MESH8, &args, None).unwrap()).network
    };
    assert_eq!(with(&["k=4", "n=3"]).topology, TopologySpec::mesh_n(4, 3));
    assert_eq!(with(&["k=4", "n=3"]).nodes(), 64);
    assert_eq!(with(&["k=16", "n=1"]).topology, TopologySpec::mesh_n(16, 1));
    let t = with(&["topology=torus", "routing_function=dim_order", "k=5", "n=3"]);
    assert!(matches!(t.topology, TopologySpec::Torus { k: 5, n: 3, .. }));
    // Transpose swaps the address bits' two halves: 4^3 = 2^6 nodes have them ...
    let tr = with(&["k=4", "n=3", "traffic=transpose"]);
    assert_eq!(
        tr.classes[0].pattern,
        qos_sim::flit::config::Pattern::Transpose
    );
    // ... 2^3 nodes do not, and 3^3 is no power of two for the bit permutations.
    let e = refused(MESH8, &["k=2", "n=3", "traffic=transpose"]);
    assert!(
        e.contains("transpose needs a square node count, not 8"),
        "{e}"
    );
    let e = refused(MESH8, &["k=3", "n=3", "traffic=bitcomp"]);
    assert!(e.contains("power-of-two node count (k = 3, n = 3"), "{e}");
    // Tornado and neighbor move every digit: any k and n.
    let nb = with(&["k=3", "n=3", "traffic=neighbor"]);
    assert_eq!(
        nb.classes[0].pattern,
        qos_sim::flit::config::Pattern::Neighbor
    );
    // n = 2 writes no `n` (the scenario of every two-dimensional file is as before).
    let text = scenario("mesh8.cfg", MESH8, &[], None).unwrap();
    assert!(
        text.contains("topology = { kind = \"mesh\", k = 8 }"),
        "{text}"
    );
    let text = scenario("mesh8.cfg", MESH8, &["n=3".into(), "k=4".into()], None).unwrap();
    assert!(
        text.contains("topology = { kind = \"mesh\", k = 4, n = 3 }"),
        "{text}"
    );
}

/// `topology = fly` is BookSim2's k-ary n-fly with `dest_tag` routing; BookSim2's own
/// `singleconfig` example (a 10-port fly of one stage) runs.
#[test]
fn a_fly_is_a_butterfly_and_booksim2s_single_switch_example_reads() {
    use qos_sim::flit::TopologySpec;
    let fly = "topology = fly; k = 4; n = 3; routing_function = dest_tag; num_vcs = 4;";
    let s = parse(&scenario("fly.cfg", fly, &[], None).unwrap());
    assert_eq!(s.network.topology, TopologySpec::Fly { k: 4, n: 3 });
    assert_eq!(s.network.nodes(), 64);
    assert_eq!(s.network.fabric().unwrap().routers, 48);
    // BookSim2's src/examples/singleconfig, its statements as shipped.
    let single = "topology = fly;\nk = 10;\nn = 1;\nnum_vcs = 8;\nvc_buf_size = 8;\n\
                  vc_allocator = separable_input_first;\nsw_allocator = separable_input_first;\n\
                  routing_function = dest_tag;\ntraffic = uniform;\nuse_read_write = 0;\n\
                  injection_rate = 1.0;\nsample_period = 100000;\nrouting_delay = 0;\n\
                  vc_alloc_delay = 1;\nsw_alloc_delay = 1;\nst_final_delay = 1;\n";
    let s = parse(&scenario("singleconfig", single, &[], None).unwrap());
    assert_eq!(s.network.topology, TopologySpec::Fly { k: 10, n: 1 });
    assert_eq!(s.network.fabric().unwrap().routers, 1);
    let e = refused(fly, &["routing_function=dor"]);
    assert!(e.contains("destination tag only"), "{e}");
}

/// `topology = fattree` is BookSim2's k-ary n-tree with `nca` routing; BookSim2's own
/// `fattree_config` example runs as shipped.
#[test]
fn a_fattree_is_a_k_ary_n_tree_and_booksim2s_fat_tree_example_reads() {
    use qos_sim::flit::TopologySpec;
    let tree = "topology = fattree; k = 4; n = 3; routing_function = nca; num_vcs = 4;";
    let s = parse(&scenario("tree.cfg", tree, &[], None).unwrap());
    assert_eq!(s.network.topology, TopologySpec::FatTree { k: 4, n: 3 });
    assert_eq!(s.network.nodes(), 64);
    assert_eq!(s.network.fabric().unwrap().routers, 48);
    // BookSim2's src/examples/fattree_config, its statements (comments aside) as shipped.
    let example = "hold_switch_for_packet=1;\nvc_buf_size = 16;\nwait_for_tail_credit = 0;\n\
                   vc_allocator = separable_input_first;\nsw_allocator = separable_input_first;\n\
                   alloc_iters  = 1;\ncredit_delay   = 2;\nrouting_delay  = 0;\n\
                   vc_alloc_delay = 1;\nsw_alloc_delay = 1;\nst_final_delay = 1;\n\
                   input_speedup     = 1;\noutput_speedup    = 1;\ninternal_speedup  = 1.0;\n\
                   warmup_periods = 3;\nsim_count          = 1;\nsample_period  = 10000;\n\
                   routing_function = nca;\nnum_vcs     = 4;\npriority = none;\n\
                   traffic       = uniform;\ninjection_rate = 0.6;\npacket_size = 1;\n\
                   injection_rate_uses_flits=1;\ntopology = fattree;\nk  = 4;\nn  = 3;\n\
                   watch_out=-;\n";
    let text = scenario("fattree_config", example, &[], None).unwrap();
    let s = parse(&text);
    assert_eq!(s.network.topology, TopologySpec::FatTree { k: 4, n: 3 });
    assert!(text.contains("hold_switch_for_packet = true"), "{text}");
    assert!(text.contains("credit_delay = 2"), "{text}");
    let e = refused(tree, &["routing_function=anca"]);
    assert!(
        e.contains("routing_function = anca") && e.contains("nearest common ancestor"),
        "{e}"
    );
}

/// `topology = cmesh` is BookSim2's concentrated mesh (four nodes per router) with its
/// `no_express` routings; BookSim2's own `cmeshconfig` example runs as shipped, and what
/// BookSim2 asserts or the equivalent network does not model is refused at its line.
#[test]
fn a_cmesh_is_a_concentrated_mesh_and_booksim2s_cmesh_example_reads() {
    use qos_sim::flit::config::MeshRouting;
    use qos_sim::flit::TopologySpec;
    // BookSim2's src/examples/cmeshconfig, its statements (comments aside) as shipped.
    let example = "topology = cmesh;\nk = 4;\nn = 2;\nc = 4;\nxr = 2;\nyr = 2;\nx = 4; \n\
                   y = 4;\nrouting_function = dor_no_express;\ntraffic = bitcomp;\n\
                   use_read_write = 0;\nbatch_size = 2000;\n";
    let s = parse(&scenario("cmeshconfig", example, &[], None).unwrap());
    let dor = TopologySpec::Cmesh {
        k: 4,
        routing: MeshRouting::Dor,
        express: false,
    };
    assert_eq!(s.network.topology, dor);
    assert_eq!(s.network.nodes(), 64);
    assert_eq!(s.network.fabric().unwrap().routers, 16);
    // BookSim2's `use_noc_latency`: router links of two cycles, one with 0.
    assert_eq!(s.network.delays().router_wire(), 2);
    let s = parse(&scenario("c.cfg", example, &["use_noc_latency=0".into()], None).unwrap());
    assert_eq!(s.network.delays().router_wire(), 1);
    let s = parse(
        &scenario(
            "c.cfg",
            example,
            &["routing_function=xy_yx_no_express".into()],
            None,
        )
        .unwrap(),
    );
    assert_eq!(
        s.network.topology,
        TopologySpec::Cmesh {
            k: 4,
            routing: MeshRouting::XyYx,
            express: false,
        }
    );
    // `dor` takes the express channels (BookSim2's `dor_cmesh`): latency k = 4 on them
    // under `use_noc_latency`, 2 on the other router links.
    let s = parse(&scenario("c.cfg", example, &["routing_function=dor".into()], None).unwrap());
    assert_eq!(
        s.network.topology,
        TopologySpec::Cmesh {
            k: 4,
            routing: MeshRouting::Dor,
            express: true,
        }
    );
    let mut lengths = s.network.fabric().unwrap().latency;
    lengths.sort_unstable();
    lengths.dedup();
    assert_eq!(lengths, vec![1, 2, 4]);
    for (args, want) in [
        (&["routing_function=xy_yx"][..], "express channels"),
        (&["routing_function=dor", "k=5", "x=5", "y=5"], "odd side"),
        (&["routing_function=min"], "dor_no_express"),
        (
            &["c=1"],
            "c = 1: BookSim2's cmesh has four nodes per router",
        ),
        (&["xr=1"], "xr = 1"),
        (&["y=8"], "y = 8 with x = 4: BookSim2's cmesh is square"),
        (&["n=3"], "n = 3: a cmesh is two-dimensional"),
        (
            &["num_vcs=1", "routing_function=xy_yx_no_express"],
            "two or more",
        ),
    ] {
        let e = refused(example, args);
        assert!(e.contains(want), "{args:?}: {e}");
    }
    // c, xr and yr left out take BookSim2's defaults (1), on which its cmesh stops.
    let e = refused(
        "topology = cmesh; k = 4; routing_function = dor_no_express;",
        &[],
    );
    assert!(e.contains("c = 1") && e.contains("write `c = 4;`"), "{e}");
    // Elsewhere c is still one node per router.
    let e = refused(
        "topology = mesh; k = 4; routing_function = dor; c = 4;",
        &[],
    );
    assert!(
        e.contains("c = 4: the BookSim2-equivalent network models c = 1 only"),
        "{e}"
    );
}

/// `topology = flatfly` is BookSim2's two-dimensional flattened butterfly with its
/// `ran_min` routing; BookSim2's own `flatflyconfig` example runs as shipped, its links
/// taking their lengths under `use_noc_latency` (one cycle each with 0), and what
/// BookSim2 asserts or the equivalent network does not model is refused at its line.
#[test]
fn a_flatfly_is_a_flattened_butterfly_and_booksim2s_flatfly_example_reads() {
    use qos_sim::flit::config::MeshRouting;
    use qos_sim::flit::TopologySpec;
    // BookSim2's src/examples/flatflyconfig, its statements (comments aside) as shipped.
    let example = "num_vcs = 8;\nvc_buf_size = 4;\nwait_for_tail_credit = 0;\n\
                   vc_allocator = islip;\nsw_allocator = islip;\nalloc_iters = 1;\n\
                   credit_delay = 2;\nrouting_delay = 0;\nvc_alloc_delay = 1;\n\
                   sw_alloc_delay = 1;\nst_final_delay = 1;\ninput_speedup = 1;\n\
                   output_speedup = 1;\ninternal_speedup = 1.0;\nwarmup_periods = 3;\n\
                   sample_period = 1000;\nsim_count = 1;\ntraffic = uniform;\n\
                   topology = flatfly;\nsubnets = 1;\nc = 4;\nk = 4;\nn = 2;\nx = 4;\n\
                   y = 4;\nxr = 2;\nyr = 2;\nrouting_function = ran_min;\n\
                   use_read_write = 0;\npacket_size = 1;\n";
    let s = parse(&scenario("flatflyconfig", example, &[], None).unwrap());
    assert_eq!(
        s.network.topology,
        TopologySpec::Flatfly {
            k: 4,
            c: 4,
            routing: Default::default()
        }
    );
    assert_eq!(s.network.nodes(), 64);
    let f = s.network.fabric().unwrap();
    assert_eq!(f.routers, 16);
    // Ports: four nodes, three others of the row, three of the column; links of two
    // nodes' width per router passed.
    assert_eq!(f.ports[0], 10);
    let mut lengths: Vec<u8> = f.latency.clone();
    lengths.sort_unstable();
    lengths.dedup();
    assert_eq!(lengths, vec![1, 2, 4, 6]);
    let s = parse(&scenario("f.cfg", example, &["use_noc_latency=0".into()], None).unwrap());
    assert!(s.network.fabric().unwrap().latency.is_empty());
    let s = parse(
        &scenario(
            "f.cfg",
            example,
            &["c=1".into(), "xr=1".into(), "yr=1".into()],
            None,
        )
        .unwrap(),
    );
    assert_eq!(
        s.network.topology,
        TopologySpec::Flatfly {
            k: 4,
            c: 1,
            routing: Default::default()
        }
    );
    // xyyx and adaptive_xyyx: each order on its half of the VCs, as on a mesh.
    for (rf, want) in [
        ("xyyx", MeshRouting::XyYx),
        ("adaptive_xyyx", MeshRouting::AdaptiveXyYx),
        ("valiant", MeshRouting::Valiant),
        ("ugal", MeshRouting::Ugal),
    ] {
        let s =
            parse(&scenario("f.cfg", example, &[format!("routing_function={rf}")], None).unwrap());
        assert_eq!(
            s.network.topology,
            TopologySpec::Flatfly {
                k: 4,
                c: 4,
                routing: want
            }
        );
    }
    for (args, want) in [
        (&["routing_function=ugal_xyyx"][..], "by `ran_min`"),
        (&["routing_function=ugal_pni"], "by `ran_min`"),
        (
            &["routing_function=valiant", "num_vcs=1"],
            "needs two or more",
        ),
        (&["routing_function=xyyx", "num_vcs=1"], "needs two or more"),
        (&["c=1"], "c = 1: BookSim2's flatfly has c = xr * yr = 4"),
        (&["yr=1"], "yr = 1 with xr = 2"),
        (&["xr=4", "yr=4", "c=16"], "xr = 4"),
        (&["x=8"], "x = 8 with k = 4"),
        (&["n=3"], "n = 3: a flatfly is two-dimensional"),
    ] {
        let e = refused(example, args);
        assert!(e.contains(want), "{args:?}: {e}");
    }
    // x and y left out take BookSim2's defaults (8), on which a 4×4 flatfly misplaces
    // its nodes.
    let e = refused(
        "topology = flatfly; k = 4; routing_function = ran_min;",
        &[],
    );
    assert!(
        e.contains("x = 8 with k = 4") && e.contains("write `x = 4;`"),
        "{e}"
    );
}

#[test]
fn booksim2s_anynet_example_reads_with_its_listing() {
    use super::booksim::scenario_with;
    use qos_sim::flit::TopologySpec;
    // BookSim2's src/examples/anynet: anynet_config's statements and anynet_file.
    let config = "topology = anynet;\nrouting_function = min;\nnetwork_file = anynet_file;\n\
                  traffic = uniform;\nuse_read_write = 0;\nsample_period = 10000;\n\
                  injection_rate = 0.01;\nvc_allocator = separable_input_first;\n\
                  sw_allocator = separable_input_first;\nalloc_iters = 1;\nnum_vcs = 1;\n\
                  vc_buf_size = 3;\n";
    let listing = "router 0 node 0 node 1 node 2 router 1\nrouter 1 node 3 node 4 node 5\n\
                   router 2 node 6 node 7 node 8 router 1 router 0\n";
    let convert = |config: &str, listing: &str, args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        scenario_with("anynet_config", config, &args, None, |path| {
            assert_eq!(path, "anynet_file");
            Ok((path.to_string(), listing.to_string()))
        })
    };
    let s = parse(&convert(config, listing, &[]).unwrap());
    let TopologySpec::Anynet { network } = &s.network.topology else {
        panic!("{:?}", s.network.topology)
    };
    assert_eq!(network.len(), 3);
    assert_eq!(s.network.nodes(), 9);
    let f = s.network.fabric().unwrap();
    assert_eq!((f.routers, f.ports.clone()), (3, vec![5, 5, 5]));
    // A latency in the listing is kept (BookSim2 sets it whatever use_noc_latency).
    let long = listing.replace("router 1\nrouter 1", "router 1 4\nrouter 1");
    let s = parse(&convert(config, &long, &["use_noc_latency=0"]).unwrap());
    // Router 0's ports: its three nodes, router 1 (4 cycles), router 2 (1).
    assert_eq!(&s.network.fabric().unwrap().latency[3..5], &[4, 1]);
    for (config, listing, args, want) in [
        (config, listing, &["routing_function=dor"][..], "by `min`"),
        (
            config,
            "router 0 node 0\nnode 1 router 0\n",
            &[],
            "network_file = anynet_file: line 2",
        ),
        (
            "topology = anynet; routing_function = min;",
            listing,
            &[],
            "without network_file",
        ),
    ] {
        let e = convert(config, listing, args).unwrap_err().to_string();
        assert!(e.contains(want), "{args:?}: {e}");
    }
    // A file that cannot be read, at its statement.
    let e = scenario("net.cfg", config, &[], None)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("net.cfg:3:") && e.contains("cannot read"),
        "{e}"
    );
}

/// `use_noc_latency = 0` shortens a torus's router channels to one cycle, as in
/// BookSim2's `KNCube`; on a mesh (and the other topologies) their latency is 1 either
/// way, so it changes nothing there.
#[test]
fn use_noc_latency_shortens_a_torus_channels_only() {
    let torus = "topology = torus; k = 4; routing_function = dim_order; num_vcs = 2;";
    let s = parse(&scenario("t.cfg", torus, &["use_noc_latency=0".into()], None).unwrap());
    assert_eq!(s.network.router.use_noc_latency, Some(false));
    assert_eq!(s.network.delays().router_wire(), 1);
    let s = parse(&scenario("t.cfg", torus, &[], None).unwrap());
    assert_eq!(s.network.delays().router_wire(), 2);
    let mesh = "topology = mesh; k = 4; routing_function = dor; num_vcs = 2;";
    let s = parse(&scenario("m.cfg", mesh, &["use_noc_latency=0".into()], None).unwrap());
    assert_eq!(s.network.router.use_noc_latency, None);
    assert_eq!(s.network.delays().router_wire(), 1);
    let e = refused(torus, &["use_noc_latency=2"]);
    assert!(e.contains("use_noc_latency = 2: 0 or 1"), "{e}");
}

#[test]
fn keys_left_out_take_booksim2s_defaults() {
    // The least a file must say: a topology with a routing function (BookSim2's own
    // default is none).
    let least = "topology = mesh; routing_function = dor;";
    let s = parse(&scenario("least.cfg", least, &[], None).unwrap());
    let n = &s.network;
    // BookSim2's credit_delay 0, routing_delay 1 and iSLIP allocators.
    assert_eq!(
        (
            n.router.credit_delay,
            n.router.routing_delay,
            n.router.allocator
        ),
        (
            Some(0),
            Some(1),
            Some(qos_sim::flit::config::Allocator::Islip)
        )
    );
    assert_eq!(n.topology, qos_sim::flit::TopologySpec::mesh(8));
    // BookSim2's 16 VCs: VL15 a data lane like the others under BookSim2's allocators.
    assert_eq!(n.classes[0].vls, (0..16).collect::<Vec<u8>>());
    assert_eq!(n.router.buffer, 8, "vc_buf_size 8");
    assert_eq!(n.classes[0].packet_flits, 1, "packet_size 1");
    assert_eq!(n.classes[0].rate, 0.1, "injection_rate 0.1");
    assert_eq!(n.seed, 0);
    // warmup_periods 3, sample_period 1000, max_samples 10, latency_thres 500.
    assert_eq!(
        (
            n.phases.warmup,
            n.phases.measure,
            n.phases.sample_period,
            n.phases.abort_latency
        ),
        (3_000, 7_000, 1_000, Some(500.0))
    );
    let e = refused(&format!("{least} num_vcs = 17;"), &[]);
    assert!(
        e.contains("num_vcs = 17") && e.contains("at most 16"),
        "{e}"
    );
    // One VC on a torus: named at BookSim2's key, not at the scenario's lanes.
    let e = refused(
        &format!("{least} num_vcs = 1;")
            .replace("topology = mesh;", "topology = torus;")
            .replace("routing_function = dor;", "routing_function = dim_order;"),
        &[],
    );
    assert!(
        e.contains("num_vcs = 1: on a torus") && !e.contains("classes["),
        "{e}"
    );
    // warmup_periods = 0: warm up until converged, within max_samples periods.
    let s = parse(&scenario("least.cfg", least, &["warmup_periods=0".into()], None).unwrap());
    assert!(s.network.phases.warmup_converge);
    assert_eq!(s.network.phases.measure, 10_000);
}

#[test]
fn what_the_equivalent_does_not_model_is_refused_at_its_line() {
    let with = |from: &str, to: &str| {
        let c = MESH8.replace(from, to);
        assert_ne!(c, MESH8, "{from}");
        c
    };
    let line_of =
        |cfg: &str, needle: &str| 1 + cfg[..cfg.find(needle).unwrap()].matches('\n').count();
    for (from, to, says) in [
        (
            "input_speedup = 1;",
            "input_speedup = 3;",
            "1 or 2 crossbar inputs",
        ),
        (
            "wait_for_tail_credit = 0;",
            "wait_for_tail_credit = 2;",
            "0 or 1",
        ),
        (
            "routing_delay = 0;",
            "routing_delay = 1001;",
            "routing_delay = 1001: 0-1000 cycles",
        ),
        (
            "sw_allocator = separable_input_first;",
            "sw_allocator = islip(17);",
            "islip(N), N = 1-16",
        ),
        (
            "sw_allocator = separable_input_first;",
            "sw_allocator = islip;",
            "both allocators of one kind",
        ),
        (
            "vc_allocator = separable_input_first;",
            "vc_allocator = wavefront;",
            "(or islip(N), N = 1-16 iterations) and separable_input_first",
        ),
        (
            "credit_delay = 1;",
            "credit_delay = 62;",
            "credit_delay = 62: 0-61",
        ),
        (
            "traffic = uniform;",
            "traffic = badperm_yarc;",
            "traffic = badperm_yarc",
        ),
        (
            "routing_function = dor;",
            "routing_function = min_adapt;",
            "dimension order",
        ),
        (
            "topology = mesh;",
            "topology = dragonflynew;",
            "a mesh, a torus, a cmesh, a flatfly, a fly, a fattree or an anynet",
        ),
        (
            "n = 2;",
            "n = 9;",
            "n = 9: the equivalent network has 1-8 dimensions",
        ),
        ("n = 2;", "n = 0;", "at least 1"),
        // 8^6 routers: more than a 256x256 mesh.
        ("n = 2;", "n = 6;", "at most 65536"),
        ("seed = 1;", "seed = time;", "reproducible"),
        (
            "seed = 1;",
            "seed = 1;\npriority = network_age;",
            "priorities none, class and age",
        ),
        (
            "seed = 1;",
            "seed = 1;\nclasses = 17;",
            "classes = 17: the equivalent network has 1-16",
        ),
        (
            "seed = 1;",
            "seed = 1;\nclasses = 2;\nlatency_thres = {500,600};",
            "one value for every class",
        ),
        (
            "seed = 1;",
            "seed = 1;\npriority = class;\nclass_priority = 256;",
            "class_priority = 256: 0-255",
        ),
        (
            "seed = 1;",
            "seed = 1;\nhold_switch_for_packet = 1;\npriority = class;",
            "with router.hold_switch_for_packet: not modelled",
        ),
        (
            "seed = 1;",
            "seed = 1;\nhold_switch_for_packet = 2;",
            "hold_switch_for_packet = 2: 0 or 1",
        ),
        (
            "seed = 1;",
            "seed = 1;\nsome_key = 3;",
            "not a BookSim2 configuration key",
        ),
        (
            "injection_rate = 0.008;",
            "injection_rate = {0.008,0.01};",
            "one value per traffic class, and with classes = 1 it would use the first 1",
        ),
        ("vc_buf_size = 10;", "vc_buf_size = 0;", "at least 1"),
        ("packet_size = 40;", "packet_size = 4x;", "whole number"),
        (
            "sample_period = 10000;",
            "sample_period = 10000",
            "missing at the end of this line",
        ),
        (
            "max_samples = 4;",
            "max_samples = 1;",
            "warmup_periods < max_samples",
        ),
    ] {
        let cfg = with(from, to);
        let e = refused(&cfg, &[]);
        assert!(e.contains(says), "{to}: {e}");
        let needle = to.lines().last().unwrap().split('=').next().unwrap().trim();
        let needle = if to.ends_with("10000") {
            "sample_period"
        } else {
            needle
        };
        let line = if needle == "max_samples" {
            line_of(&cfg, "warmup_periods")
        } else {
            line_of(&cfg, needle)
        };
        assert!(e.starts_with(&format!("net.cfg:{line}:")), "{to}: {e}");
    }
    // iSLIP's iterations come from the allocators' names; `alloc_iters` does not reach
    // BookSim2's router, so it changes nothing.
    let islip3 = MESH8
        .replace(
            "vc_allocator = separable_input_first;",
            "vc_allocator = islip(3);",
        )
        .replace(
            "sw_allocator = separable_input_first;",
            "sw_allocator = islip(3);",
        );
    let s = parse(&scenario("net.cfg", &islip3, &["input_speedup=2".into()], None).unwrap());
    assert_eq!(
        (
            s.network.router.allocator,
            s.network.router.alloc_iters,
            s.network.router.input_speedup
        ),
        (
            Some(qos_sim::flit::config::Allocator::Islip),
            Some(3),
            Some(2)
        )
    );
    let s = parse(&scenario("net.cfg", MESH8, &["wait_for_tail_credit=1".into()], None).unwrap());
    assert_eq!(s.network.router.wait_for_tail_credit, Some(true));
    let plain = scenario("net.cfg", MESH8, &[], None).unwrap();
    let iters = scenario("net.cfg", MESH8, &["alloc_iters=4".into()], None).unwrap();
    assert_eq!(parse(&plain), parse(&iters));
    let e = refused(
        &islip3.replace("sw_allocator = islip(3);", "sw_allocator = islip;"),
        &[],
    );
    assert!(e.contains("both islip with the same iterations"), "{e}");
    // BookSim2's own defaults for the allocators: one left out takes islip.
    let e = refused(
        &MESH8.replace("sw_allocator = separable_input_first;", ""),
        &[],
    );
    assert!(
        e.contains("sw_allocator = islip with vc_allocator = separable_input_first"),
        "{e}"
    );
    // An argument at fault is named.
    let e = refused(MESH8, &["num_vcs=4", "vct=1"]);
    assert!(
        e.starts_with("argument `vct=1`") && e.contains("vct = 0 only"),
        "{e}"
    );
    let e = refused(MESH8, &["bogus"]);
    assert!(e.starts_with("argument `bogus`"), "{e}");
    // A scenario check reported at the BookSim2 key it came from: a torus needs two
    // lanes per class (the dateline's halves).
    let cfg = with("topology = mesh;", "topology = torus;")
        .replace("routing_function = dor;", "routing_function = dim_order;")
        .replace("num_vcs = 4;", "num_vcs = 1;");
    let e = refused(&cfg, &[]);
    assert!(
        e.starts_with(&format!("net.cfg:{}:", line_of(&cfg, "num_vcs"))),
        "{e}"
    );
    // BookSim2's transpose, like its other bit permutations, needs a power-of-two node
    // count (BookSim2 stops with "Bit permutation traffic patterns require the number
    // of nodes to be a power of two"); so does the equivalent.
    for t in ["transpose", "bitcomp", "bitrev", "shuffle"] {
        let cfg =
            with("k = 8;", "k = 6;").replace("traffic = uniform;", &format!("traffic = {t};"));
        let e = refused(&cfg, &[]);
        assert!(
            e.starts_with(&format!("net.cfg:{}:", line_of(&cfg, "traffic"))),
            "{e}"
        );
        assert!(e.contains("power-of-two"), "{e}");
    }
}

#[test]
fn output_settings_and_comments_change_nothing() {
    let plain = scenario("mesh8.cfg", MESH8, &[], None).unwrap();
    let noisy = format!(
        "// a comment; with = signs\n{}\nstats_out = run.m; // trailing\nprint_activity = 1;\n\
         watch_out = -; sim_power = 1; deadlock_warn_timeout = 1000;",
        MESH8.replace("k = 8;", "k = 8; // radix")
    );
    let got = scenario("mesh8.cfg", &noisy, &[], None).unwrap();
    assert_eq!(parse(&got), parse(&plain));
}

#[test]
fn the_shipped_configurations_without_a_twin_are_read() {
    // scenarios/flit/booksim-extra: networks checked side by side with BookSim2 from
    // the .cfg alone (docs/flit-network.md, "Beyond the shipped pairs").
    let mut n = 0;
    for entry in std::fs::read_dir(format!("{DIR}/booksim-extra")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "cfg") {
            // An anynet's listing (`network_file`), read with its configuration.
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let file = path.display().to_string();
        let s = parse(&scenario(&file, &text, &[], None).unwrap_or_else(|e| panic!("{e}")));
        assert!(
            text.contains("scripts/booksim-compare"),
            "{file}: the command"
        );
        // 4,000-cycle periods where the file says so, BookSim2's 1,000 where it does
        // not (the files of BookSim2's default router leave every such key out).
        let want = if text.contains("sample_period") {
            4_000
        } else {
            1_000
        };
        assert_eq!(s.network.phases.sample_period, want, "{file}");
        n += 1;
    }
    assert!(n >= 8, "{n}");
}

/// Packet-size mixes as BookSim2's traffic manager reads them: `{{a,b,c}}` is the one
/// class's sizes, `packet_size_rate` their weights (a plain number: every size alike; a
/// shorter list padded with its last), a rate in flits divided by the weighted mean,
/// and `{a,b,c}` (one size per class, three classes) refused at its line.
#[test]
fn packet_size_lists_give_a_weighted_mix_of_the_one_class() {
    use qos_sim::flit::config::PacketSize;
    let with = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        parse(&scenario("mesh8.cfg", MESH8, &args, None).unwrap()).network
    };
    let ps = PacketSize::new;
    let n = with(&["packet_size={{1,5,20}}", "packet_size_rate={{6,3,1}}"]);
    assert_eq!(n.classes[0].packet_mix, vec![ps(1, 6), ps(5, 3), ps(20, 1)]);
    let n = with(&["packet_size={{1,5,20}}"]);
    assert_eq!(n.classes[0].packet_mix, vec![ps(1, 1), ps(5, 1), ps(20, 1)]);
    let n = with(&["packet_size={{1,5,20}}", "packet_size_rate={{2,1}}"]);
    assert_eq!(n.classes[0].packet_mix, vec![ps(1, 2), ps(5, 1), ps(20, 1)]);
    let n = with(&["packet_size={{1,5,20}}", "packet_size_rate={{0,1,3}}"]);
    assert_eq!(n.classes[0].packet_mix, vec![ps(5, 1), ps(20, 3)]);
    let n = with(&[
        "packet_size={{2,8}}",
        "packet_size_rate={{1,3}}",
        "injection_rate=0.13",
        "injection_rate_uses_flits=1",
    ]);
    assert!((n.classes[0].rate - 0.13 / 6.5).abs() < 1e-12);
    // One size in braces is one size.
    let n = with(&["packet_size={7}"]);
    assert!(n.classes[0].packet_mix.is_empty());
    assert_eq!(n.classes[0].packet_flits, 7);
    let e = refused(MESH8, &["packet_size={1,5,20}"]);
    assert!(e.contains("one value per traffic class"), "{e}");
    // What BookSim2 cannot read: a list with more after its last closing brace (its
    // lexer: "syntax error"), and one whose braces do not close (tokenize_str finds no
    // element; BookSim2 prints the configuration and stops).
    let e = refused(MESH8, &["packet_size={{1,5,20}}x"]);
    assert!(e.contains("not a BookSim2 value"), "{e}");
    let e = refused(MESH8, &["packet_size={{1,5,20}"]);
    assert!(e.contains("reads no element"), "{e}");
    let e = refused(MESH8, &["packet_size={{1,0}}"]);
    assert!(e.contains("a packet of 0 flits"), "{e}");
    let e = refused(MESH8, &["packet_size_rate={{0,0}}", "packet_size={{1,2}}"]);
    assert!(e.contains("weight 0"), "{e}");
}

/// `injection_process = on_off`: alpha and beta from `burst_alpha`/`burst_beta` or
/// the process's parameters, one of them derived from `burst_r1` and the rate as
/// BookSim2's `OnOffInjectionProcess` does, and the impossible combinations refused.
#[test]
fn on_off_injection_translates_booksim2s_burst_parameters() {
    use qos_sim::flit::config::Process;
    let with = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        parse(&scenario("mesh8.cfg", MESH8, &args, None).unwrap()).network
    };
    let onoff = |a: f64, b: f64| Process::OnOff { alpha: a, beta: b };
    assert_eq!(
        with(&["injection_process=on_off"]).classes[0].process,
        onoff(0.5, 0.5)
    );
    assert_eq!(
        with(&[
            "injection_process=on_off",
            "burst_alpha=0.1",
            "burst_beta=0.3"
        ])
        .classes[0]
            .process,
        onoff(0.1, 0.3)
    );
    assert_eq!(
        with(&["injection_process=on_off(0.2,0.4)"]).classes[0].process,
        onoff(0.2, 0.4)
    );
    // r1 given, alpha derived: alpha = beta * rate / (r1 - rate).
    let n = with(&[
        "injection_process=on_off",
        "burst_alpha=-1",
        "burst_r1=0.05",
        "injection_rate=0.01",
    ]);
    let Process::OnOff { alpha, beta } = n.classes[0].process else {
        panic!()
    };
    assert!((alpha - 0.5 * 0.01 / 0.04).abs() < 1e-12 && beta == 0.5);
    assert!((n.classes[0].process.peak(0.01) - 0.05).abs() < 1e-12);
    // r1 given, beta derived: beta = alpha * (r1 - rate) / rate.
    let n = with(&[
        "injection_process=on_off",
        "burst_alpha=0.1",
        "burst_beta=-1",
        "burst_r1=0.05",
        "injection_rate=0.01",
    ]);
    assert_eq!(n.classes[0].process, onoff(0.1, 0.1 * 0.04 / 0.01));
    let e = refused(MESH8, &["injection_process=on_off", "burst_r1=0.3"]);
    assert!(e.contains("exactly two"), "{e}");
    let e = refused(MESH8, &["injection_process=poisson"]);
    assert!(e.contains("`bernoulli` or `on_off`"), "{e}");
    // r1 = rate * (alpha + beta) / alpha above 1: the scenario's own check, at the key.
    let e = refused(
        MESH8,
        &[
            "injection_process=on_off",
            "burst_alpha=0.01",
            "injection_rate=0.1",
        ],
    );
    assert!(
        e.contains("injection_process") && e.contains("above 1"),
        "{e}"
    );
    let rates = [0.01, 0.02];
    let args = [
        "injection_process=on_off".to_string(),
        "burst_beta=-1".into(),
        "burst_r1=0.05".into(),
    ];
    let e = scenario("net.cfg", MESH8, &args, Some(&rates)).unwrap_err();
    assert!(
        e.to_string().contains("one injection_rate at a time"),
        "{e}"
    );
}

/// BookSim2's random patterns with parameters read as BookSim2 reads them: the
/// parameters split by its `tokenize_str`, whose quirk is kept (`hotspot({0,63},{1,3})`
/// is one hotspot, node 0, with rate 63: the braces of a list inside the parentheses
/// must be doubled), the plain ones by name, and what BookSim2 would draw from its own
/// generator, or crash on, refused at the line; `randperm` takes its seed from
/// `perm_seed` or its parameter.
#[test]
fn booksim2s_random_patterns_read_as_booksim2_reads_them() {
    use qos_sim::flit::config::Pattern;
    let pattern = |traffic: &str| {
        let arg = format!("traffic={traffic}");
        parse(&scenario("net.cfg", MESH8, &[arg], None).unwrap())
            .network
            .classes[0]
            .pattern
            .clone()
    };
    let hotspot = |nodes: Vec<u32>, weights: Vec<u32>| Pattern::Hotspot {
        nodes,
        fraction: 1.0,
        weights,
    };
    assert_eq!(
        pattern("hotspot({{0,27,36,63},{1,1,2,4}})"),
        hotspot(vec![0, 27, 36, 63], vec![1, 1, 2, 4])
    );
    // The last rate stands for the nodes without one; equal rates are no weights.
    assert_eq!(
        pattern("hotspot({{5,6,7},{2,3}})"),
        hotspot(vec![5, 6, 7], vec![2, 3, 3])
    );
    assert_eq!(pattern("hotspot({{5,6}})"), hotspot(vec![5, 6], vec![]));
    assert_eq!(pattern("hotspot({0,63},{1,3})"), hotspot(vec![0], vec![]));
    assert_eq!(pattern("hotspot(9)"), hotspot(vec![9], vec![]));
    assert_eq!(
        pattern("background({{0,9,18}})"),
        Pattern::Background {
            excluded: vec![0, 9, 18]
        }
    );
    assert_eq!(
        pattern("background({0,9,18})"),
        Pattern::Background { excluded: vec![0] }
    );
    assert_eq!(pattern("diagonal"), Pattern::Diagonal);
    assert_eq!(pattern("asymmetric"), Pattern::Asymmetric);
    assert_eq!(pattern("taper64"), Pattern::Taper64);
    assert_eq!(pattern("randperm"), Pattern::Randperm { seed: 0 });
    assert_eq!(pattern("randperm(17)"), Pattern::Randperm { seed: 17 });
    let args = ["traffic=randperm".to_string(), "perm_seed=-4".into()];
    let s = parse(&scenario("net.cfg", MESH8, &args, None).unwrap());
    assert_eq!(s.network.classes[0].pattern, Pattern::Randperm { seed: -4 });
    let e = refused(MESH8, &["traffic=randperm", "perm_seed=time"]);
    assert!(e.contains("perm_seed = time: a whole number"), "{e}");
    for (traffic, says) in [
        ("hotspot", "from its own random generator"),
        ("hotspot({{3,-1}})", "from its own random generator"),
        ("hotspot({{3,4},{1,0}})", "from 1 to 65535"),
        ("hotspot({{3,64}})", "need nodes below 64"),
        ("background", "needs its excluded nodes"),
        ("background({{64}})", "node 64: nodes are below 64"),
        ("uniform(3)", "takes no parameters"),
        ("transpose(3)", "takes no parameters"),
        ("bogus", "traffic = bogus"),
    ] {
        let cfg = MESH8.replace("traffic = uniform;", &format!("traffic = {traffic};"));
        let e = refused(&cfg, &[]);
        assert!(e.contains(says), "{traffic}: {e}");
        let line = 1 + cfg[..cfg.find("traffic =").unwrap()].matches('\n').count();
        assert!(e.starts_with(&format!("net.cfg:{line}:")), "{traffic}: {e}");
    }
    let e = refused(MESH8, &["k=4", "traffic=taper64"]);
    assert!(e.contains("taper64 needs exactly 64 nodes, not 16"), "{e}");
}

/// BookSim2's routing functions on a mesh beyond dimension order — `xy_yx`,
/// `adaptive_xy_yx`, `valiant`, `romm` — are the mesh's routings of the same names;
/// each needs two VCs (BookSim2 stops on an assertion with one), and on a torus only
/// `dim_order` is read (its `valiant_torus` stops on an assertion in BookSim2).
#[test]
fn xy_yx_valiant_and_romm_read_as_the_meshs_routings() {
    use qos_sim::flit::config::MeshRouting;
    for (name, routing, half) in [
        (
            "xy_yx",
            MeshRouting::XyYx,
            "each dimension order takes half",
        ),
        (
            "adaptive_xy_yx",
            MeshRouting::AdaptiveXyYx,
            "each dimension order takes half",
        ),
        ("valiant", MeshRouting::Valiant, "each phase takes half"),
        ("romm", MeshRouting::Romm, "each phase takes half"),
    ] {
        let rf = format!("routing_function={name}");
        let s = parse(&scenario("net.cfg", MESH8, std::slice::from_ref(&rf), None).unwrap());
        assert_eq!(
            s.network.topology,
            qos_sim::flit::TopologySpec::Mesh {
                k: 8,
                n: 2,
                routing
            }
        );
        let e = refused(MESH8, &[rf.as_str(), "num_vcs=1"]);
        assert!(e.contains(half) && e.contains("needs two or more"), "{e}");
        let e = refused(MESH8, &["topology=torus", rf.as_str(), "num_vcs=4"]);
        let says = if name == "valiant" {
            "stops on its assertion"
        } else {
            "routes by dimension order only (`dim_order`)"
        };
        assert!(e.contains(says), "{name}: {e}");
    }
}

/// Several traffic classes as BookSim2 reads them: every class on every VC, the
/// per-class keys' vectors one value per class (the last repeated), priorities as
/// `priority` says, and the sweep over every class at once.
#[test]
fn classes_read_as_booksim2s_per_class_vectors() {
    use qos_sim::flit::config::{PacketSize, Pattern, PriorityRule};
    let file = format!("{DIR}/booksim-extra/mesh4-classes.cfg");
    let text = std::fs::read_to_string(&file).unwrap();
    let s = parse(&scenario(&file, &text, &[], Some(&[0.01, 0.02])).unwrap());
    let n = &s.network;
    assert_eq!(n.router.priority, PriorityRule::Class);
    let names: Vec<&str> = n.classes.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["class0", "class1"]);
    for c in &n.classes {
        assert_eq!(c.vls, [0, 1, 2, 3], "{}", c.name);
        assert_eq!(c.packet_flits, 5);
    }
    assert_eq!((n.classes[0].priority, n.classes[1].priority), (1, 0));
    let sw = s.sweep.as_ref().unwrap();
    assert!(sw.class.is_empty());
    assert_eq!(sw.classes, names);
    // Each class its own rate, pattern and sizes; no sweep when the rates differ.
    let args: Vec<String> = [
        "classes=3",
        "injection_rate={0.01,0.02}",
        "traffic={uniform,transpose}",
        "packet_size={{5},{10,20}}",
        "packet_size_rate={{1},{3,1}}",
        "priority=age",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let s = parse(&scenario(&file, &text, &args, None).unwrap());
    let n = &s.network;
    assert!(s.sweep.is_none());
    assert_eq!(n.router.priority, PriorityRule::Age);
    let rates: Vec<f64> = n.classes.iter().map(|c| c.rate).collect();
    assert_eq!(rates, [0.01, 0.02, 0.02]);
    assert_eq!(n.classes[0].pattern, Pattern::Uniform);
    assert_eq!(n.classes[2].pattern, Pattern::Transpose);
    assert_eq!(n.classes[0].packet_flits, 5);
    let mix = vec![PacketSize::new(10, 3), PacketSize::new(20, 1)];
    assert_eq!(
        (&n.classes[1].packet_mix, &n.classes[2].packet_mix),
        (&mix, &mix)
    );
    // Class priorities count under `priority = class` only.
    assert!(n.classes.iter().all(|c| c.priority == 0));
    let none = parse(&scenario(&file, &text, &["priority=none".into()], None).unwrap());
    assert_eq!(none.network.router.priority, PriorityRule::None);
    assert!(none.network.classes.iter().all(|c| c.priority == 0));
}
