//! Prints the checks of one shipped scenario (development aid).
use qos_sim::scenario::{self, builtin, run::Options};
fn main() {
    let name = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "best-effort-one".into());
    let quick = std::env::args().nth(2).is_some();
    let s = scenario::load("x", builtin::find(&name).unwrap(), |p| Err(p.into())).unwrap();
    let r = scenario::run::execute(
        &s,
        Options {
            quick,
            ..Options::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for c in &r.checks {
        let p = c.published.as_ref().map_or(f64::NAN, |p| p.value);
        println!(
            "{:50} pub {:8.3} sim {:8.3} {}",
            c.label, p, c.measured, c.ok
        );
    }
    for f in &r.figures {
        for s in &f.series {
            let pts: Vec<String> = s
                .points
                .iter()
                .take(400)
                .step_by(if f.id.contains("dispatch") { 5 } else { 1 })
                .map(|p| format!("{:.0}:{:.1}", p.0, p.1))
                .collect();
            println!("{} / {}: {}", f.id, s.name, pts.join(" "));
        }
    }
}
