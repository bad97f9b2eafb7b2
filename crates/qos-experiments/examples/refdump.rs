//! Development aid: prints the results of flit scenario files as JSON, one line each (the
//! byte-for-byte comparison of the flit network before and after a change).
//! `cargo run -p qos-experiments --example refdump -- scenarios/flit/*.toml`
use qos_experiments::flit::scenario::{run_scenario, FlitScenario};
fn main() {
    for f in std::env::args().skip(1) {
        let text = std::fs::read_to_string(&f).unwrap();
        let mut s = FlitScenario::parse(&f, &text, |p| {
            let path = std::path::Path::new(&f).parent().unwrap().join(p);
            Ok((
                p.to_string(),
                std::fs::read_to_string(path).map_err(|e| e.to_string())?,
            ))
        })
        .unwrap();
        s.quick();
        let r = run_scenario(&f, &s, |_| {}).unwrap();
        println!("{}", serde_json::to_string(&r).unwrap());
    }
}
