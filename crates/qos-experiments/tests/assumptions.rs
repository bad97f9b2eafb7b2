//! Every shipped scenario's declared assumptions: each loads at every end of its range
//! (so `reproduce PAPER --sensitivity` can run it), and each is listed in
//! docs/assumptions.md with its value, range and source.

use qos_experiments::assume::{self, show};
use qos_experiments::experiment::{Experiment, Source};
use qos_experiments::flit::Flit;
use qos_experiments::gulati::Gulati;
use qos_experiments::nagar::Nagar;
use qos_experiments::yum::Yum;

/// Every assumption of `e`'s shipped scenarios as the docs' table row starts:
/// `| scenario | name | value | open | cite |`.
fn rows<E: Experiment>(e: &E) -> Vec<String> {
    let mut out = Vec::new();
    for src in e.builtin_sources(None).unwrap() {
        let scenario = e.load_sources(std::slice::from_ref(&src)).unwrap();
        let name = e.name(&scenario[0]).to_string();
        for a in assume::declared(&src.file, &src.text).unwrap() {
            for v in a.ends() {
                let text = assume::with_value(&src.file, &src.text, &a.name, &v).unwrap();
                let s = Source {
                    text,
                    ..src.clone()
                };
                if let Err(err) = e.load_sources(std::slice::from_ref(&s)) {
                    panic!(
                        "{}: assumption `{}` = {}: {err}",
                        src.file,
                        a.name,
                        show(&v)
                    );
                }
            }
            out.push(format!(
                "| {} | `{}` | {} | {} | {} |",
                name,
                a.name,
                show(&a.value),
                a.open_text(),
                a.cite
            ));
        }
    }
    out
}

#[test]
fn every_shipped_assumption_loads_at_its_ends_and_is_listed_in_the_docs() {
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/assumptions.md"
    ))
    .unwrap();
    let mut all = rows(&Gulati);
    all.extend(rows(&Nagar));
    all.extend(rows(&Yum));
    all.extend(rows(&Flit));
    assert!(!all.is_empty());
    let missing: Vec<&String> = all.iter().filter(|r| !docs.contains(r.as_str())).collect();
    assert!(
        missing.is_empty(),
        "docs/assumptions.md lacks these rows (add them, followed by `why |`):\n{}",
        missing
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
