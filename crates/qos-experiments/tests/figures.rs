//! Every figure of every simulated report (`reproduce gulati`, `nagar` and `yum`, at
//! reduced length) as drawn: no point lies outside its axes or on their border, every
//! axis has at least two labelled ticks, a categorical axis names its cases, published
//! values have their own hollow markers, and the SVG and (with a font) the PDF are
//! written and draw one marker per point.

use qos_experiments::experiment::{Experiment, RunOptions, Silent};
use qos_experiments::report::plot::Layout;
use qos_experiments::report::{pdf, svg, Figure, Report, Style};
use qos_experiments::reproduce;

/// The figures of `e`'s report at reduced length, as written to `report.json`.
fn figures<E: Experiment>(e: &E, name: &str) -> Vec<Figure> {
    let dir = tempfile::tempdir().unwrap();
    let opt = RunOptions {
        quick: true,
        workers: 2,
        ..RunOptions::default()
    };
    let out = dir.path().join(name);
    reproduce::reproduce(e, None, &opt, false, Some(out.clone()), name, &Silent)
        .unwrap_or_else(|err| panic!("{name}: {err}"));
    let text = std::fs::read_to_string(out.join("report.json")).unwrap();
    let report: Report = serde_json::from_str(&text).unwrap();
    for f in &report.figures {
        assert!(out.join(format!("{}.svg", f.id)).is_file(), "{}", f.id);
        match pdf::available() {
            Ok(()) => assert!(out.join(format!("{}.pdf", f.id)).is_file(), "{}", f.id),
            Err(why) => eprintln!("SKIPPED the PDF of {}: {why}", f.id),
        }
    }
    report.figures
}

/// Markers drawn in an SVG: every marker is a filled polygon after the frame.
fn check(paper: &str, figures: &[Figure]) {
    assert!(!figures.is_empty(), "{paper} draws nothing");
    for fig in figures {
        let at = format!("{paper} {}", fig.id);
        let layout = Layout::of(fig);
        // 2 % of each axis's span: a marker's radius on the 560-pixel plot.
        let outside = layout.outside(0.02);
        assert!(
            outside.is_empty(),
            "{at}: points on or past the axes: {outside:?}"
        );
        assert!(
            layout.x.ticks.len() >= 2 || !fig.x_categories.is_empty(),
            "{at}: x ticks {:?}",
            layout.x.ticks
        );
        assert!(
            layout.y.ticks.len() >= 2,
            "{at}: y ticks {:?}",
            layout.y.ticks
        );
        for axis in [&layout.x, &layout.y] {
            for (t, label) in &axis.ticks {
                assert!(
                    *t >= axis.lo && *t <= axis.hi,
                    "{at}: tick {label} outside its axis"
                );
                assert!(!label.is_empty(), "{at}: unlabelled tick at {t}");
            }
        }
        if !fig.x_categories.is_empty() {
            let names: Vec<&str> = layout.x.ticks.iter().map(|t| t.1.as_str()).collect();
            assert_eq!(names, fig.x_categories, "{at}");
        }
        for d in &layout.series {
            let s = &fig.series[d.index];
            assert_eq!(d.hollow, s.published, "{at}: {}", s.name);
            if s.published {
                assert!(d.marker.is_some(), "{at}: published {} unmarked", s.name);
            }
        }
        // One marker per drawable point of each marked series (a marker is drawn as a
        // polygon and its outline).
        let doc = svg::render(fig);
        let marked: usize = layout
            .series
            .iter()
            .filter(|d| d.marker.is_some())
            .map(|d| d.points.len())
            .sum();
        let legend_markers = layout.series.iter().filter(|d| d.marker.is_some()).count();
        assert_eq!(
            doc.matches("<polygon").count(),
            marked + legend_markers,
            "{at}: markers drawn"
        );
        let lines = fig
            .series
            .iter()
            .filter(|s| s.style != Style::Scatter)
            .count();
        assert!(
            doc.matches("<polyline").count() >= lines,
            "{at}: lines drawn"
        );
    }
}

#[test]
fn every_figure_of_the_gulati_report_lies_inside_its_axes() {
    check(
        "gulati",
        &figures(&qos_experiments::gulati::Gulati, "gulati"),
    );
}

#[test]
fn every_figure_of_the_nagar_report_lies_inside_its_axes() {
    check("nagar", &figures(&qos_experiments::nagar::Nagar, "nagar"));
}

/// Yum's figures as its quick reproduction draws them, from a recorded result
/// (`tests/data/yum-quick-figures.json`: the `figures` of `report.json` written by
/// `clusterqos reproduce yum --quick --out DIR`; regenerate it with
/// `python3 -c "import json,sys; json.dump(json.load(open(sys.argv[1]))['figures'],
/// open(sys.argv[2],'w'))" DIR/report.json tests/data/yum-quick-figures.json`). The
/// drawing is what is tested here; the run itself is the ignored test below.
#[test]
fn every_figure_of_a_recorded_yum_report_lies_inside_its_axes() {
    let text = include_str!("data/yum-quick-figures.json");
    let figures: Vec<Figure> = serde_json::from_str(text).unwrap();
    assert!(figures.len() >= 40, "{} figures", figures.len());
    check("yum (recorded)", &figures);
    match pdf::available() {
        Ok(()) => {
            for fig in &figures {
                let doc = pdf::render(fig).unwrap_or_else(|e| panic!("{}: {e}", fig.id));
                assert!(doc.starts_with(b"%PDF"), "{}", fig.id);
            }
        }
        Err(why) => eprintln!("SKIPPED the PDFs of the recorded Yum figures: {why}"),
    }
}

/// Yum's quick reproduction takes about half an hour in an unoptimised build on two
/// cores (the suite's budget is 30 minutes), so it runs on request:
/// `cargo test --release -p qos-experiments --test figures -- --ignored`.
#[test]
#[ignore = "half an hour unoptimised; run with --release -- --ignored"]
fn every_figure_of_the_yum_report_lies_inside_its_axes() {
    check("yum", &figures(&qos_experiments::yum::Yum, "yum"));
}
