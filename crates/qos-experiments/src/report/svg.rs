//! One [`Figure`] as a standalone SVG document: [`super::draw`] on plotters' SVG
//! backend. Text is SVG text in a sans-serif font; nothing is embedded, so the file
//! opens in any browser and diffs as text.

use plotters::prelude::*;

use super::draw::{self, Geometry, WIDTH};
use super::plot::Layout;
use super::Figure;

/// Renders `fig` as an SVG document.
pub fn render(fig: &Figure) -> String {
    let layout = Layout::of(fig);
    let geometry = Geometry::of(fig);
    let mut out = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut out, (WIDTH, geometry.height)).into_drawing_area();
        draw::figure(&root, fig, &layout, &geometry).and_then(|()| root.present())
    };
    if let Err(e) = drawn {
        // Writing SVG into a String has no failure of its own; keep any message.
        return format!("<!-- {} -->\n", super::escape(&e.to_string()));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::super::draw::wrap;
    use super::super::{Scale, Series, Style};
    use super::*;

    /// The text elements' contents.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                let body = t.split_once('>')?.1;
                Some(body.split("</text>").next()?.trim().to_string())
            })
            .collect()
    }

    fn has(svg: &str, text: &str) -> bool {
        texts(svg).iter().any(|t| t == text)
    }

    #[test]
    fn svg_has_the_title_axis_labels_ticks_and_a_legend_entry_per_series() {
        let fig = Figure::new("f", "Title <x>", "IDT (ticks)", "Bandwidth (MB/s)")
            .with_series(Series::new("flow 1", vec![(0.0, 80.0), (2000.0, 4.0)]))
            .with_series(Series::new("flow 2", vec![(0.0, 40.0)]).with_style(Style::Scatter));
        let s = render(&fig);
        assert!(s.starts_with("<svg"), "{s}");
        for t in [
            "Title &lt;x&gt;",
            "IDT (ticks)",
            "Bandwidth (MB/s)",
            "flow 1",
            "flow 2",
            "2000",
            "80",
        ] {
            assert!(has(&s, t), "{t} missing: {:?}", texts(&s));
        }
    }

    #[test]
    fn a_series_hidden_under_an_identical_one_is_named_in_the_legend() {
        // Yum Figs 8-10: with no credit binding, "CC" is "None" point for point.
        let points = vec![(0.0, 19.1), (25.6, 22.8)];
        let fig = Figure::new("f", "t", "time (us)", "power (W)")
            .with_series(Series::new("None", points.clone()))
            .with_series(Series::new("CC", points))
            .with_series(Series::new("PC", vec![(0.0, 14.7), (25.6, 16.3)]));
        let s = render(&fig);
        assert!(has(&s, "None"), "{:?}", texts(&s));
        assert!(has(&s, "CC (= None)"), "{:?}", texts(&s));
        assert!(has(&s, "PC"), "{:?}", texts(&s));
    }

    #[test]
    fn a_long_title_is_wrapped_not_cut() {
        let words = "Fig 5.5: Proportional bandwidth sharing among three flows with rate control at the NIC and the manager's shares";
        let lines = wrap(words, f64::from(WIDTH) - 30.0, 15.0);
        assert!(lines.len() >= 2, "{lines:?}");
        assert_eq!(lines.join(" "), words);
    }

    #[test]
    fn log2_axis_labels_powers_of_two_with_k_suffix() {
        let fig = Figure::new("f", "t", "Message size (bytes)", "Latency (us)")
            .with_series(Series::new("a", vec![(4.0, 10.0), (65536.0, 900.0)]))
            .with_x_scale(Scale::Log2);
        let s = render(&fig);
        assert!(has(&s, "64K") && has(&s, "4"), "{:?}", texts(&s));
    }

    #[test]
    fn categories_label_the_x_axis() {
        let fig = Figure::new("f", "t", "case", "MB/s")
            .with_categories(["(2T, 4T)", "(4T, 8T)"])
            .with_series(
                Series::new("A", vec![(1.0, 40.0), (2.0, 20.0)]).with_style(Style::Scatter),
            );
        let s = render(&fig);
        assert!(
            has(&s, "(2T, 4T)") && has(&s, "(4T, 8T)"),
            "{:?}",
            texts(&s)
        );
        assert!(
            !has(&s, "0.5") && !has(&s, "1.5") && !has(&s, "1"),
            "{:?}",
            texts(&s)
        );
    }

    #[test]
    fn empty_figure_still_renders() {
        let s = render(&Figure::new("f", "t", "x", "y"));
        assert!(s.trim_end().ends_with("</svg>"), "{s}");
    }
}
