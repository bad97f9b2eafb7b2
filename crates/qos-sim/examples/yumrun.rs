//! Development aid: one Yum cluster run of an `iba` configuration file at one load, its
//! results as JSON and the simulation speed.
fn main() {
    let f = std::env::args().nth(1).unwrap();
    let load: f64 = std::env::args().nth(2).unwrap().parse().unwrap();
    let text = std::fs::read_to_string(&f).unwrap();
    let cfg: qos_sim::iba::IbaConfig = toml::from_str(&text).unwrap();
    cfg.validate().unwrap();
    let t = std::time::Instant::now();
    let r = qos_sim::iba::run::run(&cfg, load, 1, &mut |_| {}).unwrap();
    let s = t.elapsed().as_secs_f64();
    println!("{}", serde_json::to_string_pretty(&r).unwrap());
    println!("wall {s:.2}s, {:.0} cycles/s", r.cycles as f64 / s);
}
