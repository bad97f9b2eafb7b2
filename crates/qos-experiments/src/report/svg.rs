//! Draws one [`Figure`] as a standalone SVG document, by hand: frame, grid, ticks with
//! "nice" labels (linear or logarithmic axes), axis labels, title, one colour and marker
//! per series, and a legend. No fonts or scripts are embedded, so the file opens in any
//! browser and diffs as text.

use super::{escape, Figure, Scale, Series, Style};

const PLOT_W: f64 = 482.0;
const H: f64 = 470.0;
const LEFT: f64 = 78.0;
const TOP: f64 = 46.0;
const BOTTOM: f64 = 62.0;

const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// One axis: its data range and scale, mapped onto a pixel span.
struct Axis {
    scale: Scale,
    lo: f64,
    hi: f64,
    p0: f64,
    p1: f64,
}

impl Axis {
    fn t(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => v,
            Scale::Log2 => v.max(f64::MIN_POSITIVE).log2(),
            Scale::Log10 => v.max(f64::MIN_POSITIVE).log10(),
        }
    }
    fn pos(&self, v: f64) -> f64 {
        let (a, b) = (self.t(self.lo), self.t(self.hi));
        let f = if b > a {
            (self.t(v) - a) / (b - a)
        } else {
            0.5
        };
        self.p0 + f * (self.p1 - self.p0)
    }
    /// Tick values and labels.
    fn ticks(&self) -> Vec<(f64, String)> {
        match self.scale {
            Scale::Linear => {
                let step = nice_step((self.hi - self.lo) / 6.0);
                let first = (self.lo / step).ceil() * step;
                let mut out = Vec::new();
                let mut k = 0.0;
                loop {
                    let v = first + k * step;
                    if v > self.hi + step * 1e-9 || out.len() > 50 {
                        break;
                    }
                    out.push((v, label(v, step)));
                    k += 1.0;
                }
                out
            }
            Scale::Log2 | Scale::Log10 => {
                let base: f64 = if self.scale == Scale::Log2 { 2.0 } else { 10.0 };
                let (a, b) = (self.t(self.lo).floor(), self.t(self.hi).ceil());
                let n = (b - a).max(1.0);
                // Thin out powers so at most ~9 labels show.
                let every = (n / 8.0).ceil().max(1.0);
                // Few decades of base 10: also label 2 and 5 times each power.
                let mults: &[f64] = if base == 10.0 && n <= 3.0 {
                    &[1.0, 2.0, 5.0]
                } else {
                    &[1.0]
                };
                let mut out = Vec::new();
                let mut e = a;
                while e <= b && out.len() < 64 {
                    for m in mults {
                        let v = m * base.powf(e);
                        if v >= self.lo * (1.0 - 1e-9) && v <= self.hi * (1.0 + 1e-9) {
                            out.push((v, binary_label(v, self.scale)));
                        }
                    }
                    e += every;
                }
                out
            }
        }
    }
}

/// 1, 2, 2.5 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= raw {
            return m * p;
        }
    }
    10.0 * p
}

fn label(v: f64, step: f64) -> String {
    let v = if v.abs() < step * 1e-9 { 0.0 } else { v };
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
            + usize::from(step * 10f64.powf((-step.log10()).floor()) % 1.0 != 0.0)
    };
    format!("{v:.decimals$}")
}

fn binary_label(v: f64, scale: Scale) -> String {
    if scale == Scale::Log2 && v >= 1024.0 {
        if v >= 1024.0 * 1024.0 {
            return format!("{}M", v / (1024.0 * 1024.0));
        }
        return format!("{}K", v / 1024.0);
    }
    if v >= 1.0 {
        format!("{v}")
    } else {
        format!("{v:.3}")
    }
}

/// The data range of a figure along one axis (fixed range wins).
fn range(
    fig: &Figure,
    fixed: Option<(f64, f64)>,
    scale: Scale,
    pick: fn(&(f64, f64)) -> f64,
) -> (f64, f64) {
    if let Some((a, b)) = fixed {
        if a.is_finite() && b.is_finite() && b > a {
            return (a, b);
        }
    }
    let vals = fig
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(pick))
        .filter(|v| v.is_finite() && (scale == Scale::Linear || *v > 0.0));
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return if scale == Scale::Linear {
            (0.0, 1.0)
        } else {
            (1.0, 2.0)
        };
    }
    match scale {
        Scale::Linear => {
            lo = lo.min(0.0);
            if hi <= lo {
                hi = lo + 1.0;
            }
            let step = nice_step((hi - lo) / 6.0);
            ((lo / step).floor() * step, (hi / step).ceil() * step)
        }
        Scale::Log2 | Scale::Log10 => {
            if hi <= lo {
                hi = lo * 2.0;
            }
            (lo, hi)
        }
    }
}

fn marker(out: &mut String, i: usize, x: f64, y: f64, colour: &str) {
    match i % 4 {
        0 => out.push_str(&format!(
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.2\" fill=\"{colour}\"/>"
        )),
        1 => out.push_str(&format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"6\" height=\"6\" fill=\"{colour}\"/>",
            x - 3.0,
            y - 3.0
        )),
        2 => out.push_str(&format!(
            "<path d=\"M{x:.1} {:.1} L{:.1} {:.1} L{:.1} {:.1} Z\" fill=\"{colour}\"/>",
            y - 4.0,
            x + 3.8,
            y + 3.0,
            x - 3.8,
            y + 3.0
        )),
        _ => out.push_str(&format!(
            "<path d=\"M{x:.1} {:.1} L{:.1} {y:.1} L{x:.1} {:.1} L{:.1} {y:.1} Z\" fill=\"{colour}\"/>",
            y - 4.2,
            x + 4.2,
            y + 4.2,
            x - 4.2
        )),
    }
}

fn series_path(s: &Series, xa: &Axis, ya: &Axis) -> String {
    let mut d = String::new();
    let mut prev_y: Option<f64> = None;
    for (k, &(x, y)) in s
        .points
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .enumerate()
    {
        let (px, py) = (xa.pos(x), ya.pos(y));
        if k == 0 {
            d.push_str(&format!("M{px:.1} {py:.1}"));
        } else if s.style == Style::Step {
            if let Some(p) = prev_y {
                d.push_str(&format!(" L{px:.1} {p:.1}"));
            }
            d.push_str(&format!(" L{px:.1} {py:.1}"));
        } else {
            d.push_str(&format!(" L{px:.1} {py:.1}"));
        }
        prev_y = Some(py);
    }
    d
}

/// Renders `fig` as an SVG document.
pub fn render(fig: &Figure) -> String {
    // The legend sits right of the plot; widen the picture for long series names.
    let longest = fig
        .series
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0) as f64;
    let right = (50.0 + 6.8 * longest).max(200.0);
    let w = LEFT + PLOT_W + right;
    let title_size = if fig.title.chars().count() as f64 * 8.0 > w - 20.0 {
        12
    } else {
        14
    };
    let (x0, x1) = range(fig, fig.x_range, fig.x_scale, |p| p.0);
    let (y0, y1) = range(fig, fig.y_range, fig.y_scale, |p| p.1);
    let xa = Axis {
        scale: fig.x_scale,
        lo: x0,
        hi: x1,
        p0: LEFT,
        p1: w - right,
    };
    let ya = Axis {
        scale: fig.y_scale,
        lo: y0,
        hi: y1,
        p0: H - BOTTOM,
        p1: TOP,
    };
    let mut o = String::new();
    o.push_str(&format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{H}\" viewBox=\"0 0 {w} {H}\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
    ));
    o.push_str(&format!("<title>{}</title>\n", escape(&fig.title)));
    o.push_str(&format!(
        "<rect width=\"{w}\" height=\"{H}\" fill=\"white\"/>\n"
    ));
    o.push_str(&format!(
        "<text x=\"{:.1}\" y=\"24\" text-anchor=\"middle\" font-size=\"{title_size}\" font-weight=\"bold\">{}</text>\n",
        w / 2.0,
        escape(&fig.title)
    ));
    // Grid and ticks.
    o.push_str("<g stroke=\"#dddddd\" stroke-width=\"1\">\n");
    let xt = xa.ticks();
    let yt = ya.ticks();
    for (v, _) in &xt {
        let p = xa.pos(*v);
        o.push_str(&format!(
            "<line x1=\"{p:.1}\" y1=\"{TOP}\" x2=\"{p:.1}\" y2=\"{:.1}\"/>\n",
            H - BOTTOM
        ));
    }
    for (v, _) in &yt {
        let p = ya.pos(*v);
        o.push_str(&format!(
            "<line x1=\"{LEFT}\" y1=\"{p:.1}\" x2=\"{:.1}\" y2=\"{p:.1}\"/>\n",
            w - right
        ));
    }
    o.push_str("</g>\n");
    o.push_str(&format!(
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"black\"/>\n",
        w - right - LEFT,
        H - BOTTOM - TOP
    ));
    for (v, l) in &xt {
        let p = xa.pos(*v);
        o.push_str(&format!(
            "<line x1=\"{p:.1}\" y1=\"{:.1}\" x2=\"{p:.1}\" y2=\"{:.1}\" stroke=\"black\"/><text x=\"{p:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            H - BOTTOM,
            H - BOTTOM + 5.0,
            H - BOTTOM + 19.0,
            escape(l)
        ));
    }
    for (v, l) in &yt {
        let p = ya.pos(*v);
        o.push_str(&format!(
            "<line x1=\"{:.1}\" y1=\"{p:.1}\" x2=\"{LEFT}\" y2=\"{p:.1}\" stroke=\"black\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            LEFT - 5.0,
            LEFT - 8.0,
            p + 4.0,
            escape(l)
        ));
    }
    o.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
        (LEFT + w - right) / 2.0,
        H - 18.0,
        escape(&fig.x_label)
    ));
    o.push_str(&format!(
        "<text x=\"18\" y=\"{:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {:.1})\">{}</text>\n",
        (TOP + H - BOTTOM) / 2.0,
        (TOP + H - BOTTOM) / 2.0,
        escape(&fig.y_label)
    ));
    // Series, clipped to the plot area.
    o.push_str(&format!(
        "<clipPath id=\"plot\"><rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\"/></clipPath>\n<g clip-path=\"url(#plot)\">\n",
        w - right - LEFT,
        H - BOTTOM - TOP
    ));
    for (i, s) in fig.series.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        if s.style != Style::Scatter && s.points.len() > 1 {
            o.push_str(&format!(
                "<path d=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"1.8\"/>\n",
                series_path(s, &xa, &ya)
            ));
        }
        if matches!(s.style, Style::Scatter | Style::LinePoints) {
            for &(x, y) in s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
            {
                marker(&mut o, i, xa.pos(x), ya.pos(y), c);
            }
            o.push('\n');
        }
    }
    o.push_str("</g>\n");
    // Legend to the right of the plot.
    let lx = w - right + 14.0;
    for (i, s) in fig.series.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let ly = TOP + 10.0 + 20.0 * i as f64;
        if s.style != Style::Scatter {
            o.push_str(&format!(
                "<line x1=\"{lx:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{c}\" stroke-width=\"1.8\"/>",
                lx + 24.0
            ));
        }
        if matches!(s.style, Style::Scatter | Style::LinePoints) {
            marker(&mut o, i, lx + 12.0, ly, c);
        }
        o.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            lx + 30.0,
            ly + 4.0,
            escape(&s.name)
        ));
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps_are_one_two_or_five_times_a_power_of_ten() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(13.0), 20.0);
        assert_eq!(nice_step(333.0), 500.0);
        assert_eq!(nice_step(2.2), 2.5);
    }

    #[test]
    fn svg_has_axes_labels_ticks_and_a_legend_entry_per_series() {
        let fig = Figure::new("f", "Title <x>", "IDT (ticks)", "Bandwidth (MB/s)")
            .with_series(Series::new("flow 1", vec![(0.0, 80.0), (2000.0, 4.0)]))
            .with_series(Series::new("flow 2", vec![(0.0, 40.0)]).with_style(Style::Scatter));
        let s = render(&fig);
        assert!(s.starts_with("<svg"));
        assert!(s.contains("Title &lt;x&gt;"));
        assert!(s.contains(">IDT (ticks)</text>"));
        assert!(s.contains(">Bandwidth (MB/s)</text>"));
        assert!(s.contains(">flow 1</text>") && s.contains(">flow 2</text>"));
        // x ticks every 500 from 0 to 2000; y ticks up to 80.
        assert!(s.contains(">2000</text>") && s.contains(">80</text>"));
    }

    #[test]
    fn log2_axis_labels_powers_of_two_with_k_suffix() {
        let fig = Figure::new("f", "t", "Message size (bytes)", "Latency (us)")
            .with_series(Series::new("a", vec![(4.0, 10.0), (65536.0, 900.0)]))
            .with_x_scale(Scale::Log2);
        let s = render(&fig);
        assert!(s.contains(">64K</text>"), "{s}");
        assert!(s.contains(">4</text>"));
    }

    #[test]
    fn empty_figure_still_renders() {
        let s = render(&Figure::new("f", "t", "x", "y"));
        assert!(s.ends_with("</svg>\n"));
    }
}
