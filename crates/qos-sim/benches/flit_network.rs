//! Speed of the flit network (Yum et al. §6.1): the reference
//! configuration (8×8 mesh, DOR, 4 VLs × 10-flit buffers, 40-flit packets, uniform
//! traffic, BookSim-equivalent router, 10,000 warm-up and 30,000 measured cycles) at
//! 0.008 and 0.004 packets/node/cycle, printed as simulated cycles per second.
//! `cargo bench -p qos-sim --bench flit_network [-- k rate [booksim2]]` (`booksim2`: the
//! BookSim2-equivalent router and terminal, [`FlitConfig::booksim2`]); the full benchmark
//! with scaling table and memory is `clusterqos bench network`.

use std::time::Instant;

use qos_sim::flit::{FlitConfig, Network, TopologySpec};

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let k: u32 = args.first().and_then(|s| s.parse().ok()).unwrap_or(8);
    let rates: Vec<f64> = match args.get(1).and_then(|s| s.parse().ok()) {
        Some(r) => vec![r],
        None => vec![0.008, 0.004],
    };
    let booksim2 = args.get(2).is_some_and(|s| s == "booksim2");
    for rate in rates {
        let cfg = if booksim2 {
            FlitConfig::booksim2(TopologySpec::mesh(k), rate)
        } else {
            FlitConfig::reference(k, rate)
        };
        let mut net = Network::new(&cfg).expect("reference configuration is valid");
        let t = Instant::now();
        let r = net.run().expect("reference run does not deadlock");
        let s = t.elapsed().as_secs_f64();
        println!(
            "{k}x{k} mesh at {rate}: {} cycles in {s:.3} s = {:.0} cycles/s, {:.2} M flit-hops/s, {:.1} ns/node-cycle, {:.1} ns/flit-hop, latency {:.6}, accepted {:.6}, {} flit-hops{}",
            r.cycles,
            r.cycles as f64 / s,
            r.flit_hops as f64 / s / 1e6,
            s * 1e9 / (r.cycles as f64 * (k * k) as f64),
            s * 1e9 / r.flit_hops as f64,
            r.total.latency.avg,
            r.total.accepted,
            r.flit_hops,
            if r.saturated { " (saturated)" } else { "" }
        );
    }
}
