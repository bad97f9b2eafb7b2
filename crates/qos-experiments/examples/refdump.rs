//! Development aid: prints the results of flit scenario files as JSON, one line each (the
//! byte-for-byte comparison of the flit network before and after a change); `--full`
//! runs them at their own lengths instead of `--quick`'s.
//! `cargo run -p qos-experiments --release --example refdump -- scenarios/flit/*.toml`
use qos_experiments::flit::scenario::{run_scenario, FlitScenario};
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let full = args.iter().any(|a| a == "--full");
    for f in args.iter().filter(|a| *a != "--full") {
        let text = std::fs::read_to_string(f).unwrap();
        let mut s = FlitScenario::parse(f, &text, |p| {
            let path = std::path::Path::new(f).parent().unwrap().join(p);
            Ok((
                p.to_string(),
                std::fs::read_to_string(path).map_err(|e| e.to_string())?,
            ))
        })
        .unwrap();
        if !full {
            s.quick();
        }
        let r = run_scenario(f, &s, |_| {}).unwrap();
        println!("{}", serde_json::to_string(&r).unwrap());
    }
}
